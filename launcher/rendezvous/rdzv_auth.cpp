#include "dlaunch/rdzv_auth.hpp"

#include <cstdint>
#include <string_view>

#include "dlaunch/nettle_api.hpp"
#include "dlaunch/text.hpp"

namespace dlaunch::rdzv_auth {
namespace {

// What a proof and a digest cover: the reader's nonce, a newline, the text.
const std::string kNewline = "\n";

const uint8_t* bytes_of(const std::string& s) {
    return reinterpret_cast<const uint8_t*>(s.data());
}

std::string hex(const unsigned char* bytes, size_t n) {
    return hex_of(std::string_view(reinterpret_cast<const char*>(bytes), n));
}

}  // namespace

Status check_secret(const std::string& secret) {
    if (secret.empty() || secret.size() >= kMinSecretLength) return Ok{};
    return Error{std::string(kSecretVariable) + " has " + std::to_string(secret.size()) + " characters; use at least " +
                     std::to_string(kMinSecretLength),
                 std::string("export ") + kSecretVariable + "=$(openssl rand -hex 16) and the same on every node"};
}

Result<std::string> proof(const std::string& secret, const std::string& nonce, const std::string& text) {
    if (secret.empty()) return std::string("-");
    auto nettle = nettle_api();
    if (!nettle) return nettle.error();
    const NettleApi& n = **nettle;
    hmac_sha256_ctx ctx{};
    n.hmac256_set_key(&ctx, secret.size(), bytes_of(secret));
    for (const std::string* part : {&nonce, &kNewline, &text}) n.hmac256_update(&ctx, part->size(), bytes_of(*part));
    uint8_t mac[SHA256_DIGEST_SIZE];
    n.hmac256_digest(&ctx, sizeof mac, mac);
    return hex(mac, sizeof mac);
}

std::string check(const std::string& secret, const std::string& nonce, const std::string& text,
                  const std::string& given) {
    const bool signed_ = given != "-";
    if (secret.empty() && !signed_) return "";
    if (secret.empty())
        return std::string("the other side has a secret and this one none; export the same ") + kSecretVariable +
               " on every node";
    if (!signed_)
        return std::string("the other side has no secret; export the same ") + kSecretVariable + " on every node";
    const auto want = proof(secret, nonce, text);
    if (!want) return "cannot check its proof (" + want.error().describe() + ")";
    if (want->size() != given.size() || (*nettle_api())->equal_sec(want->data(), given.data(), want->size()) == 0)
        return std::string("wrong secret: ") + kSecretVariable + " differs between the nodes";
    return "";
}

Proofs with_secret(const std::string& secret) {
    return {[secret](const std::string& nonce, const std::string& text) -> Result<std::string> {
                return proof(secret, nonce, text);
            },
            [secret](const std::string& nonce, const std::string& text, const std::string& given) {
                return check(secret, nonce, text, given);
            },
            secret.empty()};
}

Result<std::string> digest(const std::string& nonce, const std::string& text) {
    auto nettle = nettle_api();
    if (!nettle) return nettle.error();
    const NettleApi& n = **nettle;
    sha256_ctx ctx{};
    n.sha_init(&ctx);
    for (const std::string* part : {&nonce, &kNewline, &text}) n.sha_update(&ctx, part->size(), bytes_of(*part));
    uint8_t md[SHA256_DIGEST_SIZE];
    n.sha_digest(&ctx, sizeof md, md);
    return hex(md, sizeof md);
}

}  // namespace dlaunch::rdzv_auth
