#include "dlaunch/context_builder.hpp"

#include <spdlog/spdlog.h>

#include "dlaunch/env_contract.hpp"
#include "dlaunch/host.hpp"
#include "dlaunch/paddle_plan.hpp"
#include "dlaunch/torch_install.hpp"

namespace dlaunch {
namespace {

// Under Slurm the node's name (node12) says more than the host name, and is what sinfo shows.
std::string node_name(const ContextFacts& f) {
    return f.hostname ? *f.hostname : host::node_name(f.env);
}

std::string run_id_of(const LaunchRequest& req, const ContextFacts& f) {
    // Under requeue the run id is the same in every attempt: --rdzv-id, else the Slurm job's id.
    if (f.requeue) return req.rdzv_id != "none" ? req.rdzv_id : f.requeue->job_id;
    if (f.job) return scheduled_run_id(f.job->info, req);
    if (f.random_run_id) return *f.random_run_id;
    return req.rdzv_id;
}

// torchrun's watchdog: on when the environment says so and the front-end can serve it.
std::string timer_file_of(const ContextFacts& f) {
    if (!f.watchdog_fifo || !watchdog_asked(f.env)) return "";
    const std::string named = watchdog_file_named(f.env);
    return named.empty() ? *f.watchdog_fifo : named;
}

}  // namespace

Result<JobContext> build_job_context(const LaunchRequest& req, ContextFacts f) {
    JobContext ctx;
    ctx.hostname = node_name(f);
    ctx.run_id = run_id_of(req, f);
    ctx.restart_count = f.requeue ? f.requeue->attempt : 0;
    if (f.python)
        ctx.python = *f.python;
    else if (req.entry != EntryKind::Command)
        ctx.python = host::find_python(f.env);
    if (auto torch = req.entry != EntryKind::Command ? host::torch_facts(ctx.python) : std::nullopt) {
        ctx.torch_local_rank_arg = torch->local_rank_arg;
        ctx.torch_async_error_var = torch->async_error_var;
        ctx.torch_store_without_libuv = torch->store_without_libuv;
    }
    ctx.assignment = std::move(f.assignment);
    ctx.free_port = f.free_port;
    ctx.local_addrs = std::move(f.local_addrs);
    ctx.run_dir = std::move(f.run_dir);
    ctx.python_hook_dir = f.python_hook_dir;
    ctx.timer_file = timer_file_of(f);
    ctx.heartbeat_file = f.heartbeat_fifo;
    if (f.job) {
        ctx.scheduler = f.job->info;
        auto master = agree_master(*f.job, req);
        if (!master) return master.error();
        ctx.master = *master;
        if (names_every_node(req.env_contract)) ctx.node_addrs = scheduled_node_addresses(f.job->info);
    }
    ctx.environ = std::move(f.env);
    // NCCL_SOCKET_IFNAME: the interface that reaches the master (the node-local fence already knows it).
    if (ctx.master && ctx.master->ifname_known) {
        ctx.master_ifname = ctx.master->ifname;
    } else if (auto addr = planned_launch_master_addr(req, ctx)) {
        ctx.master_ifname = host::interface_for(*addr);
        if (!ctx.master_ifname)
            spdlog::debug("no local interface found for MASTER_ADDR {}; NCCL_SOCKET_IFNAME is not set", *addr);
    }
    return ctx;
}

}  // namespace dlaunch
