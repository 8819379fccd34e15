#include "dlaunch/hang_monitor.hpp"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/epoll.h>
#include <sys/stat.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <csignal>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>

#include "dlaunch/clock.hpp"
#include "dlaunch/heartbeat.hpp"
#include "dlaunch/proc_files.hpp"
#include "dlaunch/signals.hpp"
#include "dlaunch/stack_report.hpp"
#include "dlaunch/summary.hpp"
#include "dlaunch/text.hpp"

namespace dlaunch {
namespace {

std::string source_line(const std::string& file, int line) {
    std::ifstream in(file);
    std::string text;
    for (int i = 0; i < line && std::getline(in, text);) ++i;
    return in ? text : "";
}

// A FIFO the user named (TORCHELASTIC_TIMER_FILE) may exist: used only when it is a FIFO of this user's,
// not a symbolic link. dlaunch's own FIFOs are made fresh in its private directory.
bool check_fifo(const std::string& path, bool& exists, std::string& problem) {
    struct stat st {};
    exists = ::lstat(path.c_str(), &st) == 0;
    if (exists && !S_ISFIFO(st.st_mode)) problem = "exists and is not a FIFO";
    if (exists && S_ISFIFO(st.st_mode) && st.st_uid != ::geteuid())
        problem = "is another user's FIFO (uid " + std::to_string(st.st_uid) + ")";
    return problem.empty();
}

}  // namespace

HangMonitor::HangMonitor(const EnvMap& env) : env_(env) {}

HangMonitor::~HangMonitor() {
    if (timer_ >= 0) ::close(timer_);
}

FifoLines::~FifoLines() {
    for (int fd : {fd_, keepalive_})
        if (fd >= 0) ::close(fd);
    if (made_) ::unlink(path_.c_str());
}

Status FifoLines::open(const std::string& path, const std::string& what, int epoll, uint64_t tag) {
    path_ = path;
    bool exists = false;
    std::string problem;
    if (!check_fifo(path, exists, problem))
        return Error{what + " " + path + " " + problem, "name a new path, or remove the file"};
    if (!exists && ::mkfifo(path.c_str(), 0600) != 0)
        return Error{"cannot make the FIFO " + what + " " + path + ": " + std::strerror(errno), "name a writable path"};
    made_ = !exists;
    // Our own writer keeps the read end from seeing EOF between clients.
    fd_ = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC);
    keepalive_ = ::open(path.c_str(), O_WRONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC);
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u64 = tag;
    if (fd_ < 0 || keepalive_ < 0 || ::epoll_ctl(epoll, EPOLL_CTL_ADD, fd_, &ev) != 0)
        return Error{"cannot open the FIFO " + what + " " + path + ": " + std::strerror(errno), ""};
    return Ok{};
}

void FifoLines::read(const LineBuffer::Sink& sink) {
    char buf[4096];
    ssize_t n;
    while ((n = ::read(fd_, buf, sizeof buf)) > 0) lines_.feed(std::string_view(buf, static_cast<size_t>(n)), sink);
}

namespace {

// The longest heartbeat interval an earlier attempt recorded (0: none).
double recorded_interval(const std::string& path) {
    if (path.empty()) return 0;
    std::ifstream in(path);
    auto j = nlohmann::json::parse(in, nullptr, false);
    if (j.is_discarded() || !j.is_object() || !j.contains("longest_interval_seconds")) return 0;
    return j["longest_interval_seconds"].is_number() ? j["longest_interval_seconds"].get<double>() : 0;
}

// Sampling: 0.1 s for the watchdog's timers (torchrun's interval), else a tenth of the hang timeout,
// between 0.1 and 1 s.
itimerspec sampling_period(const LaunchPlan& plan) {
    const double fastest = kFastestHangSampleSeconds;
    const double period =
        !plan.timer_file.empty() ? fastest : std::clamp(plan.hang_timeout.value_or(10) / 10, fastest, 1.0);
    itimerspec spec{};
    spec.it_interval.tv_sec = spec.it_value.tv_sec = static_cast<time_t>(period);
    spec.it_interval.tv_nsec = spec.it_value.tv_nsec =
        static_cast<long>((period - static_cast<double>(static_cast<time_t>(period))) * 1e9);
    return spec;
}

}  // namespace

Status HangMonitor::open(const LaunchPlan& plan, int epoll, uint64_t tick_tag, uint64_t fifo_tag,
                         uint64_t heartbeat_tag) {
    plan_ = &plan;
    if (!plan.hang_timeout && plan.timer_file.empty() && plan.heartbeat_file.empty()) return Ok{};
    watch_ = std::make_unique<hang::ProgressWatch>(plan.hang_timeout);
    recorded_interval_ = recorded_interval(plan.heartbeat_record);
    if (recorded_interval_ > 0) watch_->carry_over(recorded_interval_);
    if (!plan.timer_file.empty()) {
        if (auto s = watchdog_.open(plan.timer_file, "watchdog: TORCHELASTIC_TIMER_FILE", epoll, fifo_tag); !s)
            return s;
        spdlog::debug("watchdog: serving torchrun's file timer at {}", plan.timer_file);
    }
    if (!plan.heartbeat_file.empty())
        if (auto s = heartbeats_.open(plan.heartbeat_file, "heartbeat: DLAUNCH_HEARTBEAT_FILE", epoll, heartbeat_tag);
            !s)
            return s;
    timer_ = ::timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
    const itimerspec spec = sampling_period(plan);
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u64 = tick_tag;
    if (timer_ < 0 || ::timerfd_settime(timer_, 0, &spec, nullptr) != 0 ||
        ::epoll_ctl(epoll, EPOLL_CTL_ADD, timer_, &ev) != 0)
        return Error{std::string("hang: cannot arm the sampling timer: ") + std::strerror(errno), ""};
    return Ok{};
}

void HangMonitor::attempt_started(const LaunchPlan& plan, const std::vector<MonitoredRank>& ranks) {
    plan_ = &plan;
    ranks_ = ranks;
    if (!watch_) return;
    const double longest = watch_->longest_interval();
    watch_ = std::make_unique<hang::ProgressWatch>(watch_->timeout());
    if (longest > 0) watch_->carry_over(longest);
    notes_by_rank_.clear();
    const double now = now_epoch();
    for (auto& r : ranks_) watch_->start(r.local_rank, now);
    detecting_ = true;
}

void HangMonitor::output(int local_rank) {
    if (watch_) watch_->output(local_rank, now_epoch());
}

void HangMonitor::exited(int local_rank, pid_t pid) {
    if (watch_) watch_->stop(local_rank);
    timers_.forget(pid);
    std::erase_if(ranks_, [&](auto& r) { return r.local_rank == local_rank; });
}

void HangMonitor::sample_cpu(double now) {
    for (auto& r : ranks_)
        if (auto cpu = main_thread_cpu_seconds(r.pid)) watch_->cpu(r.local_rank, *cpu, now);
}

std::optional<HangReport> HangMonitor::on_tick() {
    uint64_t expirations;
    if (::read(timer_, &expirations, sizeof expirations) <= 0) return std::nullopt;
    const double now = now_epoch();
    if (watchdog_.is_open()) expire_timers(now);
    record_learned();
    if (!watch_ || !detecting_) return std::nullopt;
    if (watch_->timeout()) sample_cpu(now);  // without --hang-timeout only heartbeats judge
    auto hung = watch_->hung(now);
    if (!hung) return std::nullopt;
    detecting_ = false;
    return capture(*hung);
}

bool HangMonitor::ours(pid_t pid) const {
    std::vector<int> ranks;
    for (auto& r : ranks_) ranks.push_back(r.pid);
    return hang::is_rank_or_descendant(pid, ranks, [](int p) {
        auto stat = read_proc_stat(p);
        return stat ? static_cast<int>(stat->ppid) : 0;
    });
}

void HangMonitor::on_fifo() {
    watchdog_.read([&](std::string_view line, Ending) {
        auto request = hang::parse_timer_request(line);
        if (!request)
            spdlog::warn("watchdog: ignoring a request that is not torch's FileTimerRequest: {}", line);
        else if (!ours(request->pid))
            spdlog::warn(
                "watchdog: pid {}: not a rank of this node nor a descendant of one; its timer '{}' is "
                "ignored and it will not be signalled",
                request->pid, request->scope_id);
        else
            timers_.apply(*request);
    });
}

void HangMonitor::on_heartbeats() {
    const double now = now_epoch();
    heartbeats_.read([&](std::string_view line, Ending) {
        auto beat = heartbeat::parse(line);
        auto rank =
            std::find_if(ranks_.begin(), ranks_.end(), [&](auto& r) { return beat && r.plan->rank == beat->rank; });
        if (!beat || rank == ranks_.end()) {
            spdlog::warn("heartbeat: ignoring '{}': not 'beat RANK [NOTE]' from a rank of this node", line);
            return;
        }
        watch_->heartbeat(rank->local_rank, now);
        notes_by_rank_[rank->local_rank] = beat->note;
    });
}

// Keeps the longest heartbeat interval in the run directory, for the next attempt (and the user).
void HangMonitor::record_learned() {
    if (!watch_ || plan_->heartbeat_record.empty()) return;
    // Again when the longest interval grows, and when the timeout is learned (the longest may come first).
    const bool learned = watch_->learned_timeout().has_value();
    if (watch_->longest_interval() <= recorded_interval_ && learned == recorded_learned_) return;
    recorded_interval_ = watch_->longest_interval();
    recorded_learned_ = learned;
    nlohmann::json j{{"longest_interval_seconds", recorded_interval_},
                     {"learned_timeout_seconds", watch_->learned_timeout() ? nlohmann::json(*watch_->learned_timeout())
                                                                           : nlohmann::json(nullptr)}};
    std::ofstream(plan_->heartbeat_record + ".tmp") << j.dump(2) << "\n";
    std::rename((plan_->heartbeat_record + ".tmp").c_str(), plan_->heartbeat_record.c_str());
}

std::string HangMonitor::learned_summary() const {
    if (!watch_ || watch_->longest_interval() <= 0) return "";
    auto learned = watch_->learned_timeout();
    return "heartbeat: longest interval between heartbeats " + fixed(watch_->longest_interval(), 1) + " s; " +
           (learned ? "learned hang timeout " + fixed(std::ceil(*learned), 0) + " s (to fix it: --hang-timeout " +
                          fixed(std::ceil(*learned), 0) + ")"
                    : std::string("too few heartbeats to learn a hang timeout"));
}

void HangMonitor::expire_timers(double now) {
    for (auto& e : timers_.expire(now)) {
        auto rank = std::find_if(ranks_.begin(), ranks_.end(), [&](auto& r) { return r.pid == e.pid; });
        const std::string who = "pid " + std::to_string(e.pid) +
                                (rank != ranks_.end() ? " (rank " + std::to_string(rank->plan->rank) + ")" : "");
        if (e.signal <= 0) {
            spdlog::warn("watchdog: timer '{}' of {} expired; it asked for no signal, so it is left alone",
                         e.scopes.front(), who);
            continue;
        }
        if (!ours(e.pid)) {  // gone, and its pid taken by another process since the request
            spdlog::warn(
                "watchdog: timer '{}' of pid {} expired, but that pid is no longer a rank of this node nor a "
                "descendant of one; nothing is signalled",
                e.scope_id, e.pid);
            continue;
        }
        const bool sent = ::kill(e.pid, e.signal) == 0;
        std::string note = "torchrun's watchdog: timer '" + e.scope_id + "' expired; " +
                           (sent ? "sent " : "could not send ") + signal_name(e.signal) + " to " + who;
        spdlog::warn("{}", note);
        notes_[e.pid].push_back(std::move(note));
    }
}

std::vector<std::string> HangMonitor::notes_for(pid_t pid) const {
    auto it = notes_.find(pid);
    return it == notes_.end() ? std::vector<std::string>{} : it->second;
}

namespace {

std::string describe_rank(const LaunchPlan& plan, const MonitoredRank& r, std::optional<double> last) {
    return "rank " + std::to_string(r.plan->rank) + " (host " + plan.hostname + ", pid " + std::to_string(r.pid) +
           (last ? ", last progress " + format_utc(*last) : "") + ")";
}

}  // namespace

std::vector<std::string> where_ranks_run(const std::vector<CaptureTarget>& targets) {
    auto captured =
        capture_stacks(targets, StackTools{}, std::chrono::milliseconds(1000), std::chrono::milliseconds(0));
    std::vector<std::string> out;
    for (auto& c : captured) {
        if (c.listened && c.python.empty())
            out.emplace_back(kNoPythonStack);
        else
            out.push_back(c.listened ? hang::where_it_runs(hang::parse_faulthandler(c.python), source_line) : "");
    }
    return out;
}

HangReport HangMonitor::capture(const hang::HungRank& hung) {
    const double found = now_epoch();
    std::vector<CaptureTarget> targets;
    for (auto& r : ranks_) targets.push_back({r.plan->rank, r.pid, r.plan->stacks_file, r.plan->native_stacks_file});
    // The native tools are looked for on PATH when a hang is found, not at every attempt's start (33 access()
    // calls per restart on this VM's PATH).
    const StackTools tools = find_stack_tools(env_);
    auto captured = capture_stacks(targets, tools, std::chrono::milliseconds(2000), std::chrono::milliseconds(10000));
    std::vector<hang::RankStacks> stacks;
    for (size_t i = 0; i < ranks_.size(); ++i)
        stacks.push_back({ranks_[i].plan->rank, plan_->hostname,
                          watch_->last_progress(ranks_[i].local_rank).value_or(0),
                          hang::parse_faulthandler(captured[i].python)});
    hang::Culprit culprit = hang::find_culprit(stacks, source_line, plan_->nnodes > 1 || plan_->watched_alone);

    HangReport report;
    auto charged = std::find_if(ranks_.begin(), ranks_.end(), [&](auto& r) {
        return !culprit.ranks.empty() && r.plan->rank == culprit.ranks.front();
    });
    if (charged == ranks_.end())
        charged = std::find_if(ranks_.begin(), ranks_.end(), [&](auto& r) { return r.local_rank == hung.local_rank; });
    report.local_rank = charged->local_rank;
    report.pid = charged->pid;
    report.found_at = found;
    report.last_progress = watch_->last_progress(charged->local_rank).value_or(hung.last_progress);
    // How long the job had shown no progress when the hang was found: the silence of the rank that crossed
    // the timeout (the culprit may have gone quiet a little later than a victim).
    report.silent_seconds = found - hung.last_progress;
    report.culprit = culprit.elsewhere ? (plan_->watched_alone ? "another rank" : "a rank of another node")
                                       : describe_rank(*plan_, *charged, report.last_progress);
    report.what =
        hung.by_heartbeat
            ? "no heartbeat for " + fixed(hung.silent_seconds, 0) + " s (timeout " + fixed(hung.timeout, 0) + " s, " +
                  (watch_->timeout() ? "--hang-timeout" : "learned from the heartbeats") + ")"
            : "no progress for " + fixed(hung.silent_seconds, 0) + " s (no output, no CPU time in its main thread)";
    if (auto note = notes_by_rank_.find(hung.local_rank); note != notes_by_rank_.end() && !note->second.empty())
        report.what += "; its last heartbeat said '" + note->second + "'";
    report.reason = culprit.reason;
    report.evidence = culprit.evidence;
    if (!tools.eu_stack.empty() || !tools.gdb.empty() || !tools.py_spy.empty())
        report.evidence.push_back("native stacks: " + (tools.eu_stack.empty() ? tools.gdb : tools.eu_stack) +
                                  (tools.py_spy.empty() ? "" : " and py-spy") + ", in each rank's " +
                                  "native-stacks file");
    report.stacks_files = plan_->stacks_files;
    return report;
}

}  // namespace dlaunch
