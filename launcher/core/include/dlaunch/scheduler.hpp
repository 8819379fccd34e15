// SchedulerInfo: what a parallel launcher (PMIx, Slurm's srun, Open MPI's mpirun) says about this process
// and its job, as plain values. The pmix/ module fills it; make_plan() reads it through JobContext.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace dlaunch {

struct SchedulerInfo {
    std::string source;   // "pmix", "pmi-1", "pmi-2", "slurm", "openmpi", "pals" or "mvapich"
    std::string job_id;   // Slurm job id, or the PMIx namespace / Open MPI jobid
    std::string step_id;  // Slurm step id ("" when none)
    int rank = 0;         // this process among the launcher's tasks
    int size = 1;         // number of tasks
    int local_rank = 0;   // among the tasks on this node
    int local_size = 1;
    int node_rank = 0;  // this node among the job's nodes (0 = the first node)
    int nnodes = 1;
    std::vector<std::string> nodes;   // node names in node-rank order (may be empty when unknown)
    std::vector<int> local_peers;     // task ranks on this node in local-rank order (empty when unknown)
    std::vector<int> tasks_per_node;  // tasks on each node in node-rank order (empty when unknown)
};

// Why the Slurm job ends, from its state in slurmctld when the SIGTERM came (slurm::slurm_job_ending).
enum class JobEnding {
    Requeueing,  // Slurm requeues it itself (scontrol requeue, preemption with PreemptMode=REQUEUE, node failure)
    Preempted,   // preempted: in its grace time, or cancelled (PreemptMode=CANCEL)
    NodeFailed,  // a node failed and Slurm does not requeue it
    TimedOut,    // the time limit, with no warning signal before it
    Cancelled,   // scancel
    Running,     // the job is not ending: the SIGTERM came from elsewhere
    Unknown,     // slurmctld could not be asked
};

// MASTER_ADDR/MASTER_PORT as agreed by all tasks of a job (see pmix/ and the front-ends).
struct AgreedMaster {
    std::string addr;
    int port = 0;
    // The local interface that routes to addr, when the agreement already looked it up for this node (the
    // node-local fence does, once for all its tasks); otherwise the caller asks host::interface_for.
    bool ifname_known = false;
    std::optional<std::string> ifname;
};

struct PortRange {
    int low = 21000;  // default: below Linux's ephemeral range (32768-60999) and clear of torch's 29400/29500
    int high = 28999;
    bool operator==(const PortRange&) const = default;
};

// The same port on every task of a Slurm step, without talking to each other: derived from the job and
// step ids, inside `range`. Concurrent steps of a job (up to kStepSlots) always differ; two jobs differ
// unless their ids are a multiple of range/kStepSlots apart. Non-numeric ids are hashed.
inline constexpr int kStepSlots = 8;
int deterministic_port(const std::string& job_id, const std::string& step_id, const PortRange& range);

// The port of the group channel (node 0's agent listens on it, the other agents connect), derived from
// the agreed master port so every agent knows it: half the range away (so it never meets another step's
// derived port of the same job), or the next port when the master port lies outside the range.
int group_port(int master_port, const PortRange& range);

}  // namespace dlaunch
