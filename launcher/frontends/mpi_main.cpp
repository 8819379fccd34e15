// dlaunch-mpi: one per rank, under mpirun or srun. A thin front-end: read the job from PMIx (or Slurm's /
// Open MPI's variables), agree on MASTER_ADDR/PORT, plan this node with the same core as the agent,
// bind this process, then exec the script as this rank. After exec nothing of dlaunch remains, unless the
// rank is watched (--hang-timeout, torchrun's watchdog): then it runs as our child (rank_watch.hpp).
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <iostream>

#include "dlaunch/cli.hpp"
#include "dlaunch/context_builder.hpp"
#include "dlaunch/exit_codes.hpp"
#include "dlaunch/frontend.hpp"
#include "dlaunch/host.hpp"
#include "dlaunch/job_setup.hpp"
#include "dlaunch/paddle_plan.hpp"
#include "dlaunch/plan.hpp"
#include "dlaunch/plan_format.hpp"
#include "dlaunch/rank_watch.hpp"
#include "dlaunch/spawner.hpp"
#include "dlaunch/topology/binder.hpp"

namespace {

using namespace dlaunch;
using frontend::fail;

bool launcher_markers(const EnvMap& env) {
    for (const char* name : {"PMIX_NAMESPACE", "PMIX_RANK", "PMI_FD", "PMI_PORT", "SLURM_PROCID",
                             "OMPI_COMM_WORLD_RANK", "PALS_RANKID", "MV2_COMM_WORLD_RANK"})
        if (env.contains(name)) return true;
    return false;
}

int start_rank(const LaunchRequest& req, const EnvMap& env, ScheduledJob& job);

int run(int argc, char** argv) {
    EnvMap env = host::environment();
    auto parsed = parse_command_line(std::vector<std::string>(argv + 1, argv + argc), env, Program::Mpi);
    if (!parsed) return fail(parsed.error(), exit_code::kUsage);
    if (parsed->mode == Command::Mode::Help || parsed->mode == Command::Mode::Version) {
        std::cout << parsed->help_text;
        return exit_code::kSuccess;
    }
    const LaunchRequest& req = parsed->request;
    frontend::setup_logging("dlaunch-mpi", req.verbosity, env);

    auto job = detect_job_for_rank(env, RankSources::EveryLauncher);
    if (!job) return fail(job.error(), launcher_markers(env) ? exit_code::kLaunchFailure : exit_code::kUsage);
    return start_rank(req, env, *job);
}

// This rank, once its job is known: plan, bind, exec (or watch). A failure here also ends the launcher's job
// where the launcher waits for every rank otherwise (Hydra): no rank runs on beside one that stopped.
int start_rank(const LaunchRequest& req, const EnvMap& env, ScheduledJob& scheduled) {
    ScheduledJob* job = &scheduled;
    auto fail = [&](const Error& e, int code) {
        int rc = frontend::fail(e, code);
        if (job->session) job->session->abort(rc);
        return rc;
    };
    const SchedulerInfo& info = job->info;
    const bool first_on_node = info.local_rank == 0;  // says node-wide warnings once per node

    if (auto s = host::check_script(req, env); !s) return fail(s.error(), exit_code::kUsage);
    // The launcher's CPU binding of this task is replaced by the plan's: plan with the cgroup's CPUs.
    auto topo = frontend::load_topology(req, env, info.job_id, topology::Scope::Cgroup);
    if (!topo) return fail(topo.error(), req.topology_xml ? exit_code::kUsage : exit_code::kLaunchFailure);

    ContextFacts facts;
    facts.env = env;
    facts.job = job;
    auto ctx = build_job_context(req, std::move(facts));
    if (!ctx) return fail(ctx.error(), exit_code::kLaunchFailure);

    auto plan = make_launch_plan(req, *ctx, *topo);
    if (!plan) return fail(plan.error(), exit_code::kUsage);
    const RankPlan& mine = plan->ranks.at(static_cast<size_t>(*plan->own_local_rank));
    for (auto& w : plan->warnings) spdlog::log(first_on_node ? spdlog::level::warn : spdlog::level::debug, "{}", w);
    spdlog::debug("rank {} of {} ({}), node {} of {}, local rank {} of {}: master {}:{}, gpu {}, cpus {}, mems {}",
                  mine.rank, plan->world_size, info.source, plan->node_rank, plan->nnodes, mine.local_rank,
                  plan->nproc_per_node, plan->master_addr, plan->master_port,
                  mine.gpu ? std::to_string(mine.gpu->index) : "-", mine.cpuset.empty() ? "-" : mine.cpuset.to_list(),
                  mine.mems.empty() ? "-" : mine.mems.to_list());
    if (req.verbosity > 0 && first_on_node) std::cerr << plan_to_table(*plan);

    if (plan->bind && !mine.cpuset.empty()) {
        if (!topo->process_binding.empty() && !topo->process_binding.contains(mine.cpuset))
            spdlog::warn(
                "bind: rank {}: {} bound this task to cpus {}, narrower than the planned {}; dlaunch rebinds "
                "it (start with mpirun --bind-to none, or srun --cpu-bind=none, to leave binding to dlaunch)",
                mine.rank, info.source == "slurm" ? "srun" : "the launcher", topo->process_binding.to_list(),
                mine.cpuset.to_list());
        auto binder = topology::Binder::for_this_machine(*topo);
        if (!binder) return fail(binder.error(), exit_code::kLaunchFailure);
        char buf[256];
        auto prepared = binder->prepare(mine.cpuset, mine.bind_memory ? mine.mems : topology::CpuSet{});
        if (const char* problem = binder->apply(*prepared, buf, sizeof buf); *problem)
            return fail({"bind: rank " + std::to_string(mine.rank) + ": " + problem, "use --bind none to run unbound"},
                        exit_code::kLaunchFailure);
    }

    if (job->session) job->session->finalize();  // before exec: the application connects again itself
    // A PMI server closes a finalized rank's connection: nothing after exec may write to that descriptor.
    for (const char* name : {"PMI_FD", "PMI_PORT", "PMI_ID"}) ::unsetenv(name);
    host::release_reserved_port();                     // the lock would not survive exec anyway (close-on-exec)
    if (rank_watch_wanted(plan->hang_timeout, env)) {  // --hang-timeout, torchrun's watchdog: stay as its parent
        auto places = watch_places_of_this_process();
        if (!places) return fail(places.error(), exit_code::kLaunchFailure);
        host::stop_cleanly_on_signals("dlaunch-mpi");  // until the executor takes the signals over
        return watch_rank(watched_rank_plan(*plan, mine, env, *places), host::environment(),
                          {.signals_reach_the_rank = false});  // mpirun signals dlaunch-mpi only
    }

    const RenderedEnv inherited(host::environment());  // it has PMIx's PMIX_MCA_gds
    ExecImage image(mine.argv, inherited, mine.env);
    std::cout.flush();
    ::execvpe(image.argv()[0], image.argv(), image.envp());
    int e = errno;
    std::cerr << "dlaunch-mpi: exec: " + mine.argv.front() + ": " + std::strerror(e) +
                     "; check the program name and PATH\n";  // one write: other ranks' output may come between pieces
    return e == ENOENT ? 127 : 126;
}

}  // namespace

int main(int argc, char** argv) {
    return dlaunch::frontend::guarded_main("dlaunch-mpi", run, argc, argv);
}
