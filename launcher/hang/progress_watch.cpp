#include "dlaunch/progress_watch.hpp"

namespace dlaunch::hang {

ProgressWatch::ProgressWatch(double timeout_seconds, double min_cpu_share)
    : timeout_(timeout_seconds), min_cpu_share_(min_cpu_share) {}

void ProgressWatch::start(int local_rank, double now) {
    ranks_[local_rank] = Rank{now, -1, now};
}

void ProgressWatch::output(int local_rank, double now) {
    auto it = ranks_.find(local_rank);
    if (it != ranks_.end()) it->second.last_progress = now;
}

void ProgressWatch::heartbeat(int local_rank, double now) {
    output(local_rank, now);
}

void ProgressWatch::cpu(int local_rank, double cpu_seconds, double now) {
    auto it = ranks_.find(local_rank);
    if (it == ranks_.end()) return;
    Rank& r = it->second;
    const double interval = now - r.sampled_at;
    if (r.cpu_seconds >= 0 && interval > 0 && cpu_seconds - r.cpu_seconds >= min_cpu_share_ * interval)
        r.last_progress = now;
    r.cpu_seconds = cpu_seconds;
    r.sampled_at = now;
}

void ProgressWatch::stop(int local_rank) {
    ranks_.erase(local_rank);
}

std::optional<HungRank> ProgressWatch::hung(double now) const {
    std::optional<HungRank> worst;
    for (auto& [local, r] : ranks_) {
        const double silent = now - r.last_progress;
        if (silent >= timeout_ && (!worst || silent > worst->silent_seconds))
            worst = HungRank{local, r.last_progress, silent};
    }
    return worst;
}

std::optional<double> ProgressWatch::last_progress(int local_rank) const {
    auto it = ranks_.find(local_rank);
    if (it == ranks_.end()) return std::nullopt;
    return it->second.last_progress;
}

}  // namespace dlaunch::hang
