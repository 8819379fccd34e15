// dlaunch: the torchrun-compatible agent. A thin front-end: gather facts (environment, topology,
// ports, directories), ask the core for a plan, hand it to the executor, report the outcome.
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <functional>
#include <iostream>
#include <numeric>
#include <thread>

#include "dlaunch/attempt_end.hpp"
#include "dlaunch/attempt_io.hpp"
#include "dlaunch/clean_command.hpp"
#include "dlaunch/cli.hpp"
#include "dlaunch/clock.hpp"
#include "dlaunch/context_builder.hpp"
#include "dlaunch/doctor_command.hpp"
#include "dlaunch/etcd_meeting.hpp"
#include "dlaunch/etcd_store.hpp"
#include "dlaunch/executor.hpp"
#include "dlaunch/exit_codes.hpp"
#include "dlaunch/failure_policy.hpp"
#include "dlaunch/frontend.hpp"
#include "dlaunch/group_run.hpp"
#include "dlaunch/guardian.hpp"
#include "dlaunch/health.hpp"
#include "dlaunch/host.hpp"
#include "dlaunch/job_setup.hpp"
#include "dlaunch/lent_context.hpp"
#include "dlaunch/nettle_api.hpp"
#include "dlaunch/node_rendezvous.hpp"
#include "dlaunch/paddle_plan.hpp"
#include "dlaunch/plan.hpp"
#include "dlaunch/plan_format.hpp"
#include "dlaunch/plan_svg.hpp"
#include "dlaunch/rdzv_auth.hpp"
#include "dlaunch/rendezvous_store.hpp"
#include "dlaunch/report_command.hpp"
#include "dlaunch/slurm/client.hpp"
#include "dlaunch/stacks_command.hpp"
#include "dlaunch/topology/describe.hpp"
#include "dlaunch/topology/topology.hpp"
#include "dlaunch/torch_install.hpp"

namespace {

using namespace dlaunch;

// Paddle's endpoints.log, appended with a header per start (Paddle's old launcher rewrote it).
void write_endpoints_log(const LaunchPlan& plan, const LaunchRequest& req) {
    std::ofstream out(plan.endpoints_log, std::ios::app);
    out << "==== dlaunch-paddle: job " << req.paddle.job_id << ", node " << plan.node_rank << " (" << plan.hostname
        << "), " << format_utc(static_cast<double>(std::time(nullptr))) << " ====\n";
    for (auto& [name, list] : plan.endpoints) {
        out << name << ":\n";
        for (auto& ep : list) out << ep << "\n";
    }
    if (!out) spdlog::warn("logs: cannot write {}", plan.endpoints_log);
}

// The line paddle.distributed.launch users look for, before dlaunch's own summary.
std::string paddle_abort_line(const RunOutcome& outcome, const LaunchPlan& plan) {
    int attempt = -1;
    for (auto& f : outcome.failures)
        if (f.failure.root_cause) attempt = f.failure.attempt;
    std::string ranks;
    int total = plan.world_size;
    for (auto& f : outcome.failures)
        if (f.failure.attempt == attempt && !f.failure.stopped_by_us)
            ranks += (ranks.empty() ? "" : ", ") + std::to_string(f.rank);
    int trainers = 0;
    for (auto& [name, list] : plan.endpoints)
        if (name == "PADDLE_TRAINER_ENDPOINTS") trainers = static_cast<int>(list.size());
    if (trainers > 0) total = trainers;
    return "ABORT!!! Out of all " + std::to_string(total) + " trainers, the trainer process with rank=[" + ranks +
           "] was aborted. Please check its log.\n";
}

// The agent's console: spdlog for events, stderr for summaries.
class ConsoleReport : public AttemptReport {
public:
    explicit ConsoleReport(std::string job_label) : job_label_(std::move(job_label)) {}
    void log(const LogLine& line) override {
        switch (line.level) {
            case LogLine::Level::Info: spdlog::info("{}", line.text); break;
            case LogLine::Level::Warn: spdlog::warn("{}", line.text); break;
            case LogLine::Level::Error: spdlog::error("{}", line.text); break;
        }
    }
    void node_summary(const RunOutcome& outcome) override { std::cerr << render_failure_summary(outcome); }
    void final_summary(const RunOutcome& all, const std::string& json_path, bool every_attempt) override {
        if (every_attempt) std::cerr << "dlaunch: every attempt of job " << job_label_ << ":\n";
        std::cerr << render_failure_summary(all)
                  << (json_path.empty() ? std::string("failure summary (JSON): not written (said above)")
                                        : "failure summary (JSON): " + json_path)
                  << "\n";
    }

private:
    std::string job_label_;
};

// How this agent's run ended besides its outcome: alone, or as one of a group.
struct RunEndFacts {
    bool group = false;
    bool summed_up_elsewhere = false;  // a group member whose end the leader sums up
    std::optional<int> attempt;        // a group's last attempt, numbered over the job (so are its failures)
    int nodes = 0;                     // a group's last attempt: its nodes (0: the plan's)
    int world_size = 0;                // and their workers
};

// The run's exit code once its logs are judged: a run whose workers succeeded but whose logs were cut ends
// with exit_code::kLogFailure (said, and kept in the outcome for run.json) unless --ignore-log-errors.
int end_code_after_logs(int code, RunOutcome& outcome, const LaunchRequest& req) {
    const int after = exit_code_after_logs(code, outcome, req.ignore_log_errors);
    if (after == exit_code::kLogFailure && code == exit_code::kSuccess) {
        spdlog::error(
            "logs: the workers succeeded, but {} log file(s) were cut (said above); exit code {} "
            "(--ignore-log-errors keeps 0)",
            outcome.log_errors.size(), after);
        outcome.exit_code = after;  // run.json says how the run ends
    }
    return after;
}

// The end of the run: the facts go to the attempt-end engine, its decision is carried out here.
int finish_run(RunOutcome outcome, const LaunchPlan& plan, const std::optional<RequeueJob>& requeue,
               const std::optional<ScheduledJob>& job, const LaunchRequest& req, const JobContext& ctx,
               const RunEndFacts& run = {}) {
    AttemptFacts facts;
    facts.attempt = run.attempt.value_or(requeue ? requeue->attempt : 0);
    facts.slurm_restart = requeue ? requeue->slurm_restart : 0;
    facts.job_id = requeue ? requeue->job_id : "";
    facts.run_id = plan.run_id;
    facts.host = plan.hostname;
    facts.node_rank = plan.node_rank;
    facts.nnodes = run.nodes > 0 ? run.nodes : plan.nnodes;
    facts.world_size = run.nodes > 0 ? run.world_size : plan.world_size;
    facts.first = plan.node_rank == 0;
    facts.time = now_epoch();
    facts.end = run.group && requeue ? group_node_end_of(outcome) : node_end_of(outcome);
    facts.exit_code = outcome.exit_code;
    if (requeue && !run.attempt)
        for (auto& f : outcome.failures) f.failure.attempt += requeue->attempt;
    facts.failures = outcome.failures;
    facts.not_ready = outcome.not_ready;
    facts.checkpoint_detail = signal_name(req.requeue.warning_signal) + " (the job's warning signal)";
    if (requeue) facts.ledger = read_ledger(*requeue);
    facts.job_ending = [&] { return slurm::slurm_job_ending(requeue ? requeue->job_id : ""); };
    facts.outcome = outcome;

    AttemptPolicy policy;
    policy.requeue = requeue.has_value();
    policy.max_restarts = req.max_restarts;
    policy.reporter = Reporter::Agent;
    // The other nodes' workers would wait for this node's in their next collective: end the step.
    // (A group has stopped every node already.)
    policy.multi_node_step = !run.group && job && plan.nnodes > 1 && !job->info.step_id.empty() &&
                             (requeue || ctx.environ.contains("SLURM_JOB_ID"));
    policy.group_member = run.summed_up_elsewhere;
    AttemptDecision decision = decide_attempt_end(facts, policy);

    AttemptPlace place;
    place.job = requeue;
    place.records_dir = requeue ? requeue->job_dir : ctx.run_dir;
    if (job) place.step_job_id = job->info.job_id, place.step_id = job->info.step_id;
    if (decision.final_summary && !requeue && req.paddle.layout) std::cerr << paddle_abort_line(outcome, plan);
    ConsoleReport report(requeue ? requeue->job_id : plan.run_id);
    host::release_reserved_port();
    const int code = end_code_after_logs(carry_out(decision, facts, place, report), outcome, req);
    // Under --requeue the job's attempts.jsonl is the record; a run directory removed at the end has none.
    if (!requeue && keeps_run_dir(req, false, outcome))
        if (auto written = write_run_json(ctx.run_dir, outcome); !written)
            spdlog::warn("{}", written.error().describe());
    return code;
}

// A launch error, said, and recorded in the agent's own TORCHELASTIC_ERROR_FILE for a scheduler that wraps
// it (not a usage error: torchrun's argparse records none either).
int fail(const Error& e, int code) {
    if (code != exit_code::kUsage) record_launcher_error(host::environment(), e.message());
    return frontend::fail(e, code);
}

// How the run ended, for a scheduler that wraps the agent (its TORCHELASTIC_ERROR_FILE), as torchrun says it:
// the root cause's own error file, or the signal that stopped the agent.
void record_run_end_for_scheduler(const EnvMap& env, const RunOutcome& outcome) {
    if (outcome.failed)
        record_worker_failure_for_launcher(env, outcome);
    else if (outcome.stop_signal != 0)
        record_launcher_error(env, "SignalException: Process " + std::to_string(::getpid()) +
                                       " got signal: " + std::to_string(outcome.stop_signal));
}

// Everything one agent run gathers before its workers start.
struct Agent {
    std::vector<std::string> argv;
    EnvMap env;
    Command cmd;
    std::optional<RequeueJob> requeue;
    std::optional<ScheduledJob> job;
    std::optional<topology::Topology> topo;
    JobContext ctx;
    // Where the run's membership is kept besides the group's channel (--rdzv-backend etcd: this node's part in
    // it); null: nowhere.
    std::unique_ptr<GroupStore> store;
    std::shared_ptr<Fd> group_listener;  // node 0 by hand: the rendezvous's socket, for the leader (Met)
    // The group decided that the nodes meet again in the store: the attempt it ended, and the restarts used.
    struct MeetAgain {
        int attempt = 0;
        int restarts_used = 0;
        std::vector<int> left_behind;  // node ranks of `attempt` lost (the leader does not take them again)
        double wait_seconds = 0;       // --restart-backoff, when a failure is why the nodes meet again
    };
    std::optional<MeetAgain> meet_again;
    int restarts_used = 0;  // of --max-restarts, before this round of attempts (after meeting again)
    RunOutcome earlier;     // the rounds of attempts before the nodes last met again: what they did
    int met_attempt = 0;    // with a store: the attempt this node first took its place in
};

// A usage or launch error already printed: the exit code to return.
using Exit = std::optional<int>;

// Whether this agent meets the other nodes through etcd (--rdzv-backend etcd or etcd-v2 by hand).
bool meets_through_etcd(const Agent& a) {
    return !a.job && a.cmd.request.etcd && a.cmd.request.launcher == Launcher::Agent;
}

// Whether this agent meets the other nodes before its workers start: dlaunch's node rendezvous (c10d,
// --master, or the first node of --nnodes N), etcd, or torchrun's static form across nodes (to learn the
// others' worker counts; `dlaunch plan` plans one node without them).
bool meets_nodes(const Agent& a) {
    const LaunchRequest& req = a.cmd.request;
    if (a.job) return false;
    return needs_node_rendezvous(req) || meets_through_etcd(a) ||
           (static_form_across_nodes(req) && a.cmd.mode == Command::Mode::Run);
}

// --requeue: the Slurm job's attempts are the restarts; its directory holds the logs and the ledger.
// Under srun or PMIx (mpirun), this agent is one of several, one per node.
Exit gather_job(Agent& a) {
    LaunchRequest& req = a.cmd.request;
    if (req.requeue.enabled && a.cmd.mode != Command::Mode::Topo) {
        auto r = prepare_requeue(req, a.env);
        if (!r) return fail(r.error(), exit_code::kUsage);
        a.requeue = *r;
        req.log_dir = a.requeue->job_dir;  // logs are kept: they are what an attempt leaves for the next
    }
    if (a.cmd.mode == Command::Mode::Run) {
        auto detected = detect_job_for_agent(a.env);
        if (!detected) return fail(detected.error(), exit_code::kLaunchFailure);
        a.job = std::move(*detected);
    }
    // The machine: an XML file when asked, else this one (discovered once per job on a node). Under a
    // launcher, its CPU binding of the agent is not ours to keep: plan with what the cgroup allows.
    auto topo = frontend::load_topology(req, a.env, a.job ? std::optional(a.job->info.job_id) : std::nullopt,
                                        a.job ? topology::Scope::Cgroup : topology::Scope::ProcessBinding);
    if (!topo) return fail(topo.error(), req.topology_xml ? exit_code::kUsage : exit_code::kLaunchFailure);
    a.topo = std::move(*topo);
    return std::nullopt;
}

// torchrun's static form across nodes, before its agents meet: its options, node 0's port, an address the
// meeting can use (IPv4: the agents meet over it, whatever torch's store would take).
Exit check_static_form(const LaunchRequest& req, Command::Mode mode) {
    auto p = static_form_placement(req);
    if (!p) return fail(p.error(), exit_code::kUsage);
    if (p->master_addr.find(':') != std::string::npos)
        return fail({"rdzv: --master-addr " + p->master_addr +
                         ": an IPv6 address; dlaunch's agents meet at the "
                         "master over IPv4 before the workers start",
                     "give node 0's IPv4 address, or a name that resolves to one"},
                    exit_code::kUsage);
    if (mode == Command::Mode::Run && p->node_rank == 0)
        if (auto s = host::check_port_free(p->master_port); !s) return fail(s.error(), exit_code::kUsage);
    return std::nullopt;
}

// The agent that hosts the nodes' meeting and leads their group: node 0 of a Slurm step (or of mpirun's
// job), else the one whose address the rendezvous names. Through etcd, any node may take the leader key.
bool leads_nodes(const Agent& a) {
    if (a.job) return a.job->info.node_rank == 0;
    if (meets_through_etcd(a)) return true;
    return (meets_nodes(a) || static_form_across_nodes(a.cmd.request)) &&
           hosts_node_rendezvous(a.cmd.request, host::local_addresses());
}

// Enough open files for the agent that leads every node there may be, checked before anything starts (past
// the limit, it would refuse connections in the middle of the rendezvous).
Exit check_descriptors(const Agent& a) {
    const LaunchRequest& req = a.cmd.request;
    const int nodes = std::max(req.nnodes.max, a.job ? a.job->info.nnodes : 1);
    if (a.cmd.mode != Command::Mode::Run || nodes < 2 || !leads_nodes(a)) return std::nullopt;
    const std::string what = "leading " + std::to_string(nodes) + " nodes";
    // Node 0's open rendezvous holds the nodes that wait, and as many connections yet to say their hello.
    const long door = !a.job && keeps_door_open(req) ? 2L * std::max(64, req.nnodes.max) : 0;
    if (auto s = host::check_descriptor_limit(descriptors_to_lead(nodes, req.nproc_per_node) + door, what); !s)
        return fail(s.error(), exit_code::kUsage);
    return std::nullopt;
}

// What can be refused before anything starts: a requeue outside its batch job, the interpreter, the script,
// $TMPDIR, a rendezvous endpoint whose host does not resolve, too low a limit of open files.
Exit check_inputs(const Agent& a) {
    const LaunchRequest& req = a.cmd.request;
    if (a.requeue && (!a.job || a.job->info.source != "slurm" || a.job->info.job_id != a.requeue->job_id))
        return fail({"requeue: --requeue needs dlaunch started by srun inside the batch job",
                     "start it as `srun --ntasks-per-node=1 dlaunch --requeue ...` (examples/sbatch/)"},
                    exit_code::kUsage);
    if (req.entry != EntryKind::Command && a.env.contains("PYTHON_EXEC")) {
        std::string python = host::find_python(a.env);
        if (python.empty() || ::access(python.c_str(), X_OK) != 0)
            return fail({"launch: PYTHON_EXEC=" + a.env.at("PYTHON_EXEC") + ": not an executable",
                         "point PYTHON_EXEC at a Python interpreter, or unset it to use python3 from PATH"},
                        exit_code::kUsage);
    }
    if (auto s = host::check_script(req, a.env); !s) return fail(s.error(), exit_code::kUsage);
    if (a.job && req.rendezvous_master)
        return fail({"rdzv: --master " + *req.rendezvous_master + " under " + a.job->info.source +
                         ": the job's nodes and ranks come from it",
                     "leave out --master when dlaunch runs under srun or mpirun"},
                    exit_code::kUsage);
    if (!a.job && (needs_node_rendezvous(req) || meets_through_etcd(a)) && a.cmd.mode == Command::Mode::Plan)
        return fail({"plan: --nnodes " + std::to_string(req.nnodes.max) +
                         ": node ranks are assigned when the nodes meet in the rendezvous",
                     "give --node-rank R and --master-addr HOST to plan one node"},
                    exit_code::kUsage);
    if (a.cmd.mode == Command::Mode::Run)
        if (auto s = host::check_tmpdir(); !s) return fail(s.error(), exit_code::kUsage);
    if (a.cmd.mode == Command::Mode::Run && req.log_dir && !a.requeue)
        if (auto s = host::check_log_dir(*req.log_dir); !s) return fail(s.error(), exit_code::kUsage);
    if (!a.job && static_form_across_nodes(req))
        if (Exit e = check_static_form(req, a.cmd.mode)) return e;
    if (meets_nodes(a) && !meets_through_etcd(a))
        if (auto ip = resolve_meeting_host(req); !ip) return fail(ip.error(), exit_code::kUsage);
    return check_descriptors(a);
}

// dlaunch's node rendezvous (--master, or the first node of `--nnodes N` with no master address). With
// --nnodes MIN:MAX node 0 keeps it open for the run: the group's store (rendezvous_store.hpp).
Exit meet_nodes(Agent& a, ContextFacts& facts) {
    const LaunchRequest& req = a.cmd.request;
    const size_t script_at = a.argv.size() - 1 - req.script_args.size();
    auto procs = node_worker_count(req, a.env, *a.topo);
    if (!procs) return fail(procs.error(), exit_code::kUsage);
    const MeetingTerms terms{rdzv_auth::with_secret(req.rendezvous_secret), ""};
    auto assigned =
        node_rendezvous(req, facts.local_addrs, NodeShare{*procs, req.role}, terms, [&](const std::string& master) {
            std::string rule(80, '-');
            std::cout << "Copy the following command to the other nodes to run (this node hosts the rendezvous of "
                      << req.nnodes.max << " nodes):\n"
                      << rule << "\n"
                      << join_command(a.argv, script_at, master) << "\n"
                      << rule << std::endl;
        });
    if (!assigned) return fail(assigned.error(), exit_code::kGroupFailure);
    facts.assignment = assigned->assignment;
    a.met_attempt = assigned->attempt;
    a.restarts_used = assigned->restarts_used;  // a node that came late counts on from the run's restarts
    a.group_listener = assigned->group_listener;
    if (assigned->attempt > 0)
        spdlog::info("rdzv: this is node {} of {} in attempt {}, taken into the run under way (master {}:{})",
                     assigned->assignment.node_rank, assigned->assignment.nnodes, assigned->attempt,
                     assigned->assignment.master_addr, assigned->assignment.master_port);
    if (keeps_door_open(req)) a.store = rendezvous_store(req, terms, *assigned);
    return std::nullopt;
}

// The nodes meet through etcd (etcd_meeting.hpp): this node joins the run's membership, which it keeps
// until the run ends, and takes its place in the first attempt.
Exit meet_through_etcd(Agent& a, ContextFacts& facts) {
    const LaunchRequest& req = a.cmd.request;
    auto procs = node_worker_count(req, a.env, *a.topo);
    if (!procs) return fail(procs.error(), exit_code::kUsage);
    auto self = etcd_node_facts(req, *procs);
    if (!self) return fail(self.error(), exit_code::kGroupFailure);
    if (!etcd::decode_node(etcd::encode_node(*self)))  // what every node would drop as not an agent's
        return fail({"rdzv: --role '" + req.role + "' or the address '" + self->addr + "' cannot be told through etcd",
                     "give a role of at most 255 characters without control characters, and --local-addr without "
                     "spaces"},
                    exit_code::kUsage);
    auto meeting = EtcdMeeting::make(req, *self, req.rdzv_id);
    if (!meeting) return fail(meeting.error(), exit_code::kGroupFailure);
    auto place = (*meeting)->meet(req);
    a.store = etcd_store(std::move(*meeting));
    if (!place) return fail(place.error(), exit_code::kGroupFailure);
    const NodeAssignment& assigned = place->assignment;
    spdlog::info("rdzv: this is node {} of {} (run {} in etcd; master {}:{})", assigned.node_rank, assigned.nnodes,
                 req.rdzv_id, assigned.master_addr, assigned.master_port);
    facts.assignment = assigned;
    a.met_attempt = place->attempt;
    a.restarts_used = place->restarts_used;  // a node that came late counts on from the run's restarts
    return std::nullopt;
}

// The group decided that the nodes meet again in the store (its leader was lost, nodes wait to join, or one
// failed the health gate while another waits): the run goes on from the next attempt with the restarts used
// so far.
Exit meet_again(Agent& a) {
    const Agent::MeetAgain again = *a.meet_again;
    a.meet_again.reset();
    // The group read the stop signals itself; while this node waits for the others they stop it, as before
    // the first meeting.
    sigset_t stops;
    sigemptyset(&stops);
    for (int signo : stop_signals()) sigaddset(&stops, signo);
    ::sigprocmask(SIG_UNBLOCK, &stops, nullptr);
    if (again.wait_seconds > 0) {
        spdlog::info("group: waiting {}s before meeting again (--restart-backoff)", again.wait_seconds);
        std::this_thread::sleep_for(seconds_ms(again.wait_seconds));
    }
    auto place = a.store->meet_again(a.cmd.request, again.attempt, again.restarts_used, again.left_behind);
    if (!place) {
        spdlog::info("logs: the run's attempts so far are in {}", a.ctx.run_dir);
        return fail(place.error(), exit_code::kGroupFailure);
    }
    spdlog::info("rdzv: this is node {} of {} in attempt {} (master {}:{})", place->assignment.node_rank,
                 place->assignment.nnodes, place->attempt, place->assignment.master_addr,
                 place->assignment.master_port);
    a.ctx.assignment = place->assignment;
    a.ctx.restart_count = place->attempt;
    a.restarts_used = place->restarts_used;  // the leader's count: one for every node
    return std::nullopt;
}

// Agents under srun whose worker count is found on each node (gpu, cpu, auto) tell each other theirs before
// the workers start, so that ranks follow every node's count as under torchrun. (A count given as a number
// is the same on every node: srun runs one command line.)
bool meets_step_nodes(const Agent& a) {
    const LaunchRequest& req = a.cmd.request;
    return a.job && a.cmd.mode == Command::Mode::Run && a.env.contains("SLURM_JOB_ID") &&
           req.launcher == Launcher::Agent && !req.paddle.layout && a.job->info.size > 1 &&
           req.nproc_per_node.kind != NprocSpec::Kind::Count;
}

// The step's agents meet as the static form's do, with the step's node ranks, on node 0 at the group's port
// (free until the group starts), every message proved with a MUNGE credential of the job's user.
Exit meet_step_nodes(Agent& a) {
    const LaunchRequest& req = a.cmd.request;
    const SchedulerInfo& s = a.job->info;
    auto procs = node_worker_count(req, a.env, *a.topo);
    if (!procs) return fail(procs.error(), exit_code::kUsage);
    LaunchRequest m = req;
    m.rdzv_backend = "static";
    m.standalone = false;
    m.rendezvous_master.reset();
    m.c10d_endpoint.reset();
    m.rdzv_endpoint.clear();
    m.nnodes = NodeRange{s.size, s.size};
    m.node_rank = s.rank;
    m.master_addr = a.ctx.master->addr;
    m.master_port = group_port(a.ctx.master->port, req.port_range);
    m.rdzv_id = a.ctx.run_id;
    m.rendezvous_timeout_seconds = req.fence_timeout_seconds;
    // With the run's secret exported, it proves the messages; else MUNGE, checked here first so that a node
    // without munged says so at once.
    MeetingTerms terms{rdzv_auth::with_secret(req.rendezvous_secret),
                       "start one dlaunch per node of the step (srun --ntasks-per-node=1 dlaunch ...), or raise "
                       "--fence-timeout",
                       true};
    if (req.rendezvous_secret.empty()) {
        terms.proofs = munge_rendezvous_proofs();
        if (auto probe = terms.proofs.prove("-", "dlaunch"); !probe)
            return fail({"rdzv: the agents tell each other the worker counts they found (--nproc-per-node is not "
                         "a number), proved with MUNGE, and " +
                             probe.error().problem(),
                         probe.error().hint + "; or export the same " + rdzv_auth::kSecretVariable +
                             " on every node, or give --nproc-per-node a number (then no node needs to ask)"},
                        exit_code::kLaunchFailure);
    }
    auto met = node_rendezvous(m, host::local_addresses(), NodeShare{*procs, req.role}, terms, nullptr);
    if (!met) return fail(met.error(), exit_code::kGroupFailure);
    a.ctx.node_shares = met->assignment.shares;
    return std::nullopt;
}

// The job context (facts -> build_job_context), with the run directory made (or, for `dlaunch plan`,
// named as it will be) so that the one plan of the attempt carries the log paths.
Exit build_context(Agent& a) {
    // The secret is the agents'; workers (user code and whatever it runs) never see it.
    if (auto it = a.env.find(rdzv_auth::kSecretVariable); it != a.env.end()) {
        a.cmd.request.rendezvous_secret = it->second;
        a.env.erase(it);
    }
    if (auto s = rdzv_auth::check_secret(a.cmd.request.rendezvous_secret); !s)
        return fail(s.error(), exit_code::kUsage);
    // A secret proves every message from the first on: a Nettle that cannot be loaded is said now, not as each
    // joiner's refusal by a host that waits on until the rendezvous times out.
    if (!a.cmd.request.rendezvous_secret.empty())
        if (auto nettle = nettle_api(); !nettle) return fail(nettle.error(), exit_code::kLaunchFailure);
    const LaunchRequest& req = a.cmd.request;
    ContextFacts facts;
    facts.env = a.env;
    facts.job = a.job ? &*a.job : nullptr;
    facts.requeue = a.requeue ? &*a.requeue : nullptr;
    if (req.standalone) facts.random_run_id = host::random_run_id();
    facts.python_hook_dir = host::python_hook_dir();
    // `dlaunch plan` names the FIFOs of the run's agent, a process that does not exist yet.
    Result<std::string> private_dir = a.cmd.mode == Command::Mode::Plan
                                          ? Result<std::string>(host::private_dir_template("<agent pid>"))
                                          : host::own_private_dir();
    if (!private_dir) return fail(private_dir.error(), exit_code::kLaunchFailure);
    facts.watchdog_fifo = host::watchdog_fifo_in(*private_dir);
    facts.heartbeat_fifo = host::heartbeat_fifo_in(*private_dir);
    if (!req.paddle.ips.empty() || req.paddle.ps || meets_nodes(a)) facts.local_addrs = host::local_addresses();
    if (meets_through_etcd(a)) {
        if (Exit e = meet_through_etcd(a, facts)) return e;
    } else if (meets_nodes(a)) {
        if (Exit e = meet_nodes(a, facts)) return e;
    }
    if (!a.job && !facts.assignment && needs_free_port(req)) {
        auto port = host::reserve_free_port();
        if (!port) return fail(port.error(), exit_code::kLaunchFailure);
        facts.free_port = *port;
    }
    auto ctx = build_job_context(req, std::move(facts));
    if (!ctx) return fail(ctx.error(), exit_code::kLaunchFailure);
    a.ctx = std::move(*ctx);
    if (a.store) a.ctx.restart_count = a.met_attempt;  // a node that came late starts in the run's current attempt
    if (a.job && a.job->session) a.job->session->finalize();  // nothing more to exchange; workers are not its ranks
    if (meets_step_nodes(a))
        if (Exit e = meet_step_nodes(a)) return e;
    if (a.requeue) {
        a.ctx.run_dir = a.requeue->job_dir;
    } else if (a.cmd.mode == Command::Mode::Plan) {
        a.ctx.run_dir = host::run_dir_template(req.log_dir, a.ctx.run_id);
    } else {
        auto run_dir = host::make_run_dir(req.log_dir, a.ctx.run_id);
        if (!run_dir) return fail(run_dir.error(), req.log_dir ? exit_code::kUsage : exit_code::kLaunchFailure);
        a.ctx.run_dir = *run_dir;
        if (!req.log_dir)  // in $TMPDIR: `dlaunch clean` asks whether the run is still going
            std::ofstream(a.ctx.run_dir + "/agent.pid") << ::getpid() << " " << host::hostname() << "\n";
    }
    return std::nullopt;
}

void print_plan(const Command& cmd, const LaunchPlan& plan, const topology::Topology& topo) {
    if (cmd.plan_format == "json")
        std::cout << plan_to_json(plan).dump(2) << "\n";
    else if (cmd.plan_format == "svg")
        std::cout << plan_to_svg(plan, topo);
    else
        std::cout << plan_to_table(plan);
}

// A plan made from --topology-xml binds ranks to that machine's cores: refused before anything starts when
// this machine lacks them (else every worker would fail to bind and exit 126). Its GPUs are only
// variables (CUDA_VISIBLE_DEVICES): a run with --bind none shows the environment that machine would get.
Exit check_plan_fits_this_machine(const Agent& a, const LaunchPlan& plan, const topology::Topology& here) {
    for (const RankPlan& r : plan.ranks) {
        if (r.cpuset.empty() || here.allowed.contains(r.cpuset)) continue;
        return fail({"bind: --topology-xml " + *a.cmd.request.topology_xml + ": rank " + std::to_string(r.rank) +
                         "'s cpus " + r.cpuset.to_list() + " are not all usable here (cpus " + here.allowed.to_list() +
                         "): the file describes another machine, or more of it",
                     "look at another machine's plan with `dlaunch plan --topology-xml FILE`; to run here, leave "
                     "out --topology-xml or give --bind none"},
                    exit_code::kUsage);
    }
    return std::nullopt;
}

// The binder for a plan that binds: with the hwloc load of this machine's topology (the plan's own, unless
// it came from --topology-xml: then this machine's, which the plan's cpusets must fit).
Exit make_binder(const Agent& a, const LaunchPlan& plan, std::optional<topology::Binder>& binder) {
    const LaunchRequest& req = a.cmd.request;
    std::optional<topology::Topology> here;
    if (req.topology_xml) {
        LaunchRequest this_machine = req;
        this_machine.topology_xml.reset();
        auto topo = frontend::load_topology(this_machine, a.env, std::nullopt, topology::Scope::Cgroup);
        if (!topo) return fail(topo.error(), exit_code::kLaunchFailure);
        if (Exit e = check_plan_fits_this_machine(a, plan, *topo)) return e;
        spdlog::warn("bind: the plan comes from {}; its cpusets are applied to this machine as they are",
                     *req.topology_xml);
        here = std::move(*topo);
    }
    auto b = topology::Binder::for_this_machine(here ? *here : *a.topo);
    if (!b) return fail(b.error(), exit_code::kLaunchFailure);
    binder = std::move(*b);
    return std::nullopt;
}

// Checks that need the plan, and what the run says before it starts. A refusal removes the run directory.
Exit prepare_run(const Agent& a, const LaunchPlan& plan, std::optional<topology::Binder>& binder) {
    const LaunchRequest& req = a.cmd.request;
    for (auto& w : plan.warnings) spdlog::warn("{}", w);
    for (auto& n : plan.notes) spdlog::debug("{}", n);
    if (plan.bind)
        if (Exit e = make_binder(a, plan, binder)) return e;
    if (req.monitor_interval)
        spdlog::debug("--monitor-interval {} has no effect: dlaunch reacts to worker exits at once",
                      *req.monitor_interval);
    if (req.start_method)
        spdlog::debug("--start-method {} has no effect: workers are always fresh fork+exec processes",
                      *req.start_method);
    if (req.master_port && plan.node_rank == 0)
        if (auto s = host::check_port_free(plan.master_port); !s) return fail(s.error(), exit_code::kUsage);
    if (!plan.endpoints_log.empty()) write_endpoints_log(plan, req);
    const bool hidden = std::any_of(plan.ranks.begin(), plan.ranks.end(),
                                    [](const RankPlan& r) { return !r.console_stdout || !r.console_stderr; });
    if (!req.log_dir && keeps_log_files(req))
        spdlog::info("logs: worker output {} kept in {}",
                     hidden ? "not shown on the console is" : "is shown on the console and", a.ctx.run_dir);
    else
        spdlog::debug("logs: {}", a.ctx.run_dir);
    if (a.requeue && plan.node_rank == 0)
        std::cerr << attempt_banner(a.ctx.run_id, a.requeue->attempt, a.requeue->slurm_restart,
                                    failed_attempts(read_ledger(*a.requeue)), req.max_restarts, plan.nnodes,
                                    plan.world_size)
                  << "; logs in " << a.requeue->job_dir << std::endl;
    return std::nullopt;
}

// dlaunch-launch: each worker gets the --local-rank spelling the installed torch.distributed.launch passes.
void match_torch_launch(LaunchRequest& req, const JobContext& ctx) {
    if (!req.local_rank_arg_from_torch || req.entry == EntryKind::Command) return;
    if (!ctx.torch_local_rank_arg.empty()) req.local_rank_arg = ctx.torch_local_rank_arg;
}

// What the health gate checks on this node (health.hpp); none with nothing to check.
std::optional<health::Settings> health_settings(const Agent& a) {
    const LaunchRequest& req = a.cmd.request;
    if (!req.health_builtin && req.health_check.empty()) return std::nullopt;
    // A plan for another machine's topology (--topology-xml) says nothing of this one's GPUs and NICs.
    auto here = req.topology_xml ? nullptr : std::make_shared<const topology::Topology>(*a.topo);
    return health::Settings{req.health_builtin, req.health_check, a.ctx.run_dir, std::move(here)};
}

// The health gate's check of this node before attempt N of the job; null with nothing to check.
// `say_passed`: log what a passing node was checked for (-v); not from a group's check thread.
std::function<std::string(int)> health_gate(const std::optional<health::Settings>& checks, bool say_passed) {
    if (!checks) return nullptr;
    return [settings = *checks, say_passed](int attempt) {
        health::Answer answer = health::check_this_node(settings, attempt);
        if (say_passed && answer.failed.empty())
            spdlog::debug("health: this node passed before attempt {}: {}", attempt, answer.passed);
        return answer.failed;
    };
}

ExecutorOptions executor_options(const Agent& a, const LaunchPlan& plan, const topology::Binder* binder) {
    const LaunchRequest& req = a.cmd.request;
    ExecutorOptions options;
    options.grace_seconds = req.grace_seconds;
    options.forward_signals = req.forward_signals;
    options.max_restarts = a.requeue ? 0 : plan.max_restarts;
    options.restart_backoff = req.restart_backoff;
    options.binder = binder;
    options.workers_read_stdin = plan.worker_reads_stdin;
    options.health_gate = health_gate(health_settings(a), true);
    options.first_attempt = a.ctx.restart_count;
    if (!a.requeue) return options;
    options.checkpoint = CheckpointRule{req.requeue.warning_signal, req.requeue.checkpoint_signal};
    options.checkpoint_seconds = [&req, job_id = a.requeue->job_id](Grace kind) {
        if (kind == kCheckpointGrace)
            return checkpoint_wait(req.requeue.checkpoint_grace, slurm::slurm_job_seconds_left(job_id));
        auto kill_wait = slurm::slurm_kill_wait();
        if (!kill_wait) spdlog::warn("checkpoint: slurmctld did not say its KillWait; assuming Slurm's default, 30 s");
        return ending_wait(req.requeue.checkpoint_grace, kill_wait);
    };
    return options;
}

// What a list with one entry per node of the job (`nodes`) says of an attempt's members, in their order (none
// when it has no entry per node).
template <typename T>
void of_members(std::vector<T>& list, size_t nodes, const std::vector<int>& members) {
    if (list.size() != nodes) return list.clear();
    std::vector<T> picked;
    picked.reserve(members.size());
    for (int id : members) picked.push_back(list.at(static_cast<size_t>(id)));
    list = std::move(picked);
}

// Whether every node has the same workers and role: the plan then needs no list of them (even_span).
bool nodes_alike(const std::vector<NodeShare>& shares) {
    return std::adjacent_find(shares.begin(), shares.end(), std::not_equal_to<>()) == shares.end();
}

// The plan of a group attempt: the members' nodes in their order, this node's rank among them (as Slurm's
// step or, by hand, the node rendezvous knows the nodes; node 0, the leader, stays first). Every agent makes
// one at every restart, so the job's node lists are not copied when the attempt runs on every node in order
// (LentContext: the agent's lists are lent to the plan's context, `a.ctx` has none while the plan is made),
// nor their shares when the nodes are alike (`alike`): in a big group those copies are most of an agent's
// work at a restart.
Result<LaunchPlan> group_plan(Agent& a, int attempt, const std::vector<int>& members, bool alike) {
    const bool step = a.job.has_value();
    const int self = step ? a.job->info.rank : a.ctx.assignment->node_rank;
    const size_t all_nodes = step ? a.job->info.nodes.size() : a.ctx.assignment->node_addrs.size();
    const auto at = std::find(members.begin(), members.end(), self);
    const int rank = at == members.end() ? 0 : static_cast<int>(at - members.begin());
    const int n = static_cast<int>(members.size());
    bool every_node = members.size() == all_nodes;
    for (int i = 0; every_node && i < n; ++i) every_node = members[static_cast<size_t>(i)] == i;
    auto place = [&](JobContext& c) {
        c.restart_count = attempt;
        if (step) {
            c.scheduler->rank = c.scheduler->node_rank = rank;
            c.scheduler->size = c.scheduler->nnodes = n;
        } else {
            c.assignment->nnodes = n;
            c.assignment->node_rank = rank;
        }
        return make_launch_plan(a.cmd.request, c, *a.topo);
    };
    if (every_node) {
        LentContext lent(a.ctx, all_nodes, alike);
        return place(lent.get());
    }
    JobContext c = a.ctx;
    auto shares = [&](std::vector<NodeShare>& list) {
        if (alike) return list.clear();
        of_members(list, all_nodes, members);
    };
    if (step) {
        of_members(c.scheduler->nodes, all_nodes, members);
        of_members(c.node_addrs, all_nodes, members);
        shares(c.node_shares);
    } else {
        of_members(c.assignment->node_addrs, all_nodes, members);
        shares(c.assignment->shares);
    }
    return place(c);
}

GroupSetup group_setup(const Agent& a, const LaunchPlan& plan) {
    const LaunchRequest& req = a.cmd.request;
    GroupSetup s;
    if (a.job) {
        s.member = a.job->info.rank;
        s.hosts = a.job->info.nodes;
        s.leader_addr = a.ctx.master->addr;
        s.port = group_port(a.ctx.master->port, req.port_range);
        s.auth = munge_group_auth();
        s.join_seconds = req.fence_timeout_seconds;
        s.missing_hint = "start one dlaunch per node of the step (srun --ntasks-per-node=1 dlaunch ...)";
    } else {  // by hand: the nodes that met in the rendezvous; node 0 listens on its port once it is over
        const NodeAssignment& n = *a.ctx.assignment;
        s.member = n.node_rank;
        s.hosts = n.node_addrs;
        s.leader_addr = n.node_addrs.at(0);
        if (req.local_addr) s.own_addr = n.node_addrs.at(static_cast<size_t>(n.node_rank));
        s.port = n.rendezvous_port;
        s.listener = a.group_listener;
        s.leader_takes_socket = hands_socket_to_leader(req);
        s.auth = secret_group_auth(req.rendezvous_secret);
        s.join_seconds = req.rendezvous_timeout_seconds;
        // Through a store every node has met before the group forms (store_join_seconds).
        if (a.store) s.join_seconds = store_join_seconds(req);
        s.missing_hint = "see that node's output; node 0 must be reachable at port " + std::to_string(s.port) +
                         (keeps_door_open(req) ? " (a free port node 0 chose for its group: open the nodes' ports to "
                                                 "each other, not only the endpoint's)"
                                               : " after the rendezvous, as during it");
    }
    s.first_nodes = plan.nnodes;
    s.run_id = a.ctx.run_id;
    const bool range = req.nnodes.min != req.nnodes.max;
    s.policy.nnodes = range ? req.nnodes : NodeRange{plan.nnodes, plan.nnodes};
    s.policy.nproc_per_node = plan.nproc_per_node;
    for (const NodeShare& share : a.job ? a.ctx.node_shares : a.ctx.assignment->shares)
        s.policy.member_procs.push_back(share.procs);
    s.policy.max_restarts = req.max_restarts;
    s.policy.backoff = req.restart_backoff;
    s.policy.requeue = a.requeue.has_value();
    s.policy.leader_replaceable = a.store && a.store->replaces_leader();
    s.store = a.store.get();
    if (a.requeue) s.warning_signal = req.requeue.warning_signal;
    s.times.lost_after = seconds_ms(req.heartbeat_timeout_seconds);
    s.times.beat = std::min(std::chrono::milliseconds(1000), s.times.lost_after / 4);
    s.grace_seconds = req.grace_seconds;
    const auto checks = health_settings(a);
    s.check_health = health_gate(checks, false);
    s.health_check_is_quick = checks && !health::may_take_long(*checks);
    s.health_seconds = req.health_check.empty() ? 10 : health::kSiteCheckSeconds + 5;
    return s;
}

std::vector<FailureRecord> failures_of_attempt(const RunOutcome& outcome, int attempt) {
    std::vector<FailureRecord> out;
    for (const FailureRecord& f : outcome.failures)
        if (f.failure.attempt == attempt) out.push_back(f);
    return out;
}

// Under --requeue, the group's decision on `attempt` (of `nodes` nodes) as the job's ledger and the job
// see it (decide_group_end): recorded by the leader, then requeued or ended with every attempt's summary.
int carry_out_group_end(const Agent& a, const LaunchPlan& first, int attempt, size_t nodes, int world_size,
                        const GroupDecision& g, std::vector<FailureRecord> failures, bool records) {
    AttemptFacts f;
    f.attempt = attempt;
    f.slurm_restart = a.requeue->slurm_restart;
    f.job_id = f.run_id = a.requeue->job_id;
    f.host = first.hostname;
    f.nnodes = static_cast<int>(nodes);
    f.world_size = world_size;
    f.first = records;  // the group's leader, or a lost leader's successor
    f.time = now_epoch();
    f.end = NodeEnd::Failed;
    f.exit_code = g.exit_code;
    f.failures = std::move(failures);
    f.ledger = read_ledger(*a.requeue);
    AttemptDecision d = decide_group_end(g, f, a.cmd.request.max_restarts);
    AttemptPlace place;
    place.job = a.requeue;
    place.records_dir = a.requeue->job_dir;
    ConsoleReport report(a.requeue->job_id);
    return carry_out(d, f, place, report);
}

// The rounds before the nodes last met again go before this round's attempts, failures and notes, so that
// the run's summary and run.json tell the whole run, not its last round.
void after_earlier_rounds(const RunOutcome& earlier, RunOutcome& round) {
    auto before = [](auto& into, const auto& from) { into.insert(into.begin(), from.begin(), from.end()); };
    before(round.failures, earlier.failures);
    before(round.attempts, earlier.attempts);
    before(round.left_out, earlier.left_out);
    before(round.log_errors, earlier.log_errors);
    round.restarts = std::max(round.restarts, earlier.restarts);  // a round that ended before its first attempt
}

// The group's attempts; the end is carried out as one agent's would be.
int run_group_attempts(Agent& a, const LaunchPlan& first, const topology::Binder* binder, RunOutcome& outcome) {
    if (a.job && a.job->info.nodes.size() != static_cast<size_t>(first.nnodes + first.spare_nodes))
        return fail({"group: srun did not say the step's node names", "this is a bug; please report it"},
                    exit_code::kInternal);
    GroupSetup setup = group_setup(a, first);
    Guardian guardian;  // one for every attempt of the group (ExecutorOptions::guardian)
    ExecutorOptions every_attempt = executor_options(a, first, binder);
    every_attempt.max_restarts = 0;
    every_attempt.health_gate = nullptr;  // the group runs it (run_group); made once, not at every attempt
    every_attempt.guardian = &guardian;
    const bool alike = nodes_alike(a.job ? a.ctx.node_shares : a.ctx.assignment->shares);
    RunGroupAttempt run_attempt = [&](int attempt, const std::vector<int>& members, const AttemptWatch& watch) {
        PlanForAttempt plan_for_attempt = [&](int) -> Result<LaunchPlan> {
            // The plan made above fits the first attempt while it runs on the first nodes (the health gate
            // may leave some out, or put a spare in).
            std::vector<int> first_nodes(static_cast<size_t>(first.nnodes));
            std::iota(first_nodes.begin(), first_nodes.end(), 0);
            if (attempt == a.ctx.restart_count && !first.spare && members == first_nodes) return first;
            return group_plan(a, attempt, members, alike);
        };
        ExecutorOptions options = every_attempt;
        options.watch = watch;
        return run_workers(plan_for_attempt, a.env, options);
    };
    setup.restarts_used = a.requeue ? failed_attempts(read_ledger(*a.requeue)) : a.restarts_used;
    OnRestart on_restart = [&](int attempt, const std::vector<int>& members, const GroupDecision& d,
                               const std::vector<FailureRecord>& failures) {
        if (a.requeue)
            carry_out_group_end(a, first, attempt, members.size(), world_size_of(setup.policy, members), d, failures,
                                a.job->info.rank == 0);
    };
    auto end = run_group(setup, a.ctx.restart_count, run_attempt, on_restart);
    guardian.hang_up();  // every attempt's workers are gone: it ends while the run is summed up
    if (!end) return fail(end.error(), exit_code::kGroupFailure);
    after_earlier_rounds(a.earlier, end->outcome);
    const std::vector<int>& behind = end->decision.left_behind;
    const bool left_behind = std::find(behind.begin(), behind.end(), setup.member) != behind.end();
    if (end->decision.kind == GroupDecision::Kind::MeetAgain && !left_behind) {  // run() meets them again
        spdlog::warn("group: {}", end->decision.summary);
        a.meet_again = Agent::MeetAgain{end->attempt, end->decision.restarts_used, end->decision.left_behind,
                                        end->decision.wait_seconds};
        a.earlier = end->outcome;
        return exit_code::kGroupFailure;
    }
    if (left_behind)  // this node's run ends here (it failed the health gate), with the group's cause and code
        spdlog::error("group: {}; this node is left behind and its run ends", end->decision.summary);
    outcome = end->outcome;
    if (a.requeue && end->kind == GroupEnd::Kind::Decided)
        return end_code_after_logs(
            carry_out_group_end(a, first, end->attempt, end->members.size(), world_size_of(setup.policy, end->members),
                                end->decision, failures_of_attempt(end->outcome, end->attempt), end->records),
            end->outcome, a.cmd.request);
    if (a.requeue) end->outcome.failures = failures_of_attempt(end->outcome, end->attempt);  // earlier: on record
    // Under Slurm every node's output goes to the job's: the leader sums up for all. By hand each node
    // has its own console.
    RunEndFacts run{true, end->summed_up_by_leader && a.job,
                    a.requeue ? std::optional<int>(end->attempt) : std::nullopt, static_cast<int>(end->members.size()),
                    world_size_of(setup.policy, end->members)};
    return finish_run(end->outcome, first, a.requeue, a.job, a.cmd.request, a.ctx, run);
}

// Runs the workers: the first attempt with the plan made above, every restart with its own plan.
int run_attempts(Agent& a, const LaunchPlan& first) {
    const LaunchRequest& req = a.cmd.request;
    const bool temporary = !req.log_dir;
    std::optional<topology::Binder> binder;
    if (Exit e = prepare_run(a, first, binder)) {
        if (!a.requeue) host::remove_tree(a.ctx.run_dir);
        return *e;
    }
    PlanForAttempt plan_for_attempt = [&](int attempt) -> Result<LaunchPlan> {
        if (attempt == 0) return first;
        JobContext c = a.ctx;
        c.restart_count = a.ctx.restart_count + attempt;
        return make_launch_plan(req, c, *a.topo);
    };
    const topology::Binder* bind = binder ? &*binder : nullptr;
    RunOutcome outcome;
    int code = 0;
    Guardian guardian;  // this node's alone (a group keeps its own across attempts); reaped before the end
    if (first.group_restarts) {
        code = run_group_attempts(a, first, bind, outcome);
        if (a.meet_again) return code;  // the run goes on after the nodes meet again
    } else {
        ExecutorOptions options = executor_options(a, first, bind);
        options.max_restarts = std::max(0, options.max_restarts - a.restarts_used);  // one node left after a group
        options.guardian = &guardian;
        outcome = run_workers(plan_for_attempt, a.env, options);
        guardian.hang_up();                        // it ends while the run is summed up and its directory removed
        after_earlier_rounds(a.earlier, outcome);  // one node left of a group that met again
        code = finish_run(outcome, first, a.requeue, a.job, req, a.ctx);
    }
    record_run_end_for_scheduler(a.env, outcome);
    if (a.store) a.store->leave();
    // A stopped run is kept as a failed one is: what it did is on record (run.json).
    if (!keeps_run_dir(req, a.requeue.has_value(), outcome)) host::remove_tree(a.ctx.run_dir);
    if (temporary && !a.requeue && outcome.stop_signal != 0 && !outcome.checkpointed)
        spdlog::info("logs: the stopped run is kept in {} (run.json says what ran)", a.ctx.run_dir);
    guardian.reap();  // before end_as, which a run stopped by a signal does not return from
    // Stopped by a signal: die of it, as a shell expects (a worker that died of one gave 128+S instead).
    const bool stopped = outcome.stop_signal != 0 && code == exit_code::kSignalBase + outcome.stop_signal;
    return frontend::end_as(code, stopped ? outcome.stop_signal : 0);
}

int run(int argc, char** argv) {
    Agent a;
    a.argv.assign(argv, argv + argc);
    a.env = host::environment();
    auto parsed = parse_command_line(std::vector<std::string>(argv + 1, argv + argc), a.env,
                                     program_from_argv0(argv[0], Program::Agent));
    if (!parsed) return fail(parsed.error(), exit_code::kUsage);
    a.cmd = std::move(*parsed);
    if (a.cmd.mode == Command::Mode::Help || a.cmd.mode == Command::Mode::Version) {
        std::cout << a.cmd.help_text;
        return exit_code::kSuccess;
    }
    frontend::setup_logging("dlaunch", a.cmd.request.verbosity, a.env);
    if (a.cmd.mode == Command::Mode::Stacks) return run_stacks_command(a.cmd);
    if (a.cmd.mode == Command::Mode::Clean) return run_clean_command(a.cmd);
    if (a.cmd.mode == Command::Mode::Report) return run_report_command(a.cmd);
    if (a.cmd.mode == Command::Mode::Doctor) return run_doctor_command(a.cmd, a.env);
    host::raise_descriptor_limit();
    // A stop before the workers start (during a rendezvous) leaves no port lock nor FIFO behind.
    if (a.cmd.mode == Command::Mode::Run) host::stop_cleanly_on_signals("dlaunch");
    if (a.cmd.mode == Command::Mode::Run) Guardian::fork_ahead();  // while the agent is small (guardian.hpp)
    if (Exit e = gather_job(a)) return *e;
    if (a.cmd.mode == Command::Mode::Topo) {
        std::cout << (a.cmd.plan_format == "svg" ? topology_to_svg(*a.topo) : topology::describe(*a.topo));
        return exit_code::kSuccess;
    }
    if (Exit e = check_inputs(a)) return *e;
    if (Exit e = build_context(a)) return *e;
    match_torch_launch(a.cmd.request, a.ctx);
    auto plan = make_launch_plan(a.cmd.request, a.ctx, *a.topo);
    if (!plan) {
        if (a.cmd.mode == Command::Mode::Run && !a.requeue) host::remove_tree(a.ctx.run_dir);
        return fail(plan.error(), exit_code::kUsage);
    }
    if (a.cmd.mode == Command::Mode::Plan) {
        print_plan(a.cmd, *plan, *a.topo);
        return exit_code::kSuccess;
    }
    int code = run_attempts(a, *plan);
    while (a.meet_again) {
        if (Exit e = meet_again(a)) return *e;
        plan = make_launch_plan(a.cmd.request, a.ctx, *a.topo);
        if (!plan) return fail(plan.error(), exit_code::kGroupFailure);  // workers ran before: not a usage error
        code = run_attempts(a, *plan);
    }
    return code;
}

}  // namespace

int main(int argc, char** argv) {
    return dlaunch::frontend::guarded_main("dlaunch", run, argc, argv);
}
