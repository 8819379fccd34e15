// dlaunch-watch: what `srun --dist-launch=hang-timeout=S train.py` executes for each task (and any
// --dist-launch step with TORCHELASTIC_ENABLE_FILE_TIMER=1). The plugin has set the rank's variables and
// binding; this runs the program (DLAUNCH_SCRIPT, under DLAUNCH_PYTHON when that is set) as its only child,
// watched as the agent watches its workers (rank_watch.hpp), and exits with the rank's code or 124 for a hang.
#include <iostream>
#include <string>
#include <vector>

#include "dlaunch/cli.hpp"
#include "dlaunch/exit_codes.hpp"
#include "dlaunch/frontend.hpp"
#include "dlaunch/host.hpp"
#include "dlaunch/rank_watch.hpp"

namespace {

using namespace dlaunch;

// The contract's variable, else Slurm's (an env=paddle step has no RANK), else `fallback`.
int rank_fact(const EnvMap& env, const char* contract, const char* slurm, int fallback) {
    return int_var(env, contract).value_or(int_var(env, slurm).value_or(fallback));
}

RankPlan rank_of_this_task(const EnvMap& env, const std::vector<std::string>& argv) {
    RankPlan r;
    r.rank = rank_fact(env, "RANK", "SLURM_PROCID", 0);
    r.local_rank = rank_fact(env, "LOCAL_RANK", "SLURM_LOCALID", 0);
    r.node_rank = rank_fact(env, "GROUP_RANK", "SLURM_NODEID", 0);
    r.world_size = rank_fact(env, "WORLD_SIZE", "SLURM_NTASKS", 1);
    r.local_world_size = rank_fact(env, "LOCAL_WORLD_SIZE", "SLURM_NTASKS_PER_NODE", 1);
    r.argv = argv;
    // --dist-launch=requeue: the plan put the rank's stacks in its log directory; the native ones go beside.
    r.stacks_file = str_var(env, "DLAUNCH_STACKS_FILE");
    r.native_stacks_file = native_stacks_file_for(r.stacks_file);
    return r;
}

LaunchPlan node_of_this_task(const EnvMap& env, const RankPlan& r, std::optional<double> hang_timeout) {
    LaunchPlan plan;
    plan.run_id = str_var(env, "TORCHELASTIC_RUN_ID");
    plan.hostname = host::node_name(env);
    plan.nnodes = rank_fact(env, "GROUP_WORLD_SIZE", "SLURM_NNODES", 1);
    plan.node_rank = r.node_rank;
    plan.nproc_per_node = r.local_world_size;
    plan.world_size = r.world_size;
    plan.master_addr = str_var(env, "MASTER_ADDR");
    plan.master_port = int_var(env, "MASTER_PORT").value_or(0);
    plan.hang_timeout = hang_timeout;
    return plan;
}

int run(int argc, char** argv) {
    EnvMap env = host::environment();
    frontend::setup_logging("dlaunch", -1, env);  // warnings and errors: the hang report, not the routine
    const std::string script = str_var(env, "DLAUNCH_SCRIPT"), python = str_var(env, "DLAUNCH_PYTHON");
    if (script.empty())
        return frontend::fail({"dlaunch-watch: DLAUNCH_SCRIPT is not set",
                               "this helper is run by the dlaunch SPANK plugin (srun --dist-launch=hang-timeout=S), "
                               "not by hand"},
                              exit_code::kUsage);
    auto hang_timeout = hang_timeout_from_env(env);
    if (!hang_timeout) return frontend::fail(hang_timeout.error(), exit_code::kUsage);
    for (auto name : {"DLAUNCH_SCRIPT", "DLAUNCH_PYTHON", "DLAUNCH_HANG_TIMEOUT"}) env.erase(name);  // ours only
    std::vector<std::string> command;
    if (!python.empty()) command = {python, "-u"};
    command.push_back(script);
    command.insert(command.end(), argv + 1, argv + argc);
    const RankPlan rank = rank_of_this_task(env, command);
    auto places = watch_places_of_this_process();
    if (!places) return frontend::fail(places.error(), exit_code::kLaunchFailure);
    host::stop_cleanly_on_signals("dlaunch-watch");  // until the executor takes the signals over
    const LaunchPlan plan = watched_rank_plan(node_of_this_task(env, rank, *hang_timeout), rank, env, *places);
    // Slurm signals every process of the step (proctrack/cgroup): the rank gets each signal from it.
    return watch_rank(plan, env, {.signals_reach_the_rank = true});
}

}  // namespace

int main(int argc, char** argv) {
    return dlaunch::frontend::guarded_main("dlaunch-watch", run, argc, argv);
}
