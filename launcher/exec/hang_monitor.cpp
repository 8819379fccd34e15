#include "dlaunch/hang_monitor.hpp"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/epoll.h>
#include <sys/stat.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <fstream>

#include "dlaunch/signals.hpp"
#include "dlaunch/stack_report.hpp"
#include "dlaunch/summary.hpp"

namespace dlaunch {
namespace {

double now_epoch() {
    return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// utime + stime of a process, in seconds; nullopt once it is gone.
std::optional<double> cpu_seconds(pid_t pid) {
    std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
    std::string stat;
    if (!std::getline(in, stat)) return std::nullopt;
    const size_t close = stat.rfind(')');
    if (close == std::string::npos) return std::nullopt;
    std::istringstream fields(stat.substr(close + 2));
    std::string field;
    unsigned long long utime = 0, stime = 0;
    for (int i = 3; i <= 15 && fields >> field; ++i) {  // fields 14 and 15 of proc(5)
        if (i == 14) utime = std::stoull(field);
        if (i == 15) stime = std::stoull(field);
    }
    return static_cast<double>(utime + stime) / static_cast<double>(::sysconf(_SC_CLK_TCK));
}

std::string source_line(const std::string& file, int line) {
    std::ifstream in(file);
    std::string text;
    for (int i = 0; i < line && std::getline(in, text);) ++i;
    return in ? text : "";
}

Status make_fifo(const std::string& path, bool& made) {
    struct stat st {};
    if (::stat(path.c_str(), &st) == 0) {
        if (S_ISFIFO(st.st_mode)) return Ok{};
        return Error{"watchdog: TORCHELASTIC_TIMER_FILE " + path + " exists and is not a FIFO",
                     "name a new path, or remove the file"};
    }
    if (::mkfifo(path.c_str(), 0600) != 0)
        return Error{"watchdog: cannot make the FIFO " + path + ": " + std::strerror(errno),
                     "name a writable path in TORCHELASTIC_TIMER_FILE"};
    made = true;
    return Ok{};
}

}  // namespace

HangMonitor::HangMonitor(const EnvMap& env) : env_(env), tools_(find_stack_tools(env)) {}

HangMonitor::~HangMonitor() {
    for (int fd : {timer_, fifo_, fifo_keepalive_})
        if (fd >= 0) ::close(fd);
    if (made_fifo_) ::unlink(fifo_path_.c_str());
}

Status HangMonitor::open(const LaunchPlan& plan, int epoll, uint64_t tick_tag, uint64_t fifo_tag) {
    plan_ = &plan;
    if (!plan.hang_timeout && plan.timer_file.empty()) return Ok{};
    if (plan.hang_timeout) watch_ = std::make_unique<hang::ProgressWatch>(*plan.hang_timeout);
    epoll_event ev{};
    ev.events = EPOLLIN;
    if (!plan.timer_file.empty()) {
        fifo_path_ = plan.timer_file;
        if (auto s = make_fifo(fifo_path_, made_fifo_); !s) return s;
        // Our own writer keeps the read end from seeing EOF between clients.
        fifo_ = ::open(fifo_path_.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
        fifo_keepalive_ = ::open(fifo_path_.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC);
        if (fifo_ < 0 || fifo_keepalive_ < 0)
            return Error{"watchdog: cannot open the FIFO " + fifo_path_ + ": " + std::strerror(errno), ""};
        ev.data.u64 = fifo_tag;
        ::epoll_ctl(epoll, EPOLL_CTL_ADD, fifo_, &ev);
        spdlog::debug("watchdog: serving torchrun's file timer at {}", fifo_path_);
    }
    // Sampling: 0.1 s for the watchdog's timers (torchrun's interval), else a tenth of the hang timeout.
    const double period = !plan.timer_file.empty() ? 0.1 : std::clamp(plan.hang_timeout.value_or(1) / 10, 0.1, 1.0);
    timer_ = ::timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
    itimerspec spec{};
    spec.it_interval.tv_sec = spec.it_value.tv_sec = static_cast<time_t>(period);
    spec.it_interval.tv_nsec = spec.it_value.tv_nsec =
        static_cast<long>((period - static_cast<double>(static_cast<time_t>(period))) * 1e9);
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
    watch_ = std::make_unique<hang::ProgressWatch>(watch_->timeout());
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
        if (auto cpu = cpu_seconds(r.pid)) watch_->cpu(r.local_rank, *cpu, now);
}

std::optional<HangReport> HangMonitor::on_tick() {
    uint64_t expirations;
    if (::read(timer_, &expirations, sizeof expirations) <= 0) return std::nullopt;
    const double now = now_epoch();
    if (fifo_ >= 0) expire_timers(now);
    if (!watch_ || !detecting_) return std::nullopt;
    sample_cpu(now);
    auto hung = watch_->hung(now);
    if (!hung) return std::nullopt;
    detecting_ = false;
    return capture(*hung);
}

void HangMonitor::on_fifo() {
    char buf[4096];
    ssize_t n;
    while ((n = ::read(fifo_, buf, sizeof buf)) > 0) {
        fifo_lines_.feed(std::string_view(buf, static_cast<size_t>(n)), [&](std::string_view line) {
            if (auto request = hang::parse_timer_request(line))
                timers_.apply(*request);
            else
                spdlog::warn("watchdog: ignoring a request that is not torch's FileTimerRequest: {}", line);
        });
    }
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

HangReport HangMonitor::capture(const hang::HungRank& hung) {
    std::vector<CaptureTarget> targets;
    for (auto& r : ranks_) targets.push_back({r.plan->rank, r.pid, r.plan->stacks_file, r.plan->native_stacks_file});
    auto captured = capture_stacks(targets, tools_, std::chrono::milliseconds(2000), std::chrono::milliseconds(10000));
    std::vector<hang::RankStacks> stacks;
    for (size_t i = 0; i < ranks_.size(); ++i)
        stacks.push_back({ranks_[i].plan->rank, plan_->hostname,
                          watch_->last_progress(ranks_[i].local_rank).value_or(0),
                          hang::parse_faulthandler(captured[i].python)});
    hang::Culprit culprit = hang::find_culprit(stacks, source_line);

    HangReport report;
    auto charged = std::find_if(ranks_.begin(), ranks_.end(), [&](auto& r) {
        return !culprit.ranks.empty() && r.plan->rank == culprit.ranks.front();
    });
    if (charged == ranks_.end())
        charged = std::find_if(ranks_.begin(), ranks_.end(), [&](auto& r) { return r.local_rank == hung.local_rank; });
    report.local_rank = charged->local_rank;
    report.pid = charged->pid;
    const double now = now_epoch();
    report.last_progress = watch_->last_progress(charged->local_rank).value_or(hung.last_progress);
    report.silent_seconds = now - report.last_progress;
    report.culprit = describe_rank(*plan_, *charged, report.last_progress);
    report.reason = culprit.reason;
    report.evidence = culprit.evidence;
    if (!tools_.eu_stack.empty() || !tools_.gdb.empty() || !tools_.py_spy.empty())
        report.evidence.push_back("native stacks: " + (tools_.eu_stack.empty() ? tools_.gdb : tools_.eu_stack) +
                                  (tools_.py_spy.empty() ? "" : " and py-spy") + ", in each rank's " +
                                  "native-stacks file");
    report.stacks_files = plan_->stacks_files;
    return report;
}

}  // namespace dlaunch
