// ProgressWatch: which rank of this node has shown no sign of progress for longer than it may. Pure: the
// executor tells it what it sees, with the time (output bytes, CPU time read from /proc, heartbeats);
// tests do the same with made-up times.
//
// Progress is any output (stdout or stderr, a '\r' progress bar too), a heartbeat, or CPU use: between
// two samples the rank used at least `min_cpu_share` of the interval (a rank computing for minutes without
// printing is not hung; one blocked in a collective or asleep uses almost none). Such a rank is hung after
// `timeout` (--hang-timeout) without progress.
//
// A rank that sends heartbeats (docs/hangs.md) is judged by them alone, which is precise (a rank spinning in
// a loop uses CPU but sends none): it is hung when no heartbeat came for --hang-timeout, or, without one,
// for the learned timeout: the longest interval between two heartbeats of any rank times `factor`, at
// least `floor` seconds, once `min_intervals` intervals were seen (or a longest interval was carried over
// from an earlier attempt).
#pragma once

#include <map>
#include <optional>

namespace dlaunch::hang {

struct HungRank {
    int local_rank = 0;
    double last_progress = 0;  // seconds since the epoch
    double silent_seconds = 0;
    bool by_heartbeat = false;  // judged by its heartbeats
    double timeout = 0;         // the timeout it went past
    bool operator==(const HungRank&) const = default;
};

struct LearnRule {
    double factor = 3;
    double floor = 10;
    int min_intervals = 5;
};

class ProgressWatch {
public:
    explicit ProgressWatch(std::optional<double> timeout_seconds, LearnRule learn = {}, double min_cpu_share = 0.05);

    void start(int local_rank, double now);
    void output(int local_rank, double now);
    void heartbeat(int local_rank, double now);
    // The rank's CPU time (user + system, seconds; its main thread's: HangMonitor) as sampled now.
    void cpu(int local_rank, double cpu_seconds, double now);
    // The rank exited: it is no longer watched.
    void stop(int local_rank);
    // The longest heartbeat interval of earlier attempts (kept in the log directory).
    void carry_over(double longest_interval);

    // The watched rank silent the longest past its timeout, if any.
    std::optional<HungRank> hung(double now) const;
    std::optional<double> last_progress(int local_rank) const;
    std::optional<double> timeout() const { return timeout_; }
    double longest_interval() const { return longest_interval_; }
    // The heartbeat timeout learned so far (nullopt: not enough intervals seen yet).
    std::optional<double> learned_timeout() const;

private:
    struct Rank {
        double last_progress = 0;
        double cpu_seconds = -1;  // at the last sample (-1: none yet)
        double sampled_at = 0;
        std::optional<double> last_beat;
    };
    std::optional<double> timeout_;
    LearnRule learn_;
    double min_cpu_share_;
    std::map<int, Rank> ranks_;
    double longest_interval_ = 0;
    int intervals_ = 0;
    bool carried_ = false;
};

}  // namespace dlaunch::hang
