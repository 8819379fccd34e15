// JobContext: what the environment and the scheduler say about this launch, gathered at the edge
// (the dlaunch front-end today; Slurm/PMIx/SPANK front-ends later) and handed to make_plan() as plain
// values, so the planner never reads the process environment itself.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "dlaunch/env_map.hpp"
#include "dlaunch/scheduler.hpp"

namespace dlaunch {

// What dlaunch's node rendezvous (--master HOST:PORT, or the first node of `--nnodes N` with no master)
// assigned this node.
// What one node brings to the job, as the nodes told each other in dlaunch's node rendezvous: its worker
// count (nodes may differ, as under torchrun) and its role (torchrun's --role).
struct NodeShare {
    int procs = 1;
    std::string role = "default";
    bool operator==(const NodeShare&) const = default;
};

struct NodeAssignment {
    int nnodes = 1;
    int node_rank = 0;
    std::string master_addr;  // MASTER_ADDR: the rendezvous host's address
    int master_port = 0;      // MASTER_PORT: a free port the rendezvous host reserved
    // Every node's address, in node-rank order. By hand, unless the workers' environment names every node
    // (names_every_node()), a node other than node 0 knows only node 0's and its own; the others are "".
    std::vector<std::string> node_addrs;
    int rendezvous_port = 0;        // where the nodes met; node 0's group channel listens there after
    std::vector<NodeShare> shares;  // every node's, in node-rank order (empty: see every_share)
    // A joiner told that every node brings the same share: that share, and `shares` empty (no list of N
    // shares is made on any node but the host). Neither: no shares were told (Paddle's parameter servers).
    std::optional<NodeShare> every_share = std::nullopt;
};

struct JobContext {
    EnvMap environ;        // the environment the workers inherit
    std::string hostname;  // this node's name, for messages and summaries
    std::string python;    // resolved interpreter: $PYTHON_EXEC, else python3 on PATH ("" if none)
    // What that interpreter's torch launcher does (host::torch_facts; "" when unknown): the --local-rank
    // spelling of torch.distributed.launch, and the NCCL async error variable torchrun sets.
    std::string torch_local_rank_arg;
    std::string torch_async_error_var;
    bool torch_store_without_libuv = false;    // host::TorchFacts::store_without_libuv: workers get USE_LIBUV=0
    std::string run_id;                        // resolved run id (--rdzv-id, or generated for --standalone)
    std::string run_dir;                       // where this run's logs and error files live ("" for `dlaunch plan`)
    int restart_count = 0;                     // attempt number: 0 for the first start
    std::optional<int> free_port;              // a free port reserved for this launch, when one was needed
    std::optional<std::string> master_ifname;  // the local interface that reaches MASTER_ADDR ("lo", "ib0")
    std::optional<SchedulerInfo> scheduler;    // set when a parallel launcher (srun, mpirun, PMIx) started us
    std::optional<AgreedMaster> master;        // MASTER_ADDR/PORT agreed by the job's tasks (with scheduler)
    std::optional<NodeAssignment> assignment;  // from dlaunch's node rendezvous
    std::vector<std::string> node_addrs;       // every node's address in node-rank order, when known (Slurm)
    // Agents under srun whose worker count is found on each node (gpu, cpu, auto): every step node's workers
    // and role, in the step's node order, as the agents told each other (empty: every node like this one).
    std::vector<NodeShare> node_shares;
    std::vector<std::string> local_addrs;  // this host's IP addresses (to find itself in --ips, --servers)
    // Supervision (docs/hangs.md): the directory of dlaunch's sitecustomize.py, which lets the agent ask a
    // Python rank for its stacks ("" when not installed), and the FIFO of torchrun's watchdog the agent
    // serves (TORCHELASTIC_ENABLE_FILE_TIMER=1; "" when off).
    std::string python_hook_dir;
    std::string timer_file;
    std::string heartbeat_file;  // the FIFO the agent reads heartbeats from ("" : none)
};

}  // namespace dlaunch
