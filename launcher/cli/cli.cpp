#include "dlaunch/cli.hpp"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <csignal>
#include <cstring>
#include <functional>
#include <map>
#include <set>

#include "cli_app.hpp"
#include "dlaunch/etcd_client.hpp"
#include "dlaunch/etcd_membership.hpp"
#include "dlaunch/exit_codes.hpp"
#include "dlaunch/failure_policy.hpp"
#include "dlaunch/plan.hpp"
#include "dlaunch/signals.hpp"
#include "dlaunch/text.hpp"

namespace dlaunch {
namespace {

constexpr const char* kUsageHint = "run 'dlaunch --help' for the options";
constexpr const char* kMpiUsageHint = "run 'dlaunch-mpi --help' for the options";

Error usage(const std::string& what, const std::string& hint = kUsageHint) {
    return cli_app::usage_error(what, hint);
}

// One entry per torchrun option: its CLI11 names and its PET_ fallback variable.
struct OptionSpec {
    const char* names;
    const char* pet;
    const char* help;
    bool flag = false;
    const char* metavar = "";
};

const std::vector<OptionSpec>& torchrun_options() {
    static const std::vector<OptionSpec> specs{
        {"--nnodes", "PET_NNODES",
         "Number of nodes, N or MIN:MAX; under srun a group shrinks within MIN:MAX and the nodes past MAX are "
         "hot spares; by hand a range needs --rdzv-backend c10d or etcd (torchrun's join window; a node coming "
         "later joins below MAX, or waits as a spare)",
         false, "N|MIN:MAX"},
        {"--nproc-per-node,--nproc_per_node", "PET_NPROC_PER_NODE",
         "Workers per node: N, gpu (one per visible GPU), cpu (one per usable CPU), auto (gpu if any, else cpu); "
         "nodes that meet (c10d, --master) may differ in it",
         false, "N|gpu|cpu|auto"},
        {"--node-rank,--node_rank", "PET_NODE_RANK", "This node's rank, 0 to nnodes-1 (default 0)", false, "R"},
        {"--master-addr,--master_addr", "PET_MASTER_ADDR",
         "Address of node rank 0 (default 127.0.0.1 on one node; required across nodes)", false, "HOST"},
        {"--master-port,--master_port", "PET_MASTER_PORT",
         "Port of the rank-0 store (default: a free port on one node, 29500 across nodes)", false, "PORT"},
        {"--rdzv-backend,--rdzv_backend", "PET_RDZV_BACKEND",
         "Rendezvous backend: static (default); c10d (served by the agent on --rdzv-endpoint's host); etcd, "
         "etcd-v2 (the nodes meet through etcd at --rdzv-endpoint, docs/etcd.md)",
         false, "NAME"},
        {"--rdzv-endpoint,--rdzv_endpoint", "PET_RDZV_ENDPOINT",
         "HOST[:PORT]: static: master address and port; c10d: where the nodes meet (port 29400 by default); etcd, "
         "etcd-v2: etcd's client address ([http[s]://]HOST[:PORT], port 2379 by default)",
         false, "HOST[:PORT]"},
        {"--rdzv-id,--rdzv_id", "PET_RDZV_ID",
         "Run id, TORCHELASTIC_RUN_ID for workers (default: none); c10d: a node with another id is refused", false,
         "ID"},
        {"--rdzv-conf,--rdzv_conf", "PET_RDZV_CONF",
         "KEY=VALUE,...: c10d applies join_timeout (600 s) and last_call_timeout (30 s); etcd timeout, etcd-v2 "
         "join_timeout and read_timeout, both last_call_timeout, protocol and TLS files (docs/etcd.md); other keys "
         "have no effect",
         false, "K=V,..."},
        {"--standalone", "PET_STANDALONE", "Single node, local rendezvous with a generated run id", true},
        {"--max-restarts,--max_restarts", "PET_MAX_RESTARTS",
         "Restarts of the worker group after a failure, counted over the run (default 0); on several nodes "
         "(under srun, or met in the c10d/--master rendezvous) every node restarts together; with --requeue, "
         "failed attempts of the Slurm job, in the allocation and requeued",
         false, "N"},
        {"--monitor-interval,--monitor_interval", "PET_MONITOR_INTERVAL",
         "Accepted for compatibility; dlaunch reacts to events at once and does not poll", false, "SECONDS"},
        {"--start-method,--start_method", "PET_START_METHOD",
         "spawn|fork|forkserver: accepted; workers are always fresh fork+exec processes", false, "METHOD"},
        {"--role", "PET_ROLE",
         "ROLE_NAME for the workers (default: default); ROLE_RANK and ROLE_WORLD_SIZE count this role's workers "
         "over the nodes that met (c10d, --master)",
         false, "NAME"},
        {"-m,--module", "PET_MODULE", "Run SCRIPT as a Python module (python -m SCRIPT)", true},
        {"--no-python,--no_python", "PET_NO_PYTHON", "Execute SCRIPT directly instead of under Python", true},
        {"--run-path,--run_path", "PET_RUN_PATH", "Run SCRIPT through runpy.run_path", true},
        {"--log-dir,--log_dir", "PET_LOG_DIR",
         "Keep per-attempt, per-rank stdout/stderr/error files here (default: error files only, in a temporary "
         "directory removed after a successful run; all output is on the console)",
         false, "DIR"},
        {"-r,--redirects", "PET_REDIRECTS",
         "Send worker streams to the log files only: 0 none, 1 stdout, 2 stderr, 3 both, or RANK:N,...", false,
         "STREAMS"},
        {"-t,--tee", "PET_TEE", "Streams that go to the console as well as the log files (same syntax)", false,
         "STREAMS"},
        {"--local-ranks-filter,--local_ranks_filter", "PET_LOCAL_RANKS_FILTER",
         "Show only these local ranks' output on the console, e.g. 0 or 0,2-3 (log files get all)", false, "RANKS"},
        {"--local-addr,--local_addr", "PET_LOCAL_ADDR", "This node's address (MASTER_ADDR on a single node)", false,
         "ADDR"},
        {"--numa-binding,--numa_binding", "PET_NUMA_BINDING",
         "node|socket|exclusive: each rank on every core of its GPU's NUMA node, of its socket, or on cores of "
         "its own there (= --bind numa, socket, closest); core-complex is refused",
         false, "MODE"},
        {"--signals-to-handle,--signals_to_handle", "PET_SIGNALS_TO_HANDLE",
         "Signals forwarded to the workers, e.g. SIGTERM,SIGINT,SIGUSR1 (= --signals)", false, "LIST"},
        {"--shutdown-timeout,--shutdown_timeout", "PET_SHUTDOWN_TIMEOUT",
         "Seconds workers get after a stop signal before SIGKILL (= --grace; also TORCH_ELASTIC_SHUTDOWN_TIMEOUT)",
         false, "SECONDS"},
        {"--virtual-local-rank,--virtual_local_rank", "PET_VIRTUAL_LOCAL_RANK",
         "LOCAL_RANK=0 for every worker, and CUDA_VISIBLE_DEVICES names only its own GPU", true},
        // torchrun (2.3+) reads no PET_ variable for this one.
        {"--logs-specs,--logs_specs", "",
         "torchrun's log layout plugin: only default (torch's DefaultLogsSpecs: the layout --log-dir, "
         "--redirects, --tee and --local-ranks-filter give) is accepted",
         false, "NAME"},
    };
    return specs;
}

std::string first_long_name(const std::string& names) {
    for (auto& n : split(names, ','))
        if (n.rfind("--", 0) == 0) return n;
    return split(names, ',').front();
}

// A torchrun option's PET_ variable by the option's first long name, looked up once per key instead of
// every spec's names split again for every key asked (that was an eighth of a launch's instructions).
const char* pet_variable(const std::string& key) {
    static const std::map<std::string, const char*> by_key = [] {
        std::map<std::string, const char*> m;
        for (auto& spec : torchrun_options()) m.emplace(first_long_name(spec.names), spec.pet);
        return m;
    }();
    auto it = by_key.find(key);
    return it == by_key.end() ? nullptr : it->second;
}

Result<bool> parse_bool_env(const std::string& var, const std::string& text) {
    if (text == "1" || text == "true" || text == "True") return true;
    if (text == "0" || text == "false" || text == "False" || text.empty()) return false;
    return usage(var + "='" + text + "' is not a boolean", "set it to 1 or 0");
}

}  // namespace

Result<long long> parse_integer(const std::string& option, const std::string& text, long long min, long long max) {
    long long v = 0;
    auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (text.empty() || (ec != std::errc{} && ec != std::errc::result_out_of_range) || p != text.data() + text.size())
        return usage(option + ": '" + text + "' is not a whole number",
                     "give a number from " + std::to_string(min) + " to " + std::to_string(max));
    if (ec == std::errc::result_out_of_range || v < min || v > max)
        return usage(option + ": " + text + " is out of range",
                     "give a number from " + std::to_string(min) + " to " + std::to_string(max));
    return v;
}

Result<double> parse_seconds(const std::string& option, const std::string& text, bool allow_zero) {
    constexpr double kMaxSeconds = 1e7;  // 115 days: a wait no run means
    double v = 0;
    auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (text.empty() || ec != std::errc{} || p != text.data() + text.size() || !std::isfinite(v) || v < 0 ||
        (!allow_zero && v == 0))
        return usage(option + ": '" + text + "' is not a number of seconds",
                     std::string("give seconds as a number") + (allow_zero ? " >= 0" : " > 0") + ", e.g. 30 or 0.5");
    if (v > kMaxSeconds)
        return usage(option + ": " + text + " s is more than the longest wait dlaunch takes (10000000 s, 115 days)",
                     "give at most 10000000 seconds");
    return v;
}

Result<double> parse_hang_timeout(const std::string& option, const std::string& text) {
    auto v = parse_seconds(option, text, false);
    if (v && *v < kMinHangTimeoutSeconds)
        return usage(option + ": " + text + " s is too short to tell a hang: progress is sampled every " +
                         fixed(kFastestHangSampleSeconds, 1) + " s at best",
                     "give at least " + fixed(kMinHangTimeoutSeconds, 0) + " s");
    return v;
}

// --restart-backoff S[:MAX]: MAX defaults to 30 s, or S when S is more.
Result<RestartBackoff> parse_restart_backoff(const std::string& text) {
    const auto colon = text.find(':');
    auto initial = parse_seconds("--restart-backoff", text.substr(0, colon), true);
    if (!initial) return initial.error();
    RestartBackoff b{*initial, std::max(*initial, RestartBackoff{}.max)};
    if (colon == std::string::npos) return b;
    auto max = parse_seconds("--restart-backoff", text.substr(colon + 1), true);
    if (!max) return max.error();
    if (*max < *initial)
        return usage("--restart-backoff " + text + ": the most is less than the first wait",
                     "give S:MAX with MAX >= S, e.g. 1:30");
    b.max = *max;
    return b;
}

Result<std::optional<double>> hang_timeout_from_env(const EnvMap& env) {
    auto it = env.find("DLAUNCH_HANG_TIMEOUT");
    if (it == env.end() || it->second.empty()) return std::optional<double>{};
    auto r = parse_hang_timeout("DLAUNCH_HANG_TIMEOUT", it->second);
    if (!r) return r.error();
    return std::optional<double>(*r);
}

std::vector<int> default_forward_signals() {
    return {SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2};
}

Result<NodeRange> parse_nnodes(const std::string& option, const std::string& text) {
    const std::string hint = "write N or MIN:MAX with 1 <= MIN <= MAX, e.g. 2 or 2:2";
    auto parts = split(text, ':');
    if (parts.size() > 2) return usage(option + ": '" + text + "' is not N or MIN:MAX", hint);
    NodeRange range;
    auto min = parse_integer(option, parts[0], 1, 1 << 20);
    if (!min) return usage(option + ": '" + text + "' is not N or MIN:MAX", hint);
    range.min = range.max = static_cast<int>(*min);
    if (parts.size() == 2) {
        auto max = parse_integer(option, parts[1], 1, 1 << 20);
        if (!max || *max < *min) return usage(option + ": '" + text + "' is not N or MIN:MAX", hint);
        range.max = static_cast<int>(*max);
    }
    return range;
}

Result<NprocSpec> parse_nproc_per_node(const std::string& option, const std::string& text) {
    if (text == "gpu") return NprocSpec{NprocSpec::Kind::Gpu, 0};
    if (text == "cpu") return NprocSpec{NprocSpec::Kind::Cpu, 0};
    if (text == "auto") return NprocSpec{NprocSpec::Kind::Auto, 0};
    auto n = parse_integer(option, text, 1, 4096);
    if (!n)
        return usage(option + ": '" + text + "' is not a worker count",
                     "give a number from 1 to 4096, or gpu, cpu or auto");
    return NprocSpec{NprocSpec::Kind::Count, static_cast<int>(*n)};
}

Result<StdSelection> parse_std_selection(const std::string& option, const std::string& text) {
    const std::string hint = "give 0 (none), 1 (stdout), 2 (stderr) or 3 (both), or per local rank, e.g. 0:1,1:3";
    StdSelection sel;
    if (text.find(':') == std::string::npos) {
        auto v = parse_integer(option, text, 0, 3);
        if (!v) return usage(option + ": '" + text + "' is not a stream selection", hint);
        sel.all = static_cast<unsigned>(*v);
        return sel;
    }
    for (auto& item : split(text, ',')) {
        auto kv = split(item, ':');
        if (kv.size() != 2) return usage(option + ": '" + item + "' is not LOCAL_RANK:STREAMS", hint);
        auto rank = parse_integer(option, kv[0], 0, 1 << 20);
        auto v = parse_integer(option, kv[1], 0, 3);
        if (!rank || !v) return usage(option + ": '" + item + "' is not LOCAL_RANK:STREAMS", hint);
        if (sel.per_rank.contains(static_cast<int>(*rank)))
            return usage(option + ": local rank " + kv[0] + " given twice", "give each local rank once");
        sel.per_rank[static_cast<int>(*rank)] = static_cast<unsigned>(*v);
    }
    return sel;
}

Result<std::set<int>> parse_rank_list(const std::string& option, const std::string& text) {
    const std::string hint = "give local ranks as a comma list with ranges, e.g. 0 or 0,2-3";
    std::set<int> ranks;
    for (auto& item : split(text, ',')) {
        auto bounds = split(item, '-');
        if (bounds.size() > 2) return usage(option + ": '" + item + "' is not a rank or range", hint);
        auto lo = parse_integer(option, bounds[0], 0, 1 << 20);
        auto hi = bounds.size() == 2 ? parse_integer(option, bounds[1], 0, 1 << 20) : lo;
        if (!lo || !hi || *hi < *lo) return usage(option + ": '" + item + "' is not a rank or range", hint);
        for (auto r = *lo; r <= *hi; ++r) ranks.insert(static_cast<int>(r));
    }
    return ranks;
}

Result<std::vector<int>> parse_signal_list(const std::string& option, const std::string& text) {
    std::vector<int> out;
    for (auto item : split(text, ',')) {
        for (auto& c : item) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
        if (item.rfind("SIG", 0) == 0) item = item.substr(3);
        int signo = signal_number(item).value_or(0);
        if (signo == 0) {
            auto n = parse_integer(option, item, 1, SIGRTMAX);
            if (!n)
                return usage(option + ": '" + item + "' is not a signal", "give names or numbers, e.g. TERM,INT,USR1");
            signo = static_cast<int>(*n);
        }
        if (signo == SIGKILL || signo == SIGSTOP || signo == SIGCHLD)
            return usage(option + ": " + signal_name(signo) + " cannot be forwarded",
                         "SIGKILL and SIGSTOP cannot be caught and SIGCHLD is dlaunch's own; leave them out");
        if (std::find(out.begin(), out.end(), signo) == out.end()) out.push_back(signo);
    }
    return out;
}

Result<PortRange> parse_port_range(const std::string& option, const std::string& text) {
    const std::string hint = "give LOW-HIGH with 1024 <= LOW <= HIGH <= 65535, e.g. 21000-28999";
    auto dash = text.find('-');
    if (dash == std::string::npos) return usage(option + ": '" + text + "' is not LOW-HIGH", hint);
    auto lo = parse_integer(option, text.substr(0, dash), 1024, 65535);
    auto hi = parse_integer(option, text.substr(dash + 1), 1024, 65535);
    if (!lo || !hi || *hi < *lo) return usage(option + ": '" + text + "' is not LOW-HIGH", hint);
    return PortRange{static_cast<int>(*lo), static_cast<int>(*hi)};
}

namespace {

// The torchrun options that also make sense for dlaunch-mpi (one process per rank).
bool per_rank_option(const std::string& key) {
    static const std::set<std::string> keys{"--master-addr", "--master-port", "--rdzv-id", "--role",
                                            "--module",      "--no-python",   "--run-path"};
    return keys.contains(key);
}

}  // namespace

Program program_from_argv0(const std::string& argv0, Program own) {
    auto slash = argv0.rfind('/');
    std::string base = slash == std::string::npos ? argv0 : argv0.substr(slash + 1);
    if (base == "dlaunch-launch") return Program::LegacyLaunch;
    if (base == "dlaunch-paddle") return Program::Paddle;
    return own;
}

Result<std::vector<int>> parse_device_list(const std::string& option, const std::string& text) {
    std::vector<int> devices;
    for (auto& item : split(text, ',')) {
        auto d = parse_integer(option, item, 0, 1023);
        if (!d) return usage(option + ": '" + text + "' is not a device list", "give indices, e.g. 0,1");
        if (std::find(devices.begin(), devices.end(), *d) != devices.end())
            return usage(option + ": device " + item + " given twice", "give each device once");
        devices.push_back(static_cast<int>(*d));
    }
    return devices;
}

Result<std::string> parse_rendezvous_master(const std::string& option, const std::string& text) {
    auto colon = text.rfind(':');
    const std::string hint = "write HOST:PORT, e.g. 10.0.0.1:36789 (the command the first node printed)";
    if (text.find("://") != std::string::npos)
        return usage(option + ": '" + text + "': only dlaunch's own rendezvous (HOST:PORT) is supported, not etcd",
                     "give HOST:PORT of the first node; for elastic jobs under Slurm use requeue");
    if (colon == std::string::npos || colon == 0) return usage(option + ": '" + text + "' is not HOST:PORT", hint);
    auto port = parse_integer(option, text.substr(colon + 1), 1, 65535);
    if (!port) return usage(option + ": '" + text + "' is not HOST:PORT", hint);
    return text;
}

Result<EnvContract> parse_env_contract(const std::string& option, const std::string& text) {
    if (text == "torch") return EnvContract::Torch;
    if (text == "paddle") return EnvContract::Paddle;
    if (text == "all") return EnvContract::All;
    return usage(option + ": '" + text + "' is not a contract", "give torch, paddle or all");
}

namespace {

const char* program_name(Program program) {
    return program == Program::Mpi ? "dlaunch-mpi" : program == Program::LegacyLaunch ? "dlaunch-launch" : "dlaunch";
}

const char* usage_hint(Program program) {
    return program == Program::Mpi ? kMpiUsageHint : kUsageHint;
}

// The --help text above the options: what `program` does and its usage lines.
std::string description(Program program, Command::Mode mode) {
    if (mode == Command::Mode::Plan)
        return "dlaunch plan: print what `dlaunch [OPTIONS] SCRIPT` would start on this node, one row per rank\n"
               "(GPU, NIC, cores, memory, console, command) and the environment, and start nothing.\n\n"
               "usage: dlaunch plan [OPTIONS] [--format table|json|svg] SCRIPT [ARGS...]\n"
               "OPTIONS are a run's (below); --format json gives the same for tools, svg a picture of the node.";
    if (program == Program::Mpi)
        return "dlaunch-mpi: make this task of an MPI launcher's or srun's job a ready torch rank\n"
               "(environment, binding, MASTER_ADDR/PORT agreed over the launcher's PMIx or PMI), then exec\n"
               "SCRIPT (with --hang-timeout or TORCHELASTIC_ENABLE_FILE_TIMER=1: run it as a child and watch\n"
               "it). Which launchers, and what is read from each: docs/mpi-launchers.md.\n\n"
               "usage: mpirun -np N dlaunch-mpi [OPTIONS] SCRIPT [ARGS...]        (Open MPI)\n"
               "       mpiexec -n N dlaunch-mpi [OPTIONS] SCRIPT [ARGS...]        (MPICH, Intel MPI: Hydra)\n"
               "       srun [--mpi=pmix|pmi2] -N NODES -n N dlaunch-mpi [OPTIONS] SCRIPT [ARGS...]";
    std::string text =
        "dlaunch: start a distributed training job's workers on this node, the way torchrun does,\n"
        "faster and with failures explained.\n\n"
        "usage: dlaunch [OPTIONS] SCRIPT [ARGS...]\n"
        "       dlaunch plan [OPTIONS] [--format table|json|svg] SCRIPT [ARGS...]   (print the plan, start nothing)\n"
        "       dlaunch topo [--topology-xml FILE] [--format text|svg]   (print the GPUs, NICs, NUMA nodes and "
        "their affinity)\n"
        "       dlaunch stacks [--native] PID|LOG_DIR|slurm:JOBID   (print every rank's stacks of a running job)\n"
        "       dlaunch clean [--dry-run]   (remove what finished or killed runs left in $TMPDIR)\n"
        "       dlaunch report [--format text|svg] [--exit-code] RUN_DIR|LOG_DIR   (a run's attempts as a timeline)\n"
        "       dlaunch doctor [--format text|json] [--log-dir DIR]   (is this node ready? each check, its fix)";
    if (program == Program::LegacyLaunch)
        text +=
            "\n\ndlaunch-launch is dlaunch with torch.distributed.launch's contract: every worker also\n"
            "gets --local-rank=N before ARGS (--local_rank=N when the installed torch passes that, as\n"
            "torch < 2.0 does), unless --use-env is given (--local-rank-arg sets the spelling).\n"
            "Replace `python -m torch.distributed.launch` with `dlaunch-launch`.";
    return text;
}

// The --help text below the options: how SCRIPT runs and the exit codes (from exit_codes.hpp).
std::string footer(Program program, Command::Mode mode) {
    using namespace exit_code;
    auto n = [](int code) { return std::to_string(code); };
    if (mode == Command::Mode::Plan)
        return "Exit codes: 0 the plan was printed; " + n(kUsage) + " usage error, or a plan that cannot be made " +
               "(the message says why); " + n(kLaunchFailure) + " this machine could not be read.";
    if (program == Program::Mpi)
        return "SCRIPT runs as `$PYTHON_EXEC -u SCRIPT ARGS` (python3 from PATH when PYTHON_EXEC is unset).\n"
               "Rank, sizes and the node come from PMIx, else Slurm's SLURM_* or Open MPI's OMPI_* variables.\n\n"
               "Exit codes: " +
               n(kUsage) + " usage error or no launcher found; " + n(kLaunchFailure) +
               " setup failed (PMIx exchange, binding);\n" + n(kInternal) +
               " internal error; 127/126 SCRIPT could "
               "not be executed; " +
               n(kHang) +
               " SCRIPT hung (--hang-timeout); otherwise\nSCRIPT's own exit "
               "code (dlaunch-mpi execs it; when it watches SCRIPT, it ends as SCRIPT did, by the\nsame signal if "
               "SCRIPT was killed).";
    return "Worker command: SCRIPT runs as `$PYTHON_EXEC -u SCRIPT ARGS` (python3 from PATH when PYTHON_EXEC is "
           "unset);\n"
           "'${local_rank}' in ARGS becomes the worker's local rank; `--` ends the options (a SCRIPT may then\n"
           "start with '-'). Every torchrun option may also come from\n"
           "PET_<NAME> (e.g. PET_NPROC_PER_NODE=4); the command line wins.\n\n"
           "Exit codes: 0 all workers succeeded; " +
           n(kUsage) + " usage error (nothing was started); " + n(kGroupFailure) +
           " the nodes\ncould not form a group, or a node was lost; " + n(kInternal) + " internal error; " +
           n(kLaunchFailure) + " dlaunch could not start or\nsupervise the workers; " + n(kNotReady) +
           " not ready: a check of dlaunch doctor, or the health gate before an attempt, failed; " + n(kHang) +
           " a rank hung (--hang-timeout); " + n(kLogFailure) +
           " the workers succeeded but a log could not be written in full (a full log\ndirectory; "
           "--ignore-log-errors keeps 0); otherwise the root-cause worker's exit code (128+N if it "
           "died of signal N). Stopped by signal N, dlaunch dies of N once the workers are gone\n(a shell shows "
           "128+N for both; the wait status, e.g. sacct's ExitCode 0:N, tells them apart).";
}

// Where CLI11 puts each option's text, and the options, to ask whether they were given. Options a
// program does not have stay null.
struct Bindings {
    std::map<std::string, CLI::Option*> torchrun;  // by first long name
    std::map<std::string, std::string> values;
    std::map<std::string, bool> flags;
    std::string restart_backoff_text;
    CLI::Option* restart_backoff_opt = nullptr;
    std::string devices_text, grace_text, signals_text, port_range_text, fence_timeout_text, bind_text;
    std::string cpus_per_rank_text, topology_xml_text, local_rank_arg_text, env_contract_text;
    std::string warning_signal_text, checkpoint_signal_text, checkpoint_grace_text, master_text, join_timeout_text;
    std::string heartbeat_timeout_text, hang_timeout_text, health_check_text;
    CLI::Option* heartbeat_timeout_opt = nullptr;
    CLI::Option* health_check_opt = nullptr;
    bool no_health_check = false;
    bool ignore_log_errors = false;
    CLI::Option* hang_timeout_opt = nullptr;
    CLI::Option* devices_opt = nullptr;
    CLI::Option* grace_opt = nullptr;
    CLI::Option* signals_opt = nullptr;
    CLI::Option* port_range_opt = nullptr;
    CLI::Option* fence_timeout_opt = nullptr;
    CLI::Option* bind_opt = nullptr;
    CLI::Option* cpus_per_rank_opt = nullptr;
    CLI::Option* topology_xml_opt = nullptr;
    CLI::Option* local_rank_arg_opt = nullptr;
    CLI::Option* env_contract_opt = nullptr;
    CLI::Option* warning_signal_opt = nullptr;
    CLI::Option* checkpoint_signal_opt = nullptr;
    CLI::Option* checkpoint_grace_opt = nullptr;
    CLI::Option* master_opt = nullptr;
    CLI::Option* join_timeout_opt = nullptr;
    bool use_env = false;
    bool requeue = false;
    int verbose = 0;
    int quiet = 0;
    cli_app::PlanFormat format;
};

bool given(const CLI::Option* option) {
    return option && option->count();
}

// Registers torchrun's options in torchrun's order; for dlaunch-mpi only those that make sense per rank.
void add_torchrun_options(cli_app::Sections& s, Bindings& b, bool mpi) {
    for (auto& spec : torchrun_options()) {
        auto key = first_long_name(spec.names);
        if (mpi && !per_rank_option(key)) continue;
        const char* help = spec.help;
        if (mpi && key == "--master-addr")
            help =
                "Address of rank 0's node (default: rank 0's host name shared over PMIx or PMI, else the job's first "
                "node)";
        if (mpi && key == "--master-port")
            help =
                "Port of rank 0's store (default: a free port rank 0 shares over PMIx or PMI, else one derived from "
                "the "
                "job and step ids inside --port-range)";
        if (spec.flag)
            b.torchrun[key] = s.next().add_flag(spec.names, b.flags[key], help);
        else
            b.torchrun[key] = s.next().add_option(spec.names, b.values[key], help)->type_name(spec.metavar);
    }
}

// Registers dlaunch's options for devices, signals, ports and binding (dlaunch-mpi has no --grace, --signals).
void add_placement_options(cli_app::Sections& s, Bindings& b, bool mpi) {
    b.devices_opt = s.next()
                        .add_option("--devices", b.devices_text,
                                    "GPUs to use, by index among the usable ones (PCI order), e.g. 0,1")
                        ->type_name("LIST");
    if (!mpi)
        b.grace_opt = s.next()
                          .add_option("--grace", b.grace_text,
                                      "Seconds workers get to exit after a stop signal before SIGKILL (default 30)")
                          ->type_name("SECONDS");
    if (!mpi)
        b.restart_backoff_opt =
            s.next()
                .add_option("--restart-backoff", b.restart_backoff_text,
                            "Wait before restart N: S seconds, doubled at every restart up to MAX (default 1:30; "
                            "0: restart at once)")
                ->type_name("S[:MAX]");
    if (!mpi)
        b.signals_opt = s.next()
                            .add_option("--signals", b.signals_text,
                                        "Signals forwarded to workers (default TERM,INT,HUP,QUIT,USR1,USR2); "
                                        "TERM, INT, HUP and QUIT also stop dlaunch")
                            ->type_name("LIST");
    b.port_range_opt =
        s.next()
            .add_option("--port-range", b.port_range_text,
                        "Range for a MASTER_PORT derived from the Slurm job and step ids when "
                        "there is no PMIx (or, for dlaunch-mpi, PMI) to agree on one (default 21000-28999; also "
                        "DLAUNCH_PORT_RANGE)")
            ->type_name("LOW-HIGH");
    b.fence_timeout_opt = s.next()
                              .add_option("--fence-timeout", b.fence_timeout_text,
                                          "Seconds to wait for every task to agree on MASTER_ADDR/PORT over PMIx "
                                          "(or, for dlaunch-mpi, PMI) (default 60)")
                              ->type_name("SECONDS");
    b.bind_opt = s.next()
                     .add_option("--bind", b.bind_text,
                                 "closest: each rank on cores of its own next to its GPU (default when there "
                                 "are GPUs); numa, socket: on every core of its GPU's NUMA node or socket, shared; "
                                 "none: no CPU/memory binding (default without GPUs)")
                     ->type_name("closest|numa|socket|none");
    b.cpus_per_rank_opt =
        s.next()
            .add_option(
                "--cpus-per-rank", b.cpus_per_rank_text,
                "Whole cores per rank (default: the rank's share of the cores near its GPU); implies --bind closest")
            ->type_name("N");
    b.topology_xml_opt = s.next()
                             .add_option("--topology-xml", b.topology_xml_text,
                                         "Plan for the machine in this hwloc XML file instead of this one "
                                         "(also DLAUNCH_TOPOLOGY_XML); for tests and for inspecting other machines")
                             ->type_name("FILE");
}

// Registers the worker contract's options: --local-rank-arg and --use-env (not for dlaunch-mpi), --env.
void add_worker_contract_options(cli_app::Sections& s, Bindings& b, Program program) {
    if (program != Program::Mpi) {
        b.local_rank_arg_opt =
            s.next()
                .add_option("--local-rank-arg", b.local_rank_arg_text,
                            std::string("torch.distributed.launch's legacy contract: also pass each worker "
                                        "--local-rank=N (dash) or --local_rank=N (underscore, torch < 2.0 scripts) "
                                        "before ARGS; none: do not (default ") +
                                (program == Program::LegacyLaunch ? "what the installed torch.distributed.launch passes"
                                                                  : "none, as torchrun") +
                                ")")
                ->type_name("dash|underscore|none");
        s.next().add_flag("--use-env,--use_env", b.use_env,
                          "torch.distributed.launch's option: workers read LOCAL_RANK from the environment only "
                          "(no --local-rank argument); overrides --local-rank-arg");
    }
    b.env_contract_opt = s.next()
                             .add_option("--env", b.env_contract_text,
                                         "Worker environment: torch (torchrun's variables, default), paddle "
                                         "(paddle.distributed.launch's PADDLE_* and FLAGS_selected_gpus) or all (both)")
                             ->type_name("torch|paddle|all");
}

// Registers --requeue and the options that only apply with it.
void add_requeue_options(cli_app::Sections& s, Bindings& b) {
    s.next().add_flag("--requeue", b.requeue,
                      "In a Slurm batch job: the job comes back as itself, with --max-restarts counted over all its "
                      "attempts. Several nodes (with --max-restarts or --nnodes MIN:MAX) restart together inside the "
                      "allocation while the budget lasts and requeue the job, lost nodes excluded, once fewer than "
                      "--nnodes MIN are left; one node requeues at once. The "
                      "warning signal makes the workers checkpoint, then requeues; Slurm's SIGTERM (scontrol "
                      "requeue, preemption, node failure) makes them checkpoint too (docs/requeue.md)");
    b.warning_signal_opt = s.next()
                               .add_option("--warning-signal", b.warning_signal_text,
                                           "With --requeue: the signal Slurm sends before the job's end, as in "
                                           "#SBATCH --signal=USR1@120 (default USR1)")
                               ->type_name("SIG");
    b.checkpoint_signal_opt = s.next()
                                  .add_option("--checkpoint-signal", b.checkpoint_signal_text,
                                              "With --requeue: the signal workers get to checkpoint and exit "
                                              "(default: the warning signal)")
                                  ->type_name("SIG");
    b.checkpoint_grace_opt =
        s.next()
            .add_option(
                "--checkpoint-grace", b.checkpoint_grace_text,
                "With --requeue: seconds the workers get to checkpoint and exit before "
                "the requeue (default 120; never past the job's end, nor past Slurm's KillWait after its SIGTERM)")
            ->type_name("SECONDS");
}

// Registers the node rendezvous's --master and --join-timeout, and the group's --heartbeat-timeout.
void add_node_rendezvous_options(cli_app::Sections& s, Bindings& b) {
    b.master_opt = s.next()
                       .add_option("--master", b.master_text,
                                   "Join the node rendezvous at HOST:PORT (printed by the first node of "
                                   "`dlaunch --nnodes N` given no master address); it assigns node ranks")
                       ->type_name("HOST:PORT");
    b.join_timeout_opt = s.next()
                             .add_option("--join-timeout", b.join_timeout_text,
                                         "Seconds the node rendezvous (and the static form's meeting at the master) "
                                         "waits for every node (default 300; 600 in torchrun's c10d and static forms)")
                             ->type_name("SECONDS");
    b.heartbeat_timeout_opt =
        s.next()
            .add_option("--heartbeat-timeout", b.heartbeat_timeout_text,
                        "On several nodes restarting as a group (--max-restarts, --nnodes MIN:MAX): "
                        "seconds without a heartbeat after which a node counts as lost (default 10)")
            ->type_name("SECONDS");
}

// Registers the health gate's --no-health-check and --health-check.
void add_health_options(cli_app::Sections& s, Bindings& b) {
    s.next().add_flag("--no-health-check", b.no_health_check,
                      "Start attempts without the health gate's own checks (GPUs usable with no uncorrected ECC "
                      "error, an RDMA port active, room in the log directory), which every agent otherwise runs "
                      "before each attempt: a failing node is left out of the attempt, or the job is requeued without "
                      "it, or it ends with exit code 78");
    b.health_check_opt =
        s.next()
            .add_option("--health-check", b.health_check_text,
                        "Also run this shell command before every attempt on every node (after the gate's own "
                        "checks): a non-zero exit, or no end within 60 s, fails the node, its last line saying "
                        "why. It sees DLAUNCH_ATTEMPT and DLAUNCH_LOG_DIR")
            ->type_name("CMD");
}

// Reads --no-health-check and --health-check.
Status apply_health_options(const Bindings& b, LaunchRequest& req) {
    req.health_builtin = !b.no_health_check;
    req.ignore_log_errors = b.ignore_log_errors;
    if (!given(b.health_check_opt)) return Ok{};
    if (b.health_check_text.find_first_not_of(" \t") == std::string::npos)
        return usage("--health-check: the command is empty",
                     "give a shell command, e.g. --health-check /etc/dlaunch/check");
    req.health_check = b.health_check_text;
    return Ok{};
}

// Registers --hang-timeout.
void add_hang_options(cli_app::Sections& s, Bindings& b, bool mpi) {
    const std::string agent_text =
        "A rank with no progress for this many seconds (no output, no CPU time in its main thread; "
        "ranks that send heartbeats: no heartbeat) is hung: every rank's stacks go to the log directory, "
        "the likeliest culprit is named, and the hang is a failure (restart, or exit code 124). Also "
        "DLAUNCH_HANG_TIMEOUT; default: off, except for ranks that send heartbeats, whose timeout "
        "is learned; at least 1 (docs/hangs.md)";
    const std::string mpi_text =
        "This rank runs as a child of dlaunch-mpi, which watches it: no progress for this many seconds (no "
        "output, no CPU time in its main thread; with heartbeats: no heartbeat) is a hang: its stacks are "
        "printed and dlaunch-mpi exits 124. Also DLAUNCH_HANG_TIMEOUT; default: off, the rank replaces "
        "dlaunch-mpi (docs/hangs.md)";
    b.hang_timeout_opt =
        s.next().add_option("--hang-timeout", b.hang_timeout_text, mpi ? mpi_text : agent_text)->type_name("SECONDS");
}

// Reads --hang-timeout, else DLAUNCH_HANG_TIMEOUT.
Status apply_hang_options(const Bindings& b, const EnvMap& env, LaunchRequest& req) {
    if (!given(b.hang_timeout_opt)) {
        auto from_env = hang_timeout_from_env(env);
        if (!from_env) return from_env.error();
        req.hang_timeout_seconds = *from_env;
        return Ok{};
    }
    auto r = parse_hang_timeout("--hang-timeout", b.hang_timeout_text);
    if (!r) return r.error();
    req.hang_timeout_seconds = *r;
    return Ok{};
}

// Registers dlaunch's own options, after torchrun's, in --help's order.
void add_own_options(cli_app::Sections& s, Bindings& b, Program program, Command::Mode mode) {
    const bool mpi = program == Program::Mpi;
    add_placement_options(s, b, mpi);
    add_worker_contract_options(s, b, program);
    if (!mpi) {
        add_requeue_options(s, b);
        add_node_rendezvous_options(s, b);
        add_health_options(s, b);
        s.next().add_flag("--ignore-log-errors", b.ignore_log_errors,
                          "A worker log that cannot be written in full (a full or failing log directory) is said, "
                          "but the run keeps its own exit code (otherwise a run that succeeded exits " +
                              std::to_string(exit_code::kLogFailure) + ")");
    }
    add_hang_options(s, b, mpi);
    s.next().add_flag("-v,--verbose", b.verbose,
                      "More messages from dlaunch: each worker's start and end, options that have no effect "
                      "(DLAUNCH_LOG=debug does the same)");
    s.next().add_flag("-q,--quiet", b.quiet, "Fewer messages from dlaunch: warnings and errors only");
    cli_app::add_plan_format_option(s.next(), mode, b.format);
}

// A torchrun option's value: the command line's, else its PET_ variable's.
struct TorchrunValues {
    const Bindings& b;
    const EnvMap& env;

    // (where it came from: the option or the PET_ variable, text); none when neither is given or the
    // program does not have the option.
    std::optional<std::pair<std::string, std::string>> raw(const std::string& key) const {
        if (!b.torchrun.contains(key)) return std::nullopt;
        if (b.torchrun.at(key)->count()) return std::pair{key, b.values.at(key)};
        const char* pet = pet_variable(key);
        auto it = pet ? env.find(pet) : env.end();
        if (it != env.end()) return std::pair{std::string(pet), it->second};
        return std::nullopt;
    }

    // A flag's value; false when neither given nor set. Fails on a PET_ variable that is not a boolean.
    Result<bool> flag(const std::string& key) const {
        if (!b.torchrun.contains(key)) return false;
        if (b.torchrun.at(key)->count()) return b.flags.at(key);
        const char* pet = pet_variable(key);
        auto it = pet ? env.find(pet) : env.end();
        if (it != env.end()) return parse_bool_env(pet, it->second);
        return false;
    }
};

// Reads --nnodes, --nproc-per-node, --node-rank, --master-addr and --master-port.
Status apply_node_options(const TorchrunValues& in, LaunchRequest& req) {
    if (auto v = in.raw("--nnodes")) {
        auto r = parse_nnodes(v->first, v->second);
        if (!r) return r.error();
        req.nnodes = *r;
    }
    if (auto v = in.raw("--nproc-per-node")) {
        auto r = parse_nproc_per_node(v->first, v->second);
        if (!r) return r.error();
        req.nproc_per_node = *r;
    }
    if (auto v = in.raw("--node-rank")) {
        auto r = parse_integer(v->first, v->second, 0, 1 << 20);
        if (!r) return r.error();
        req.node_rank = static_cast<int>(*r);
    }
    if (auto v = in.raw("--master-addr")) {
        if (v->second.empty()) return usage(v->first + ": empty address", "give a host name or IP address");
        req.master_addr = v->second;
    }
    if (auto v = in.raw("--master-port")) {
        auto r = parse_integer(v->first, v->second, 1, 65535);
        if (!r) return r.error();
        req.master_port = static_cast<int>(*r);
    }
    return Ok{};
}

// Reads the --rdzv-* options and --standalone.
Status apply_rendezvous_options(const TorchrunValues& in, LaunchRequest& req) {
    if (auto v = in.raw("--rdzv-backend")) req.rdzv_backend = v->second;
    if (auto v = in.raw("--rdzv-endpoint")) req.rdzv_endpoint = v->second;
    if (auto v = in.raw("--rdzv-id")) {
        if (v->second.empty()) return usage(v->first + ": empty run id", "give a non-empty id");
        if (std::any_of(v->second.begin(), v->second.end(), [](unsigned char c) { return c < 0x20 || c == 0x7f; }))
            return usage(v->first + ": the run id contains a control character (a newline?)",
                         "give an id of printable characters, e.g. the job id");
        req.rdzv_id = v->second;
    }
    if (auto v = in.raw("--rdzv-conf"); v && !v->second.empty()) {
        for (auto& item : split(v->second, ',')) {
            auto eq = item.find('=');
            if (eq == std::string::npos || eq == 0)
                return usage(v->first + ": '" + item + "' is not KEY=VALUE", "write KEY=VALUE,KEY=VALUE");
            req.rdzv_conf[item.substr(0, eq)] = item.substr(eq + 1);
        }
    }
    auto standalone = in.flag("--standalone");
    if (!standalone) return standalone.error();
    req.standalone = *standalone;
    return Ok{};
}

// Reads --max-restarts, --monitor-interval, --start-method and --role.
Status apply_worker_group_options(const TorchrunValues& in, LaunchRequest& req) {
    if (auto v = in.raw("--max-restarts")) {
        auto r = parse_integer(v->first, v->second, 0, 1 << 20);
        if (!r) return r.error();
        req.max_restarts = static_cast<int>(*r);
    }
    if (auto v = in.raw("--monitor-interval")) {
        auto r = parse_seconds(v->first, v->second, false);
        if (!r) return r.error();
        req.monitor_interval = *r;
    }
    if (auto v = in.raw("--start-method")) {
        if (v->second != "spawn" && v->second != "fork" && v->second != "forkserver")
            return usage(v->first + ": '" + v->second + "' is not a start method", "give spawn, fork or forkserver");
        req.start_method = v->second;
    }
    if (auto v = in.raw("--role")) {
        if (v->second.empty()) return usage(v->first + ": empty role", "give a role name");
        req.role = v->second;
    }
    return Ok{};
}

// Reads how SCRIPT runs: --module, --no-python, --run-path (at most one of them).
Status apply_entry_options(const TorchrunValues& in, LaunchRequest& req) {
    auto module = in.flag("--module"), no_python = in.flag("--no-python"), run_path = in.flag("--run-path");
    for (auto* r : {&module, &no_python, &run_path})
        if (!*r) return r->error();
    if (*module && *no_python) return usage("--module and --no-python: a module needs Python", "use one of them");
    if (*run_path && (*module || *no_python))
        return usage("--run-path with --module or --no-python: run-path runs a Python file", "use one of them");
    req.entry = *no_python  ? EntryKind::Command
                : *module   ? EntryKind::PythonModule
                : *run_path ? EntryKind::RunPath
                            : EntryKind::PythonScript;
    return Ok{};
}

// Reads --log-dir, --redirects, --tee, --local-ranks-filter and --local-addr.
Status apply_output_options(const TorchrunValues& in, LaunchRequest& req) {
    if (auto v = in.raw("--log-dir")) {
        if (v->second.empty()) return usage(v->first + ": empty directory name", "give a directory");
        req.log_dir = v->second;
    }
    if (auto v = in.raw("--redirects")) {
        auto r = parse_std_selection(v->first, v->second);
        if (!r) return r.error();
        req.redirects = *r;
    }
    if (auto v = in.raw("--tee")) {
        auto r = parse_std_selection(v->first, v->second);
        if (!r) return r.error();
        req.tee = *r;
    }
    if (auto v = in.raw("--local-ranks-filter")) {
        auto r = parse_rank_list(v->first, v->second);
        if (!r) return r.error();
        req.local_ranks_filter = *r;
    }
    if (auto v = in.raw("--local-addr")) req.local_addr = v->second;
    return Ok{};
}

// torchrun's --numa-binding MODE: dlaunch's --bind under torchrun's names.
Result<topology::BindMode> parse_numa_binding(const std::string& option, const std::string& mode) {
    using topology::BindMode;
    if (mode == "node") return BindMode::Numa;
    if (mode == "socket") return BindMode::Socket;
    if (mode == "exclusive") return BindMode::Closest;
    if (mode == "core-complex")
        return usage(option + " core-complex: dlaunch does not plan by L3 cache domain",
                     "give exclusive (each rank on cores of its own next to its GPU), node or socket");
    return usage(option + ": '" + mode + "' is not a binding mode", "give node, socket or exclusive");
}

// Reads torchrun's newer options: --numa-binding, --signals-to-handle, --shutdown-timeout (else
// TORCH_ELASTIC_SHUTDOWN_TIMEOUT), --logs-specs (default only) and --virtual-local-rank. The first three are dlaunch's
// --bind, --signals and --grace under torchrun's names (a command line giving both is refused in apply_own_options).
Status apply_recent_options(const TorchrunValues& in, LaunchRequest& req) {
    if (auto v = in.raw("--numa-binding")) {
        auto r = parse_numa_binding(v->first, v->second);
        if (!r) return r.error();
        req.bind = *r;
    }
    if (auto v = in.raw("--signals-to-handle")) {
        auto r = parse_signal_list(v->first, v->second);
        if (!r) return r.error();
        req.forward_signals = *r;
    }
    auto timeout = in.raw("--shutdown-timeout");
    if (!timeout && in.b.torchrun.contains("--shutdown-timeout") && in.env.contains("TORCH_ELASTIC_SHUTDOWN_TIMEOUT"))
        timeout = {"TORCH_ELASTIC_SHUTDOWN_TIMEOUT", in.env.at("TORCH_ELASTIC_SHUTDOWN_TIMEOUT")};
    if (timeout) {
        auto r = parse_seconds(timeout->first, timeout->second, true);
        if (!r) return r.error();
        req.grace_seconds = *r;
    }
    if (auto v = in.raw("--logs-specs"); v && v->second != "default")
        return usage(v->first + " " + v->second +
                         ": dlaunch cannot load torchrun.logs_specs entry points (they are Python classes); it "
                         "writes the layout of torch's default one",
                     "leave the option out or give 'default'; --log-dir, --redirects, --tee and "
                     "--local-ranks-filter choose what goes where");
    auto virtual_rank = in.flag("--virtual-local-rank");
    if (!virtual_rank) return virtual_rank.error();
    req.virtual_local_rank = *virtual_rank;
    return Ok{};
}

// Reads torchrun's options, each from the command line or else its PET_ variable, in torchrun's order.
Status apply_torchrun_options(const TorchrunValues& in, LaunchRequest& req) {
    for (auto* apply : {apply_node_options, apply_rendezvous_options, apply_worker_group_options, apply_entry_options,
                        apply_output_options, apply_recent_options})
        if (auto s = apply(in, req); !s) return s;
    return Ok{};
}

// Reads --devices, --grace, --signals (default: default_forward_signals()), -v and -q.
Status apply_process_options(const Bindings& b, LaunchRequest& req) {
    if (given(b.devices_opt)) {
        auto devices = parse_device_list("--devices", b.devices_text);
        if (!devices) return devices.error();
        req.devices = *devices;
    }
    if (given(b.grace_opt)) {
        auto r = parse_seconds("--grace", b.grace_text, true);
        if (!r) return r.error();
        req.grace_seconds = *r;
    }
    if (given(b.restart_backoff_opt)) {
        auto r = parse_restart_backoff(b.restart_backoff_text);
        if (!r) return r.error();
        req.restart_backoff = *r;
    }
    if (req.forward_signals.empty()) req.forward_signals = default_forward_signals();
    if (given(b.signals_opt)) {
        auto r = parse_signal_list("--signals", b.signals_text);
        if (!r) return r.error();
        req.forward_signals = *r;
    }
    req.verbosity = b.verbose - b.quiet;
    return Ok{};
}

// Reads --bind, --cpus-per-rank, --port-range (else DLAUNCH_PORT_RANGE) and --fence-timeout.
Status apply_binding_options(const Bindings& b, const EnvMap& env, LaunchRequest& req) {
    if (given(b.bind_opt)) {
        req.bind = topology::parse_bind_mode(b.bind_text);
        if (!req.bind)
            return usage("--bind: '" + b.bind_text + "' is not a binding", "give closest, numa, socket or none");
    }
    if (given(b.cpus_per_rank_opt)) {
        auto r = parse_integer("--cpus-per-rank", b.cpus_per_rank_text, 1, 4096);
        if (!r) return r.error();
        req.cpus_per_rank = static_cast<int>(*r);
    }
    if (given(b.port_range_opt) || env.contains("DLAUNCH_PORT_RANGE")) {
        bool cli = given(b.port_range_opt);
        auto r = parse_port_range(cli ? "--port-range" : "DLAUNCH_PORT_RANGE",
                                  cli ? b.port_range_text : env.at("DLAUNCH_PORT_RANGE"));
        if (!r) return r.error();
        req.port_range = *r;
    }
    if (given(b.fence_timeout_opt)) {
        auto r = parse_seconds("--fence-timeout", b.fence_timeout_text, false);
        if (!r) return r.error();
        req.fence_timeout_seconds = *r;
    }
    return Ok{};
}

// Reads the worker contract: the --local-rank argument (on for dlaunch-launch; --local-rank-arg, --use-env)
// and --env.
Status apply_worker_contract_options(const Bindings& b, Program program, LaunchRequest& req) {
    if (program == Program::LegacyLaunch) req.local_rank_arg = "--local-rank";
    req.local_rank_arg_from_torch = program == Program::LegacyLaunch && !given(b.local_rank_arg_opt) && !b.use_env;
    if (given(b.local_rank_arg_opt)) {
        if (b.local_rank_arg_text == "dash")
            req.local_rank_arg = "--local-rank";
        else if (b.local_rank_arg_text == "underscore")
            req.local_rank_arg = "--local_rank";
        else if (b.local_rank_arg_text == "none")
            req.local_rank_arg.clear();
        else
            return usage("--local-rank-arg: '" + b.local_rank_arg_text + "' is not a spelling",
                         "give dash (--local-rank=N), underscore (--local_rank=N) or none");
    }
    if (b.use_env) req.local_rank_arg.clear();
    if (given(b.env_contract_opt)) {
        auto r = parse_env_contract("--env", b.env_contract_text);
        if (!r) return r.error();
        req.env_contract = *r;
    }
    return Ok{};
}

// Reads --master, --join-timeout and --heartbeat-timeout.
Status apply_node_rendezvous_options(const Bindings& b, LaunchRequest& req) {
    if (given(b.master_opt)) {
        auto r = parse_rendezvous_master("--master", b.master_text);
        if (!r) return r.error();
        req.rendezvous_master = *r;
    }
    if (given(b.join_timeout_opt)) {
        auto r = parse_seconds("--join-timeout", b.join_timeout_text, false);
        if (!r) return r.error();
        req.rendezvous_timeout_seconds = *r;
    }
    if (given(b.heartbeat_timeout_opt)) {
        auto r = parse_seconds("--heartbeat-timeout", b.heartbeat_timeout_text, false);
        if (!r) return r.error();
        req.heartbeat_timeout_seconds = *r;
    }
    return Ok{};
}

// Exactly one signal, by name or number; fails on a list.
Result<int> parse_one_signal(const std::string& option, const std::string& text) {
    auto r = parse_signal_list(option, text);
    if (!r) return r.error();
    if (r->size() != 1) return usage(option + ": '" + text + "' is not one signal", "give one name, e.g. USR1");
    return r->front();
}

// Reads --requeue and its options, which are refused without it; the warning signal may not be a stop signal.
Status apply_requeue_options(const Bindings& b, LaunchRequest& req) {
    req.requeue.enabled = b.requeue;
    for (CLI::Option* o : {b.warning_signal_opt, b.checkpoint_signal_opt, b.checkpoint_grace_opt})
        if (given(o) && !b.requeue)
            return usage(o->get_name() + " only applies with --requeue",
                         "add --requeue (in a Slurm batch job), or leave " + o->get_name() + " out");
    if (given(b.warning_signal_opt)) {
        auto r = parse_one_signal("--warning-signal", b.warning_signal_text);
        if (!r) return r.error();
        if (stop_signals().contains(*r))
            return usage(
                "--warning-signal " + signal_name(*r) + " is a stop signal (Slurm also sends it to end the job)",
                "use USR1 or USR2, as in #SBATCH --signal=USR1@120");
        req.requeue.warning_signal = req.requeue.checkpoint_signal = *r;
    }
    if (given(b.checkpoint_signal_opt)) {
        auto r = parse_one_signal("--checkpoint-signal", b.checkpoint_signal_text);
        if (!r) return r.error();
        req.requeue.checkpoint_signal = *r;
    }
    if (given(b.checkpoint_grace_opt)) {
        auto r = parse_seconds("--checkpoint-grace", b.checkpoint_grace_text, true);
        if (!r) return r.error();
        req.requeue.checkpoint_grace = *r;
    }
    return Ok{};
}

// dlaunch's options that torchrun spells otherwise: a command line gives one name of each.
Status refuse_both_names(const TorchrunValues& in, const Bindings& b) {
    const std::tuple<const char*, const char*, CLI::Option*> pairs[] = {
        {"--numa-binding", "--bind", b.bind_opt},
        {"--signals-to-handle", "--signals", b.signals_opt},
        {"--shutdown-timeout", "--grace", b.grace_opt}};
    for (auto [theirs, ours, option] : pairs)
        if (auto v = in.raw(theirs); v && given(option))
            return usage(v->first + " and " + ours + " set the same thing", "give one of them");
    return Ok{};
}

// One of the --rdzv-conf keys that dlaunch's node rendezvous applies (request.hpp), in seconds.
Result<std::optional<double>> c10d_seconds(const LaunchRequest& req, const std::string& key) {
    auto it = req.rdzv_conf.find(key);
    if (it == req.rdzv_conf.end()) return std::optional<double>{};
    auto r = parse_seconds("--rdzv-conf " + key, it->second, key == kC10dLastCallTimeout);
    if (!r) return r.error();
    return std::optional<double>{*r};
}

// torchrun's static form across nodes: the agents meet at the master (plan.hpp) for --join-timeout, else the
// static rendezvous's --rdzv-conf timeout, else its 600 s. The rest is checked when the agent starts.
Status apply_static_options(const Bindings& b, LaunchRequest& req) {
    if (!static_form_across_nodes(req)) return Ok{};
    auto timeout = c10d_seconds(req, kStaticTimeout);
    if (!timeout) return timeout.error();
    if (*timeout && given(b.join_timeout_opt))
        return usage("--join-timeout and --rdzv-conf timeout: one setting given twice", "give one of them");
    if (!given(b.join_timeout_opt)) req.rendezvous_timeout_seconds = timeout->value_or(600);
    return Ok{};
}

// torchrun's c10d form across nodes: the node rendezvous at --rdzv-endpoint (torchrun's default port 29400),
// torchrun's join window (join_timeout 600 s; last_call_timeout 30 s once MIN of MIN:MAX nodes are there).
Status apply_c10d_options(const Bindings& b, LaunchRequest& req) {
    if (req.rdzv_backend != "c10d" || req.nnodes.max <= 1 || req.standalone) return Ok{};
    if (req.rendezvous_master)
        return usage("--master with --rdzv-backend c10d: two rendezvous", "give one: --rdzv-endpoint HOST:PORT");
    if (req.rdzv_endpoint.empty())
        return usage("--rdzv-backend c10d --nnodes " + std::to_string(req.nnodes.max) + ": no --rdzv-endpoint",
                     "give --rdzv-endpoint HOST[:PORT], the same on every node; the agent on HOST serves it");
    const std::string& ep = req.rdzv_endpoint;
    if (ep.find("://") != std::string::npos || ep.front() == '[')
        return usage("--rdzv-endpoint '" + ep + "': dlaunch's c10d rendezvous takes HOST[:PORT] over IPv4",
                     "give a host name or IPv4 address, e.g. node1:29400");
    const bool has_port = ep.find(':') != std::string::npos;
    auto endpoint =
        parse_rendezvous_master("--rdzv-endpoint", has_port ? ep : ep + ":" + std::to_string(kDefaultC10dPort));
    if (!endpoint) return endpoint.error();
    req.c10d_endpoint = *endpoint;
    auto join = c10d_seconds(req, kC10dJoinTimeout);
    if (!join) return join.error();
    if (*join && given(b.join_timeout_opt))
        return usage("--join-timeout and --rdzv-conf join_timeout: one setting given twice", "give one of them");
    if (!given(b.join_timeout_opt)) req.rendezvous_timeout_seconds = join->value_or(600);
    auto last_call = c10d_seconds(req, kC10dLastCallTimeout);
    if (!last_call) return last_call.error();
    req.rendezvous_last_call_seconds = last_call->value_or(30);
    return Ok{};
}

// torchrun's etcd backends across nodes: the nodes meet through etcd (docs/etcd.md), with each backend's
// --rdzv-conf keys: etcd's timeout (600 s), etcd-v2's join_timeout (600 s) and read_timeout (60 s), both's
// last_call_timeout (30 s), protocol and the TLS files.
Status apply_etcd_options(const Bindings& b, LaunchRequest& req) {
    const bool v2 = req.rdzv_backend == "etcd-v2";
    if ((req.rdzv_backend != "etcd" && !v2) || req.standalone) return Ok{};
    const std::string backend = "--rdzv-backend " + req.rdzv_backend;
    if (req.rendezvous_master)
        return usage("--master with " + backend + ": two rendezvous", "give one: --rdzv-endpoint HOST:2379 of etcd");
    if (req.nnodes.max > static_cast<int>(etcd::kMaxMembers))
        return usage(
            backend + " --nnodes " + std::to_string(req.nnodes.max) + ": more nodes than one attempt in etcd holds",
            "give at most " + std::to_string(etcd::kMaxMembers) + " nodes");
    if (req.node_rank || req.master_addr || req.master_port)
        return usage(std::string(req.node_rank     ? "--node-rank"
                                 : req.master_addr ? "--master-addr"
                                                   : "--master-port") +
                         " with " + backend +
                         ": the nodes take their ranks, and the master its address, when they "
                         "meet in etcd",
                     "leave it out (torchrun's static form uses it)");
    if (req.rdzv_endpoint.empty())
        return usage(
            backend + " --nnodes " + std::to_string(req.nnodes.max) + ": no --rdzv-endpoint",
            "give --rdzv-endpoint HOST[:PORT] of etcd's client port (2379 by default), the same on every node");
    auto conf = [&](const char* key) {
        auto it = req.rdzv_conf.find(key);
        return it == req.rdzv_conf.end() ? std::string() : it->second;
    };
    auto endpoint = etcd::parse_endpoint(req.rdzv_endpoint);
    if (!endpoint) return usage("--rdzv-endpoint: " + endpoint.error().problem(), endpoint.error().hint);
    if (const std::string protocol = conf("protocol"); !protocol.empty()) {
        if (protocol != "http" && protocol != "https")
            return usage("--rdzv-conf protocol=" + protocol + ": not a protocol etcd speaks", "give http or https");
        if (req.rdzv_endpoint.find("://") != std::string::npos && protocol != endpoint->scheme)
            return usage("--rdzv-conf protocol=" + protocol + " and --rdzv-endpoint " + req.rdzv_endpoint + " disagree",
                         "give the protocol once");
        endpoint->scheme = protocol;
    }
    EtcdTerms terms{endpoint->url(), conf(v2 ? "ca_cert" : "cacert"), conf(v2 ? "ssl_cert" : "cert"),
                    conf(v2 ? "ssl_cert_key" : "key")};
    const std::string cert_key = v2 ? "ssl_cert" : "cert", key_key = v2 ? "ssl_cert_key" : "key";
    if (terms.cert.empty() != terms.key.empty())
        return usage("--rdzv-conf " + (terms.cert.empty() ? key_key : cert_key) + " without " +
                         (terms.cert.empty() ? cert_key : key_key),
                     "give this agent's certificate and its key together");
    if (endpoint->scheme == "http" && (!terms.cacert.empty() || !terms.cert.empty()))
        return usage("--rdzv-conf: TLS files for an http:// endpoint", "add --rdzv-conf protocol=https, or drop them");
    auto join = c10d_seconds(req, v2 ? kC10dJoinTimeout : kStaticTimeout);
    if (!join) return join.error();
    if (*join && given(b.join_timeout_opt))
        return usage("--join-timeout and --rdzv-conf " + std::string(v2 ? kC10dJoinTimeout : kStaticTimeout) +
                         ": one setting given twice",
                     "give one of them");
    if (!given(b.join_timeout_opt)) req.rendezvous_timeout_seconds = join->value_or(600);
    auto last_call = c10d_seconds(req, kC10dLastCallTimeout);
    if (!last_call) return last_call.error();
    req.rendezvous_last_call_seconds = last_call->value_or(30);
    if (v2) {
        auto read = c10d_seconds(req, "read_timeout");
        if (!read) return read.error();
        terms.request_seconds = read->value_or(60);
    }
    req.etcd = std::move(terms);
    return Ok{};
}

// Reads dlaunch's own options, in the order their errors are reported.
Status apply_own_options(const Bindings& b, const EnvMap& env, Program program, LaunchRequest& req) {
    if (auto s = apply_process_options(b, req); !s) return s;
    if (auto s = apply_binding_options(b, env, req); !s) return s;
    if (auto s = apply_worker_contract_options(b, program, req); !s) return s;
    if (auto s = apply_node_rendezvous_options(b, req); !s) return s;
    if (auto s = apply_requeue_options(b, req); !s) return s;
    if (auto s = apply_health_options(b, req); !s) return s;
    if (auto s = apply_hang_options(b, env, req); !s) return s;
    if (given(b.topology_xml_opt))
        req.topology_xml = b.topology_xml_text;
    else if (auto it = env.find("DLAUNCH_TOPOLOGY_XML"); it != env.end() && !it->second.empty())
        req.topology_xml = it->second;
    return Ok{};
}

}  // namespace

namespace {

// DLAUNCH_LOG: one of spdlog's level names (an unknown name would silence dlaunch).
Status check_log_level(const EnvMap& env) {
    const std::string level = str_var(env, "DLAUNCH_LOG");
    static const std::set<std::string> known{"",        "trace", "debug", "info",     "warn",
                                             "warning", "err",   "error", "critical", "off"};
    if (known.contains(level)) return Ok{};
    return usage("DLAUNCH_LOG=" + level + ": not a log level",
                 "give trace, debug, info, warn, error, critical or off (or unset it)");
}

}  // namespace

Result<Command> parse_command_line(const std::vector<std::string>& in_args, const EnvMap& env, Program program) {
    if (auto s = check_log_level(env); !s) return s.error();
    if (program == Program::Paddle) return parse_paddle_command_line(in_args, env);
    const bool mpi = program == Program::Mpi;
    Command cmd;
    cmd.request.launcher = mpi ? Launcher::PerRank : Launcher::Agent;
    std::vector<std::string> args = in_args;
    if (!mpi && !args.empty() && args.front() == "stacks")
        return parse_stacks_command(std::vector<std::string>(args.begin() + 1, args.end()));
    if (!mpi && !args.empty() && args.front() == "clean")
        return parse_clean_command(std::vector<std::string>(args.begin() + 1, args.end()));
    if (!mpi && !args.empty() && args.front() == "doctor")
        return parse_doctor_command(std::vector<std::string>(args.begin() + 1, args.end()), env);
    if (!mpi && !args.empty() && args.front() == "report")
        return parse_report_command(std::vector<std::string>(args.begin() + 1, args.end()));
    if (!mpi && !args.empty() && args.front() == "topo")
        return parse_topo_command(std::vector<std::string>(args.begin() + 1, args.end()), env);
    if (!mpi && !args.empty() && args.front() == "plan") {
        cmd.mode = Command::Mode::Plan;
        args.erase(args.begin());
    }

    Bindings b;
    CLI::App app{description(program, cmd.mode), program_name(program)};
    app.footer(footer(program, cmd.mode));
    cli_app::configure(app);
    cli_app::Sections sections(app);
    add_torchrun_options(sections, b, mpi);
    add_own_options(sections, b, program, cmd.mode);
    std::vector<std::string> script;
    auto answered = cli_app::parse(app, args, usage_hint(program), cmd, &script);
    if (!answered) return answered.error();
    if (*answered) return cmd;
    if (given(b.format.option)) cmd.plan_format = b.format.text;

    if (auto s = apply_torchrun_options(TorchrunValues{b, env}, cmd.request); !s) return s.error();
    if (auto s = apply_own_options(b, env, program, cmd.request); !s) return s.error();
    if (auto s = refuse_both_names(TorchrunValues{b, env}, b); !s) return s.error();
    if (auto s = apply_c10d_options(b, cmd.request); !s) return s.error();
    if (auto s = apply_etcd_options(b, cmd.request); !s) return s.error();
    if (auto s = apply_static_options(b, cmd.request); !s) return s.error();
    if (auto s = cli_app::take_script(app, script, program_name(program), usage_hint(program), cmd.request); !s)
        return s.error();
    return cmd;
}

}  // namespace dlaunch
