// torchrun's watchdog (TORCHELASTIC_ENABLE_FILE_TIMER=1), served by dlaunch: the protocol of
// torch.distributed.elastic.timer.FileTimerClient and the table of its timers. Pure: the executor reads
// the FIFO, feeds the lines in and sends the signals that expire() returns.
//
// A client writes one JSON object per line into the FIFO named by TORCHELASTIC_TIMER_FILE:
//   {"version": 1, "pid": 4242, "scope_id": "step", "expiration_time": 1732500000.5, "signal": 9}
// An expiration time below 0 releases the timer. Timers are keyed by (pid, scope). When any timer of a pid
// expires, the earliest expired one with a signal above 0 is sent to that pid (none: the pid is left alone)
// and all the pid's timers are dropped, as torch's FileTimerServer (torch 1.13) does. Unlike torch's, the
// server signals only this node's ranks and their descendants (is_rank_or_descendant): a request that names
// any other pid is refused and said.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace dlaunch::hang {

struct TimerRequest {
    int pid = 0;
    std::string scope_id;
    double expiration_time = 0;  // seconds since the epoch; < 0: release
    int signal = 0;
    bool operator==(const TimerRequest&) const = default;
};

// nullopt for a line that is not a request (the caller logs and ignores it); "version" is not checked,
// as torch's server does not check it.
std::optional<TimerRequest> parse_timer_request(std::string_view line);

struct Expiry {
    int pid = 0;
    std::string scope_id;             // the timer whose signal is sent
    int signal = 0;                   // 0: no timer asked for a signal; the pid is left alone
    std::vector<std::string> scopes;  // every expired scope of that pid, earliest first
    bool operator==(const Expiry&) const = default;
};

// Whether `pid` is one of `ranks` or descends from one, walking up through `parent_of` (a pid's parent, 0
// when unknown or gone) at most 64 generations. Pure.
bool is_rank_or_descendant(int pid, const std::vector<int>& ranks, const std::function<int(int)>& parent_of);

class TimerTable {
public:
    void apply(const TimerRequest& request);
    // Takes out every pid whose earliest timer is past `now`.
    std::vector<Expiry> expire(double now);
    void forget(int pid);  // the process is gone
    bool empty() const { return timers_.empty(); }

private:
    std::map<std::pair<int, std::string>, TimerRequest> timers_;
};

}  // namespace dlaunch::hang
