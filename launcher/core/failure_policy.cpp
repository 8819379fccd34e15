#include "dlaunch/failure_policy.hpp"

#include <sys/wait.h>

#include <algorithm>
#include <csignal>
#include <cstdio>

#include "dlaunch/exit_codes.hpp"
#include "dlaunch/signals.hpp"

namespace dlaunch {

std::string ExitStatus::describe() const {
    if (signaled) return "signal " + signal_name(code) + " (" + std::to_string(code) + ")";
    return "exit code " + std::to_string(code);
}

ExitStatus ExitStatus::from_wait_status(int wstatus) {
    if (WIFSIGNALED(wstatus)) return {true, WTERMSIG(wstatus)};
    return {false, WEXITSTATUS(wstatus)};
}

int Failure::exit_code() const {
    return hung_after ? exit_code::kHang : exit.status.as_exit_code();
}

std::string Failure::describe() const {
    if (!hung_after) return exit.status.describe();
    char seconds[32];
    std::snprintf(seconds, sizeof seconds, "%.0f", *hung_after);
    std::string out = std::string("hung: no progress for ") + seconds + " s";
    if (exit.status != ExitStatus{}) out += " (then " + exit.status.describe() + ")";
    return out;
}

double RestartBackoff::before_restart(int restart) const {
    if (initial <= 0 || restart < 1) return 0;
    double wait = initial;
    for (int i = 1; i < restart && wait < max; ++i) wait *= 2;
    return std::min(wait, std::max(initial, max));
}

std::set<int> stop_signals() {
    return {SIGTERM, SIGINT, SIGHUP, SIGQUIT};
}

FailurePolicy::FailurePolicy(int workers, int max_restarts, std::set<int> stop_signals, std::set<int> services,
                             std::optional<CheckpointRule> checkpoint, RestartBackoff backoff)
    : workers_(workers),
      max_restarts_(max_restarts),
      stop_signals_(std::move(stop_signals)),
      services_(std::move(services)),
      checkpoint_(checkpoint),
      backoff_(backoff) {}

std::vector<Action> FailurePolicy::start() {
    phase_ = Phase::Running;
    live_ = workers_;
    live_others_ = workers_ - static_cast<int>(services_.size());
    return {{Action::Kind::StartGroup, restart_count_}};
}

std::vector<Action> FailurePolicy::worker_exited(const WorkerExit& exit) {
    if (phase_ != Phase::Running && phase_ != Phase::Stopping && phase_ != Phase::Finishing &&
        phase_ != Phase::Checkpointing)
        return {};
    --live_;
    const bool service = services_.contains(exit.local_rank);
    if (!service) --live_others_;
    if (phase_ == Phase::Checkpointing) {
        // Asked to checkpoint: however a worker ends now, it is not this attempt's failure.
        if (!exit.status.success()) failures_.push_back({restart_count_, exit, false, true});
        if (live_ > 0) return {};
        return finish(stop_signal_ ? exit_code::kSignalBase + *stop_signal_ : exit_code::kSuccess);
    }
    if (phase_ == Phase::Finishing) {
        // The services were told to stop because the work is done: how they exit does not matter.
        return live_ > 0 ? std::vector<Action>{} : finish(exit_code::kSuccess);
    }
    std::vector<Action> actions;
    if (Failure* hung = hung_failure(exit.local_rank)) {
        hung->exit.status = exit.status;  // how the hung rank ended once stopped: the same failure
    } else if (!exit.status.success()) {
        // Only a failure of a running group is a root cause; deaths after the stop began are its effects.
        bool running = phase_ == Phase::Running;
        failures_.push_back({restart_count_, exit, running, !running && !exit.before_the_stop});
        if (phase_ == Phase::Running) actions = begin_stop(SIGTERM);
    }
    if (live_ == 0) {
        auto rest = phase_ == Phase::Stopping ? finish_stop() : finish(exit_code::kSuccess);
        actions.insert(actions.end(), rest.begin(), rest.end());
    } else if (phase_ == Phase::Running && live_others_ == 0 && !services_.empty()) {
        phase_ = Phase::Finishing;
        actions.push_back({Action::Kind::SignalWorkers, SIGTERM});
        actions.push_back({Action::Kind::StartGrace, kStopGrace});
    }
    return actions;
}

std::vector<Action> FailurePolicy::worker_hung(const WorkerExit& at, double silent_seconds) {
    if (phase_ != Phase::Running) return {};  // stopping already: the attempt ends anyway
    Failure f{restart_count_, at, true, false, silent_seconds};
    f.exit.status = {};
    failures_.push_back(f);
    return begin_stop(SIGTERM);
}

Failure* FailurePolicy::hung_failure(int local_rank) {
    for (auto& f : failures_)
        if (f.attempt == restart_count_ && f.hung_after && f.exit.local_rank == local_rank) return &f;
    return nullptr;
}

std::vector<Action> FailurePolicy::signal_received(int signo) {
    if (phase_ == Phase::Done || phase_ == Phase::Idle) return {};
    if (checkpoint_ && signo == checkpoint_->warning_signal && !stop_signals_.contains(signo)) {
        if (phase_ != Phase::Running) return {};  // stopping already: the attempt ends anyway
        phase_ = Phase::Checkpointing;
        checkpointed_ = true;
        return {{Action::Kind::SignalWorkers, checkpoint_->checkpoint_signal},
                {Action::Kind::StartGrace, kCheckpointGrace}};
    }
    if (!stop_signals_.contains(signo)) return {{Action::Kind::SignalWorkers, signo}};
    if (checkpoint_ && signo == SIGTERM && phase_ == Phase::Running) {
        // Slurm ends the attempt: the workers checkpoint within what Slurm leaves (KillWait).
        phase_ = Phase::Checkpointing;
        checkpointed_ = true;
        stop_signal_ = signo;
        return {{Action::Kind::SignalWorkers, checkpoint_->checkpoint_signal},
                {Action::Kind::StartGrace, kEndingGrace}};
    }
    if (phase_ == Phase::Checkpointing && signo == SIGTERM) {
        if (stop_signal_ == SIGTERM) return {};  // the same end of the attempt, forwarded once more by srun
        stop_signal_ = signo;
        return {{Action::Kind::StartGrace, kEndingGrace}};
    }
    if (phase_ == Phase::Finishing || phase_ == Phase::Checkpointing) {
        // The work is done (or being checkpointed) and the workers are being stopped already: a stop
        // request kills them at once.
        if (phase_ == Phase::Checkpointing) stop_signal_ = signo;
        return {{Action::Kind::KillWorkers, 0}};
    }
    if (phase_ == Phase::Stopping && stop_signal_) {
        // A second stop request: do not make the user wait for the grace period.
        return {{Action::Kind::KillWorkers, 0}};
    }
    stop_signal_ = signo;
    if (phase_ == Phase::Stopping) {
        // Already stopping after a failure (or the group's stop): forward the signal, and do not restart
        // afterwards. Slurm ending the attempt (--requeue) leaves only its KillWait: the agent must record
        // the attempt before Slurm's SIGKILL.
        if (checkpoint_ && signo == SIGTERM)
            return {{Action::Kind::SignalWorkers, signo}, {Action::Kind::StartGrace, kEndingGrace}};
        return {{Action::Kind::SignalWorkers, signo}};
    }
    if (live_ == 0) return finish(exit_code::kSignalBase + signo);
    return begin_stop(signo);
}

std::vector<Action> FailurePolicy::grace_expired() {
    if (phase_ == Phase::Waiting) return start_again();
    if (phase_ != Phase::Stopping && phase_ != Phase::Finishing && phase_ != Phase::Checkpointing) return {};
    return {{Action::Kind::KillWorkers, 0}};
}

std::vector<Action> FailurePolicy::group_stop() {
    if (phase_ != Phase::Running) return {};  // stopping, checkpointing or done already: the attempt ends anyway
    stopped_by_group_ = true;
    if (live_ == 0) return finish(exit_code::kSuccess);
    return begin_stop(SIGTERM);
}

std::optional<Failure> FailurePolicy::root_cause() const {
    std::optional<Failure> root;
    for (auto& f : failures_)
        if (f.root_cause) root = f;
    return root;
}

std::vector<Action> FailurePolicy::begin_stop(int signo) {
    phase_ = Phase::Stopping;
    return {{Action::Kind::SignalWorkers, signo}, {Action::Kind::StartGrace, kStopGrace}};
}

std::vector<Action> FailurePolicy::finish_stop() {
    if (stop_signal_) return finish(exit_code::kSignalBase + *stop_signal_);
    if (stopped_by_group_) return finish(exit_code::kSuccess);  // the group decides what comes next
    if (restart_count_ < max_restarts_) {
        ++restart_count_;
        const double wait = backoff_.before_restart(restart_count_);
        if (wait <= 0) return start_again();
        phase_ = Phase::Waiting;
        return {{Action::Kind::WaitToRestart, restart_count_, wait}};
    }
    auto root = root_cause();
    return finish(root ? root->exit_code() : exit_code::kLaunchFailure);
}

std::vector<Action> FailurePolicy::start_again() {
    phase_ = Phase::Running;
    live_ = workers_;
    live_others_ = workers_ - static_cast<int>(services_.size());
    return {{Action::Kind::StartGroup, restart_count_}};
}

std::vector<Action> FailurePolicy::finish(int code) {
    phase_ = Phase::Done;
    exit_code_ = code;
    return {{Action::Kind::Exit, code}};
}

}  // namespace dlaunch
