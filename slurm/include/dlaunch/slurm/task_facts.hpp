// What Slurm says about a task, as a SchedulerInfo. Two front-ends gather the facts: a task reads its
// environment (from_slurm_env), the SPANK plugin reads SPANK items in slurmstepd (StepFacts); both end in
// scheduler_info(), so Slurm's layout is interpreted in one place.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "dlaunch/env_map.hpp"
#include "dlaunch/result.hpp"
#include "dlaunch/scheduler.hpp"

namespace dlaunch::slurm {

struct TaskFacts {
    std::string job_id, step_id;
    int rank = 0;                         // SLURM_PROCID (SPANK: the node's first task)
    int size = 1;                         // tasks in the step
    int local_rank = 0;                   // SLURM_LOCALID
    int node_rank = 0;                    // SLURM_NODEID
    std::optional<int> nnodes;            // nodes in the step, when Slurm said
    std::optional<std::string> nodelist;  // SLURM_STEP_NODELIST, else SLURM_JOB_NODELIST
    std::string tasks_per_node;           // SLURM_STEP_TASKS_PER_NODE, "2(x2),1" ("" when absent)
    std::vector<int> local_global_ids;    // every task of this node (SPANK knows them; a task does not)
};

// The job context those facts describe; an Error when the node list cannot be expanded.
Result<SchedulerInfo> scheduler_info(const TaskFacts& facts);

// From Slurm's task environment (SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID, SLURM_NODEID, node list ...).
// nullopt when SLURM_PROCID is absent.
std::optional<Result<SchedulerInfo>> from_slurm_env(const EnvMap& env);

// Slurm's SLURM_STEP_TASKS_PER_NODE ("2(x2),1") as one count per node.
std::vector<int> parse_tasks_per_node(const std::string& text);

// The node list a step's environment names: SLURM_STEP_NODELIST, else SLURM_JOB_NODELIST.
std::optional<std::string> step_nodelist(const EnvMap& env);

// Whether a step's environment says it was started from a batch script: Slurm gives every batch script
// ENVIRONMENT=BATCH, and srun passes it on to the step (unless --export leaves it out). True spares the other
// nodes the question to slurmctld that node 0 asks (one RPC per step, not per node); false means "ask", not
// "no". (A salloc started from a batch script inherits it too: node 0's answer is the one that counts.)
bool started_from_batch_script(const EnvMap& env);

// With requeue, whether node `node_id` of a step may skip asking slurmctld whether the job is a batch job:
// any node but 0, when the step's environment says so (node 0 always asks: one question per step).
bool batch_job_known_without_asking(const EnvMap& env, int node_id);

}  // namespace dlaunch::slurm
