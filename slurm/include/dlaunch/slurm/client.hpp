// Everything dlaunch asks slurmctld or libslurm: host lists, node addresses, the job's state and time
// left, requeue, KillWait, signalling a step. libslurm is opened on first use; no Slurm type leaves this
// module. Each call is one RPC at most; none is on the launch path of a task that does not need it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "dlaunch/result.hpp"
#include "dlaunch/scheduler.hpp"

namespace dlaunch::slurm {

// A Slurm host list ("node[1-3],gpu7") expanded with libslurm's hostlist functions; an error when
// libslurm cannot be loaded or the list names no node.
Result<std::vector<std::string>> expand_hostlist(const std::string& hostlist);

// The address Slurm reaches `node` at (its NodeAddr), asked from slurmctld; nullopt when unknown.
std::optional<std::string> slurm_node_address(const std::string& node);

// Requeues a running Slurm batch job (slurm_requeue): Slurm ends every step and the batch script, and
// starts the job again with SLURM_RESTART_COUNT one higher. AlreadyRequeued: another node was first.
enum class RequeueResult { Requeued, AlreadyRequeued };
Result<RequeueResult> requeue_slurm_job(const std::string& job_id);

// Adds `hosts` to a pending (e.g. just requeued) job's excluded nodes (ExcNodeList, slurm_update_job), so
// that Slurm does not start it on them again. Slurm refuses the change while the job runs.
Status exclude_nodes(const std::string& job_id, const std::vector<std::string>& hosts);
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

// Before an RPC that ends this job's step (requeue_slurm_job, signal_slurm_step): srun stops reading the
// step's output once it ends, and what this process printed may still be on its way through slurmstepd
// (whole summaries and a refusing node's messages were lost so, most runs on the test cluster). Flushes
// stdout and stderr and gives them half a second to arrive: a heuristic, Slurm acknowledges no output.
void let_output_reach_srun();

// Signals every task of a Slurm job step (used to end a multi-node step when one node's workers failed).
Status signal_slurm_step(const std::string& job_id, const std::string& step_id, int signo);

}  // namespace dlaunch::slurm
