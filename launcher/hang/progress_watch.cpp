#include "dlaunch/progress_watch.hpp"

#include <algorithm>

namespace dlaunch::hang {

ProgressWatch::ProgressWatch(std::optional<double> timeout_seconds, LearnRule learn, double min_cpu_share)
    : timeout_(timeout_seconds), learn_(learn), min_cpu_share_(min_cpu_share) {}

void ProgressWatch::start(int local_rank, double now) {
    ranks_[local_rank] = Rank{now, -1, now, std::nullopt};
}

void ProgressWatch::output(int local_rank, double now) {
    auto it = ranks_.find(local_rank);
    if (it != ranks_.end()) it->second.last_progress = now;
}

void ProgressWatch::heartbeat(int local_rank, double now) {
    auto it = ranks_.find(local_rank);
    if (it == ranks_.end()) return;
    Rank& r = it->second;
    if (r.last_beat) {
        longest_interval_ = std::max(longest_interval_, now - *r.last_beat);
        ++intervals_;
    }
    r.last_beat = now;
    r.last_progress = now;
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

void ProgressWatch::carry_over(double longest_interval) {
    longest_interval_ = std::max(longest_interval_, longest_interval);
    carried_ = longest_interval > 0;
}

std::optional<double> ProgressWatch::learned_timeout() const {
    if (!carried_ && intervals_ < learn_.min_intervals) return std::nullopt;
    return std::max(longest_interval_ * learn_.factor, learn_.floor);
}

std::optional<HungRank> ProgressWatch::hung(double now) const {
    std::optional<HungRank> worst;
    const auto learned = learned_timeout();
    for (auto& [local, r] : ranks_) {
        const bool beats = r.last_beat.has_value();
        const std::optional<double> limit = beats && !timeout_ ? learned : timeout_;
        const double since = beats ? *r.last_beat : r.last_progress;
        const double silent = now - since;
        if (limit && silent >= *limit && (!worst || silent > worst->silent_seconds))
            worst = HungRank{local, since, silent, beats, *limit};
    }
    return worst;
}

std::optional<double> ProgressWatch::last_progress(int local_rank) const {
    auto it = ranks_.find(local_rank);
    if (it == ranks_.end()) return std::nullopt;
    return it->second.last_beat.value_or(it->second.last_progress);
}

}  // namespace dlaunch::hang
