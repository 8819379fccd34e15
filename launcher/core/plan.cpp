#include "dlaunch/plan.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <set>

#include "dlaunch/env_contract.hpp"
#include "dlaunch/signals.hpp"
#include "dlaunch/summary.hpp"
#include "dlaunch/topology/binding.hpp"
#include "dlaunch/topology/gpu_selection.hpp"

namespace dlaunch {
namespace {

constexpr const char* kRunPathProgram =
    "import runpy, sys; sys.argv = sys.argv[1:]; runpy.run_path(sys.argv[0], run_name='__main__')";

struct Endpoint {
    std::string host;
    std::optional<int> port;
};

Result<Endpoint> parse_endpoint(const std::string& text) {
    Endpoint ep;
    std::string port_text;
    if (!text.empty() && text.front() == '[') {  // [v6]:port
        auto close = text.find(']');
        if (close == std::string::npos)
            return Error{"rdzv: --rdzv-endpoint '" + text + "': unbalanced '['", "write [ADDR]:PORT"};
        ep.host = text.substr(1, close - 1);
        if (close + 1 < text.size()) {
            if (text[close + 1] != ':')
                return Error{"rdzv: --rdzv-endpoint '" + text + "': expected ':' after ']'", "write [ADDR]:PORT"};
            port_text = text.substr(close + 2);
        }
    } else {
        auto colon = text.rfind(':');
        ep.host = text.substr(0, colon);
        if (colon != std::string::npos) port_text = text.substr(colon + 1);
    }
    if (ep.host.empty()) return Error{"rdzv: --rdzv-endpoint '" + text + "': no host", "write HOST:PORT"};
    if (!port_text.empty()) {
        int port = 0;
        auto [p, ec] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
        if (ec != std::errc{} || p != port_text.data() + port_text.size() || port < 1 || port > 65535)
            return Error{"rdzv: --rdzv-endpoint '" + text + "': port '" + port_text + "' is not 1-65535",
                         "write HOST:PORT"};
        ep.port = port;
    }
    return ep;
}

std::string substitute_local_rank(std::string arg, int local_rank) {
    // torchrun's macro: "${local_rank}" in a worker argument becomes the worker's local rank.
    static const std::string macro = "${local_rank}";
    for (auto pos = arg.find(macro); pos != std::string::npos; pos = arg.find(macro, pos))
        arg.replace(pos, macro.size(), std::to_string(local_rank));
    return arg;
}

Result<std::vector<std::string>> worker_argv(const LaunchRequest& req, const JobContext& ctx) {
    std::vector<std::string> argv;
    if (req.entry != EntryKind::Command) {
        if (ctx.python.empty())
            return Error{"launch: python: no python3 found on PATH and PYTHON_EXEC is not set",
                         "set PYTHON_EXEC=/path/to/python3, or use --no-python to run SCRIPT directly"};
        argv = {ctx.python, "-u"};
    }
    switch (req.entry) {
        case EntryKind::PythonScript:
            if (req.script.starts_with("-")) argv.push_back("--");  // else Python reads it as its own option
            break;
        case EntryKind::PythonModule: argv.push_back("-m"); break;
        case EntryKind::RunPath: argv.insert(argv.end(), {"-c", kRunPathProgram}); break;
        case EntryKind::Command: break;
    }
    argv.push_back(req.script);
    // Where torch.distributed.launch puts it: after the script, before its arguments.
    if (!req.local_rank_arg.empty()) argv.push_back(req.local_rank_arg + "=${local_rank}");
    argv.insert(argv.end(), req.script_args.begin(), req.script_args.end());
    return argv;
}

// --standalone, or c10d on one node: dlaunch runs the workers' rendezvous itself; the endpoint is not
// the master's address.
bool local_rendezvous(const LaunchRequest& req) {
    return req.standalone || (req.rdzv_backend == "c10d" && req.nnodes.min == 1 && req.nnodes.max == 1);
}

// The agents of several nodes can restart together (group_run.hpp): a multi-node Slurm step (inside the
// allocation; with --requeue too, the job leaving it only when fewer than --nnodes MIN nodes are left), or
// nodes started by hand that met in dlaunch's node rendezvous (c10d, --master). With something to restart
// or a node range to shrink in. Not Paddle's parameter-server layout: its roles are fixed per node.
bool group_capable(const LaunchRequest& req, const JobContext& ctx) {
    const bool step = ctx.scheduler && ctx.environ.contains("SLURM_JOB_ID");
    const bool met = !ctx.scheduler && ctx.assignment && !req.paddle.ps && !static_form_across_nodes(req);
    return req.launcher == Launcher::Agent && (step || met) &&
           (req.max_restarts > 0 || req.nnodes.min != req.nnodes.max);
}

std::string node_count_hint(const LaunchRequest& req, const std::string& source, bool too_many) {
    if (too_many && req.launcher == Launcher::Agent && source == "slurm")
        return "give --max-restarts N: the nodes past --nnodes MAX then wait as hot spares; or leave out --nnodes";
    return "leave out --nnodes under " + source + ": the job's shape comes from it";
}

// Under a parallel launcher the job's shape comes from it, not from --nnodes/--node-rank: agents are its
// tasks (one per node), dlaunch-mpi processes are the ranks themselves.
Result<NodePlacement> scheduled_rendezvous(const LaunchRequest& req, const JobContext& ctx) {
    const SchedulerInfo& s = *ctx.scheduler;
    NodePlacement rv;
    if (req.launcher == Launcher::Agent) {
        if (s.local_size != 1)
            return Error{"rdzv: " + s.source + ": " + std::to_string(s.local_size) +
                             " dlaunch agents on this node; dlaunch runs one agent per node",
                         "start one per node (srun --ntasks-per-node=1, mpirun --map-by ppr:1:node), or use "
                         "dlaunch-mpi to make every task a rank"};
        rv.nnodes = s.size;
        rv.node_rank = s.rank;
        if (static_cast<int>(ctx.node_shares.size()) == s.size) rv.shares = ctx.node_shares;
    } else {
        rv.nnodes = s.nnodes;
        rv.node_rank = s.node_rank;
    }
    if (req.nnodes.min != 1 || req.nnodes.max != 1) {
        if (req.launcher == Launcher::Agent && rv.nnodes > req.nnodes.max && req.max_restarts > 0 &&
            group_capable(req, ctx)) {
            rv.spares = rv.nnodes - req.nnodes.max;
            rv.spare = rv.node_rank >= req.nnodes.max;
            rv.nnodes = req.nnodes.max;
            if (rv.spare) rv.node_rank = rv.nnodes - 1;
            if (!rv.shares.empty()) {  // the first MAX nodes run; a spare plans in the last one's place
                if (rv.spare) rv.shares[static_cast<size_t>(rv.node_rank)] = rv.shares[static_cast<size_t>(s.rank)];
                rv.shares.resize(static_cast<size_t>(rv.nnodes));
            }
        }
        if (req.nnodes.min > rv.nnodes || req.nnodes.max < rv.nnodes)
            return Error{"rdzv: --nnodes " + std::to_string(req.nnodes.min) + ":" + std::to_string(req.nnodes.max) +
                             ": " + s.source + " started " + std::to_string(rv.nnodes) + " node(s)",
                         node_count_hint(req, s.source, rv.nnodes > req.nnodes.max)};
    }
    if (req.node_rank && *req.node_rank != rv.node_rank)
        return Error{"rdzv: --node-rank " + std::to_string(*req.node_rank) + ": " + s.source + " says this is node " +
                         std::to_string(rv.node_rank),
                     "leave out --node-rank under " + s.source};
    if (!ctx.master) return Error{"rdzv: no agreed master address", "this is a front-end bug; please report it"};
    rv.master_addr = ctx.master->addr;
    rv.master_port = ctx.master->port;
    return rv;
}

// A --rdzv-backend dlaunch has no rendezvous for.
Error unsupported_backend(const LaunchRequest& req) {
    return Error{"rdzv: --rdzv-backend " + req.rdzv_backend + ": not supported by dlaunch",
                 "across nodes use --rdzv-backend c10d --rdzv-endpoint HOST:PORT (dlaunch's node rendezvous, the same "
                 "command on every node), etcd or etcd-v2 with --rdzv-endpoint at etcd, the static form (--nnodes N "
                 "--node-rank R --master-addr HOST --master-port "
                 "PORT), or one dlaunch per node under Slurm (srun --ntasks-per-node=1 dlaunch ...)"};
}

bool known_backend(const std::string& backend) {
    return backend == "static" || backend == "c10d" || backend == "etcd" || backend == "etcd-v2";
}

// The node count of torchrun's static rendezvous: one fixed --nnodes, and a backend dlaunch can serve.
Result<int> static_node_count(const LaunchRequest& req) {
    if (req.nnodes.min != req.nnodes.max)
        return Error{"rdzv: --nnodes " + std::to_string(req.nnodes.min) + ":" + std::to_string(req.nnodes.max) +
                         ": a node range needs a rendezvous that assigns node ranks",
                     "add --rdzv-backend c10d --rdzv-endpoint HOST:PORT (the same on every node), or give a fixed "
                     "--nnodes N; under Slurm, start one dlaunch per node with srun: the agents restart in the range"};
    const int nnodes = req.nnodes.min;
    if (req.standalone && nnodes != 1)
        return Error{"rdzv: --standalone with --nnodes " + std::to_string(nnodes) + ": standalone means a single node",
                     "drop --standalone and give --node-rank and --master-addr for each node"};
    if (req.rdzv_backend != "static" && !local_rendezvous(req)) return unsupported_backend(req);
    return nnodes;
}

// --rdzv-endpoint HOST[:PORT] when it names the master; nullopt without one, or for a local rendezvous.
Result<std::optional<Endpoint>> master_endpoint(const LaunchRequest& req) {
    if (req.rdzv_endpoint.empty() || local_rendezvous(req)) return std::optional<Endpoint>{};
    auto ep = parse_endpoint(req.rdzv_endpoint);
    if (!ep) return ep.error();
    return std::optional<Endpoint>{std::move(*ep)};
}

// MASTER_ADDR: --master-addr, else the endpoint's host; on one node this host's address.
Result<std::string> static_master_addr(const LaunchRequest& req, const std::optional<Endpoint>& endpoint, int nnodes) {
    if (req.master_addr) return *req.master_addr;
    if (endpoint) return endpoint->host;
    if (nnodes > 1)
        return Error{"rdzv: --nnodes " + std::to_string(nnodes) + ": no master address",
                     "give --master-addr with the address of node rank 0 (the same on every node), or leave out "
                     "--node-rank to let the nodes meet in dlaunch's rendezvous"};
    return req.local_addr.value_or("127.0.0.1");
}

// MASTER_PORT: --master-port, else the endpoint's port, else torchrun's default across nodes and the
// front-end's reserved port on one node.
Result<int> static_master_port(const LaunchRequest& req, const JobContext& ctx, const std::optional<Endpoint>& endpoint,
                               int nnodes) {
    if (req.master_port) return *req.master_port;
    if (endpoint && endpoint->port) return *endpoint->port;
    if (nnodes > 1) return kDefaultMasterPort;
    if (ctx.free_port) return *ctx.free_port;
    return Error{"rdzv: master port: none given and none reserved",
                 "give --master-port PORT (this is a front-end bug if you see it from dlaunch itself)"};
}

// The --rdzv-conf keys that do nothing here: every key of the static rendezvous, and of c10d's all but
// its join window.
void rdzv_conf_warnings(const LaunchRequest& req, std::vector<std::string>& warnings) {
    const bool meeting = static_form_across_nodes(req);  // the agents meet at the master: its timeout applies
    for (auto& [key, value] : req.rdzv_conf) {
        const std::string what = "rdzv: --rdzv-conf " + key + "=" + value + ": has no effect ";
        if (meeting && key == kStaticTimeout) continue;
        if (req.etcd) {
            const bool v2 = req.rdzv_backend == "etcd-v2";
            const std::set<std::string> applied =
                v2 ? std::set<std::string>{"protocol",     "ca_cert",        "ssl_cert",          "ssl_cert_key",
                                           "read_timeout", kC10dJoinTimeout, kC10dLastCallTimeout}
                   : std::set<std::string>{"protocol", "cacert", "cert", "key", kStaticTimeout, kC10dLastCallTimeout};
            if (!applied.contains(key))
                warnings.push_back(what + "(dlaunch's " + req.rdzv_backend + " rendezvous applies " +
                                   (v2 ? "protocol, ca_cert, ssl_cert, ssl_cert_key, read_timeout, join_timeout"
                                       : "protocol, cacert, cert, key, timeout") +
                                   " and last_call_timeout)");
        } else if (!req.c10d_endpoint)
            warnings.push_back(what + "with static rendezvous" +
                               (meeting ? std::string(" (dlaunch's agents apply only ") + kStaticTimeout + ")"
                                        : std::string(" (dlaunch runs no rendezvous store)")));
        else if (key != kC10dJoinTimeout && key != kC10dLastCallTimeout)
            warnings.push_back(what + "(dlaunch's c10d rendezvous applies " + kC10dJoinTimeout + " and " +
                               kC10dLastCallTimeout + ")");
    }
}

// torchrun's static rendezvous: --nnodes and --node-rank, with --master-addr/--master-port or
// --rdzv-endpoint. --rdzv-conf has nothing to configure and only earns a warning.
Result<NodePlacement> static_rendezvous(const LaunchRequest& req, const JobContext& ctx,
                                        std::vector<std::string>& warnings) {
    auto nnodes = static_node_count(req);
    if (!nnodes) return nnodes.error();
    rdzv_conf_warnings(req, warnings);
    NodePlacement node;
    node.nnodes = *nnodes;
    node.node_rank = req.node_rank.value_or(0);
    if (node.node_rank < 0 || node.node_rank >= node.nnodes)
        return Error{"rdzv: --node-rank " + std::to_string(node.node_rank) + ": out of range for --nnodes " +
                         std::to_string(node.nnodes),
                     "node ranks run from 0 to " + std::to_string(node.nnodes - 1)};
    auto endpoint = master_endpoint(req);
    if (!endpoint) return endpoint.error();
    auto addr = static_master_addr(req, *endpoint, node.nnodes);
    if (!addr) return addr.error();
    auto port = static_master_port(req, ctx, *endpoint, node.nnodes);
    if (!port) return port.error();
    node.master_addr = std::move(*addr);
    node.master_port = *port;
    return node;
}

// The job's launcher as its user knows it.
std::string launcher_name(const SchedulerInfo& s) {
    if (s.source == "slurm") return "srun";
    if (s.source == "openmpi") return "mpirun";
    if (s.source == "pmi-1" || s.source == "pmi-2") return "the PMI launcher (mpiexec, srun --mpi=pmi2, flux run)";
    if (s.source == "pals") return "PALS (mpiexec, srun --mpi=cray_shasta)";
    if (s.source == "mvapich") return "mpirun_rsh";
    return "the PMIx launcher (srun --mpi=pmix, mpirun)";
}

// torchrun's rendezvous options under srun or mpirun: the job's nodes are the ones its launcher started, and
// they meet through it, not at an endpoint; the master is the job's (--master-addr/--master-port choose it).
void ignored_under_scheduler(const LaunchRequest& req, const SchedulerInfo& s, std::vector<std::string>& warnings) {
    const std::string launcher = launcher_name(s);
    const std::string meet = ": the job's nodes meet through " + (req.paddle.layout ? "it" : launcher);
    if (req.paddle.layout && req.etcd)  // nothing to drop: Paddle's etcd master also turns its restarts on
        warnings.push_back("rdzv: " + req.paddle.etcd_given + ": etcd is not used under " + launcher + meet +
                           " (outside a job the nodes meet in etcd)");
    else if (req.etcd || req.c10d_endpoint)
        warnings.push_back("rdzv: --rdzv-backend " + req.rdzv_backend + " --rdzv-endpoint " + req.rdzv_endpoint +
                           ": has no effect under " + launcher + meet +
                           " (drop both options here; outside a job they make the nodes meet at the endpoint)");
    else if (!req.rdzv_endpoint.empty() && !req.paddle.layout && !local_rendezvous(req))
        warnings.push_back("rdzv: --rdzv-endpoint " + req.rdzv_endpoint + ": has no effect under " + launcher +
                           ": the job's first node is the master (drop the option here; --master-addr and "
                           "--master-port choose another)");
    for (auto& [key, value] : req.rdzv_conf)
        warnings.push_back("rdzv: --rdzv-conf " + key + "=" + value + ": has no effect under " + launcher + meet +
                           " (--fence-timeout bounds their meeting)");
}

// Where this node sits: as the parallel launcher says, as dlaunch's node rendezvous (or a front-end's
// static node list) assigned it, or from torchrun's static options.
Result<NodePlacement> resolve_rendezvous(const LaunchRequest& req, const JobContext& ctx,
                                         std::vector<std::string>& warnings) {
    if (ctx.scheduler) {
        if (!known_backend(req.rdzv_backend)) return unsupported_backend(req);
        ignored_under_scheduler(req, *ctx.scheduler, warnings);
        return scheduled_rendezvous(req, ctx);
    }
    if (ctx.assignment) {
        const NodeAssignment& a = *ctx.assignment;
        if (req.c10d_endpoint || req.etcd) rdzv_conf_warnings(req, warnings);
        NodePlacement met{a.nnodes, a.node_rank, a.master_addr, a.master_port, 0, false, a.shares, a.every_share};
        if (static_form_across_nodes(req)) {  // the nodes met only to learn each other's shares
            auto own = static_rendezvous(req, ctx, warnings);
            if (!own) return own.error();
            met.master_addr = own->master_addr;  // each node's own --master-addr, as torchrun passes it on
            met.master_port = own->master_port;
        }
        return met;
    }
    if (req.launcher == Launcher::PerRank)
        return Error{"rdzv: no parallel launcher found (no PMIx, no SLURM_PROCID, no OMPI_COMM_WORLD_RANK)",
                     "start dlaunch-mpi under mpirun (mpirun -np N dlaunch-mpi ...), srun --mpi=pmix, or srun"};
    return static_rendezvous(req, ctx, warnings);
}

Result<int> resolve_nproc(const LaunchRequest& req, int cpus, int gpus) {
    using K = NprocSpec::Kind;
    switch (req.nproc_per_node.kind) {
        case K::Count: return req.nproc_per_node.count;
        case K::Cpu: return std::max(1, cpus);
        case K::Auto: return gpus > 0 ? gpus : std::max(1, cpus);
        case K::GpuOrOne: return std::max(1, gpus);
        case K::Gpu:
            if (gpus == 0)
                return Error{"plan: --nproc-per-node gpu: no GPU visible on this node",
                             "give a number of workers, or 'cpu' / 'auto'"};
            return gpus;
    }
    return 1;
}

// How many workers this node runs before any layout hook: the scheduler's tasks on this node under
// dlaunch-mpi, else --nproc-per-node resolved against the node's CPUs and GPUs.
// --local-ranks-filter names local ranks this node has: a filter that shows nothing is a typo.
Status check_console_filter(const LaunchRequest& req, int nproc) {
    if (!req.local_ranks_filter || req.local_ranks_filter->empty()) return Ok{};
    const int highest = *req.local_ranks_filter->rbegin();
    if (highest < nproc) return Ok{};
    return Error{"launch: --local-ranks-filter: local rank " + std::to_string(highest) +
                     " does not exist: this node runs " + std::to_string(nproc) +
                     (nproc == 1 ? " worker" : " workers") + " (local ranks 0-" + std::to_string(nproc - 1) + ")",
                 "give local ranks below " + std::to_string(nproc)};
}

Result<int> default_nproc(const LaunchRequest& req, const JobContext& ctx, const topology::Topology& topo,
                          const topology::GpuSelection& gpus) {
    if (req.launcher == Launcher::PerRank && ctx.scheduler) return ctx.scheduler->local_size;
    return resolve_nproc(req, topo.cpus, static_cast<int>(gpus.usable.size()));
}

Result<ProcessLayout> node_layout(const ProcessLayoutHook& hook, const NodePlacement& node, int nproc) {
    if (!hook) return ProcessLayout{};
    return hook(node, nproc);
}

void append(std::vector<std::string>& to, const std::vector<std::string>& lines) {
    to.insert(to.end(), lines.begin(), lines.end());
}

// Places nproc ranks on the node's GPUs, NICs and cores; with --bind none (or no GPU and no
// --cpus-per-rank) only GPUs and NICs are chosen.
Result<topology::BindingPlan> bind_ranks(const LaunchRequest& req, const topology::Topology& topo,
                                         const topology::GpuSelection& gpus, int nproc, LaunchPlan& plan) {
    using topology::BindMode;
    if (req.cpus_per_rank && req.bind && req.bind != BindMode::Closest)
        return Error{"bind: --cpus-per-rank with --bind " + topology::bind_mode_name(*req.bind) +
                         ": only closest binding gives each rank cores of its own to size",
                     "drop --cpus-per-rank, or use --bind closest"};
    topology::BindRequest bind_request{
        .ranks = nproc,
        .mode = req.bind.value_or(!gpus.usable.empty() || req.cpus_per_rank ? BindMode::Closest : BindMode::None),
        .cores_per_rank = req.cpus_per_rank,
        .gpus = gpus.usable};
    auto binding = topology::plan_binding(topo, bind_request);
    if (!binding) return binding.error();
    append(plan.warnings, binding->warnings);
    plan.bind = bind_request.mode != BindMode::None;
    plan.bind_mode = bind_request.mode;
    plan.topology_source = topo.source;
    return binding;
}

// The restart budget this node's agent applies, and a warning when --max-restarts cannot apply.
void plan_restarts(const LaunchRequest& req, const JobContext& ctx, const NodePlacement& node, LaunchPlan& plan) {
    const bool agent = req.launcher == Launcher::Agent;
    // Through etcd, or at node 0's open rendezvous, a node alone may still be joined by others (below --nnodes
    // MAX): it leads a group of one.
    const bool may_grow = (req.etcd || keeps_door_open(req)) && !ctx.scheduler && node.nnodes < req.nnodes.max;
    plan.group_restarts = group_capable(req, ctx) && (node.nnodes + node.spares > 1 || may_grow);
    plan.spare_nodes = node.spares;
    plan.spare = node.spare;
    plan.max_restarts = (node.nnodes == 1 && agent) || plan.group_restarts ? req.max_restarts : 0;
    // With --requeue the budget is the job's, over restarts in the allocation and requeues (requeue.hpp).
    if (req.requeue.enabled) plan.max_restarts = req.max_restarts;
    if (node.nnodes > 1 && req.max_restarts > 0 && !req.requeue.enabled && !plan.group_restarts)
        plan.warnings.push_back(
            "restart: --max-restarts " + std::to_string(req.max_restarts) + " is not applied with --nnodes " +
            std::to_string(node.nnodes) +
            " here: the agents restart together only under srun or after dlaunch's node "
            "rendezvous (--rdzv-backend c10d, --master; not torchrun's static form); a worker failure ends this "
            "node's part");
}

// The node-wide part of the plan: the job's ids and sizes, the master, restarts and the attempt's files.
void describe_node(const LaunchRequest& req, const JobContext& ctx, const NodePlacement& node, int nproc,
                   LaunchPlan& plan) {
    plan.run_id = ctx.run_id;
    plan.hostname = ctx.hostname;
    plan.nnodes = node.nnodes;
    plan.node_rank = node.node_rank;
    plan.nproc_per_node = nproc;
    const bool per_rank = req.launcher == Launcher::PerRank;
    plan.span =
        node.shares.empty() ? even_span(node.nnodes, node.node_rank, nproc) : rank_span(node.shares, node.node_rank);
    plan.role_name = req.role;
    plan.prefix_template = str_var(ctx.environ, "TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE");
    if (per_rank) {  // ranks are the parallel launcher's (global_rank); node by node only as a fallback
        const int first = node.node_rank * nproc;
        plan.span = RankSpan{first, ctx.scheduler->size, first, ctx.scheduler->size};
    }
    plan.world_size = plan.span.world_size;
    if (per_rank) plan.own_local_rank = ctx.scheduler->local_rank;
    plan.master_addr = node.master_addr;
    plan.master_port = node.master_port;
    plan.master_port_free_pick = !req.master_port && ctx.free_port && node.master_port == *ctx.free_port;
    plan.restart_count = ctx.restart_count;
    plan_restarts(req, ctx, node, plan);
    if (!ctx.run_dir.empty())
        plan.attempt_dir =
            req.requeue.enabled ? ctx.run_dir : ctx.run_dir + "/attempt_" + std::to_string(ctx.restart_count);
    // Per-rank log files when asked for (--log-dir), or when some output would otherwise reach no one
    // (--redirects, --local-ranks-filter) or was asked for twice (--tee). Otherwise every line is on the
    // console already, and writing files that are removed after a successful run only costs time.
    plan.log_files = keeps_log_files(req) && !plan.attempt_dir.empty();
}

// Node-wide device and network facts (the same on every rank), and the node's GPUs in
// CUDA_VISIBLE_DEVICES order (empty when dlaunch does not set it).
struct NodeDevices {
    BindingFacts facts;
    std::vector<int> gpu_order;
    std::vector<int> visible_base;  // the incoming CUDA_VISIBLE_DEVICES, as GPU numbers
};

NodeDevices node_devices(const JobContext& ctx, const topology::Topology& topo, const topology::GpuSelection& gpus,
                         const topology::BindingPlan& binding) {
    NodeDevices node;
    if (!gpus.cuda_visible_unmappable && !gpus.usable.empty()) {
        // CUDA index i = the GPU of local rank i (then no other), so set_device(LOCAL_RANK) lands on the
        // planned GPU while every rank still sees its peers' GPUs (peer access stays possible).
        for (auto& rb : binding.ranks)
            if (rb.gpu && std::find(node.gpu_order.begin(), node.gpu_order.end(), *rb.gpu) == node.gpu_order.end())
                node.gpu_order.push_back(*rb.gpu);
        node.facts.visible_var = gpus.visible_var;
        node.facts.cuda_visible_devices = topology::cuda_visible_devices(node.gpu_order, gpus.cuda_visible_base);
        node.facts.cuda_pci_order = true;
        node.visible_base = gpus.cuda_visible_base;
    }
    std::string hca;
    for (auto& port : binding.usable_ports) hca += (hca.empty() ? "=" : ",") + topology::port_name(topo, port);
    node.facts.nccl_ib_hca = hca;
    if (ctx.master_ifname) node.facts.nccl_socket_ifname = "=" + *ctx.master_ifname;
    return node;
}

// What every rank of this node is planned from.
struct NodeInputs {
    const LaunchRequest& req;
    const JobContext& ctx;
    const topology::Topology& topo;
    const topology::BindingPlan& binding;
    const NodeDevices& devices;
    const std::vector<std::string>& argv;
    bool torch_env;
};

// A local rank's global rank: node by node, unless the parallel launcher placed the ranks (dlaunch-mpi):
// then ours is known, and the others' from PMIx's local peers if given.
int global_rank(const NodeInputs& in, const LaunchPlan& plan, int local) {
    int rank = plan.span.first_rank + local;
    if (in.req.launcher != Launcher::PerRank) return rank;
    const SchedulerInfo& s = *in.ctx.scheduler;
    if (static_cast<int>(s.local_peers.size()) == plan.nproc_per_node) return s.local_peers[static_cast<size_t>(local)];
    if (local == s.local_rank) return s.rank;
    return rank;
}

// The rank's error file and log files, and with --requeue the header atop each attempt's output (the
// agent writes it atop each attempt's log, the SPANK plugin atop the task's output).
void place_rank_files(const NodeInputs& in, const LaunchPlan& plan, RankPlan& r) {
    const JobContext& ctx = in.ctx;
    if (in.req.requeue.enabled)
        r.log_header = "==== dlaunch: job " + plan.run_id + ", attempt " + std::to_string(ctx.restart_count) +
                       ": rank " + std::to_string(r.rank) + " of " + std::to_string(plan.world_size) + " (local rank " +
                       std::to_string(r.local_rank) + ", node " + std::to_string(r.node_rank) + " of " +
                       std::to_string(plan.nnodes) + ", host " + ctx.hostname + ") ====";
    if (in.req.requeue.enabled && !ctx.run_dir.empty()) {
        // One directory per global rank for the whole job, shared by every node and attempt: the logs
        // append, each attempt under its header, and nothing of an earlier attempt is overwritten.
        std::string dir = ctx.run_dir + "/rank_" + std::to_string(r.rank);
        r.error_file = dir + "/error.attempt_" + std::to_string(ctx.restart_count) + ".json";
        r.stdout_log = dir + "/stdout.log";
        r.stderr_log = dir + "/stderr.log";
        r.stacks_file = dir + "/stacks.attempt_" + std::to_string(ctx.restart_count) + ".txt";
        r.native_stacks_file = native_stacks_file_for(r.stacks_file);
    } else if (!plan.attempt_dir.empty()) {
        std::string dir = plan.attempt_dir + "/" + std::to_string(r.local_rank);
        r.error_file = dir + "/error.json";
        r.stacks_file = dir + "/stacks.txt";
        r.native_stacks_file = native_stacks_file_for(r.stacks_file);
        if (keeps_log_files(in.req)) {
            r.stdout_log = dir + "/stdout.log";
            r.stderr_log = dir + "/stderr.log";
        }
    }
}

// The rank's GPU, NIC, cores and memory nodes from the binding plan.
void place_rank_devices(const NodeInputs& in, const topology::RankBinding& rb, RankPlan& r) {
    const topology::Topology& topo = in.topo;
    if (rb.gpu) {
        const std::vector<int>& order = in.devices.gpu_order;
        auto visible = std::find(order.begin(), order.end(), *rb.gpu);
        r.gpu = RankGpu{*rb.gpu, topo.gpus[static_cast<size_t>(*rb.gpu)].loc.pci,
                        order.empty() ? *rb.gpu : static_cast<int>(visible - order.begin())};
        if (in.req.virtual_local_rank && !order.empty()) r.gpu->visible_index = 0;  // it sees only its own
    }
    if (rb.nic) {
        const auto& nic = topo.nics[static_cast<size_t>(rb.nic->nic)];
        r.nics.push_back({nic.name, rb.nic->port, nic.netdev, nic.loc.pci,
                          rb.nic_affinity ? topology::to_string(*rb.nic_affinity) : ""});
    }
    r.cpuset = rb.cpus;
    r.mems = rb.mems;
    r.bind_memory = !rb.mems.empty() && rb.mems.size() < topo.numa_nodes.size();
}

// OMP_NUM_THREADS' default: the rank's share of the whole cores it is bound to (ranks bound to one NUMA node
// or socket share them: --bind numa, socket), else its share of the node's CPUs.
int omp_threads(const NodeInputs& in, const topology::CpuSet& cpus, int nproc) {
    int cores_bound = 0;
    for (auto& core : in.topo.cores)
        if (cpus.contains(core.pus)) ++cores_bound;
    int sharing = 0;
    for (auto& rb : in.binding.ranks)
        if (rb.cpus == cpus) ++sharing;
    return cores_bound > 0 ? std::max(1, cores_bound / std::max(1, sharing)) : std::max(1, in.topo.cpus / nproc);
}

// The contract's variables: torch's for torch ranks; for a layout's other processes only dlaunch's own.
EnvMap contract_env(const NodeInputs& in, const LaunchPlan& plan, const RankPlan& r) {
    RankFacts facts{
        .rank = r.rank,
        .local_rank = in.req.virtual_local_rank ? 0 : r.local_rank,
        .node_rank = r.node_rank,
        .world_size = r.world_size,
        .local_world_size = r.local_world_size,
        .nnodes = plan.nnodes,
        .role = in.req.role,
        .role_rank = in.req.launcher == Launcher::PerRank ? r.rank : plan.span.first_role_rank + r.local_rank,
        .role_world_size = plan.span.role_world_size,
        .master_addr = plan.master_addr,
        .master_port = plan.master_port,
        .restart_count = plan.restart_count,
        .max_restarts = plan.max_restarts,
        .run_id = plan.run_id,
        .error_file = r.error_file,
        .omp_threads = omp_threads(in, r.cpuset, plan.nproc_per_node)};
    if (!in.ctx.torch_async_error_var.empty()) facts.async_error_var = in.ctx.torch_async_error_var;
    facts.store_without_libuv = in.ctx.torch_store_without_libuv;
    if (in.torch_env) return rank_env(facts, in.ctx.environ);
    EnvMap env = default_rank_env(facts, in.ctx.environ);
    env["DLAUNCH_RESTART_COUNT"] = std::to_string(plan.restart_count);
    return env;
}

// The binding's variables; user values kept instead become the plan's notes (once each).
void add_binding_env(const NodeInputs& in, const topology::RankBinding& rb, RankPlan& r, LaunchPlan& plan) {
    BindingFacts rank_facts = in.devices.facts;
    if (rb.nic) rank_facts.ucx_net_devices = topology::port_name(in.topo, *rb.nic);
    // --virtual-local-rank: every rank is local rank 0 and sees its own GPU only, as device 0.
    if (in.req.virtual_local_rank && rb.gpu && rank_facts.cuda_visible_devices)
        rank_facts.cuda_visible_devices = topology::cuda_visible_devices({*rb.gpu}, in.devices.visible_base);
    std::vector<std::string> kept;
    for (auto& [k, v] : binding_env(rank_facts, in.ctx.environ, kept)) r.env[k] = v;
    for (auto& note : kept)
        if (std::find(plan.notes.begin(), plan.notes.end(), note) == plan.notes.end()) plan.notes.push_back(note);
}

// Which of the rank's streams dlaunch echoes: those --local-ranks-filter shows and --redirects keeps
// from the console (unless --tee sends them to both).
void route_console(const LaunchRequest& req, RankPlan& r) {
    const int local = r.local_rank;
    bool shown = !req.local_ranks_filter || req.local_ranks_filter->contains(local);
    unsigned redirected = req.redirects.for_rank(local) & ~req.tee.for_rank(local);
    r.console_stdout = shown && !(redirected & kStdOut);
    r.console_stderr = shown && !(redirected & kStdErr);
}

// What the agent watches: the hang timeout, torchrun's watchdog FIFO, where the ranks' stacks go.
void describe_supervision(const LaunchRequest& req, const JobContext& ctx, LaunchPlan& plan) {
    plan.hang_timeout = req.hang_timeout_seconds;
    plan.timer_file = ctx.timer_file;
    plan.heartbeat_file = ctx.heartbeat_file;
    if (!ctx.run_dir.empty()) plan.heartbeat_record = ctx.run_dir + "/heartbeats.json";
    if (req.requeue.enabled && !ctx.run_dir.empty())
        plan.stacks_files = ctx.run_dir + "/rank_*/stacks.attempt_" + std::to_string(ctx.restart_count) + ".txt";
    else if (!plan.attempt_dir.empty())
        plan.stacks_files = plan.attempt_dir + "/*/stacks.txt";
}

RankPlan plan_rank(const NodeInputs& in, LaunchPlan& plan, int local) {
    RankPlan r;
    r.local_rank = local;
    r.node_rank = plan.node_rank;
    r.rank = global_rank(in, plan, local);
    r.world_size = plan.world_size;
    r.local_world_size = plan.nproc_per_node;
    for (auto& arg : in.argv) r.argv.push_back(substitute_local_rank(arg, local));
    place_rank_files(in, plan, r);
    const topology::RankBinding& rb = in.binding.ranks[static_cast<size_t>(local)];
    place_rank_devices(in, rb, r);
    r.env = contract_env(in, plan, r);
    r.env.merge(supervision_env({.stacks_file = r.stacks_file,
                                 .stack_signal = stack_signal(),
                                 .python_hook_dir = in.ctx.python_hook_dir,
                                 .timer_file = in.ctx.timer_file,
                                 .heartbeat_file = in.ctx.heartbeat_file},
                                in.ctx.environ));
    add_binding_env(in, rb, r, plan);
    route_console(in.req, r);
    return r;
}

}  // namespace

long descriptors_to_lead(int nodes, const NprocSpec& nproc) {
    constexpr long kPerWorker = 4, kMargin = 64;
    const long workers = nproc.kind == NprocSpec::Kind::Count ? nproc.count : 8;
    return nodes + kPerWorker * workers + kMargin;
}

namespace {
// Agents that meet by hand at dlaunch's own node rendezvous, whose node 0 may keep it (its door, its socket):
// not etcd's meeting, not Paddle's parameter-server layout, not the static form.
bool meet_at_node_zeros_rendezvous(const LaunchRequest& req) {
    return req.launcher == Launcher::Agent && !req.etcd && !req.paddle.ps && !static_form_across_nodes(req);
}
}  // namespace

bool keeps_door_open(const LaunchRequest& req) {
    return meet_at_node_zeros_rendezvous(req) && req.nnodes.min != req.nnodes.max;
}

bool hands_socket_to_leader(const LaunchRequest& req) {
    return meet_at_node_zeros_rendezvous(req) && req.nnodes.min == req.nnodes.max && req.max_restarts > 0;
}

bool static_form_across_nodes(const LaunchRequest& req) {
    return req.launcher == Launcher::Agent && req.rdzv_backend == "static" && !req.standalone && !req.paddle.layout &&
           !req.rendezvous_master && req.nnodes.min == req.nnodes.max && req.nnodes.max > 1 &&
           (req.node_rank || req.master_addr || !req.rdzv_endpoint.empty());
}

Result<NodePlacement> static_form_placement(const LaunchRequest& req) {
    std::vector<std::string> ignored;  // make_plan says them
    return static_rendezvous(req, JobContext{}, ignored);
}

namespace {
// How many workers this node told the others it runs at their meeting: the one share every node brought, else
// its own entry; 0 when none was told.
int told_procs(const NodePlacement& node) {
    if (node.every_share) return node.every_share->procs;
    return node.shares.empty() ? 0 : node.shares.at(static_cast<size_t>(node.node_rank)).procs;
}
}  // namespace

Result<LaunchPlan> make_plan(const LaunchRequest& req, const JobContext& ctx, const topology::Topology& topo,
                             const ProcessLayoutHook& layout_hook) {
    LaunchPlan plan;
    auto node = resolve_rendezvous(req, ctx, plan.warnings);
    if (!node) return node.error();
    auto gpus = topology::select_gpus(topo, ctx.environ, req.devices, req.devices_option);
    if (!gpus) return gpus.error();
    append(plan.warnings, gpus->warnings);
    auto nproc = default_nproc(req, ctx, topo, *gpus);
    if (!nproc) return nproc.error();
    auto layout = node_layout(layout_hook, *node, *nproc);
    if (!layout) return layout.error();
    nproc = layout->nproc.value_or(*nproc);
    if (auto s = check_console_filter(req, *nproc); !s) return s.error();
    if (const int told = told_procs(*node); told > 0 && told != *nproc)
        return Error{"plan: this node told the others it runs " + std::to_string(told) + " workers, but plans " +
                         std::to_string(*nproc),
                     "this is a bug; please report it with the command line"};

    auto binding = bind_ranks(req, topo, *gpus, *nproc, plan);
    if (!binding) return binding.error();
    auto argv = worker_argv(req, ctx);
    if (!argv) return argv.error();

    describe_node(req, ctx, *node, *nproc, plan);
    const NodeDevices devices = node_devices(ctx, topo, *gpus, *binding);
    const NodeInputs inputs{req, ctx, topo, *binding, devices, *argv, layout->torch_env};
    for (int local = 0; local < *nproc; ++local) plan.ranks.push_back(plan_rank(inputs, plan, local));
    plan.worker_reads_stdin = plan.ranks.size() == 1;
    describe_supervision(req, ctx, plan);
    return plan;
}

std::optional<std::string> planned_master_addr(const LaunchRequest& req, const JobContext& ctx) {
    std::vector<std::string> warnings;
    auto rv = resolve_rendezvous(req, ctx, warnings);
    if (!rv) return std::nullopt;
    return rv->master_addr;
}

bool keeps_log_files(const LaunchRequest& req) {
    return req.log_dir || req.redirects.any() || req.tee.any() || req.local_ranks_filter.has_value();
}

bool keeps_run_dir(const LaunchRequest& req, bool requeue, const RunOutcome& outcome) {
    return requeue || outcome.failed || outcome.stop_signal != 0 || keeps_log_files(req);
}

bool needs_free_port(const LaunchRequest& req) {
    if (req.master_port || req.nnodes.min > 1) return false;
    if (local_rendezvous(req) || req.rdzv_endpoint.empty()) return true;
    auto ep = parse_endpoint(req.rdzv_endpoint);
    return !ep || !ep->port;
}

std::string native_stacks_file_for(const std::string& stacks_file) {
    if (stacks_file.empty()) return "";
    const size_t name = stacks_file.rfind('/') + 1;  // 0 without a directory
    return stacks_file.substr(0, name) + "native-" + stacks_file.substr(name);
}

std::string console_prefix(const LaunchPlan& plan, const RankPlan& rank) {
    if (!plan.prefix_console) return "";
    if (!plan.prefix_template.empty())
        return safe_substitute(plan.prefix_template, {{"role_name", rank.role.empty() ? plan.role_name : rank.role},
                                                      {"rank", std::to_string(rank.rank)},
                                                      {"local_rank", std::to_string(rank.local_rank)}});
    if (!rank.role.empty()) return "[" + rank.role + std::to_string(rank.rank) + "]:";
    if (plan.nnodes > 1) return "[" + std::to_string(rank.node_rank) + ":" + std::to_string(rank.rank) + "]:";
    return "[" + std::to_string(rank.rank) + "]:";
}

std::string safe_substitute(const std::string& text, const std::vector<std::pair<std::string, std::string>>& values) {
    auto ident_start = [](char c) { return c == '_' || std::isalpha(static_cast<unsigned char>(c)); };
    auto ident_char = [](char c) { return c == '_' || std::isalnum(static_cast<unsigned char>(c)); };
    auto value_of = [&](const std::string& name) -> const std::string* {
        for (auto& [k, v] : values)
            if (k == name) return &v;
        return nullptr;
    };
    std::string out;
    for (size_t i = 0; i < text.size(); ++i) {
        if (text[i] != '$' || i + 1 >= text.size()) {
            out += text[i];
            continue;
        }
        const bool braced = text[i + 1] == '{';
        size_t begin = i + (braced ? 2 : 1), end = begin;
        if (!braced && text[i + 1] == '$') {
            out += '$', ++i;
            continue;
        }
        if (end < text.size() && ident_start(text[end]))
            while (end < text.size() && ident_char(text[end])) ++end;
        const bool closed = !braced || (end < text.size() && text[end] == '}');
        const std::string* value = end > begin && closed ? value_of(text.substr(begin, end - begin)) : nullptr;
        if (!value) {
            out += text[i];
            continue;
        }
        out += *value;
        i = end + (braced ? 1 : 0) - 1;
    }
    return out;
}

RankSpan even_span(int nnodes, int node_rank, int procs) {
    return RankSpan{node_rank * procs, nnodes * procs, node_rank * procs, nnodes * procs};
}

RankSpan rank_span(const std::vector<NodeShare>& nodes, int node_rank) {
    RankSpan s{0, 0, 0, 0};
    const std::string& role = nodes.at(static_cast<size_t>(node_rank)).role;
    for (size_t i = 0; i < nodes.size(); ++i) {
        const bool before = static_cast<int>(i) < node_rank, same_role = nodes[i].role == role;
        s.world_size += nodes[i].procs;
        if (before) s.first_rank += nodes[i].procs;
        if (same_role) s.role_world_size += nodes[i].procs;
        if (same_role && before) s.first_role_rank += nodes[i].procs;
    }
    return s;
}

Result<int> node_worker_count(const LaunchRequest& req, const EnvMap& environ, const topology::Topology& topo) {
    auto gpus = topology::select_gpus(topo, environ, req.devices, req.devices_option);
    if (!gpus) return gpus.error();
    return resolve_nproc(req, topo.cpus, static_cast<int>(gpus->usable.size()));
}

}  // namespace dlaunch
