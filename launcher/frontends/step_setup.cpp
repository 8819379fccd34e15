#include "dlaunch/step_setup.hpp"

#include <charconv>

#include "dlaunch/cli.hpp"
#include "dlaunch/context_builder.hpp"
#include "dlaunch/frontend.hpp"
#include "dlaunch/host.hpp"
#include "dlaunch/job_setup.hpp"
#include "dlaunch/paddle_plan.hpp"
#include "dlaunch/rank_watch.hpp"
#include "dlaunch/slurm/client.hpp"
#include "dlaunch/slurm/task_facts.hpp"

namespace dlaunch {

namespace {

Result<SchedulerInfo> scheduler_info_of(const StepFacts& f) {
    auto tasks_per_node = f.env.find("SLURM_STEP_TASKS_PER_NODE");
    slurm::TaskFacts task{.job_id = f.job_id,
                          .step_id = f.step_id,
                          .rank = f.local_global_ids.empty() ? 0 : f.local_global_ids.front(),
                          .size = f.total_tasks,
                          .local_rank = 0,
                          .node_rank = f.node_id,
                          .nnodes = f.nnodes,
                          .nodelist = slurm::step_nodelist(f.env),
                          .tasks_per_node = tasks_per_node == f.env.end() ? "" : tasks_per_node->second,
                          .local_global_ids = f.local_global_ids};
    return slurm::scheduler_info(task);
}

// requeue: the attempts of the batch job are the restarts (every rank sees Slurm's restart count and the
// job id as the run id, in every attempt, as with dlaunch --requeue). Whether it is a batch job: node 0 asks
// slurmctld (the plugin did, as root); the other nodes take the step's environment's word when it says so
// (srun in the batch script), else they ask too.
Result<std::optional<RequeueJob>> step_requeue(const LaunchRequest& req, const StepFacts& f) {
    if (!req.requeue.enabled) return std::optional<RequeueJob>{};
    auto batch = slurm::batch_job_known_without_asking(f.env, f.node_id) ? Result<bool>(true)
                 : f.batch_job                                           ? *f.batch_job
                                                                         : slurm::slurm_job_is_batch(f.job_id);
    if (!batch) return batch.error();
    if (!*batch)
        return Error{
            "--dist-launch: requeue needs a batch job, and job " + f.job_id + " is not one (salloc or srun alone)",
            "submit it with sbatch (examples/sbatch/requeue-spank.sbatch), or leave requeue out"};
    auto rq = prepare_requeue(req, f.env);
    if (!rq)
        return Error{"--dist-launch=requeue: " + rq.error().what,
                     "submit from a directory every node of the job can write: its dlaunch-logs/ holds the ledger"};
    return std::optional<RequeueJob>(*rq);
}

}  // namespace

Result<StepNodePlan> plan_step_node(const StepFacts& f, const DistLaunchSettings& settings) {
    auto scheduled = scheduler_info_of(f);
    if (!scheduled) return scheduled.error();
    const SchedulerInfo& info = *scheduled;

    LaunchRequest req = dist_launch_request(settings, f.argv0);
    if (req.entry == EntryKind::PythonScript) req.script = f.argv0;
    if (auto it = f.env.find("DLAUNCH_TOPOLOGY_XML"); it != f.env.end() && !it->second.empty())
        req.topology_xml = it->second;
    if (!req.hang_timeout_seconds) {  // hang-timeout=S, else the step's DLAUNCH_HANG_TIMEOUT, as the agent reads it
        auto from_env = hang_timeout_from_env(f.env);
        if (!from_env) return Error{"--dist-launch: " + from_env.error().what, from_env.error().hint};
        req.hang_timeout_seconds = *from_env;
    }

    auto requeue = step_requeue(req, f);
    if (!requeue) return requeue.error();

    ContextFacts facts;
    facts.env = f.env;
    // This node's Slurm name: the step's node list says it (SLURMD_NODENAME in the step's environment is
    // the one srun ran on).
    facts.hostname = f.node_id >= 0 && static_cast<size_t>(f.node_id) < info.nodes.size()
                         ? info.nodes[static_cast<size_t>(f.node_id)]
                         : f.hostname;
    ScheduledJob job{info, nullptr};
    job.whole_node = true;
    facts.job = &job;
    facts.requeue = *requeue ? &**requeue : nullptr;
    facts.python = settings.python;  // else the builder resolves it (PYTHON_EXEC, python3 on PATH)
    auto built = build_job_context(req, std::move(facts));
    if (!built) return built.error();
    const JobContext& ctx = *built;

    auto topo = frontend::load_topology(req, f.env, f.job_id + "." + f.step_id, topology::Scope::Cgroup);
    if (!topo) return topo.error();

    StepNodePlan out;
    auto plan = make_launch_plan(req, ctx, *topo);
    if (!plan) return plan.error();
    out.plan = std::move(*plan);
    out.python = ctx.python;
    out.run_under_python = req.entry == EntryKind::PythonScript;
    out.requeue = *requeue;
    out.watched = rank_watch_wanted(req.hang_timeout_seconds, f.env);
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
        auto binder = topology::Binder::for_this_machine(*topo);
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
                              const TaskHelpers& helpers) {
    StepTaskSetup out;
    out.env = node.plan.ranks.at(local).env;
    if (node.watched) {
        // dlaunch-watch runs the program as its child: `python -u SCRIPT` for a .py program, else argv0 itself.
        out.env["DLAUNCH_SCRIPT"] = argv0;
        out.env["DLAUNCH_PYTHON"] = node.run_under_python ? node.python : "";
        if (node.plan.hang_timeout) {
            char text[32];
            auto end = std::to_chars(text, text + sizeof text, *node.plan.hang_timeout).ptr;
            out.env["DLAUNCH_HANG_TIMEOUT"] = std::string(text, end);
        }
        out.exec_argv0 = helpers.watch;
    } else if (node.run_under_python) {
        // One way on every Slurm release (22.05 has no spank_prepend_task_argv): the helper execs
        // `python -u SCRIPT`, SCRIPT from DLAUNCH_SCRIPT.
        out.env["DLAUNCH_SCRIPT"] = argv0;
        out.env["DLAUNCH_PYTHON"] = node.python;
        out.exec_argv0 = helpers.pyexec;
    }
    return out;
}

std::string watch_helper_next_to(const std::string& pyexec) {
    auto slash = pyexec.rfind('/');
    return (slash == std::string::npos ? std::string(".") : pyexec.substr(0, slash)) + "/dlaunch-watch";
}

Status check_step_helpers(bool python_program, bool watched, const TaskHelpers& helpers,
                          const std::function<bool(const std::string& path)>& executable) {
    const std::string where =
        "point the plugin's pyexec= argument (plugstack.conf) at dlaunch-python (installed in "
        "<prefix>/libexec/dlaunch/, built in <build>/launcher/, with dlaunch-watch beside it)";
    if (python_program && !executable(helpers.pyexec))
        return Error{"--dist-launch: " + helpers.pyexec +
                         " (the helper that starts a .py program under Python) is not an executable",
                     where};
    if (watched && !executable(helpers.watch))
        return Error{"--dist-launch: " + helpers.watch +
                         " (the helper that watches each task for hang-timeout and torchrun's watchdog) is not an "
                         "executable",
                     where};
    return Ok{};
}

}  // namespace dlaunch
