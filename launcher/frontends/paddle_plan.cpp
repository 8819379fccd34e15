#include "dlaunch/paddle_plan.hpp"

#include <algorithm>
#include <vector>

#include "dlaunch/env_contract.hpp"

namespace dlaunch {
namespace {

std::string endpoint(const std::string& host, int port) {
    return host + ":" + std::to_string(port);
}

std::string endpoint_host(const std::string& ep) {
    return ep.substr(0, ep.rfind(':'));
}

// The hosts of "ip:port" endpoints, each once, in order of first appearance.
std::vector<std::string> endpoint_hosts(const std::vector<std::vector<std::string>>& lists) {
    std::vector<std::string> hosts;
    for (auto& list : lists)
        for (auto& ep : list) {
            std::string host = endpoint_host(ep);
            if (std::find(hosts.begin(), hosts.end(), host) == hosts.end()) hosts.push_back(host);
        }
    return hosts;
}

// This node's position in a list of node addresses (--ips, PS endpoint hosts): --host/--local-addr
// when given, else the first listed address this host holds.
Result<int> find_this_node(const std::vector<std::string>& addrs, const LaunchRequest& req, const JobContext& ctx,
                           const std::string& what) {
    for (size_t i = 0; i < addrs.size(); ++i) {
        bool mine = req.local_addr
                        ? addrs[i] == *req.local_addr
                        : std::find(ctx.local_addrs.begin(), ctx.local_addrs.end(), addrs[i]) != ctx.local_addrs.end();
        if (mine) return static_cast<int>(i);
    }
    std::string local;
    for (auto& a : ctx.local_addrs) local += (local.empty() ? "" : ", ") + a;
    return Error{"rdzv: " + what + ": this node (" + (req.local_addr ? "--host " + *req.local_addr : local) +
                     ") is not in the list",
                 "list this node's address, or give --host with the address the list uses for it"};
}

bool has_ps_lists(const LaunchRequest& req) {
    return req.paddle.ps && !req.paddle.ps->servers.empty();
}

// Paddle's static layouts: every node's address is on the command line, the same on all nodes, and a
// node's rank is its position. nullopt when there is no such list, or the scheduler or dlaunch's node
// rendezvous places the nodes instead.
Result<std::optional<NodeAssignment>> static_nodes(const LaunchRequest& req, const JobContext& ctx) {
    const bool ps_lists = has_ps_lists(req);
    if (ctx.scheduler || ctx.assignment || (req.paddle.ips.empty() && !ps_lists))
        return std::optional<NodeAssignment>{};
    const PsRequest* ps = ps_lists ? &*req.paddle.ps : nullptr;
    auto hosts = ps ? endpoint_hosts({ps->servers, ps->trainers, ps->heter_workers}) : req.paddle.ips;
    const std::string what = ps ? "--servers/--trainers" : "--ips";
    const int n = static_cast<int>(hosts.size());
    if ((req.nnodes.min != 1 || req.nnodes.max != 1) && (req.nnodes.min > n || req.nnodes.max < n))
        return Error{"rdzv: --nnodes " + std::to_string(req.nnodes.min) + ": " + what + " name " + std::to_string(n) +
                         " node(s)",
                     "make --nnodes match the list, or leave it out"};
    auto me = find_this_node(hosts, req, ctx, what);
    if (!me) return me.error();
    if (req.node_rank && *req.node_rank != *me)
        return Error{"rdzv: --rank " + std::to_string(*req.node_rank) + ": this node is entry " + std::to_string(*me) +
                         " of " + what,
                     "leave out --rank: with " + what + " a node's rank is its position"};
    NodeAssignment nodes{n, *me, hosts.front(), req.master_port.value_or(kDefaultMasterPort), hosts, 0, {}};
    if (n == 1 && !req.master_port && ctx.free_port) nodes.master_port = *ctx.free_port;
    return std::optional<NodeAssignment>{std::move(nodes)};
}

// Every node's address in node-rank order, when this launch knows them ({} otherwise).
std::vector<std::string> node_addresses(const LaunchRequest& req, const JobContext& ctx, const NodePlacement& node) {
    if (ctx.assignment) return ctx.assignment->node_addrs;
    if (!req.paddle.ips.empty()) return req.paddle.ips;
    if (static_cast<int>(ctx.node_addrs.size()) == node.nnodes) return ctx.node_addrs;
    if (node.nnodes == 1) return {node.master_addr};
    return {};
}

// The number of ranks on each node: nproc everywhere for agents; under dlaunch-mpi the scheduler's
// tasks per node, which must hold the ranks node by node.
Result<std::vector<int>> ranks_per_node(const LaunchRequest& req, const JobContext& ctx, const NodePlacement& node,
                                        int nproc) {
    std::vector<int> counts(static_cast<size_t>(node.nnodes), nproc);
    if (req.launcher != Launcher::PerRank || node.nnodes <= 1) return counts;
    const SchedulerInfo& s = *ctx.scheduler;
    if (static_cast<int>(s.tasks_per_node.size()) != node.nnodes)
        return Error{"plan: Paddle's endpoints need the tasks on every node, and " + s.source + " does not say them",
                     "run under srun (SLURM_STEP_TASKS_PER_NODE), or start one dlaunch agent per node instead"};
    counts = s.tasks_per_node;
    int offset = 0;
    for (int n = 0; n < s.node_rank; ++n) offset += counts[static_cast<size_t>(n)];
    if (offset + s.local_rank != s.rank)
        return Error{"plan: Paddle's endpoints need ranks laid out node by node, and rank " + std::to_string(s.rank) +
                         " is local rank " + std::to_string(s.local_rank) + " of node " + std::to_string(s.node_rank),
                     "use block distribution (srun -m block, mpirun --map-by slot)"};
    return counts;
}

// Paddle's collective endpoints: rank r's "ip:port", ranks laid out node by node; a rank's port is the
// first endpoint port plus its local rank.
Result<std::vector<std::string>> collective_endpoints(const LaunchRequest& req, const JobContext& ctx,
                                                      const NodePlacement& node, int nproc, int base_port) {
    auto addrs = node_addresses(req, ctx, node);
    if (static_cast<int>(addrs.size()) != node.nnodes)
        return Error{
            "plan: Paddle's endpoints (PADDLE_TRAINER_ENDPOINTS) need every node's address, and this "
            "launch does not know them",
            "let the nodes meet through dlaunch's rendezvous (--master HOST:PORT, or no master address "
            "at all), give --ips, or run under Slurm"};
    auto counts = ranks_per_node(req, ctx, node, nproc);
    if (!counts) return counts.error();
    std::vector<std::string> eps;
    for (int n = 0; n < node.nnodes; ++n)
        for (int l = 0; l < (*counts)[static_cast<size_t>(n)]; ++l)
            eps.push_back(endpoint(addrs[static_cast<size_t>(n)], base_port + l));
    return eps;
}

struct PsProcess {
    PsRole role;
    int index;  // in its role's job-wide list
    int local;  // among this node's processes of its role
    std::string endpoint;
};

struct PsLayout {
    std::vector<std::string> servers, trainers, heter_workers;
    std::string gloo_endpoint;
    std::vector<PsProcess> local;  // this node's processes: servers, then trainers, then heter workers
};

// --servers/--trainers/--heter_workers: the lists as given; this node is the node_rank-th host.
std::string listed_ps_endpoints(const PsRequest& ps, const NodePlacement& node, PsLayout& layout) {
    layout.servers = ps.servers;
    layout.trainers = ps.trainers;
    layout.heter_workers = ps.heter_workers;
    layout.gloo_endpoint = endpoint(endpoint_host(ps.servers.front()), ps.gloo_port);
    return endpoint_hosts({ps.servers, ps.trainers, ps.heter_workers})[static_cast<size_t>(node.node_rank)];
}

// --server_num/--trainer_num/--heter_worker_num: that many of each on every node, ports counting up from
// base_port in that order, the Gloo store on the first node right after them.
Result<std::string> generated_ps_endpoints(const PsRequest& ps, const std::vector<std::string>& addrs,
                                           const NodePlacement& node, int base_port, PsLayout& layout) {
    if (static_cast<int>(addrs.size()) != node.nnodes)
        return Error{"plan: parameter-server endpoints need every node's address, and this launch does not know them",
                     "let the nodes meet through dlaunch's rendezvous (--master), or give --servers and --trainers"};
    const int per_node = ps.server_num + ps.trainer_num + ps.heter_worker_num;
    for (auto& addr : addrs) {
        for (int j = 0; j < ps.server_num; ++j) layout.servers.push_back(endpoint(addr, base_port + j));
        for (int j = 0; j < ps.trainer_num; ++j)
            layout.trainers.push_back(endpoint(addr, base_port + ps.server_num + j));
        for (int j = 0; j < ps.heter_worker_num; ++j)
            layout.heter_workers.push_back(endpoint(addr, base_port + ps.server_num + ps.trainer_num + j));
    }
    layout.gloo_endpoint = endpoint(addrs.front(), base_port + per_node);
    return addrs[static_cast<size_t>(node.node_rank)];
}

// Parameter-server mode: the job's endpoint lists and this node's processes.
Result<PsLayout> ps_layout(const PsRequest& ps, const LaunchRequest& req, const JobContext& ctx,
                           const NodePlacement& node, int base_port) {
    PsLayout layout;
    auto my_host = !ps.servers.empty()
                       ? Result<std::string>(listed_ps_endpoints(ps, node, layout))
                       : generated_ps_endpoints(ps, node_addresses(req, ctx, node), node, base_port, layout);
    if (!my_host) return my_host.error();
    const std::vector<std::pair<PsRole, const std::vector<std::string>*>> lists{
        {PsRole::Server, &layout.servers},
        {PsRole::Trainer, &layout.trainers},
        {PsRole::HeterWorker, &layout.heter_workers}};
    for (auto& [role, list] : lists) {
        int local = 0;
        for (size_t i = 0; i < list->size(); ++i)
            if (endpoint_host((*list)[i]) == *my_host)
                layout.local.push_back({role, static_cast<int>(i), local++, (*list)[i]});
    }
    if (layout.local.empty())
        return Error{"plan: parameter-server mode: no server or trainer on this node (" + *my_host + ")",
                     "list this node in --servers or --trainers, or give --server_num/--trainer_num"};
    return layout;
}

std::string role_name(PsRole role) {
    switch (role) {
        case PsRole::Server: return "server";
        case PsRole::Trainer: return "trainer";
        case PsRole::HeterWorker: return "heter_worker";
    }
    return "trainer";
}

std::string paddle_log_name(const PsProcess* ps, int local_rank) {
    if (!ps) return "workerlog." + std::to_string(local_rank);
    switch (ps->role) {
        case PsRole::Server: return "serverlog." + std::to_string(ps->local);
        case PsRole::Trainer: return "workerlog." + std::to_string(ps->local);
        case PsRole::HeterWorker: return "heterlog." + std::to_string(ps->local);
    }
    return "workerlog." + std::to_string(local_rank);
}

// What the layout hook decided, for finishing the ranks: the PS layout, or the collective endpoints.
struct PaddleLayout {
    std::optional<PsLayout> ps;
    std::vector<std::string> endpoints;
};

// make_plan's ProcessLayout hook: PS mode fixes the node's processes; Paddle's collective contract needs
// every rank's endpoint. Neither is a torch rank's contract, except with --env all.
Result<ProcessLayout> plan_paddle_layout(const LaunchRequest& req, const JobContext& ctx, const NodePlacement& node,
                                         int nproc, PaddleLayout& out) {
    // Endpoint ports start at --start_port with --ips (Paddle's rule), else right above MASTER_PORT.
    const int base_port = !req.paddle.ips.empty() ? req.paddle.start_port : node.master_port + 1;
    if (req.paddle.ps) {
        if (req.launcher == Launcher::PerRank)
            return Error{"plan: parameter-server mode under dlaunch-mpi", "start PS jobs with dlaunch-paddle"};
        auto layout = ps_layout(*req.paddle.ps, req, ctx, node, base_port);
        if (!layout) return layout.error();
        out.ps = std::move(*layout);
        return ProcessLayout{.nproc = static_cast<int>(out.ps->local.size()), .torch_env = false};
    }
    if (gives_paddle_env(req.env_contract)) {
        auto eps = collective_endpoints(req, ctx, node, nproc, base_port);
        if (!eps) return eps.error();
        out.endpoints = std::move(*eps);
    }
    return ProcessLayout{.nproc = std::nullopt, .torch_env = gives_torch_env(req.env_contract)};
}

void add_ps_contract(const LaunchRequest& req, const LaunchPlan& plan, const PsLayout& ps, const PsProcess& proc,
                     RankPlan& r) {
    r.role = role_name(proc.role);
    r.rank = proc.index;
    r.service = proc.role != PsRole::Trainer;
    PsFacts pf{.role = proc.role,
               .index = proc.index,
               .pod_ip = endpoint_host(proc.endpoint),
               .port = std::stoi(proc.endpoint.substr(proc.endpoint.rfind(':') + 1)),
               .servers = ps.servers,
               .trainers = ps.trainers,
               .heter_workers = ps.heter_workers,
               .nnodes = plan.nnodes,
               .with_gloo = req.paddle.ps->with_gloo,
               .gloo_endpoint = ps.gloo_endpoint,
               .job_id = req.paddle.job_id};
    r.env.merge(paddle_ps_env(pf));
}

void add_collective_contract(const LaunchRequest& req, const LaunchPlan& plan,
                             const std::vector<std::string>& endpoints, RankPlan& r) {
    PaddleFacts pf{.rank = r.rank,
                   .local_rank = r.local_rank,
                   .world_size = r.world_size,
                   .local_world_size = r.local_world_size,
                   .nnodes = plan.nnodes,
                   .master = req.paddle.ips.empty() ? endpoint(plan.master_addr, plan.master_port) : "",
                   .endpoints = endpoints,
                   .job_id = req.paddle.job_id,
                   .selected_gpu = r.gpu ? std::optional<int>(r.gpu->visible_index) : std::nullopt};
    for (auto& [k, v] : paddle_collective_env(pf)) r.env[k] = v;
}

// Paddle's log layout: one file per process for both streams, the node's first process on the console.
void use_paddle_logs(const LaunchRequest& req, const LaunchPlan& plan, const PsProcess* proc, RankPlan& r) {
    const int local = r.local_rank;
    r.stdout_log = r.stderr_log = *req.log_dir + "/" + paddle_log_name(proc, local);
    r.log_truncate = req.paddle.log_overwrite && plan.restart_count == 0;
    r.log_header = "==== dlaunch-paddle: job " + req.paddle.job_id + ", attempt " + std::to_string(plan.restart_count) +
                   ", " + (r.role.empty() ? "rank" : r.role) + " " + std::to_string(r.rank) + " (local " +
                   std::to_string(local) + ") on " + plan.hostname + " ====";
    unsigned redirected = req.redirects.for_rank(local) & ~req.tee.for_rank(local);
    r.console_stdout = local == 0 && !(redirected & kStdOut);
    r.console_stderr = local == 0 && !(redirected & kStdErr);
}

std::vector<std::pair<std::string, std::vector<std::string>>> endpoint_lists(const LaunchRequest& req,
                                                                             const PaddleLayout& layout) {
    if (layout.ps) {
        std::vector<std::pair<std::string, std::vector<std::string>>> lists{
            {"PADDLE_PSERVERS_IP_PORT_LIST", layout.ps->servers}, {"PADDLE_TRAINER_ENDPOINTS", layout.ps->trainers}};
        if (!layout.ps->heter_workers.empty())
            lists.push_back({"PADDLE_HETER_TRAINER_IP_PORT_LIST", layout.ps->heter_workers});
        return lists;
    }
    if (gives_paddle_env(req.env_contract)) return {{"PADDLE_TRAINER_ENDPOINTS", layout.endpoints}};
    return {};
}

// Writes Paddle's part into the plan make_plan produced: endpoint lists, each process's contract and logs.
void finish_paddle_plan(const LaunchRequest& req, const PaddleLayout& layout, LaunchPlan& plan) {
    plan.endpoints = endpoint_lists(req, layout);
    const bool paddle_logs = req.paddle.layout && req.log_dir.has_value();
    if (paddle_logs) plan.endpoints_log = *req.log_dir + "/endpoints.log";
    for (auto& r : plan.ranks) {
        const PsProcess* proc = layout.ps ? &layout.ps->local[static_cast<size_t>(r.local_rank)] : nullptr;
        if (proc)
            add_ps_contract(req, plan, *layout.ps, *proc, r);
        else if (gives_paddle_env(req.env_contract))
            add_collective_contract(req, plan, layout.endpoints, r);
        if (paddle_logs) use_paddle_logs(req, plan, proc, r);
    }
}

}  // namespace

Result<LaunchPlan> make_launch_plan(const LaunchRequest& req, const JobContext& ctx, const topology::Topology& topo) {
    auto nodes = static_nodes(req, ctx);
    if (!nodes) return nodes.error();
    std::optional<JobContext> placed;  // a copy only when Paddle's lists place the nodes
    if (*nodes) {
        placed = ctx;
        placed->assignment = std::move(**nodes);
    }
    const JobContext& c = placed ? *placed : ctx;
    PaddleLayout layout;
    auto plan = make_plan(req, c, topo, [&](const NodePlacement& node, int nproc) {
        return plan_paddle_layout(req, c, node, nproc, layout);
    });
    if (plan) finish_paddle_plan(req, layout, *plan);
    return plan;
}

std::optional<std::string> planned_launch_master_addr(const LaunchRequest& req, const JobContext& ctx) {
    auto nodes = static_nodes(req, ctx);
    if (!nodes) return std::nullopt;
    if (*nodes) return (*nodes)->master_addr;
    return planned_master_addr(req, ctx);
}

}  // namespace dlaunch
