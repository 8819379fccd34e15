// spank_dlaunch.so: `srun --dist-launch[=OPTS] train.py` makes every Slurm task a ready torch rank.
// SPANK glue only: options are parsed by dlaunch::parse_dist_launch_opts, the node's plan comes from
// dlaunch::plan_step_node (the same make_launch_plan as the agent and dlaunch-mpi); here we gather SPANK items
// and apply the answer (spank_setenv, binding, argv[0]).
//
// Callbacks and where they run:
//   slurm_spank_init       everywhere: register --dist-launch, read plugstack.conf arguments
//   option callback        srun/sbatch/salloc (validates before anything starts) and slurmstepd
//   slurm_spank_local_user_init  srun: the helpers the tasks will exec are there (check_step_helpers)
//   slurm_spank_init_post_opt    slurmstepd (as root): with requeue=, node 0 asks slurmctld whether it is a
//                                batch job (the other nodes, when the step's environment says so, do not)
//   slurm_spank_user_init  slurmstepd, once per node per step, before tasks fork: plan the node
//   slurm_spank_task_init  each task, just before exec: environment, binding, python for .py
//   slurm_spank_task_exit  slurmstepd (as root), each task's end: with requeue=, the attempt ledger and
//                          the requeue (requeue.hpp decides; docs/requeue.md)
//
// Caveats:
// - No C++ exception may cross these extern "C" functions: each body is wrapped.
// - A .py program's argv[0] is replaced by the dlaunch-python helper, which execs `python -u SCRIPT ARGS`
//   after slurmstepd's TaskProlog, TMPDIR and limits: the same on every Slurm release (22.05 cannot insert
//   into a task's argv; spank_prepend_task_argv came in 23.11).
// - Batch, extern and interactive steps are left alone, and so is every step without --dist-launch.
// - No RPC to slurmctld from user_init: there, with privileges dropped, 24.11's slurmstepd aborted the step
//   at the first one ("fatal: auth_g_create: pthread_rwlock_rdlock(): Resource deadlock avoided").
#include <dlfcn.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <optional>
#include <string>

#include "dlaunch/attempt_end.hpp"
#include "dlaunch/attempt_io.hpp"
#include "dlaunch/clock.hpp"
#include "dlaunch/dist_launch.hpp"
#include "dlaunch/exit_codes.hpp"
#include "dlaunch/plan_format.hpp"
#include "dlaunch/rank_watch.hpp"
#include "dlaunch/slurm/client.hpp"
#include "dlaunch/slurm/task_facts.hpp"
#include "dlaunch/step_setup.hpp"

// spank.h declares the callbacks without C linkage for C++.
extern "C" {
#include <slurm/slurm.h>
#include <slurm/spank.h>
}

#ifndef DLAUNCH_PYEXEC_DEFAULT
#define DLAUNCH_PYEXEC_DEFAULT "/usr/libexec/dlaunch/dlaunch-python"
#endif

extern "C" {
extern const char plugin_name[];
extern const char plugin_type[];
extern const unsigned int plugin_version;
const char plugin_name[] = "dlaunch";
const char plugin_type[] = "spank";
const unsigned int plugin_version = SLURM_VERSION_NUMBER;
}

namespace {

struct State {
    dlaunch::DistLaunchSettings site;
    std::optional<dlaunch::DistLaunchSettings> user;  // set when --dist-launch was given
    std::optional<dlaunch::StepNodePlan> node;        // set in slurmstepd by user_init
    // The step, once user_init has read it: a node that refuses it ends it on the others.
    std::string job_id, step_id;
    bool other_nodes = false;  // the step has tasks elsewhere, which would wait for this node's
    int refused = 0;           // user_init refused the step here (said why): every task exits with this code
    std::optional<dlaunch::Result<bool>> batch_job;  // with requeue: asked by init_post_opt, for user_init
};

State& state() {
    static State s;
    return s;
}

// A refusal on a node must reach srun as the tasks' exit code: failing user_init or task_init makes srun
// report "task launch failed" and still exit 0 (Slurm 22.05). user_init has said why (once per node, on
// the step's stderr); each task then ends with `code` before the program is executed.
int refuse_step(int code) {
    state().refused = code;
    return 0;
}

[[noreturn]] void end_task(int code) {
    std::fflush(stdout);
    std::fflush(stderr);
    ::_exit(code);
}

// This node's tasks end before their program runs; the step's tasks on other nodes would wait for them in
// their first collective: end the step everywhere (this task keeps its exit code).
void end_step_on_other_nodes(const char* why) {
    const State& st = state();
    if (!st.other_nodes || st.job_id.empty()) return;
    sigset_t term;
    sigemptyset(&term);
    sigaddset(&term, SIGTERM);
    ::sigprocmask(SIG_BLOCK, &term, nullptr);
    std::fprintf(stderr, "dlaunch: ending step %s.%s on every node: %s\n", st.job_id.c_str(), st.step_id.c_str(), why);
    dlaunch::slurm::let_output_reach_srun();  // why it refused, the line above
    if (auto s = dlaunch::slurm::signal_slurm_step(st.job_id, st.step_id, SIGTERM); !s)
        std::fprintf(stderr, "%s\n", s.error().message().c_str());
}

// A task of a node that refused the step (its first task ends the step on the others).
[[noreturn]] void end_refused_task(int local) {
    if (local == 0) end_step_on_other_nodes("this node refused it (above)");
    end_task(state().refused);
}

// A task that could not be set up (said why on its stderr).
[[noreturn]] void fail_task(int code) {
    end_step_on_other_nodes("this task could not be set up (above)");
    end_task(code);
}

int dist_launch_option(int, const char* optarg, int) {
    try {
        // A bare `#SBATCH --dist-launch` reaches the job's steps as the text "(null)".
        std::string opts = optarg && std::strcmp(optarg, "(null)") != 0 ? optarg : "";
        auto settings = dlaunch::parse_dist_launch_opts(opts, state().site);
        if (!settings) {
            slurm_error("%s", settings.error().message().c_str());
            return -1;
        }
        if (settings->requeue && spank_context() == S_CTX_LOCAL) {
            auto var = [](const char* name) {
                const char* v = std::getenv(name);
                return v ? std::optional<std::string>(v) : std::nullopt;
            };
            if (auto st = dlaunch::requeue_allowed(var("SLURM_JOB_ID"), var("ENVIRONMENT")); !st) {
                slurm_error("%s", st.error().message().c_str());
                return -1;
            }
        }
        state().user = *settings;
        return 0;
    } catch (const std::exception& e) {
        slurm_error("dlaunch: internal error reading --dist-launch: %s", e.what());
        return -1;
    }
}

struct spank_option dist_launch_spec = {
    const_cast<char*>("dist-launch"),
    const_cast<char*>("[OPTS]"),
    const_cast<char*>(
        "Start every task as a rank of a distributed PyTorch/NCCL job (rank, sizes, master address "
        "and port, closest GPU/NIC/cores). OPTS, comma-separated: bind=closest|numa|socket|none, devices=0:1, "
        "port=N|LOW-HIGH, python=/path, env=torch, verbose[=N], requeue, max-restarts=N, "
        "checkpoint-exit=N (sbatch jobs: failures and checkpoints requeue the job; docs/requeue.md), "
        "hang-timeout=S (a rank with no progress for S seconds is hung: stacks, exit 124; docs/hangs.md). "
        "A .py program runs under Python."),
    2,
    0,
    dist_launch_option};

bool special_step(uint32_t step) {
    return step == SLURM_BATCH_SCRIPT || step == SLURM_EXTERN_CONT || step == SLURM_INTERACTIVE_STEP;
}

template <class T>
bool item(spank_t sp, spank_item_t what, T* out) {
    return spank_get_item(sp, what, out) == ESPANK_SUCCESS;
}

bool executable(const std::string& path) {
    return ::access(path.c_str(), X_OK) == 0;
}

// The step's environment (S_JOB_ENV) as a map.
dlaunch::EnvMap env_of(char** env) {
    dlaunch::EnvMap out;
    for (char** e = env; e && *e; ++e) {
        std::string kv = *e;
        auto eq = kv.find('=');
        if (eq != std::string::npos) out.emplace(kv.substr(0, eq), kv.substr(eq + 1));
    }
    return out;
}

// dlaunch-python beside this plugin's own file (a build tree, or a site that keeps both in one directory).
std::optional<std::string> helper_beside_plugin() {
    Dl_info self{};
    if (::dladdr(reinterpret_cast<void*>(&helper_beside_plugin), &self) == 0 || !self.dli_fname) return std::nullopt;
    const std::string file = self.dli_fname;
    const auto slash = file.rfind('/');
    if (slash == std::string::npos) return std::nullopt;
    std::string helper = file.substr(0, slash) + "/dlaunch-python";
    return executable(helper) ? std::optional(helper) : std::nullopt;
}

// The dlaunch-python helper: the site's pyexec= argument, else the one beside the plugin, else where it
// was installed.
std::string pyexec_path() {
    if (!state().user->pyexec.empty()) return state().user->pyexec;
    return helper_beside_plugin().value_or(DLAUNCH_PYEXEC_DEFAULT);
}

dlaunch::TaskHelpers task_helpers() {
    const std::string pyexec = pyexec_path();
    return dlaunch::TaskHelpers{pyexec, dlaunch::watch_helper_next_to(pyexec)};
}

// srun, once the options are read: a helper the tasks will need and that is missing here fails srun with
// one message, before any node starts the step. (Each node checks its own again in user_init.)
int local_user_init(spank_t sp) {
    if (!state().user || spank_context() != S_CTX_LOCAL) return 0;
    int argc = 0;
    char** argv = nullptr;
    char** env = nullptr;
    if (spank_get_item(sp, S_JOB_ARGV, &argc, &argv) != ESPANK_SUCCESS || argc < 1) return 0;
    const dlaunch::EnvMap vars =
        spank_get_item(sp, S_JOB_ENV, &env) == ESPANK_SUCCESS ? env_of(env) : dlaunch::EnvMap{};
    const bool watched = dlaunch::rank_watch_wanted(state().user->hang_timeout, vars);
    auto ok = dlaunch::check_step_helpers(dlaunch::is_python_script(argv[0]), watched, task_helpers(), executable);
    if (ok) return 0;
    slurm_error("%s", ok.error().message().c_str());
    return -1;
}

// slurmstepd, as root, before user_init: with requeue, whether the job is a batch job (the one RPC the
// step's plan may need; see the caveats for why not in user_init). Node 0 asks slurmctld; the other nodes
// take the step's environment's word when it says so (srun in a batch script, the usual case), so a step
// costs slurmctld one question, not one per node, and a step the environment misleads (salloc started
// from a batch script) still ends at node 0's refusal. Unanswered, user_init asks and says why.
int init_post_opt(spank_t sp) {
    if (!state().user || !state().user->requeue || spank_remote(sp) != 1) return 0;
    uint32_t job = 0, step = 0, nodeid = 0;
    if (!item(sp, S_JOB_ID, &job) || !item(sp, S_JOB_STEPID, &step) || special_step(step)) return 0;
    char value[16] = "";
    if (item(sp, S_JOB_NODEID, &nodeid) && spank_getenv(sp, "ENVIRONMENT", value, sizeof value) == ESPANK_SUCCESS &&
        dlaunch::slurm::batch_job_known_without_asking({{"ENVIRONMENT", value}}, static_cast<int>(nodeid))) {
        state().batch_job = dlaunch::Result<bool>(true);
        return 0;
    }
    state().batch_job = dlaunch::slurm::slurm_job_is_batch(std::to_string(job));
    return 0;
}

int user_init(spank_t sp) {
    if (!state().user || spank_remote(sp) != 1) return 0;
    uint32_t job = 0, step = 0, nnodes = 0, nodeid = 0, local = 0, total = 0;
    if (!item(sp, S_JOB_ID, &job) || !item(sp, S_JOB_STEPID, &step)) {
        slurm_error("dlaunch: spank: cannot read the job and step ids");
        return refuse_step(dlaunch::exit_code::kLaunchFailure);
    }
    if (special_step(step)) return 0;
    state().job_id = std::to_string(job);
    state().step_id = std::to_string(step);
    int argc = 0;
    char** argv = nullptr;
    char** env = nullptr;
    if (!item(sp, S_JOB_NNODES, &nnodes) || !item(sp, S_JOB_NODEID, &nodeid) ||
        !item(sp, S_JOB_LOCAL_TASK_COUNT, &local) || !item(sp, S_JOB_TOTAL_TASK_COUNT, &total) ||
        spank_get_item(sp, S_JOB_ARGV, &argc, &argv) != ESPANK_SUCCESS ||
        spank_get_item(sp, S_JOB_ENV, &env) != ESPANK_SUCCESS || argc < 1) {
        slurm_error("dlaunch: spank: cannot read the step's task counts, node id, argv or environment");
        return refuse_step(dlaunch::exit_code::kLaunchFailure);
    }
    state().other_nodes = nnodes > 1;
    dlaunch::StepFacts facts;
    facts.job_id = std::to_string(job);
    facts.step_id = std::to_string(step);
    facts.nnodes = static_cast<int>(nnodes);
    facts.node_id = static_cast<int>(nodeid);
    facts.total_tasks = static_cast<int>(total);
    for (uint32_t i = 0; i < local; ++i) {
        uint32_t global = 0;
        if (spank_get_item(sp, S_JOB_LOCAL_TO_GLOBAL_ID, i, &global) != ESPANK_SUCCESS) {
            slurm_error("dlaunch: spank: cannot map local task %u to its global id", i);
            return refuse_step(dlaunch::exit_code::kLaunchFailure);
        }
        facts.local_global_ids.push_back(static_cast<int>(global));
    }
    facts.env = env_of(env);
    facts.argv0 = argv[0];
    facts.batch_job = state().batch_job;
    facts.hostname = facts.env.contains("SLURMD_NODENAME") ? facts.env.at("SLURMD_NODENAME") : "";
    char host[256] = {};
    if (facts.hostname.empty() && gethostname(host, sizeof host - 1) == 0) facts.hostname = host;
    // libslurm (node addresses) reads the same slurm.conf as the user's srun.
    if (!std::getenv("SLURM_CONF") && facts.env.contains("SLURM_CONF"))
        setenv("SLURM_CONF", facts.env.at("SLURM_CONF").c_str(), 0);

    auto node = dlaunch::plan_step_node(facts, *state().user);
    if (!node) {
        slurm_error("%s", node.error().message().c_str());
        return refuse_step(dlaunch::exit_code::kUsage);
    }
    if (auto ok = dlaunch::check_step_helpers(node->run_under_python, node->watched, task_helpers(), executable); !ok) {
        slurm_error("%s", ok.error().message().c_str());
        return refuse_step(dlaunch::exit_code::kLaunchFailure);
    }
    if (node->requeue) {
        // Made now, as the job's user (privileges are dropped here): task_exit appends to it as root.
        if (auto made = dlaunch::create_ledger(*node->requeue); !made) {
            slurm_error("%s", made.error().message().c_str());
            return refuse_step(dlaunch::exit_code::kUsage);
        }
    }
    state().node = std::move(*node);
    return 0;
}

int task_init(spank_t sp) {
    if (!state().user || (!state().node && !state().refused)) return 0;
    int local = 0;
    if (spank_get_item(sp, S_TASK_ID, &local) != ESPANK_SUCCESS) local = -1;
    if (state().refused) end_refused_task(local);
    if (local < 0) {
        std::fprintf(stderr, "dlaunch: spank: cannot read the task id\n");
        fail_task(dlaunch::exit_code::kLaunchFailure);
    }
    const dlaunch::StepNodePlan& node = *state().node;
    if (local < 0 || static_cast<size_t>(local) >= node.plan.ranks.size()) {
        std::fprintf(stderr, "dlaunch: spank: task %d is not in this node's plan\n", local);
        fail_task(dlaunch::exit_code::kLaunchFailure);
    }
    const dlaunch::RankPlan& mine = node.plan.ranks[static_cast<size_t>(local)];
    int argc = 0;
    char** argv = nullptr;
    if (spank_get_item(sp, S_JOB_ARGV, &argc, &argv) != ESPANK_SUCCESS || argc < 1) {
        std::fprintf(stderr, "dlaunch: spank: cannot read the task's command\n");
        fail_task(dlaunch::exit_code::kLaunchFailure);
    }
    const dlaunch::StepTaskSetup setup =
        dlaunch::step_task_setup(node, static_cast<size_t>(local), argv[0], task_helpers());
    for (auto& [name, value] : setup.env)
        if (spank_setenv(sp, name.c_str(), value.c_str(), 1) != ESPANK_SUCCESS) {
            std::fprintf(stderr, "dlaunch: spank: rank %d: cannot set %s\n", mine.rank, name.c_str());
            fail_task(dlaunch::exit_code::kLaunchFailure);
        }
    if (node.binder && node.bindings[static_cast<size_t>(local)]) {
        char buf[256];
        const char* problem = node.binder->apply(*node.bindings[static_cast<size_t>(local)], buf, sizeof buf);
        if (*problem) {
            std::fprintf(stderr, "dlaunch: bind: rank %d: %s; use --dist-launch=bind=none to run unbound\n", mine.rank,
                         problem);
            fail_task(dlaunch::exit_code::kLaunchFailure);
        }
    }
    // slurmstepd execs argv[0]; the script stays in DLAUNCH_SCRIPT for the helper.
    if (!setup.exec_argv0.empty()) argv[0] = strdup(setup.exec_argv0.c_str());
    if (!mine.log_header.empty()) {
        // requeue: each attempt's output starts with a header, on stdout (slurmstepd relays stdout and
        // stderr through pipes of their own even when they end in one file: both would double it).
        const std::string header = mine.log_header + " " + dlaunch::format_utc(dlaunch::now_epoch()) + "\n";
        std::fputs(header.c_str(), stdout);
        std::fflush(stdout);
    }
    if (node.plan.ranks.size() > 0 && state().user->verbosity > 0) {
        if (mine.rank == 0) std::fprintf(stderr, "%s", dlaunch::plan_to_table(node.plan).c_str());
        std::fprintf(stderr, "dlaunch: rank %d (node %d, local %d): master %s:%d, gpu %s, cpus %s, mems %s\n",
                     mine.rank, node.plan.node_rank, mine.local_rank, node.plan.master_addr.c_str(),
                     node.plan.master_port, mine.gpu ? std::to_string(mine.gpu->index).c_str() : "-",
                     mine.cpuset.empty() ? "-" : mine.cpuset.to_list().c_str(),
                     mine.mems.empty() ? "-" : mine.mems.to_list().c_str());
    }
    return 0;
}

// The plugin's voice: the node's slurmd log and, through slurm_error, the step's stderr.
class SlurmReport : public dlaunch::AttemptReport {
public:
    void log(const dlaunch::LogLine& line) override {
        if (line.level == dlaunch::LogLine::Level::Info)
            slurm_verbose("dlaunch: %s", line.text.c_str());
        else
            slurm_error("dlaunch: %s", line.text.c_str());
    }
    void node_summary(const dlaunch::RunOutcome&) override {}
    void final_summary(const dlaunch::RunOutcome& all, const std::string& json_path, bool) override {
        slurm_error("dlaunch: requeue: every attempt of job %s: %d failed; summary in %s", all.run_id.c_str(),
                    all.restarts + 1, json_path.empty() ? "no file (it could not be written)" : json_path.c_str());
    }
};

dlaunch::AttemptFacts task_facts(const dlaunch::StepNodePlan& node, const dlaunch::RankPlan& rank,
                                 const dlaunch::ExitStatus& exit, dlaunch::TaskEnd end, dlaunch::JobEnding ending) {
    const dlaunch::RequeueJob& rq = *node.requeue;
    dlaunch::AttemptFacts f;
    f.attempt = rq.attempt;
    f.slurm_restart = rq.slurm_restart;
    f.job_id = rq.job_id;
    f.run_id = rq.job_id;
    f.host = node.plan.hostname;
    f.node_rank = node.plan.node_rank;
    f.nnodes = node.plan.nnodes;
    f.world_size = node.plan.world_size;
    f.first = rank.rank == 0;
    f.time = dlaunch::now_epoch();
    f.end = dlaunch::node_end_of(end);
    f.exit_code = exit.as_exit_code();
    f.checkpoint_detail = "rank 0 exited with checkpoint-exit " + std::to_string(exit.code);
    if (end == dlaunch::TaskEnd::Failed) {
        dlaunch::FailureRecord failure;
        failure.rank = rank.rank;
        failure.node_rank = node.plan.node_rank;
        failure.host = node.plan.hostname;
        failure.failure = {rq.attempt, {rank.local_rank, 0, exit, f.time}, true, false};
        f.failures = {failure};
    }
    f.ledger = dlaunch::read_ledger(rq);
    f.job_ending = [ending] { return ending; };
    return f;
}

// requeue: one task of this node ended (slurmstepd, as root). The facts go to the attempt-end engine.
int task_exit(spank_t sp) {
    if (!state().user || !state().node || !state().node->requeue || spank_remote(sp) != 1) return 0;
    const dlaunch::StepNodePlan& node = *state().node;
    const dlaunch::RequeueJob& rq = *node.requeue;
    int status = 0, local = -1;
    if (spank_get_item(sp, S_TASK_EXIT_STATUS, &status) != ESPANK_SUCCESS ||
        spank_get_item(sp, S_TASK_ID, &local) != ESPANK_SUCCESS || local < 0 ||
        static_cast<size_t>(local) >= node.plan.ranks.size()) {
        slurm_error("dlaunch: requeue: cannot read a task's id or exit status; the job is not requeued for it");
        return 0;
    }
    const dlaunch::RankPlan& rank = node.plan.ranks[static_cast<size_t>(local)];
    const dlaunch::ExitStatus exit = dlaunch::ExitStatus::from_wait_status(status);
    if (!dlaunch::task_end_needs_job_state(exit, rank.rank)) return 0;
    const dlaunch::JobEnding ending = dlaunch::slurm::slurm_job_ending(rq.job_id);
    const auto end = dlaunch::classify_task_end(exit, ending, state().user->checkpoint_exit);
    const dlaunch::AttemptFacts facts = task_facts(node, rank, exit, end, ending);
    dlaunch::AttemptPolicy policy{true, node.plan.max_restarts, dlaunch::Reporter::Task, false};
    dlaunch::AttemptPlace place;
    place.job = rq;
    place.records_dir = rq.job_dir;
    uint32_t uid = 0, gid = 0;
    if (item(sp, S_JOB_UID, &uid) && item(sp, S_JOB_GID, &gid)) place.owner = dlaunch::Owner{uid, gid};
    SlurmReport report;
    dlaunch::carry_out(dlaunch::decide_attempt_end(facts, policy), facts, place, report);
    return 0;
}

}  // namespace

extern "C" {

int slurm_spank_init(spank_t sp, int ac, char** av) {
    try {
        std::vector<std::string> args(av, av + ac);
        auto site = dlaunch::parse_site_arguments(args);
        if (!site) {
            slurm_error("%s", site.error().message().c_str());
            return -1;
        }
        state().site = *site;
        return spank_option_register(sp, &dist_launch_spec) == ESPANK_SUCCESS ? 0 : -1;
    } catch (const std::exception& e) {
        slurm_error("dlaunch: internal error in slurm_spank_init: %s", e.what());
        return -1;
    }
}

int slurm_spank_local_user_init(spank_t sp, int, char**) {
    try {
        return local_user_init(sp);
    } catch (const std::exception& e) {
        slurm_error("dlaunch: internal error checking the helpers: %s", e.what());
        return -1;
    }
}

int slurm_spank_init_post_opt(spank_t sp, int, char**) {
    try {
        return init_post_opt(sp);
    } catch (const std::exception& e) {
        slurm_error("dlaunch: internal error asking whether this is a batch job: %s", e.what());
        return 0;
    }
}

int slurm_spank_user_init(spank_t sp, int, char**) {
    try {
        return user_init(sp);
    } catch (const std::exception& e) {
        slurm_error("dlaunch: internal error planning the step: %s", e.what());
        return refuse_step(dlaunch::exit_code::kInternal);
    }
}

int slurm_spank_task_init(spank_t sp, int, char**) {
    try {
        return task_init(sp);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "dlaunch: internal error setting up the task: %s\n", e.what());
        fail_task(dlaunch::exit_code::kInternal);
    }
}

int slurm_spank_task_exit(spank_t sp, int, char**) {
    try {
        return task_exit(sp);
    } catch (const std::exception& e) {
        slurm_error("dlaunch: internal error after a task's end: %s", e.what());
        return 0;
    }
}

}  // extern "C"
