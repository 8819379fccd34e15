#include "dlaunch/scheduler.hpp"

#include <cstdint>
#include <optional>

namespace dlaunch {

namespace {

std::optional<uint64_t> number(const std::string& s) {
    if (s.empty() || s.size() > 18 || s.find_first_not_of("0123456789") != std::string::npos) return std::nullopt;
    return std::stoull(s);
}

uint64_t fnv1a(const std::string& text) {  // stable across hosts and runs (std::hash is not)
    uint64_t h = 1469598103934665603ull;
    for (char c : text) {
        h ^= static_cast<unsigned char>(c);
        h *= 1099511628211ull;
    }
    return h;
}

}  // namespace

int deterministic_port(const std::string& job_id, const std::string& step_id, const PortRange& range) {
    const uint64_t span = static_cast<uint64_t>(range.high - range.low + 1);
    auto job = number(job_id), step = number(step_id.empty() ? "0" : step_id);
    if (!job || !step || span < 2 * kStepSlots)
        return range.low + static_cast<int>(fnv1a(job_id + "." + step_id) % span);
    // Numeric Slurm ids: the job picks a block of kStepSlots ports, the step a port in it. Steps of one
    // job never collide (up to kStepSlots concurrent steps); jobs collide only when their ids differ by a
    // multiple of span / kStepSlots (1000 with the default range), unlike neighbours sharing a node.
    const uint64_t blocks = span / kStepSlots;
    return range.low + static_cast<int>((*job % blocks) * kStepSlots + *step % kStepSlots);
}

int group_port(int master_port, const PortRange& range) {
    const int span = range.high - range.low + 1;
    if (master_port < range.low || master_port > range.high || span < 2) return master_port + 1;
    return range.low + (master_port - range.low + span / 2) % span;
}

}  // namespace dlaunch
