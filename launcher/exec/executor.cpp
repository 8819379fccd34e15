#include "dlaunch/executor.hpp"

#include <fcntl.h>
#include <spdlog/details/null_mutex.h>
#include <spdlog/sinks/base_sink.h>
#include <spdlog/spdlog.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/timerfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstring>
#include <fstream>
#include <memory>
#include <sstream>

#include "dlaunch/clock.hpp"
#include "dlaunch/console.hpp"
#include "dlaunch/exit_codes.hpp"
#include "dlaunch/guardian.hpp"
#include "dlaunch/hang_monitor.hpp"
#include "dlaunch/line_buffer.hpp"
#include "dlaunch/proc_files.hpp"
#include "dlaunch/signals.hpp"

namespace dlaunch {
namespace {

constexpr uint64_t kTagSignal = 1ull << 32;
constexpr uint64_t kTagTimer = 2ull << 32;
constexpr uint64_t kTagStdout = 3ull << 32;
constexpr uint64_t kTagStderr = 4ull << 32;
constexpr uint64_t kTagWatch = 5ull << 32;
constexpr uint64_t kTagHangTick = 6ull << 32;
constexpr uint64_t kTagTimerFifo = 7ull << 32;
constexpr uint64_t kTagHeartbeat = 8ull << 32;
constexpr uint64_t kTagWake = 9ull << 32;
constexpr double kWakeGap = 0.005;  // seconds

// False when `fd` took not all of `data` (errno says why): a closed console (EPIPE) or a full disk must not
// stop supervision; the caller says what was lost where it matters (a worker's log).
bool write_all(int fd, std::string_view data) {
    while (!data.empty()) {
        ssize_t n = ::write(fd, data.data(), data.size());
        if (n < 0) {
            if (errno == EINTR) continue;
            return false;
        }
        data.remove_prefix(static_cast<size_t>(n));
    }
    return true;
}

// Whether a child of ours has exited but is not reaped yet (a zombie), leaving it to the SIGCHLD handling.
// One waitid() on every stop, where opening and parsing /proc/PID/stat took several system calls.
bool exited_unreaped(pid_t child) {
    siginfo_t info{};
    return ::waitid(P_PID, static_cast<id_t>(child), &info, WEXITED | WNOHANG | WNOWAIT) == 0 && info.si_pid == child;
}

// Called before each of dlaunch's own log lines (on stderr), ahead of the sink that writes it.
class BeforeOwnLines : public spdlog::sinks::base_sink<spdlog::details::null_mutex> {
public:
    explicit BeforeOwnLines(std::function<void()> hook) : hook_(std::move(hook)) {}

protected:
    void sink_it_(const spdlog::details::log_msg&) override { hook_(); }
    void flush_() override {}

private:
    std::function<void()> hook_;
};

// While it lives, dlaunch's own lines first end a worker's progress bar on stderr, so they are not
// written over the bar (nor the bar over them).
class OwnLinesAfterBars {
public:
    explicit OwnLinesAfterBars(std::function<void()> end_bar)
        : logger_(spdlog::default_logger()), sink_(std::make_shared<BeforeOwnLines>(std::move(end_bar))) {
        if (logger_) logger_->sinks().insert(logger_->sinks().begin(), sink_);
    }
    ~OwnLinesAfterBars() {
        if (logger_) std::erase(logger_->sinks(), sink_);
    }
    OwnLinesAfterBars(const OwnLinesAfterBars&) = delete;
    OwnLinesAfterBars& operator=(const OwnLinesAfterBars&) = delete;

private:
    std::shared_ptr<spdlog::logger> logger_;
    spdlog::sink_ptr sink_;
};

struct Stream {
    int pipe = -1;         // read end, -1 once closed
    int file = -1;         // log file, -1 when not kept (or cut: it could not be written)
    std::string log_path;  // the log file's path, for what is said when it cannot be written
    bool console = true;
    int console_fd = 1;
    LineBuffer lines{true};  // progress bars ('\r') are shown as they come
    ConsoleSource shown;
};

struct Worker {
    explicit Worker(const RankPlan& p) : plan(p) {}
    const RankPlan& plan;  // in the executor's plan_, which changes only once the group's workers are gone
    std::string prefix;
    pid_t pid = -1;
    bool alive = false;
    bool exited_before_the_stop = false;  // a zombie already when the group was told to stop
    bool group_gone = false;              // reaped, and nothing of its process group left: its id may be reused
    double started = 0;                   // seconds since the epoch
    Stream out, err;
    Tail stderr_tail;
};

class Executor {
public:
    Executor(const PlanForAttempt& plan_for_attempt, const EnvMap& inherited, const ExecutorOptions& options)
        : plan_for_attempt_(plan_for_attempt),
          options_(options),
          policy_(0, options.max_restarts, stop_signals()),
          own_spawner_(options.spawner ? nullptr : fork_exec_spawner(inherited, options.binder)),
          spawner_(options.spawner ? options.spawner : own_spawner_.get()),
          monitor_(inherited),
          guardian_(options.guardian ? options.guardian : &own_guardian_) {}

    ~Executor() { close_all(); }

    RunOutcome run();

private:
    bool setup();
    void apply(const std::vector<Action>& actions);
    bool start_group(int attempt);
    bool refused_by_health_gate(int attempt);
    void finish_outcome();
    bool spawn(size_t index, int stdin_fd);
    void on_signalfd();
    void say_received(int signo, const std::vector<Action>& actions) const;
    std::vector<Straggler> running_ranks(bool services_too) const;
    void record_running_at_stop();
    void on_stream(size_t index, bool is_err);
    void drain(Worker& w, Stream& s, bool final);
    void emit(Worker& w, Stream& s, std::string_view chunk);
    void show(Worker& w, Stream& s, std::string_view piece, Ending end, std::string& console);
    Console& console_of(const Stream& s) { return s.console_fd == 2 && !one_console_ ? consoles_[1] : consoles_[0]; }
    void reap();
    void record_failure_details(Worker& w);
    void end_group();
    void close_stream(Stream& s);
    void write_log(const Worker& w, Stream& s, std::string_view data);
    void close_log(const Worker& w, Stream& s);
    void log_cut(const Worker& w, Stream& s, int error);
    void close_all();
    void signal_workers(int signo);
    void kill_workers();
    void arm_grace(bool on, Grace kind = kStopGrace);
    void arm_timer(double seconds);  // 0 or less: disarm
    void on_timer();
    bool setup_watch();
    void on_watch();
    void on_wake();
    void ask_the_watch();
    void tell_failing(const Failure& f);
    void on_hang_tick();
    void watch_attempt();

    const PlanForAttempt& plan_for_attempt_;
    ExecutorOptions options_;
    FailurePolicy policy_;
    std::unique_ptr<Spawner> own_spawner_;
    Spawner* spawner_;
    HangMonitor monitor_;
    Guardian own_guardian_;
    Guardian* guardian_;   // options.guardian, kept across a group's attempts, or this run's own
    Console consoles_[2];  // stdout's, stderr's: one when both are the same file (a terminal)
    bool one_console_ = false;
    LaunchPlan plan_;
    std::vector<std::unique_ptr<Worker>> workers_;
    std::string attempt_dir_made_;  // made for the rank spawned before: its attempt's directory, not again
    int epoll_ = -1, signalfd_ = -1, timerfd_ = -1, watchfd_ = -1;
    // The watch's wake descriptor is asked at most every kWakeGap (a stranger's packets must not drive the
    // group's work); news within the gap is asked for when it is over.
    double last_asked_ = 0;
    bool wake_pending_ = false;
    sigset_t blocked_{};
    sigset_t original_mask_{};
    bool done_ = false;
    // Some ranks finished while others run: when the first did, and how often that was said since.
    double first_finished_ = 0;
    int waiting_notes_ = 0;
    double next_note_due() const;
    int wait_timeout_ms() const;
    void say_what_is_happening();
    int exit_code_ = 0;
    RunOutcome outcome_;
    std::map<std::pair<int, int>, FailureRecord> details_;  // (attempt, local rank) -> details
};

bool Executor::setup() {
    sigemptyset(&blocked_);
    sigaddset(&blocked_, SIGCHLD);
    for (int s : stop_signals()) sigaddset(&blocked_, s);
    for (int s : options_.forward_signals) sigaddset(&blocked_, s);
    if (options_.checkpoint) sigaddset(&blocked_, options_.checkpoint->warning_signal);
    if (::sigprocmask(SIG_BLOCK, &blocked_, &original_mask_) != 0) return false;
    ::signal(SIGPIPE, SIG_IGN);
    struct stat out {
    }, err{};
    one_console_ =
        ::fstat(1, &out) == 0 && ::fstat(2, &err) == 0 && out.st_dev == err.st_dev && out.st_ino == err.st_ino;
    signalfd_ = ::signalfd(-1, &blocked_, SFD_CLOEXEC | SFD_NONBLOCK);
    timerfd_ = ::timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
    epoll_ = ::epoll_create1(EPOLL_CLOEXEC);
    if (signalfd_ < 0 || timerfd_ < 0 || epoll_ < 0) return false;
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u64 = kTagSignal;
    ::epoll_ctl(epoll_, EPOLL_CTL_ADD, signalfd_, &ev);
    ev.data.u64 = kTagTimer;
    ::epoll_ctl(epoll_, EPOLL_CTL_ADD, timerfd_, &ev);
    return setup_watch();
}

// The watch's periodic timer: every tick, one question to the group.
bool Executor::setup_watch() {
    if (!options_.watch) return true;
    watchfd_ = ::timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
    if (watchfd_ < 0) return false;
    const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(options_.watch->tick).count();
    itimerspec spec{};
    spec.it_interval.tv_sec = spec.it_value.tv_sec = ns / 1000000000;
    spec.it_interval.tv_nsec = spec.it_value.tv_nsec = ns % 1000000000;
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u64 = kTagWatch;
    if (::timerfd_settime(watchfd_, 0, &spec, nullptr) != 0 || ::epoll_ctl(epoll_, EPOLL_CTL_ADD, watchfd_, &ev) != 0)
        return false;
    if (options_.watch->wake_fd < 0) return true;
    // Edge-triggered: news wakes the loop once; what the watch leaves unread waits for the tick.
    epoll_event wake{};
    wake.events = EPOLLIN | EPOLLET;
    wake.data.u64 = kTagWake;
    return ::epoll_ctl(epoll_, EPOLL_CTL_ADD, options_.watch->wake_fd, &wake) == 0;
}

void Executor::on_watch() {
    uint64_t expirations;
    if (::read(watchfd_, &expirations, sizeof expirations) <= 0) return;
    ask_the_watch();
}

void Executor::on_wake() {
    if (now_epoch() - last_asked_ >= kWakeGap)
        ask_the_watch();
    else
        wake_pending_ = true;
}

void Executor::ask_the_watch() {
    last_asked_ = now_epoch();
    wake_pending_ = false;
    if (options_.watch->stop_requested()) apply(policy_.group_stop());
}

RunOutcome Executor::run() {
    if (!setup()) {
        spdlog::error("launch: cannot set up signal handling: {}", std::strerror(errno));
        outcome_.exit_code = exit_code::kLaunchFailure;
        return outcome_;
    }
    auto first = plan_for_attempt_(0);
    if (!first) {
        spdlog::error("{}", first.error().describe());
        outcome_.exit_code = exit_code::kLaunchFailure;
        return outcome_;
    }
    plan_ = std::move(first).value();
    std::set<int> services;
    for (auto& r : plan_.ranks)
        if (r.service) services.insert(r.local_rank);
    policy_ = FailurePolicy(static_cast<int>(plan_.ranks.size()), options_.max_restarts, stop_signals(), services,
                            options_.checkpoint, options_.restart_backoff);
    outcome_.run_id = plan_.run_id;
    outcome_.max_restarts = options_.max_restarts;
    if (auto s = monitor_.open(plan_, epoll_, kTagHangTick, kTagTimerFifo, kTagHeartbeat); !s) {
        spdlog::error("{}", s.error().describe());
        outcome_.exit_code = exit_code::kLaunchFailure;
        return outcome_;
    }

    if (const pid_t was = guardian_->pid(); guardian_->ended_unseen())
        spdlog::warn("launch: the guardian (pid {}) ended between attempts; starting another", was);
    if (guardian_->pid() < 0 && !guardian_->start())
        spdlog::warn(
            "launch: cannot start the guardian ({}): if dlaunch is killed with SIGKILL, its workers' own "
            "children will outlive it",
            std::strerror(errno));
    OwnLinesAfterBars own_lines([this] { write_all(2, consoles_[one_console_ ? 0 : 1].end_open_line()); });
    apply(policy_.start());
    epoll_event events[64];
    while (!done_) {
        int n = ::epoll_wait(epoll_, events, 64, wait_timeout_ms());
        say_what_is_happening();  // when due: a rank printing all the time must not put it off
        if (wake_pending_ && now_epoch() - last_asked_ >= kWakeGap) ask_the_watch();
        if (n < 0) {
            if (errno == EINTR) continue;
            spdlog::error("launch: epoll_wait: {}", std::strerror(errno));
            kill_workers();
            exit_code_ = exit_code::kLaunchFailure;
            break;
        }
        for (int i = 0; i < n && !done_; ++i) {
            uint64_t tag = events[i].data.u64 & ~0xffffffffull;
            size_t index = events[i].data.u64 & 0xffffffffull;
            if (tag == kTagSignal)
                on_signalfd();
            else if (tag == kTagTimer)
                on_timer();
            else if (tag == kTagWatch)
                on_watch();
            else if (tag == kTagWake)
                on_wake();
            else if (tag == kTagHangTick)
                on_hang_tick();
            else if (tag == kTagTimerFifo)
                monitor_.on_fifo();
            else if (tag == kTagHeartbeat)
                monitor_.on_heartbeats();
            else if (tag == kTagStdout || tag == kTagStderr)
                on_stream(index, tag == kTagStderr);
        }
    }
    end_group();
    finish_outcome();
    ::sigprocmask(SIG_SETMASK, &original_mask_, nullptr);
    return outcome_;
}

// The run is over: what the policy and the attempts say goes into the outcome.
void Executor::finish_outcome() {
    if (auto learned = monitor_.learned_summary(); !learned.empty()) spdlog::info("{}", learned);
    outcome_.exit_code = exit_code_;
    // The restarts that began: a stop during a restart's backoff cut that one short.
    outcome_.restarts = outcome_.attempts.empty() ? 0 : static_cast<int>(outcome_.attempts.size()) - 1;
    outcome_.failed = exit_code_ != exit_code::kSuccess && !policy_.stopped_by_signal() &&
                      (policy_.root_cause() || !outcome_.not_ready.empty());
    outcome_.checkpointed = policy_.checkpointed();
    outcome_.stopped_by_group = policy_.stopped_by_group();
    outcome_.stop_signal = policy_.stopped_by_signal().value_or(0);
    for (auto& f : policy_.failures()) {
        auto it = details_.find({f.attempt, f.exit.local_rank});
        FailureRecord r = it != details_.end() ? it->second : FailureRecord{};
        r.failure = f;
        outcome_.failures.push_back(std::move(r));
    }
}

void Executor::apply(const std::vector<Action>& actions) {
    for (auto& a : actions) {
        // Every worker of the attempt is gone when the policy starts, schedules or ends: it ended now.
        if (a.kind != Action::Kind::SignalWorkers && a.kind != Action::Kind::StartGrace &&
            a.kind != Action::Kind::KillWorkers && !outcome_.attempts.empty() && outcome_.attempts.back().end == 0)
            outcome_.attempts.back().end = now_epoch();
        switch (a.kind) {
            case Action::Kind::StartGroup:
                if (refused_by_health_gate(a.value)) return;
                if (!start_group(a.value)) {
                    kill_workers();
                    // Reap what was started so nothing outlives us.
                    for (auto& w : workers_)
                        if (w->alive) ::waitpid(w->pid, nullptr, 0), w->alive = false;
                    exit_code_ = exit_code::kLaunchFailure;
                    done_ = true;
                    return;
                }
                break;
            case Action::Kind::WaitToRestart:
                spdlog::info("restart: waiting {}s before restart {} (--restart-backoff)", a.seconds, a.value);
                monitor_.pause();
                arm_timer(a.seconds);
                break;
            case Action::Kind::SignalWorkers: signal_workers(a.value); break;
            case Action::Kind::StartGrace:
                monitor_.pause();  // the attempt is ending: a silent rank now is no news
                arm_grace(true, static_cast<Grace>(a.value));
                break;
            case Action::Kind::KillWorkers: kill_workers(); break;
            case Action::Kind::Exit:
                exit_code_ = a.value;
                done_ = true;
                return;
        }
    }
}

// The health gate before `attempt`: a node that fails it starts no worker; the run ends here.
bool Executor::refused_by_health_gate(int local_attempt) {
    if (!options_.health_gate) return false;
    const int attempt = options_.first_attempt + local_attempt;
    const std::string why = options_.health_gate(attempt);
    if (why.empty()) return false;
    spdlog::error(
        "health: {} failed the health check before attempt {}: {}; no worker started "
        "(--no-health-check turns the gate off)",
        plan_.hostname, attempt, why);
    outcome_.not_ready = plan_.hostname + " failed the health check (" + why + ")";
    outcome_.end_cause = "attempt " + std::to_string(attempt) + ": " + outcome_.not_ready;
    exit_code_ = exit_code::kNotReady;
    done_ = true;
    return true;
}

bool Executor::start_group(int attempt) {
    end_group();
    arm_grace(false);
    outcome_.attempts.push_back({attempt, now_epoch(), 0});
    first_finished_ = 0;
    waiting_notes_ = 0;
    if (attempt > 0) {
        auto next = plan_for_attempt_(attempt);
        if (!next) {
            spdlog::error("{}", next.error().describe());
            return false;
        }
        plan_ = std::move(next).value();
    }
    int stdin_fd = options_.workers_read_stdin ? ::fcntl(0, F_DUPFD_CLOEXEC, 3) : -1;
    if (stdin_fd < 0) stdin_fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);  // also when dlaunch has no stdin
    for (const auto& rp : plan_.ranks) {
        auto w = std::make_unique<Worker>(rp);
        w->prefix = console_prefix(plan_, rp);
        workers_.push_back(std::move(w));
    }
    bool ok = true;
    for (size_t i = 0; i < workers_.size() && ok; ++i) ok = spawn(i, stdin_fd);
    if (stdin_fd >= 0) ::close(stdin_fd);
    if (ok) watch_attempt();
    if (ok)
        spdlog::debug("started [attempt: {}, workers: {}, master: {}:{}]", attempt, workers_.size(), plan_.master_addr,
                      plan_.master_port);
    return ok;
}

bool Executor::spawn(size_t index, int stdin_fd) {
    Worker& w = *workers_[index];
    const RankPlan& rp = w.plan;
    // The rank's directory (error file, logs) first: a worker must not start if its output cannot be kept.
    if (!rp.error_file.empty()) {
        std::string dir = rp.error_file.substr(0, rp.error_file.rfind('/'));
        std::string attempt_dir = dir.substr(0, dir.rfind('/'));
        if (attempt_dir != attempt_dir_made_) ::mkdir(attempt_dir.c_str(), 0755), attempt_dir_made_ = attempt_dir;
        if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) {
            spdlog::error("launch: rank {}: cannot create {}: {}", rp.rank, dir, std::strerror(errno));
            return false;
        }
    }
    if (!rp.stdout_log.empty()) {
        const int flags = O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | (rp.log_truncate ? O_TRUNC : 0);
        w.out.file = ::open(rp.stdout_log.c_str(), flags, 0644);
        // One file for both streams (Paddle's workerlog.N): the same open file, so lines interleave in order.
        w.err.file = rp.stderr_log == rp.stdout_log ? ::fcntl(w.out.file, F_DUPFD_CLOEXEC, 0)
                                                    : ::open(rp.stderr_log.c_str(), flags, 0644);
        if (w.out.file < 0 || w.err.file < 0) {
            spdlog::error("launch: rank {}: cannot open its log file {}: {}", rp.rank, rp.stdout_log,
                          std::strerror(errno));
            return false;
        }
        w.out.log_path = rp.stdout_log;
        w.err.log_path = rp.stderr_log;
        if (!rp.log_header.empty()) {
            const std::string header = rp.log_header + " " + format_utc(now_epoch()) + "\n";
            write_log(w, w.out, header);
            if (rp.stderr_log != rp.stdout_log) write_log(w, w.err, header);
        }
    }
    w.out.console = rp.console_stdout;
    w.err.console = rp.console_stderr;
    w.out.console_fd = 1;
    w.err.console_fd = 2;

    int out[2], err[2];
    if (::pipe2(out, O_CLOEXEC) != 0) return false;
    if (::pipe2(err, O_CLOEXEC) != 0) {
        ::close(out[0]), ::close(out[1]);
        return false;
    }
    auto pid = spawner_->spawn(rp, policy_.restart_count(), SpawnIo{stdin_fd, out[1], err[1]});
    if (!pid) {
        spdlog::error("{}", pid.error().describe());
        for (int fd : {out[0], out[1], err[0], err[1]}) ::close(fd);
        return false;
    }
    ::close(out[1]);
    ::close(err[1]);
    w.pid = *pid;
    w.alive = true;
    guardian_->hold(*pid);
    w.started = now_epoch();
    w.out.pipe = out[0];
    w.err.pipe = err[0];
    for (auto [fd, tag] : {std::pair{out[0], kTagStdout}, std::pair{err[0], kTagStderr}}) {
        ::fcntl(fd, F_SETFL, O_NONBLOCK);  // a pipe's read end has no other status flag
        epoll_event ev{};
        ev.events = EPOLLIN;
        ev.data.u64 = tag | index;
        ::epoll_ctl(epoll_, EPOLL_CTL_ADD, fd, &ev);
    }
    if (!spdlog::should_log(spdlog::level::debug)) return true;
    spdlog::debug("spawned [rank: {}, local_rank: {}, pid: {}, gpu: {}, cpus: {}, mems: {}]", rp.rank, rp.local_rank,
                  *pid, rp.gpu ? std::to_string(rp.gpu->index) : "-", rp.cpuset.empty() ? "-" : rp.cpuset.to_list(),
                  rp.mems.empty() ? "-" : rp.mems.to_list());
    return true;
}

// One line on what a received signal does: the policy's answer says it.
void Executor::say_received(int signo, const std::vector<Action>& actions) const {
    const std::string name = signal_name(signo);
    if (std::any_of(actions.begin(), actions.end(),
                    [](const Action& a) { return a.kind == Action::Kind::KillWorkers; }))
        spdlog::warn("stop: received {} while stopping; killing the workers now (SIGKILL)", name);
    else if (options_.checkpoint && signo == options_.checkpoint->warning_signal && !stop_signals().contains(signo))
        spdlog::warn("checkpoint: received {} (the job's warning signal)", name);
    else if (options_.checkpoint && signo == SIGTERM)
        spdlog::warn(
            "checkpoint: received SIGTERM (Slurm ends this attempt: requeue, preemption, node failure, "
            "time limit or scancel)");
    else if (stop_signals().contains(signo) && running_ranks(true).empty())
        spdlog::warn("stop: received {}; no worker runs (the run was waiting to restart): it ends now", name);
    else if (stop_signals().contains(signo))
        spdlog::warn("stop: received {}; stopping the workers (grace {}s; a second stop signal kills them at once)",
                     name, options_.grace_seconds);
    else
        spdlog::info("signal: forwarding {} to the workers", name);
}

std::vector<Straggler> Executor::running_ranks(bool services_too) const {
    std::vector<Straggler> out;
    for (auto& w : workers_)
        if (w->alive && (services_too || !w->plan.service))
            out.push_back({w->plan.rank, w->pid, plan_.hostname, now_epoch() - w->started, "", ""});
    return out;
}

// A stop by signal: which ranks it stopped and where each was (their Python stacks, taken before the
// signal reaches them), on the console and in run.json.
void Executor::record_running_at_stop() {
    outcome_.running_at_stop = running_ranks(true);
    if (outcome_.running_at_stop.empty()) return;
    std::vector<CaptureTarget> targets;
    for (const Straggler& s : outcome_.running_at_stop) {
        auto w = std::find_if(workers_.begin(), workers_.end(), [&](auto& x) { return x->pid == s.pid; });
        targets.push_back({s.rank, s.pid, (*w)->plan.stacks_file, ""});
    }
    // Under --requeue Slurm's SIGTERM starts the checkpoint grace: the checkpoint signal must not wait.
    const std::vector<std::string> where = options_.checkpoint ? std::vector<std::string>{} : where_ranks_run(targets);
    for (size_t i = 0; i < outcome_.running_at_stop.size() && i < where.size(); ++i) {
        outcome_.running_at_stop[i].where = where[i];
        if (!where[i].empty() && where[i] != kNoPythonStack)
            outcome_.running_at_stop[i].stacks_file = targets[i].stacks_file;
    }
    spdlog::warn("stop: {}", still_running_line(outcome_.running_at_stop));
}

void Executor::on_signalfd() {
    signalfd_siginfo info;
    bool child = false;
    while (::read(signalfd_, &info, sizeof info) == sizeof info) {
        int signo = static_cast<int>(info.ssi_signo);
        if (signo == SIGCHLD) {
            child = true;
            continue;
        }
        const bool was_stopped = policy_.stopped_by_signal().has_value();
        auto actions = policy_.signal_received(signo);
        say_received(signo, actions);
        if (!was_stopped && policy_.stopped_by_signal()) record_running_at_stop();
        if (options_.workers_get_signals_too)
            std::erase_if(actions, [signo](const Action& a) {
                return a.kind == Action::Kind::SignalWorkers && a.value == signo;
            });
        apply(actions);
        if (done_) return;
    }
    if (child) reap();
}

void Executor::reap() {
    int status = 0;
    pid_t pid;
    while ((pid = ::waitpid(-1, &status, WNOHANG)) > 0) {
        if (pid == guardian_->pid()) {
            spdlog::warn(
                "launch: the guardian (pid {}) ended; if dlaunch is killed with SIGKILL now, its workers' "
                "own children will outlive it",
                pid);
            guardian_->forget();
            continue;
        }
        for (auto& w : workers_) {
            if (w->pid != pid || !w->alive) continue;
            w->alive = false;
            if (::kill(-pid, 0) != 0 && errno == ESRCH) {  // no child left in its group: nothing to kill later
                w->group_gone = true;
                guardian_->release(pid);
            }
            monitor_.exited(w->plan.local_rank, pid);
            WorkerExit exit{w->plan.local_rank, pid, ExitStatus::from_wait_status(status), now_epoch(),
                            w->exited_before_the_stop};
            outcome_.last_exit = exit.status;
            // Its output is all in the pipes now: read it before reporting, so the tail is complete.
            drain(*w, w->out, false);
            drain(*w, w->err, false);
            spdlog::debug("exited [rank: {}, pid: {}, status: {}]", w->plan.rank, pid, exit.status.describe());
            if (!exit.status.success() || details_.contains({policy_.restart_count(), w->plan.local_rank}))
                record_failure_details(*w);
            if (exit.status.success() && first_finished_ == 0) first_finished_ = exit.time;
            int before = policy_.restart_count();
            auto actions = policy_.worker_exited(exit);
            if (!policy_.failures().empty() && policy_.failures().back().exit.pid == pid &&
                policy_.failures().back().root_cause && !policy_.failures().back().hung_after) {
                spdlog::info("worker failed [rank: {}, status: {}]{}", w->plan.rank, exit.status.describe(),
                             workers_.size() > 1 ? "; stopping the group" : "");
                tell_failing(policy_.failures().back());
            }
            if (policy_.restart_count() != before && !policy_.waiting_to_restart())
                spdlog::info("restart: starting the group again (restart {} of {})", policy_.restart_count(),
                             options_.max_restarts);
            apply(actions);
            break;
        }
        if (done_) return;
    }
}

void Executor::tell_failing(const Failure& f) {
    if (!options_.watch || !options_.watch->failing) return;
    auto it = details_.find({f.attempt, f.exit.local_rank});
    FailureRecord r = it != details_.end() ? it->second : FailureRecord{};
    r.failure = f;
    options_.watch->failing(r);
}

void Executor::record_failure_details(Worker& w) {
    FailureRecord& r = details_[{policy_.restart_count(), w.plan.local_rank}];  // a hang's details may be there
    r.rank = w.plan.rank;
    r.node_rank = w.plan.node_rank;
    r.role = w.plan.role;
    r.role_name = w.plan.role.empty() ? str_var(w.plan.env, "ROLE_NAME") : w.plan.role;
    r.host = plan_.hostname;
    r.stderr_log = w.plan.stderr_log;
    r.stderr_tail.assign(w.stderr_tail.lines().begin(), w.stderr_tail.lines().end());
    if (!w.plan.error_file.empty()) {
        const std::string content = read_file_from(w.plan.error_file);
        auto [message, traceback] = parse_error_file(content);
        r.error_message = message;
        r.traceback = traceback;
        if (!content.empty()) r.error_file = w.plan.error_file;
    }
    for (auto& note : monitor_.notes_for(w.pid)) r.notes.push_back(note);
}

// Every attempt's workers are watched from their start.
void Executor::watch_attempt() {
    std::vector<MonitoredRank> ranks;
    for (auto& w : workers_) ranks.push_back({w->plan.local_rank, w->pid, &w->plan});
    monitor_.attempt_started(plan_, ranks);
}

// A hang: its report (stacks taken) on the console and in the failure record, then the policy's stop.
void Executor::on_hang_tick() {
    auto report = monitor_.on_tick();
    if (!report) return;
    auto w = std::find_if(workers_.begin(), workers_.end(),
                          [&](auto& x) { return x->plan.local_rank == report->local_rank; });
    spdlog::warn("hang: {}; likeliest culprit: {}; {}", report->what, report->culprit, report->reason);
    for (auto& e : report->evidence) spdlog::warn("hang:   {}", e);
    if (!report->stacks_files.empty()) spdlog::warn("hang: every rank's stacks: {}", report->stacks_files);
    FailureRecord& r = details_[{policy_.restart_count(), report->local_rank}];
    r.culprit = report->culprit + ": " + report->reason;
    r.hang_evidence = report->evidence;
    r.hang_evidence.insert(r.hang_evidence.begin(), report->what);
    r.stacks_files = report->stacks_files;
    WorkerExit at{report->local_rank, report->pid, {}, report->found_at};
    auto actions = policy_.worker_hung(at, report->silent_seconds);
    if (w != workers_.end()) record_failure_details(**w);
    if (!policy_.failures().empty() && policy_.failures().back().hung_after) tell_failing(policy_.failures().back());
    apply(actions);
}

void Executor::on_stream(size_t index, bool is_err) {
    if (index >= workers_.size()) return;
    Worker& w = *workers_[index];
    drain(w, is_err ? w.err : w.out, false);
}

void Executor::drain(Worker& w, Stream& s, bool final) {
    char buf[65536];
    while (s.pipe >= 0) {
        ssize_t n = ::read(s.pipe, buf, sizeof buf);
        if (n > 0) {
            emit(w, s, std::string_view(buf, static_cast<size_t>(n)));
            continue;
        }
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && errno == EAGAIN && !final) return;
        // EOF, or the group is over and whatever still holds the write end is not ours to wait for.
        close_stream(s);
    }
}

void Executor::emit(Worker& w, Stream& s, std::string_view chunk) {
    monitor_.output(w.plan.local_rank);
    write_log(w, s, chunk);
    std::string console;
    s.lines.feed(chunk, [&](std::string_view piece, Ending end) { show(w, s, piece, end, console); });
    if (!console.empty()) write_all(s.console_fd, console);
}

void Executor::show(Worker& w, Stream& s, std::string_view piece, Ending end, std::string& console) {
    if (&s == &w.err && end != Ending::kPartial && !(end == Ending::kReturn && piece.empty()))
        w.stderr_tail.add(piece, end == Ending::kReturn);
    if (s.console) console += console_of(s).render(s.shown, w.prefix, piece, end);
}

void Executor::write_log(const Worker& w, Stream& s, std::string_view data) {
    if (s.file >= 0 && !write_all(s.file, data)) log_cut(w, s, errno);
}

// A log file's last data may fail only when it is closed (NFS, a delayed write): that is a cut log too.
void Executor::close_log(const Worker& w, Stream& s) {
    if (s.file < 0) return;
    const int fd = s.file;
    s.file = -1;
    if (::close(fd) != 0 && errno != EINTR) log_cut(w, s, errno);
}

// A full or failing log directory: said once per file, the file given up, the console kept going; the run
// then ends with exit_code::kLogFailure unless --ignore-log-errors (outcome's log_errors).
void Executor::log_cut(const Worker& w, Stream& s, int error) {
    if (s.file >= 0) ::close(s.file), s.file = -1;
    const std::string what = "rank " + std::to_string(w.plan.rank) + ": " + s.log_path + ": " + std::strerror(error);
    spdlog::error(
        "logs: {}; this log is cut here (the console keeps going); free space in its directory, or give "
        "--log-dir on another file system",
        what);
    outcome_.log_errors.push_back(what);
}

void Executor::close_stream(Stream& s) {
    if (s.pipe < 0) return;
    ::epoll_ctl(epoll_, EPOLL_CTL_DEL, s.pipe, nullptr);
    ::close(s.pipe);
    s.pipe = -1;
}

void Executor::end_group() {
    for (auto& w : workers_) {
        for (Stream* s : {&w->out, &w->err}) {
            drain(*w, *s, true);
            std::string console;
            s->lines.finish([&](std::string_view piece, Ending end) { show(*w, *s, piece, end, console); });
            if (s->console) console += console_of(*s).close(s->shown);
            if (!console.empty()) write_all(s->console_fd, console);
            close_log(*w, *s);
        }
        // Leftovers in the worker's process group (its own children) do not outlive the group.
        if (w->pid > 0 && !w->group_gone) ::kill(-w->pid, SIGKILL), guardian_->release(w->pid);
    }
    workers_.clear();
}

void Executor::close_all() {
    end_group();
    for (int* fd : {&epoll_, &signalfd_, &timerfd_, &watchfd_})
        if (*fd >= 0) ::close(*fd), *fd = -1;
}

void Executor::signal_workers(int signo) {
    // A stop signal the user did not list in --signals still stops the workers, with SIGTERM.
    bool listed = std::find(options_.forward_signals.begin(), options_.forward_signals.end(), signo) !=
                  options_.forward_signals.end();
    if (!listed) signo = SIGTERM;
    // A stop reaches the worker's process group, as torchrun's killpg does: its own children (a non-daemon
    // multiprocessing.Process the worker waits for at exit) stop with it. A notification (USR1) reaches
    // the worker alone: its children may not handle it.
    const bool stop = stop_signals().contains(signo);
    for (auto& w : workers_) {
        if (!w->alive) continue;
        if (exited_unreaped(w->pid)) w->exited_before_the_stop = true;
        ::kill(stop ? -w->pid : w->pid, signo);
    }
}

void Executor::kill_workers() {
    for (auto& w : workers_)
        if (w->alive) {
            ::kill(-w->pid, SIGKILL);
            ::kill(w->pid, SIGKILL);
        }
}

// When the next note is due (say_what_is_happening), in seconds since the epoch; 0: none.
double Executor::next_note_due() const {
    if (!policy_.running() || outcome_.attempts.empty()) return 0;
    if (first_finished_ != 0) return first_finished_ + waiting_note_after(waiting_notes_);
    return 0;
}

// How long epoll may wait: until the next note is due; else for ever.
int Executor::wait_timeout_ms() const {
    const double due = next_note_due();
    const int note = due == 0 ? -1 : static_cast<int>(std::max(0.0, (due - now_epoch()) * 1000) + 1);
    if (!wake_pending_) return note;
    const int wake = static_cast<int>(std::max(0.0, (last_asked_ + kWakeGap - now_epoch()) * 1000) + 1);
    return note < 0 ? wake : std::min(note, wake);
}

// While the workers run: who is waited for once some finished.
void Executor::say_what_is_happening() {
    const double due = next_note_due();
    if (due == 0 || now_epoch() < due) return;
    ++waiting_notes_;
    std::vector<Straggler> waiting = running_ranks(false);
    const int total = static_cast<int>(
        std::count_if(workers_.begin(), workers_.end(), [](const auto& w) { return !w->plan.service; }));
    if (!waiting.empty())
        spdlog::info("finish: {}{}", plan_.nnodes > 1 ? "on this node, " : "",
                     waiting_line(total - static_cast<int>(waiting.size()), total, waiting));
}

// The one timer fired: a grace period is over, or the wait before a restart.
void Executor::on_timer() {
    uint64_t expirations;
    if (::read(timerfd_, &expirations, sizeof expirations) <= 0) return;
    if (policy_.waiting_to_restart())
        spdlog::info("restart: starting the group again (restart {} of {})", policy_.restart_count(),
                     options_.max_restarts);
    else if (policy_.checkpointed())
        spdlog::warn("checkpoint: the checkpoint grace is over; killing the remaining workers");
    else
        spdlog::warn("stop: grace period of {}s is over; killing the remaining workers", options_.grace_seconds);
    apply(policy_.grace_expired());
}

void Executor::arm_grace(bool on, Grace kind) {
    if (!on) return arm_timer(0);
    double g = options_.grace_seconds;
    if (kind != kStopGrace) {
        g = options_.checkpoint_seconds ? options_.checkpoint_seconds(kind) : g;
        itimerspec armed{};
        ::timerfd_gettime(timerfd_, &armed);
        double left = static_cast<double>(armed.it_value.tv_sec) + static_cast<double>(armed.it_value.tv_nsec) / 1e9;
        if (left > 0 && left <= g) {
            spdlog::warn("checkpoint: {:.0f}s of the checkpoint grace are left, within what Slurm leaves", left);
            return;  // the shorter bound wins
        }
        spdlog::warn("checkpoint: sent {} to the workers; waiting up to {:.0f}s for them to exit{}",
                     signal_name(options_.checkpoint->checkpoint_signal), g,
                     kind == kEndingGrace ? " (Slurm kills them after KillWait)" : "");
    }
    arm_timer(std::max(g, 1e-9));  // a grace of 0 still fires
}

void Executor::arm_timer(double seconds) {
    itimerspec spec{};
    if (seconds > 0) {
        spec.it_value.tv_sec = static_cast<time_t>(seconds);
        spec.it_value.tv_nsec = static_cast<long>((seconds - static_cast<double>(spec.it_value.tv_sec)) * 1e9);
        if (spec.it_value.tv_sec == 0 && spec.it_value.tv_nsec == 0) spec.it_value.tv_nsec = 1;  // 0 would disarm
    }
    ::timerfd_settime(timerfd_, 0, &spec, nullptr);
}

}  // namespace

RunOutcome run_workers(const PlanForAttempt& plan_for_attempt, const EnvMap& inherited,
                       const ExecutorOptions& options) {
    Executor executor(plan_for_attempt, inherited, options);
    return executor.run();
}

}  // namespace dlaunch
