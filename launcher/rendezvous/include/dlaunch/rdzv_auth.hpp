// Proofs for the node rendezvous of nodes started by hand: an HMAC-SHA256 (OpenSSL) of what a message
// says, keyed with the run's secret (DLAUNCH_RDZV_SECRET, the same on every node) and bound to a fresh
// nonce of the side that reads it, so that a recorded message cannot be played again. Without a secret
// the proof is "-" and anyone who reaches the port may join (the host warns).
#pragma once

#include <string>

namespace dlaunch::rdzv_auth {

// The environment variable that holds the secret.
inline constexpr const char* kSecretVariable = "DLAUNCH_RDZV_SECRET";

// 16 random bytes as 32 hex digits.
std::string fresh_nonce();

// The proof of `text` for the reader whose nonce is `nonce`: 64 hex digits, or "-" without a secret.
std::string proof(const std::string& secret, const std::string& nonce, const std::string& text);

// "" when `given` proves `text`; otherwise why not, in the words of the side that checks it.
std::string check(const std::string& secret, const std::string& nonce, const std::string& text,
                  const std::string& given);

}  // namespace dlaunch::rdzv_auth
