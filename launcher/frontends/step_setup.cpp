#include "dlaunch/step_setup.hpp"

#include "dlaunch/frontend.hpp"
#include "dlaunch/host.hpp"
#include "dlaunch/job_setup.hpp"
#include "dlaunch/slurm/client.hpp"
#include "dlaunch/slurm/task_facts.hpp"

namespace dlaunch {

Result<StepNodePlan> plan_step_node(const StepFacts& f, const DistLaunchSettings& settings) {
    slurm::TaskFacts facts;
    facts.job_id = f.job_id;
    facts.step_id = f.step_id;
    facts.size = f.total_tasks;
    facts.nnodes = f.nnodes;
    facts.node_rank = f.node_id;
    facts.local_global_ids = f.local_global_ids;
    facts.rank = f.local_global_ids.empty() ? 0 : f.local_global_ids.front();
    facts.nodelist = slurm::step_nodelist(f.env);
    if (auto it = f.env.find("SLURM_STEP_TASKS_PER_NODE"); it != f.env.end()) facts.tasks_per_node = it->second;
    auto scheduled = slurm::scheduler_info(facts);
    if (!scheduled) return scheduled.error();
    const SchedulerInfo& info = *scheduled;

    LaunchRequest req = dist_launch_request(settings, f.argv0);
    if (req.entry == EntryKind::PythonScript) req.script = f.argv0;
    if (auto it = f.env.find("DLAUNCH_TOPOLOGY_XML"); it != f.env.end() && !it->second.empty())
        req.topology_xml = it->second;

    JobContext ctx;
    ctx.environ = f.env;
    // This node's Slurm name: the step's node list says it (SLURMD_NODENAME in the step's environment is
    // the one srun ran on).
    ctx.hostname = f.node_id >= 0 && static_cast<size_t>(f.node_id) < info.nodes.size()
                       ? info.nodes[static_cast<size_t>(f.node_id)]
                       : f.hostname;
    ctx.scheduler = info;
    ctx.run_id = scheduled_run_id(info, req);
    std::optional<RequeueJob> requeue;
    if (req.requeue.enabled) {
        // The attempts of the batch job are the restarts: every rank sees Slurm's restart count and the
        // job id as the run id, in every attempt (as with dlaunch --requeue).
        auto batch = slurm::slurm_job_is_batch(f.job_id);
        if (!batch) return batch.error();
        if (!*batch)
            return Error{
                "--dist-launch: requeue needs a batch job, and job " + f.job_id + " is not one (salloc or srun alone)",
                "submit it with sbatch (examples/sbatch/requeue-spank.sbatch), or leave requeue out"};
        auto rq = prepare_requeue(req, f.env);
        if (!rq)
            return Error{"--dist-launch=requeue: " + rq.error().what,
                         "submit from a directory every node of the job can write: its dlaunch-logs/ holds the ledger"};
        requeue = *rq;
        ctx.run_id = rq->job_id;
        ctx.restart_count = rq->attempt;
    }
    ctx.python = settings.python.value_or(host::find_python(f.env));

    ScheduledJob job{info, nullptr};
    auto master = agree_master(job, req);
    if (!master) return master.error();
    ctx.master = *master;
    if (req.env_contract != EnvContract::Torch) ctx.node_addrs = scheduled_node_addresses(info);
    ctx.master_ifname = host::interface_for(master->addr);

    auto topo = frontend::load_topology(req, f.env, f.job_id + "." + f.step_id, topology::Scope::Cgroup);
    if (!topo) return topo.error();

    StepNodePlan out;
    auto plan = make_plan(req, ctx, *topo);
    if (!plan) return plan.error();
    out.plan = std::move(*plan);
    out.python = ctx.python;
    out.run_under_python = req.entry == EntryKind::PythonScript;
    out.requeue = requeue;
    if (out.run_under_python && out.python.empty())
        return Error{"launch: python: no python3 found on the step's PATH and PYTHON_EXEC is not set",
                     "add python=/path/to/python3 to --dist-launch, or export PYTHON_EXEC"};

    // The first node hosts rank 0's store: say so now if its port is taken, instead of a hang later.
    if (f.node_id == 0 && !settings.port) {
        if (auto s = host::check_port_free(out.plan.master_port); !s)
            return Error{"launch: MASTER_PORT " + std::to_string(out.plan.master_port) + " (from job " + f.job_id +
                             " step " + f.step_id + ") is in use on " + ctx.hostname,
                         "run the step again, or give --dist-launch=port=N with a free port"};
    }
    if (out.plan.bind) {
        auto binder = topology::Binder::for_this_machine();
        if (!binder) return binder.error();
        out.binder = std::move(*binder);
        for (auto& r : out.plan.ranks)
            out.bindings.push_back(r.cpuset.empty() && !r.bind_memory
                                       ? nullptr
                                       : out.binder->prepare(r.cpuset, r.bind_memory ? r.mems : topology::CpuSet{}));
    }
    return out;
}

StepTaskSetup step_task_setup(const StepNodePlan& node, size_t local, const std::string& argv0,
                              const std::string& pyexec) {
    StepTaskSetup out;
    out.env = node.plan.ranks.at(local).env;
    if (node.run_under_python && !pyexec.empty()) {
        // Slurm 22.05 cannot insert into argv: the helper execs `python -u SCRIPT`, SCRIPT from DLAUNCH_SCRIPT.
        out.env["DLAUNCH_SCRIPT"] = argv0;
        out.env["DLAUNCH_PYTHON"] = node.python;
        out.exec_argv0 = pyexec;
    }
    return out;
}

}  // namespace dlaunch
