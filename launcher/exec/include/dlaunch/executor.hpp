// The executor: the only place that forks, execs, handles signals and writes worker logs. It applies
// plans and carries out FailurePolicy's actions; it decides nothing itself.
//
// Design note: one thread, one epoll loop over a signalfd (SIGCHLD and the forwarded signals), the
// workers' stdout/stderr pipes and a timerfd for the grace period. No polling: every wake-up is an event.
//
// Caveats:
// - Workers get PR_SET_PDEATHSIG=SIGKILL, so they die with the agent even on SIGKILL; their own
//   children (in the worker's process group) are killed then by the guardian (guardian.hpp).
// - Each worker leads its own process group: a terminal's Ctrl-C reaches only dlaunch, which forwards
//   it once. When a group is stopped, whatever is left in the workers' process groups is SIGKILLed.
#pragma once

#include <chrono>
#include <functional>
#include <vector>

#include "dlaunch/guardian.hpp"
#include "dlaunch/plan.hpp"
#include "dlaunch/spawner.hpp"
#include "dlaunch/summary.hpp"
#include "dlaunch/topology/binder.hpp"

namespace dlaunch {

// Something beyond this node that can end the attempt (the group of a multi-node job): asked every `tick`
// (a periodic timer of the loop); true stops the workers (FailurePolicy::group_stop).
struct AttemptWatch {
    std::chrono::milliseconds tick{100};
    std::function<bool()> stop_requested;
    // The attempt's first failure on this node, as it happens (before the other workers are stopped), so
    // that the group can stop the other nodes meanwhile. May be empty.
    std::function<void(const FailureRecord&)> failing;
    // Readable when stop_requested() may have news (the group channel): asked then too, not only every
    // tick, so that a stop reaches the workers at once. -1: the tick alone.
    int wake_fd = -1;
};

struct ExecutorOptions {
    double grace_seconds = 30;
    std::vector<int> forward_signals;
    int max_restarts = 0;
    RestartBackoff restart_backoff{0, 0};      // the wait before each restart (--restart-backoff); none by default
    const topology::Binder* binder = nullptr;  // applies each rank's cpuset/mems; null: no binding
    // dlaunch --requeue: the warning signal (and Slurm's SIGTERM) asks the workers to checkpoint;
    // checkpoint_seconds(kCheckpointGrace or kEndingGrace) says how long they get, asked when the signal
    // arrives (the job's time left shrinks).
    std::optional<CheckpointRule> checkpoint;
    std::function<double(Grace)> checkpoint_seconds;
    // Starts each worker; null: fork/exec (fork_exec_spawner with the inherited environment and binder).
    Spawner* spawner = nullptr;
    std::optional<AttemptWatch> watch;
    // The signals this process receives reach the workers without it (srun --dist-launch under a watcher:
    // Slurm signals every process of the step): they are acted on, not sent again.
    bool workers_get_signals_too = false;
    // The workers read this process's stdin (a watched rank, as if exec'd; a node's only worker:
    // LaunchPlan::worker_reads_stdin); else /dev/null.
    bool workers_read_stdin = false;
    // The health gate (health/health.hpp), asked before every attempt (numbered over the job:
    // first_attempt + N): what failed on this node, "" when it passed. A failure ends the run before that attempt's
    // workers start: exit_code::kNotReady, not_ready and end_cause in the outcome. Null: no gate (--no-health-check; a
    // group runs its own).
    std::function<std::string(int attempt)> health_gate;
    // The agent's guardian (guardian.hpp), forked once and kept across a group's attempts: a new one at every
    // restart would cost each agent the fork of a threaded process, its exit and the copy-on-write faults after
    // it. Null: this run forks its own.
    Guardian* guardian = nullptr;
    int first_attempt = 0;  // the job's number of this run's attempt 0 (--requeue: from the ledger), for the gate
};

// Makes the plan of attempt N (the executor calls it at every start of the group).
using PlanForAttempt = std::function<Result<LaunchPlan>(int attempt)>;

// Runs this node's worker group to the end. Returns the outcome (exit code and failures); a plan or
// spawn error during a restart ends the run with exit_code::kLaunchFailure and a message logged.
RunOutcome run_workers(const PlanForAttempt& plan_for_attempt, const EnvMap& inherited, const ExecutorOptions& options);

}  // namespace dlaunch
