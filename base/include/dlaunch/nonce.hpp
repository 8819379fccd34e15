// Nonces for the challenges of the rendezvous and the group channel: one generator for both.
#pragma once

#include <string>

namespace dlaunch {

// 16 bytes from the kernel's generator (getrandom) as 32 hex digits. Throws std::runtime_error when the
// kernel gives none (never once it is seeded: up to 256 bytes come whole).
std::string fresh_nonce();

}  // namespace dlaunch
