#include "dlaunch/rdzv_auth.hpp"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include <stdexcept>

namespace dlaunch::rdzv_auth {
namespace {

std::string hex(const unsigned char* bytes, size_t n) {
    static const char* digits = "0123456789abcdef";
    std::string out;
    for (size_t i = 0; i < n; ++i) {
        out += digits[bytes[i] >> 4];
        out += digits[bytes[i] & 15];
    }
    return out;
}

}  // namespace

std::string fresh_nonce() {
    unsigned char bytes[16];
    if (RAND_bytes(bytes, sizeof bytes) != 1) throw std::runtime_error("rdzv: OpenSSL has no random bytes");
    return hex(bytes, sizeof bytes);
}

Status check_secret(const std::string& secret) {
    if (secret.empty() || secret.size() >= kMinSecretLength) return Ok{};
    return Error{std::string(kSecretVariable) + " has " + std::to_string(secret.size()) + " characters; use at least " +
                     std::to_string(kMinSecretLength),
                 std::string("export ") + kSecretVariable + "=$(openssl rand -hex 16) and the same on every node"};
}

std::string proof(const std::string& secret, const std::string& nonce, const std::string& text) {
    if (secret.empty()) return "-";
    const std::string message = nonce + "\n" + text;
    unsigned char mac[EVP_MAX_MD_SIZE];
    unsigned int len = 0;
    if (!HMAC(EVP_sha256(), secret.data(), static_cast<int>(secret.size()),
              reinterpret_cast<const unsigned char*>(message.data()), message.size(), mac, &len))
        throw std::runtime_error("rdzv: OpenSSL cannot compute an HMAC-SHA256");
    return hex(mac, len);
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
    if (want.size() != given.size() || CRYPTO_memcmp(want.data(), given.data(), want.size()) != 0)
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
    const std::string message = nonce + "\n" + text;
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int len = 0;
    if (EVP_Digest(message.data(), message.size(), md, &len, EVP_sha256(), nullptr) != 1)
        throw std::runtime_error("rdzv: OpenSSL cannot compute a SHA-256");
    return hex(md, len);
}

}  // namespace dlaunch::rdzv_auth
