// Nonces for the challenges of the rendezvous and the group channel: one generator for both.
#pragma once

#include <string>

namespace dlaunch {

// `n` (at most 256) bytes from the kernel's generator (getrandom). Throws std::runtime_error when the kernel
// gives none (never once it is seeded: up to 256 bytes come whole). Not std::random_device: it asks the CPU
// with CPUID whether it has RDRAND first, which traps to the hypervisor on a VM.
std::string random_bytes(size_t n);

// 16 random bytes as 32 hex digits.
std::string fresh_nonce();

}  // namespace dlaunch
