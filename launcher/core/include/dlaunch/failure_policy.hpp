// The supervision state machine: events in (a worker exited, a signal arrived, the grace period ran
// out), actions out (signal the workers, kill them, start the group again, exit with a code). Pure: the
// executor feeds it events and carries out its actions, tests feed it events and check the actions.
//
// Rules (torchrun's, plus dlaunch's signal handling):
// - A worker exiting 0 is done; the agent waits for the others. All done: exit 0.
// - A worker failing (non-zero, or killed by a signal) while the group runs is a failure. The others
//   get SIGTERM, then SIGKILL after the grace period. Once all are gone: start the group again if
//   restarts remain (counted over the whole run), after the restart's backoff (RestartBackoff), else exit
//   with the attempt's root cause's code. A stop signal while waiting to restart ends the run at once.
// - A stop signal (TERM, INT, HUP, QUIT by default) is forwarded, the rest get SIGKILL after the grace
//   period, and the run's code is 128+signal (the front-end then dies of the signal); a second stop
//   signal kills at once.
// - A hung worker (no progress for --hang-timeout, found by the executor) is a failure like a crash: the
//   others get SIGTERM, and its own end once stopped is not another failure. Its exit code is kHang.
// - Any other forwarded signal (USR1, USR2, ...) is only passed on; the workers decide what it means.
// - With a checkpoint rule (dlaunch --requeue): the warning signal sends the checkpoint signal to every
//   worker and arms the checkpoint grace; exits from then on are not failures. When all are gone (or
//   killed at the end of the grace) the agent exits and checkpointed() says why.
//   SIGTERM while the group runs is Slurm ending the attempt (scontrol requeue, preemption, node failure,
//   scancel, time limit): it too sends the checkpoint signal (not SIGTERM), but arms the ending grace,
//   which Slurm's KillWait bounds; the agent then exits 128+SIGTERM. A SIGTERM during a checkpoint
//   arms the ending grace (the shorter bound wins); a repeated SIGTERM is ignored (srun forwards the one
//   Slurm sent), other stop signals kill at once.
// - Services (Paddle's parameter servers) never end by themselves: once every other worker has exited
//   0, the services get SIGTERM (SIGKILL after the grace period) and the run succeeds whatever they
//   exit with. A service failing while the others still run is a failure like any other.
// - The group (agents of several nodes restarting together) may end the attempt because a worker failed
//   on another node or a node was lost: group_stop() sends SIGTERM, arms the stop grace, and once all are
//   gone ends the attempt with no restart (the group decides what comes next). Deaths from then on are
//   effects, not failures of this node; stopped_by_group() says why the attempt ended.
#pragma once

#include <optional>
#include <set>
#include <string>
#include <vector>

namespace dlaunch {

struct ExitStatus {
    bool signaled = false;
    int code = 0;  // exit code, or signal number when signaled

    bool success() const { return !signaled && code == 0; }
    int as_exit_code() const { return signaled ? 128 + code : code; }
    std::string describe() const;  // "exit code 3" or "signal SIGSEGV (11)"
    static ExitStatus from_wait_status(int wstatus);
    bool operator==(const ExitStatus&) const = default;
};

struct WorkerExit {
    int local_rank = 0;
    int pid = 0;
    ExitStatus status;
    double time = 0;  // seconds since the epoch
    // It had already exited (not yet reaped) when dlaunch began stopping the group: however it ended,
    // the stop did not cause it.
    bool before_the_stop = false;
    bool operator==(const WorkerExit&) const = default;
};

struct Failure {
    int attempt = 0;
    WorkerExit exit;                     // of a hang: when it was found (status: how the rank ended once stopped)
    bool root_cause = false;             // first failure of its attempt
    bool stopped_by_us = false;          // it died after dlaunch began stopping the group (and not before)
    std::optional<double> hung_after{};  // the rank was hung: no progress for this many seconds
    bool operator==(const Failure&) const = default;

    // The run's exit code when this is its root cause: the rank's own, exit_code::kHang for a hang.
    int exit_code() const;
    // "exit code 3", "signal SIGSEGV (11)", "hung: no progress for 5 s (then signal SIGTERM (15))"
    std::string describe() const;
};

struct Action {
    enum class Kind {
        StartGroup,     // start every worker (attempt number: restart_count())
        WaitToRestart,  // arm the timer for `seconds`; grace_expired() when it fires starts the group
        SignalWorkers,  // send `value` to every live worker
        StartGrace,     // arm the grace timer (value: a Grace); grace_expired() when it fires
        KillWorkers,    // SIGKILL every live worker (and its process group)
        Exit,           // the agent is done: exit with `value`
    };
    Kind kind;
    int value = 0;
    double seconds = 0;  // WaitToRestart: how long
    bool operator==(const Action&) const = default;
};

// StartGrace's value: which grace period.
enum Grace : int {
    kStopGrace = 0,        // --grace-seconds: stopping after a failure or a stop signal
    kCheckpointGrace = 1,  // --checkpoint-grace, never past the job's end: after the warning signal
    kEndingGrace = 2,      // --checkpoint-grace, never past Slurm's KillWait: after Slurm's SIGTERM
};

// Stop signals: dlaunch always catches these, forwards them (SIGTERM if not in --signals), and dies of
// the signal after the workers are gone (the policy's code is 128+signal).
std::set<int> stop_signals();

// The wait before restart N (1, 2, ...): `initial` seconds, doubled at every restart, never more than
// `max`; initial 0: restart at once. Gives a transient fault (a port in TIME_WAIT, a file system, a
// GPU being reset) time to clear, and keeps a crash loop from burning every restart in milliseconds.
struct RestartBackoff {
    double initial = 1;  // dlaunch's default (--restart-backoff 1:30)
    double max = 30;
    double before_restart(int restart) const;
    bool operator==(const RestartBackoff&) const = default;
};

// dlaunch --requeue: Slurm's warning signal asks the workers to checkpoint.
struct CheckpointRule {
    int warning_signal = 0;     // what Slurm sends before the end (#SBATCH --signal=SIG@SECONDS)
    int checkpoint_signal = 0;  // what the workers get
};

class FailurePolicy {
public:
    // `services`: local ranks that are stopped, not waited for, once all other workers succeeded.
    FailurePolicy(int workers, int max_restarts, std::set<int> stop_signals, std::set<int> services = {},
                  std::optional<CheckpointRule> checkpoint = std::nullopt, RestartBackoff backoff = {0, 0});

    std::vector<Action> start();
    std::vector<Action> worker_exited(const WorkerExit& exit);
    // The executor found `at.local_rank` hung (status unused) after `silent_seconds` without progress.
    std::vector<Action> worker_hung(const WorkerExit& at, double silent_seconds);
    std::vector<Action> signal_received(int signo);
    // The grace timer fired (or, waiting to restart, the backoff is over).
    std::vector<Action> grace_expired();
    std::vector<Action> group_stop();

    int restart_count() const { return restart_count_; }
    bool done() const { return phase_ == Phase::Done; }
    int exit_code() const { return exit_code_; }
    // Every failure of every attempt, in the order they happened.
    const std::vector<Failure>& failures() const { return failures_; }
    // The failure the exit code comes from (first failure of the last failed attempt), if any.
    std::optional<Failure> root_cause() const;
    // Set once a stop signal arrived: the agent exits 128+signal.
    std::optional<int> stopped_by_signal() const { return stop_signal_; }
    // Set once the warning signal arrived while the group ran: the attempt ended for a checkpoint.
    bool checkpointed() const { return checkpointed_; }
    // Set once group_stop() ended a running attempt.
    bool stopped_by_group() const { return stopped_by_group_; }
    // The attempt runs (no stop, checkpoint or restart under way).
    bool running() const { return phase_ == Phase::Running; }
    // Between attempts, waiting out the restart's backoff.
    bool waiting_to_restart() const { return phase_ == Phase::Waiting; }

private:
    enum class Phase { Idle, Running, Stopping, Finishing, Checkpointing, Waiting, Done };
    std::vector<Action> begin_stop(int signo);
    std::vector<Action> finish_stop();
    std::vector<Action> start_again();
    std::vector<Action> finish(int code);
    Failure* hung_failure(int local_rank);

    int workers_;
    int max_restarts_;
    std::set<int> stop_signals_;
    Phase phase_ = Phase::Idle;
    std::set<int> services_;
    int live_ = 0;
    int live_others_ = 0;  // live workers that are not services
    int restart_count_ = 0;
    int exit_code_ = 0;
    std::optional<int> stop_signal_;
    std::optional<CheckpointRule> checkpoint_;
    RestartBackoff backoff_;
    bool checkpointed_ = false;
    bool stopped_by_group_ = false;
    std::vector<Failure> failures_;
};

}  // namespace dlaunch
