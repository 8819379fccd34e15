#include "dlaunch/scheduler.hpp"

#include <cstdint>

namespace dlaunch {

int deterministic_port(const std::string& job_id, const std::string& step_id, const PortRange& range) {
    // FNV-1a over "job.step": stable across hosts and runs (std::hash is not).
    uint64_t h = 1469598103934665603ull;
    for (char c : job_id + "." + step_id) {
        h ^= static_cast<unsigned char>(c);
        h *= 1099511628211ull;
    }
    const uint64_t span = static_cast<uint64_t>(range.high - range.low + 1);
    return range.low + static_cast<int>(h % span);
}

}  // namespace dlaunch
