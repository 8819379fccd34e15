// The launch plan and the pure function that makes it.
//
// make_plan(request, context, topology) decides everything a front-end needs to start this node's
// workers: per rank its ranks, argv, environment and log files. It reads nothing but its arguments:
// no getenv, no filesystem, no clock. The executor applies a plan; `dlaunch plan` prints one.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "dlaunch/job_context.hpp"
#include "dlaunch/request.hpp"
#include "dlaunch/result.hpp"
#include "dlaunch/topology/topology.hpp"

namespace dlaunch {

struct RunOutcome;  // summary.hpp

struct RankGpu {
    int index = 0;          // the node's GPU number in PCI order
    std::string pci;        // "0000:07:00.0"
    int visible_index = 0;  // its number inside CUDA_VISIBLE_DEVICES (index when dlaunch cannot renumber it)
};

struct RankNic {
    std::string name;  // "mlx5_0"
    int port = 1;
    std::string netdev;  // "ib0"
    std::string pci;
    std::string affinity;  // class from the rank's GPU (or cores): PIX ... SYS
};

// Where one node's ranks sit in the job, as torchrun assigns them (its agent's _assign_worker_ranks): global
// ranks node after node in node-rank order; role ranks the same among the nodes of the node's role.
struct RankSpan {
    int first_rank = 0;
    int world_size = 1;
    int first_role_rank = 0;
    int role_world_size = 1;
    bool operator==(const RankSpan&) const = default;
};
RankSpan rank_span(const std::vector<NodeShare>& nodes, int node_rank);
// The same for `nnodes` nodes alike, each with `procs` workers of one role, without a list of them.
RankSpan even_span(int nnodes, int node_rank, int procs);

struct RankPlan {
    int rank = 0;  // global rank
    int local_rank = 0;
    int node_rank = 0;  // GROUP_RANK
    int world_size = 1;
    int local_world_size = 1;
    std::vector<std::string> argv;  // argv[0] is the program to exec (PATH lookup for a bare name)
    std::optional<RankGpu> gpu;
    std::vector<RankNic> nics;  // its closest usable NIC port (empty: no RDMA NIC)
    topology::CpuSet cpuset;    // PUs to bind to (empty: no CPU binding)
    topology::CpuSet mems;      // NUMA nodes of its cores (empty without binding)
    bool bind_memory = false;   // apply mems as memory policy: only when it excludes some NUMA node
    EnvMap env;                 // the variables dlaunch sets; applied on top of JobContext::environ
    std::string error_file;     // TORCHELASTIC_ERROR_FILE ("" when the plan has no run directory)
    std::string stdout_log;     // per-attempt log files ("" when the plan has no run directory)
    std::string stderr_log;
    std::string stacks_file;         // DLAUNCH_STACKS_FILE: Python's faulthandler dumps ("" without a run directory)
    std::string native_stacks_file;  // eu-stack's or gdb's output for the rank, beside it
    bool console_stdout = true;      // echo this stream to dlaunch's stdout (prefixed)
    bool console_stderr = true;
    std::string role;           // parameter-server mode: "server", "trainer" or "heter_worker"; "" otherwise
    bool service = false;       // stopped (not waited for) once the other workers succeeded: PS servers
    std::string log_header;     // written (with the time) at the top of each attempt's output in the log
    bool log_truncate = false;  // truncate the log file when opening it (Paddle's --log_overwrite)
};

struct LaunchPlan {
    std::string run_id;
    std::string hostname;
    int nnodes = 1;
    int node_rank = 0;
    int nproc_per_node = 1;
    int world_size = 1;
    RankSpan span;  // this node's ranks and role ranks (nodes may run different worker counts)
    std::string master_addr;
    int master_port = 0;
    bool master_port_free_pick = false;  // a free port this dlaunch found: each run picks its own
    int restart_count = 0;
    int max_restarts = 0;  // restarts of this node's workers: locally, or as a group (below)
    // The agents of a multi-node Slurm step restart together inside the allocation (group_run.hpp): under
    // srun, with --max-restarts or --nnodes MIN:MAX (with --requeue too: the budget is then the job's).
    // Otherwise max_restarts is 0 there.
    bool group_restarts = false;
    // A group's hot spares: the step's nodes past --nnodes MAX wait idle and replace a lost node at the next
    // attempt. A spare's own plan shows it in the last node's place (node_rank nnodes-1).
    int spare_nodes = 0;
    bool spare = false;
    std::optional<int> own_local_rank;  // dlaunch-mpi: the entry of `ranks` this process becomes
    std::string attempt_dir;            // run_dir/attempt_<n> ("" without a run directory)
    bool log_files = false;             // per-rank stdout.log/stderr.log are written (see keeps_log_files)
    std::vector<RankPlan> ranks;
    // One worker on this node reads dlaunch's stdin (breakpoint(), input()), as torchrun's workers do; with
    // several, none may take another's input: /dev/null for all.
    bool worker_reads_stdin = false;
    bool prefix_console = true;  // "[rank]:" before each console line; off for a watched rank (rank_watch.hpp)
    // TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE (torch 2.3+): the console prefix instead, with ${role_name},
    // ${rank} and ${local_rank} put in as Python's string.Template.safe_substitute does ("" when unset).
    std::string prefix_template;
    std::string role_name = "default";  // --role: ROLE_NAME
    bool watched_alone = false;         // one rank of the job, under its own watcher (rank_watch.hpp)
    bool bind = false;                  // CPU and memory binding applied
    topology::BindMode bind_mode = topology::BindMode::None;
    std::string topology_source;
    // Paddle layout: the job's endpoint lists by variable name, and the endpoints.log they go to.
    std::vector<std::pair<std::string, std::vector<std::string>>> endpoints;
    std::string endpoints_log;
    std::optional<double> hang_timeout;  // --hang-timeout: seconds without progress before a rank is hung
    std::string timer_file;              // TORCHELASTIC_TIMER_FILE the agent serves ("" when off)
    std::string heartbeat_file;          // DLAUNCH_HEARTBEAT_FILE the agent reads ("" when none)
    std::string heartbeat_record;        // the longest heartbeat interval, kept across attempts (run directory)
    std::string stacks_files;            // every rank's stacks file, as a pattern ("<attempt_dir>/*/stacks.txt")
    std::vector<std::string> warnings;   // quality drops the user should hear about, one line each
    std::vector<std::string> notes;      // details for -v (e.g. user variables that were kept)
};

// torchrun's --master-port default.
inline constexpr int kDefaultMasterPort = 29500;
// torchrun's port of a c10d --rdzv-endpoint HOST given without one.
inline constexpr int kDefaultC10dPort = 29400;

// Where this node sits in the job once the rendezvous is resolved.
struct NodePlacement {
    int nnodes = 1;
    int node_rank = 0;
    std::string master_addr;
    int master_port = 0;
    int spares = 0;                 // the step's nodes past --nnodes MAX: hot spares of a group (plan.hpp LaunchPlan)
    bool spare = false;             // this node is one; node_rank is then the last node's, whose place it would take
    std::vector<NodeShare> shares;  // every node's workers and role, when the nodes told each other (else empty)
    std::optional<NodeShare> every_share;  // else the one every node told, when it was told so (NodeAssignment)
};

// A layout of this node's processes that another launcher's contract defines (paddle.distributed.launch's
// parameter-server roles and endpoints: frontends/paddle_plan.hpp). make_plan asks its hook for it once the
// node's placement and default process count are known, before binding; the hook fails for layouts this
// launch cannot make.
struct ProcessLayout {
    std::optional<int> nproc;  // this node's process count, when the layout fixes it
    bool torch_env = true;     // false: the processes are not torch ranks and get none of torch's variables
};
using ProcessLayoutHook = std::function<Result<ProcessLayout>(const NodePlacement& node, int nproc)>;

// Makes the plan for this node and attempt. Fails with a usage Error for requests that cannot be
// satisfied here (e.g. "gpu" workers with no GPU, --devices naming an absent device, node rank out of
// range, an unsupported rendezvous backend), or with the layout hook's Error.
Result<LaunchPlan> make_plan(const LaunchRequest& request, const JobContext& context,
                             const topology::Topology& topology, const ProcessLayoutHook& layout = {});

// torchrun's static form across nodes (--nnodes N > 1 with --node-rank, --master-addr or a static
// --rdzv-endpoint; not under a launcher, which the caller checks): the agents meet at MASTER_ADDR:MASTER_PORT
// before the workers start, node 0 hosting, to learn each other's worker counts as torchrun's agents do in
// its store; the workers' TCPStore takes that port once they met.
bool static_form_across_nodes(const LaunchRequest& request);

// Whether node 0 of dlaunch's node rendezvous keeps it open while the run lasts, so that a node that comes
// late waits there and the nodes meet there again to take it (torchrun's c10d scale-up;
// rendezvous/rendezvous_door.hpp): the nodes run as a group with a range --nnodes MIN:MAX, met by hand (not in
// the static form, not a Slurm step's agents, not Paddle's parameter-server layout).
bool keeps_door_open(const LaunchRequest& request);

// Whether node 0's group leader takes the rendezvous's listening socket over once the nodes met by hand
// (rendezvous/node_rendezvous_io.cpp's met_from: fixed --nnodes with restarts, not the static form, not etcd),
// so that a node answered connects to it at once and waits in its backlog (GroupSetup::leader_takes_socket).
bool hands_socket_to_leader(const LaunchRequest& request);

// The static form's placement as the options give it: --nnodes, --node-rank, MASTER_ADDR and MASTER_PORT
// (--master-addr/--master-port, else the endpoint's, else torchrun's default port). A usage Error for a
// rank out of range, a missing master address, a node range or a backend dlaunch does not serve.
Result<NodePlacement> static_form_placement(const LaunchRequest& request);

// This node's worker count for --nproc-per-node (N, or counted from the GPUs --devices and `environ` leave
// usable, or from the CPUs): what it tells the other nodes in the node rendezvous.
Result<int> node_worker_count(const LaunchRequest& request, const EnvMap& environ, const topology::Topology& topology);

// The open files the agent needs that hosts the node rendezvous and leads the group of `nodes` nodes (node
// 0, or the rendezvous host by hand): one connection per node, a few per local worker
// (stdout, stderr, pidfd, heartbeat; 8 workers assumed when --nproc-per-node is not a number), and a
// margin for logs, listeners, timers and libraries.
long descriptors_to_lead(int nodes, const NprocSpec& nproc);

// Whether per-rank stdout/stderr files are kept: with --log-dir, --redirects, --tee or
// --local-ranks-filter. Without them all output is on the console and only error files are written.
bool keeps_log_files(const LaunchRequest& request);

// Whether the run directory outlives the run (and so gets its run.json): a --log-dir's always; a temporary
// one (under $TMPDIR) when it holds worker logs (keeps_log_files), a --requeue job's records, or a run that
// failed or was stopped. One removed at the end gets no run.json: nothing could read it, and its fsync would
// slow every launch.
bool keeps_run_dir(const LaunchRequest& request, bool requeue, const RunOutcome& outcome);

// The MASTER_ADDR make_plan() will choose for this request and context (to find the interface that
// reaches it before planning); nullopt when the rendezvous cannot be resolved (make_plan says why).
std::optional<std::string> planned_master_addr(const LaunchRequest& request, const JobContext& context);

// Whether the front-end must reserve a free port for MASTER_PORT (JobContext::free_port): one node and
// no port given, or only the port of a local rendezvous endpoint (--standalone, single-node c10d).
bool needs_free_port(const LaunchRequest& request);

// Where a rank's native stacks go: beside its Python stacks file, "native-" before the name
// (".../stacks.txt" -> ".../native-stacks.txt").
std::string native_stacks_file_for(const std::string& stacks_file);

// The console prefix for a rank's lines: "[rank]:" on one node, "[node:rank]:" across nodes ("" when the
// plan does not prefix).
std::string console_prefix(const LaunchPlan& plan, const RankPlan& rank);

// `text` with $name and ${name} replaced by values[name] and $$ by $; anything else (an unknown name, a lone
// $) stays as written: Python's string.Template.safe_substitute, which torchrun uses for its prefix template.
std::string safe_substitute(const std::string& text, const std::vector<std::pair<std::string, std::string>>& values);

}  // namespace dlaunch
