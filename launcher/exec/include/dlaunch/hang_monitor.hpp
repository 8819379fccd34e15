// The executor's eyes on progress (docs/hangs.md): samples each rank's CPU time, hears its output and its
// heartbeats (a FIFO), serves torchrun's watchdog FIFO, and when a rank has been silent past its timeout
// captures every rank's stacks and names the likeliest culprit. It decides nothing: the executor hands the report to
// FailurePolicy::worker_hung. The rules (what counts as progress, who is the culprit, when a watchdog timer
// expires) are hang/'s, pure; this file is their edge: /proc, timerfd, the FIFO, signals.
#pragma once

#include <sys/types.h>

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "dlaunch/env_map.hpp"
#include "dlaunch/fd.hpp"
#include "dlaunch/file_timer.hpp"
#include "dlaunch/line_buffer.hpp"
#include "dlaunch/plan.hpp"
#include "dlaunch/progress_watch.hpp"
#include "dlaunch/result.hpp"
#include "dlaunch/stack_capture.hpp"

namespace dlaunch {

// A FIFO the agent reads lines from (the watchdog's, the heartbeats'): made unless it exists (only a FIFO the
// user named may: one of this user's, not a symbolic link), read without blocking, kept open for writing by
// the agent itself so readers never see EOF, removed if made here.
class FifoLines {
public:
    FifoLines() = default;
    FifoLines(const FifoLines&) = delete;
    FifoLines& operator=(const FifoLines&) = delete;
    ~FifoLines();
    Status open(const std::string& path, const std::string& what, int epoll, uint64_t tag);
    void read(const LineBuffer::Sink& sink);
    bool is_open() const { return fd_ >= 0; }

private:
    std::string path_;
    bool made_ = false;
    int fd_ = -1, keepalive_ = -1;
    LineBuffer lines_;
};

struct MonitoredRank {
    int local_rank = 0;
    pid_t pid = 0;
    const RankPlan* plan = nullptr;
};

struct HangReport {
    int local_rank = 0;  // the rank the failure is charged to: the culprit when it is one of ours
    pid_t pid = 0;
    double found_at = 0;        // when the hang was found, before the stacks were taken (seconds since the epoch)
    double silent_seconds = 0;  // of the rank that crossed the timeout (>= the timeout)
    double last_progress = 0;   // of the charged rank
    std::string what;     // "no progress for 6 s (no output, no CPU time in its main thread)", "no heartbeat for 31 s
                          // (learned timeout 30 s)"
    std::string culprit;  // "rank 2 (host node1, pid 4242, last progress 12:00:01.250Z)"
    std::string reason;
    std::vector<std::string> evidence;
    std::string stacks_files;
};

// Where each target's Python thread is now, for the summary of a stop: its stacks are taken (Python's
// only, at most 1 s) and appended to its stacks file. "" for a target that does not listen to the stack
// signal (not Python); "no Python stack: ..." for one that listens but did not answer in time.
std::vector<std::string> where_ranks_run(const std::vector<CaptureTarget>& targets);

class HangMonitor {
public:
    explicit HangMonitor(const EnvMap& env);
    ~HangMonitor();

    // Arms what the plan asks for (its hang timeout, its watchdog FIFO) on `epoll`: the sampling timer
    // under `tick_tag`, the FIFO under `fifo_tag`. Fails when the FIFO cannot be made.
    Status open(const LaunchPlan& plan, int epoll, uint64_t tick_tag, uint64_t fifo_tag, uint64_t heartbeat_tag);
    void attempt_started(const LaunchPlan& plan, const std::vector<MonitoredRank>& ranks);
    void output(int local_rank);
    void exited(int local_rank, pid_t pid);
    // The attempt is ending (a grace period runs): no more hang reports until the next attempt.
    void pause() { detecting_ = false; }

    // The sampling timer fired: CPU samples, watchdog expiries; a hang's report, stacks already taken.
    std::optional<HangReport> on_tick();
    void on_fifo();
    void on_heartbeats();
    // The heartbeat intervals seen and the timeout learned from them, for the end of the run ("" : none).
    std::string learned_summary() const;
    // What the watchdog did to this process, for its failure record.
    std::vector<std::string> notes_for(pid_t pid) const;

private:
    void sample_cpu(double now);
    void expire_timers(double now);
    bool ours(pid_t pid) const;  // a rank of this attempt, or a descendant of one (/proc parentage)
    HangReport capture(const hang::HungRank& hung);
    void record_learned();

    EnvMap env_;
    const LaunchPlan* plan_ = nullptr;
    std::unique_ptr<hang::ProgressWatch> watch_;
    std::vector<MonitoredRank> ranks_;
    bool detecting_ = false;
    int timer_ = -1;
    FifoLines watchdog_, heartbeats_;
    hang::TimerTable timers_;
    std::map<int, std::string> notes_by_rank_;  // local rank -> its last heartbeat's note
    double recorded_interval_ = 0;
    bool recorded_learned_ = false;
    std::map<pid_t, std::vector<std::string>> notes_;
};

}  // namespace dlaunch
