// Proofs for the node rendezvous of nodes started by hand: an HMAC-SHA256 (Nettle) of what a message
// says, keyed with the run's secret (DLAUNCH_RDZV_SECRET, the same on every node) and bound to a fresh
// nonce of the side that reads it, so that a recorded message cannot be played again. Without a secret
// the proof is "-" and anyone who reaches the port may join (the host warns). Nonces come from the
// kernel (getrandom, dlaunch/nonce.hpp). Nettle, not OpenSSL: OpenSSL 3 costs every agent its loading and, at its
// first HMAC, its providers and name tables, several times Nettle's whole cost (bench/README.md); Nettle is opened
// only where a proof or digest is made (dlaunch/nettle_api.hpp).
#pragma once

#include <functional>
#include <string>

#include "dlaunch/result.hpp"

namespace dlaunch::rdzv_auth {

// The environment variable that holds the secret.
inline constexpr const char* kSecretVariable = "DLAUNCH_RDZV_SECRET";

// A secret anyone could guess in an afternoon protects nothing: at least this many characters.
inline constexpr size_t kMinSecretLength = 16;
// A usage Error when a secret was given and is too short; Ok for none (the rendezvous warns) or a good one.
Status check_secret(const std::string& secret);

// The proof of `text` for the reader whose nonce is `nonce`: 64 hex digits, or "-" without a secret; an Error
// when Nettle cannot be loaded (dlaunch/nettle_api.hpp).
Result<std::string> proof(const std::string& secret, const std::string& nonce, const std::string& text);

// "" when `given` proves `text`; otherwise why not, in the words of the side that checks it (also when Nettle
// cannot be loaded to check it).
std::string check(const std::string& secret, const std::string& nonce, const std::string& text,
                  const std::string& given);

// How one node rendezvous proves what its sides say: with the run's secret (nodes started by hand), or
// with MUNGE under Slurm (group/group_auth.hpp). `prove` makes the proof of `text` for the reader whose
// nonce is `nonce` (an Error when it cannot); `check` says "" when `given` proves it, else why not.
struct Proofs {
    std::function<Result<std::string>(const std::string& nonce, const std::string& text)> prove;
    std::function<std::string(const std::string& nonce, const std::string& text, const std::string& given)> check;
    bool anonymous = false;  // no secret: anyone who reaches the port may take part (the rendezvous warns)
    std::string what = "the run's secret";  // what a proof shows, for messages
};
Proofs with_secret(const std::string& secret);

// SHA-256 of `nonce` and `text` as 64 hex digits: what a proof made by other means (MUNGE) carries; an Error
// when Nettle cannot be loaded.
Result<std::string> digest(const std::string& nonce, const std::string& text);

}  // namespace dlaunch::rdzv_auth
