#include "dlaunch/rdzv_auth.hpp"

#include <nettle/hmac.h>
#include <nettle/memops.h>
#include <nettle/sha2.h>

#include <cstdint>
#include <string_view>

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

std::string proof(const std::string& secret, const std::string& nonce, const std::string& text) {
    if (secret.empty()) return "-";
    hmac_sha256_ctx ctx{};
    hmac_sha256_set_key(&ctx, secret.size(), bytes_of(secret));
    for (const std::string* part : {&nonce, &kNewline, &text}) hmac_sha256_update(&ctx, part->size(), bytes_of(*part));
    uint8_t mac[SHA256_DIGEST_SIZE];
    hmac_sha256_digest(&ctx, sizeof mac, mac);
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
    const std::string want = proof(secret, nonce, text);
    if (want.size() != given.size() || memeql_sec(want.data(), given.data(), want.size()) == 0)
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

std::string digest(const std::string& nonce, const std::string& text) {
    sha256_ctx ctx{};
    sha256_init(&ctx);
    for (const std::string* part : {&nonce, &kNewline, &text}) sha256_update(&ctx, part->size(), bytes_of(*part));
    uint8_t md[SHA256_DIGEST_SIZE];
    sha256_digest(&ctx, sizeof md, md);
    return hex(md, sizeof md);
}

}  // namespace dlaunch::rdzv_auth
