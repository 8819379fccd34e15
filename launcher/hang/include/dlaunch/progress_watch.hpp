// ProgressWatch: which rank of this node has shown no sign of progress for longer than the hang timeout.
// Pure: the executor tells it what it sees, with the time (output bytes, CPU time read from /proc,
// heartbeats); tests do the same with made-up times.
//
// Progress is any output (stdout or stderr, a '\r' progress bar too), a heartbeat, or CPU use: between
// two samples the rank used at least `min_cpu_share` of the interval (a rank computing for minutes without
// printing is not hung; one blocked in a collective or asleep uses almost none).
#pragma once

#include <map>
#include <optional>

namespace dlaunch::hang {

struct HungRank {
    int local_rank = 0;
    double last_progress = 0;  // seconds since the epoch
    double silent_seconds = 0;
    bool operator==(const HungRank&) const = default;
};

class ProgressWatch {
public:
    explicit ProgressWatch(double timeout_seconds, double min_cpu_share = 0.05);

    void start(int local_rank, double now);
    void output(int local_rank, double now);
    void heartbeat(int local_rank, double now);
    // The rank's total CPU time (user + system, seconds) as sampled now.
    void cpu(int local_rank, double cpu_seconds, double now);
    // The rank exited: it is no longer watched.
    void stop(int local_rank);

    // The watched rank silent the longest, when it has been silent past the timeout.
    std::optional<HungRank> hung(double now) const;
    std::optional<double> last_progress(int local_rank) const;
    double timeout() const { return timeout_; }

private:
    struct Rank {
        double last_progress = 0;
        double cpu_seconds = -1;  // at the last sample (-1: none yet)
        double sampled_at = 0;
    };
    double timeout_;
    double min_cpu_share_;
    std::map<int, Rank> ranks_;
};

}  // namespace dlaunch::hang
