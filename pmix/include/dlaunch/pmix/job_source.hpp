// The job context of a process started by a parallel launcher, and a small key-value exchange between its
// tasks. Sources, in order: PMIx (mpirun, srun --mpi=pmix), Slurm's environment (plain srun), Open MPI's
// environment. No PMIx type leaves this module.
//
// Caveats (see shared/docs/platform-facts.md):
// - PMIX_MCA_gds=hash is set before the first PMIx_Init: a process that execs into an application which
//   connects again as the same rank otherwise loses its per-process keys (Open MPI dies in MPI_Init).
// - Integer keys come typed differently per launcher (Slurm: int, Open MPI: uint32): all go through one
//   converter.
// - Always finalize() before exec: mpirun reports an unfinalized exit as an error.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "dlaunch/job_context.hpp"
#include "dlaunch/requeue.hpp"
#include "dlaunch/result.hpp"
#include "dlaunch/scheduler.hpp"

namespace dlaunch::pmix {

// A PMIx client connection of this process.
class Session {
public:
    ~Session();
    Session(const Session&) = delete;
    Session& operator=(const Session&) = delete;

    // Connects when the environment names a PMIx server (PMIX_NAMESPACE/PMIX_RANK); nullopt when it does
    // not, an Error when it does but the server cannot be reached.
    static Result<std::unique_ptr<Session>> connect_if_available(const EnvMap& env);

    Result<SchedulerInfo> job() const;

    // Publishes `value` under `key` for every task (global scope), then commits.
    Status put(const std::string& key, const std::string& value);
    // Waits until every task of the job arrived, exchanging what they put. Fails after `timeout_seconds`
    // with the number of tasks and a hint that one never arrived.
    Status fence(double timeout_seconds);
    // `key` as published by task `rank`.
    Result<std::string> get(int rank, const std::string& key) const;
    // Disconnects; safe to call twice.
    void finalize();

private:
    Session();
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

// From Slurm's task environment (SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID, SLURM_NODEID, node list ...).
// nullopt when SLURM_PROCID is absent.
std::optional<Result<SchedulerInfo>> from_slurm_env(const EnvMap& env);

// From Open MPI's environment (OMPI_COMM_WORLD_*). nullopt when absent.
std::optional<Result<SchedulerInfo>> from_openmpi_env(const EnvMap& env);

// A Slurm host list ("node[1-3],gpu7") expanded with libslurm's hostlist functions; an error when
// libslurm cannot be loaded or the list names no node.
Result<std::vector<std::string>> expand_hostlist(const std::string& hostlist);

// The address Slurm reaches `node` at (its NodeAddr), asked from slurmctld; nullopt when unknown.
std::optional<std::string> slurm_node_address(const std::string& node);

// Slurm's SLURM_STEP_TASKS_PER_NODE ("2(x2),1") as one count per node.
std::vector<int> parse_tasks_per_node(const std::string& text);

// Requeues a running Slurm batch job (slurm_requeue): Slurm ends every step and the batch script, and
// starts the job again with SLURM_RESTART_COUNT one higher. AlreadyRequeued: another node was first.
enum class RequeueResult { Requeued, AlreadyRequeued };
Result<RequeueResult> requeue_slurm_job(const std::string& job_id);

// Seconds until the job's end time (its time limit), asked from slurmctld; nullopt when unknown.
std::optional<double> slurm_job_seconds_left(const std::string& job_id);

// Why the job ends, from its state in slurmctld (Unknown when slurmctld cannot be asked).
JobEnding slurm_job_ending(const std::string& job_id);
// The same, from a job_state value of slurm.h (JOB_* base state and flags) and whether the job is in
// its preemption grace (preempt_time set: it still runs, and will be cancelled or requeued); pure.
JobEnding job_ending_from_state(uint32_t job_state, bool preempting);

// Whether the job is a batch job (only those can be requeued), asked from slurmctld.
Result<bool> slurm_job_is_batch(const std::string& job_id);

// Slurm's KillWait (seconds from a job's SIGTERM to its SIGKILL), asked from slurmctld; nullopt if unknown.
std::optional<double> slurm_kill_wait();

// Signals every task of a Slurm job step (used to end a multi-node step when one node's workers failed).
Status signal_slurm_step(const std::string& job_id, const std::string& step_id, int signo);

}  // namespace dlaunch::pmix
