// dlaunch-paddle's command line: paddle.distributed.launch's options (Paddle 2.4-2.6, read from
// python/paddle/distributed/launch/context/args_envs.py) mapped onto a LaunchRequest. Every option Paddle
// documents is either carried out or refused with a reason; none is ignored.
//
// Differences from Paddle, on purpose (docs/paddle.md): an option on the command line wins over its
// PADDLE_* variable (Paddle lets the variable win and warns); --max_restart takes effect with
// --elastic_level 1 on one node (Paddle's only with an etcd master); the default --log_dir is none (all
// output on the console) instead of ./log.
#include <CLI/CLI.hpp>
#include <algorithm>

#include "cli_app.hpp"
#include "dlaunch/cli.hpp"
#include "dlaunch/etcd_client.hpp"
#include "dlaunch/etcd_membership.hpp"
#include "dlaunch/text.hpp"

namespace dlaunch {
namespace {

constexpr const char* kHint = "run 'dlaunch-paddle --help' for the options";

Error usage(const std::string& what, const std::string& hint = kHint) {
    return cli_app::usage_error(what, hint);
}

struct PaddleOption {
    const char* names;
    const char* env;  // the PADDLE_* variable Paddle reads for it ("" when none)
    const char* help;
    const char* metavar;
};

// Carried out (the rest of the table is refused below).
const std::vector<PaddleOption>& options() {
    static const std::vector<PaddleOption> specs{
        {"--master", "PADDLE_MASTER",
         "HOST:PORT of the node rendezvous (the first node prints it), or etcd://HOST:PORT: the nodes meet through "
         "etcd",
         "HOST:PORT"},
        {"--rank", "PADDLE_RANK", "This node's rank; -1 (default): assigned in joining order, the master's node is 0",
         "R"},
        {"--nnodes", "PADDLE_NNODES",
         "Number of nodes, N or MIN:MAX (the rendezvous waits for MAX until the timeout, then starts with at least "
         "MIN)",
         "N|MIN:MAX"},
        {"--nproc_per_node,--nproc-per-node", "PADDLE_NPROC_PER_NODE",
         "Workers per node (default: one per device in --devices, else per visible GPU, else 1)", "N"},
        {"--devices,--gpus", "PADDLE_DEVICES", "GPUs to use, by index among the visible ones, e.g. 0,1", "LIST"},
        {"--host", "POD_IP", "This node's IP address, as the other nodes reach it", "IP"},
        {"--ips", "PADDLE_IPS",
         "Every node's IP, comma separated, the same on every node; this node's rank is its position (no rendezvous)",
         "IP,IP,..."},
        {"--start_port", "PADDLE_START_PORT", "First endpoint port with --ips (default 6070)", "PORT"},
        {"--log_dir", "PADDLE_LOG_DIR",
         "Write workerlog.N (each worker's stdout and stderr) and endpoints.log here; the console shows local rank 0",
         "DIR"},
        {"--log_level", "PADDLE_LOG_LEVEL", "DEBUG, INFO (default), WARNING or ERROR: dlaunch's own messages", "LEVEL"},
        {"--log_overwrite", "PADDLE_LOG_OVERWRITE",
         "true: truncate workerlog.N at start instead of appending (default false)", "BOOL"},
        {"--job_id", "PADDLE_JOB_ID",
         "Job name: PADDLE_JOB_ID and TORCHELASTIC_RUN_ID of the workers (default: default)", "ID"},
        {"--run_mode", "PADDLE_RUN_MODE", "collective (default) or ps (parameter server)", "MODE"},
        {"--max_restart", "PADDLE_MAX_RESTART",
         "Restarts of the workers after a failure with --elastic_level 1 (default 3)", "N"},
        {"--elastic_level", "PADDLE_ELASTIC_LEVEL",
         "-1 (default) or 0: a failure ends the job; 1: restart on one node up to --max_restart times", "L"},
        {"--elastic_timeout", "PADDLE_ELASTIC_TIMEOUT",
         "Seconds: the rendezvous waits 10x this for --nnodes N (default 30; 120 with --elastic_server), this "
         "long for --nnodes MIN:MAX",
         "SECONDS"},
        {"--elastic_server", "PADDLE_ELASTIC_SERVER",
         "HOST:PORT of etcd: Paddle's fleet elastic form, with --np and --job_id; the same as --master "
         "etcd://HOST:PORT --nnodes NP",
         "HOST:PORT"},
        {"--np", "PADDLE_ELASTIC_NP", "With --elastic_server: the number of nodes, N or MIN:MAX", "N|MIN:MAX"},
        {"--server_num", "PADDLE_SERVER_NUM", "PS mode: parameter servers on this node", "N"},
        {"--trainer_num", "PADDLE_TRAINER_NUM", "PS mode: trainers on this node", "N"},
        {"--heter_worker_num", "", "PS mode: heterogeneous workers on this node", "N"},
        {"--servers", "PADDLE_SERVERS_ENDPOINTS", "PS mode: every server's IP:PORT, comma separated", "EPS"},
        {"--trainers", "PADDLE_TRAINERS_ENDPOINTS", "PS mode: every trainer's IP:PORT, comma separated", "EPS"},
        {"--heter_workers", "", "PS mode: every heterogeneous worker's IP:PORT, comma separated", "EPS"},
        {"--gloo_port", "PADDLE_GLOO_PORT",
         "PS mode: port of the Gloo HTTP store on the first server's host (default 6767)", "PORT"},
        {"--with_gloo", "PADDLE_WITH_GLOO", "PS mode: PADDLE_WITH_GLOO for the workers, 0 or 1 (default 1)", "0|1"},
    };
    return specs;
}

struct Refused {
    const char* names;
    const char* why;
};

// Paddle's options dlaunch-paddle does not carry out: refused with the reason, never ignored.
const std::vector<Refused>& refused() {
    static const std::vector<Refused> list{
        {"--legacy", "selects Paddle's old fleet launcher; dlaunch-paddle has one behaviour; drop --legacy"},
        {"--npus", "Ascend NPUs are not supported by dlaunch; use NVIDIA or AMD GPUs (--devices)"},
        {"--xpus", "Kunlun XPUs are not supported by dlaunch; use NVIDIA or AMD GPUs (--devices)"},
        {"--auto_parallel_config",
         "Paddle's auto-parallel tuner is not part of dlaunch; run it with paddle.distributed.launch"},
        {"--auto_tuner_json", "Paddle's auto-tuner is not part of dlaunch; run it with paddle.distributed.launch"},
        {"--sort_ip",
         "dlaunch assigns node ranks in joining order or from --rank; give --rank on each node for a fixed order"},
        {"--enable_gpu_log", "dlaunch writes no GPU utilisation log; use nvidia-smi or DCGM; drop the option"},
        {"--scale",
         "changes a running fleet elastic job's node count in etcd; dlaunch's jobs grow by starting "
         "another node with the same command while they are below MAX of --np"},
        {"--force", "forces a running fleet elastic job's node count in etcd; start or stop nodes instead"},
        {"--elastic_pre_hook",
         "dlaunch runs no command of its own before the workers; run it at the start of the training script"},
    };
    return list;
}

std::string first_long(const std::string& names) {
    return split(names, ',').front();
}

Result<bool> parse_bool(const std::string& option, const std::string& text) {
    std::string t;
    for (char c : text) t.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
    if (t == "1" || t == "true" || t == "yes" || t == "on" || t == "y" || t == "t") return true;
    if (t == "0" || t == "false" || t == "no" || t == "off" || t == "n" || t == "f") return false;
    return usage(option + ": '" + text + "' is not a boolean", "give true or false (1 or 0)");
}

Result<std::vector<std::string>> parse_endpoints(const std::string& option, const std::string& text) {
    std::vector<std::string> eps;
    for (auto& item : split(text, ',')) {
        auto colon = item.rfind(':');
        if (item.empty() || colon == std::string::npos || colon == 0 ||
            !parse_integer(option, item.substr(colon + 1), 1, 65535))
            return usage(option + ": '" + item + "' is not IP:PORT",
                         "give a comma list like 10.0.0.1:6170,10.0.0.2:6170");
        if (std::find(eps.begin(), eps.end(), item) != eps.end())
            return usage(option + ": endpoint " + item + " given twice", "give each endpoint once");
        eps.push_back(item);
    }
    return eps;
}

constexpr const char* kDescription =
    "dlaunch-paddle: paddle.distributed.launch's command line on dlaunch: start a Paddle job's workers on\n"
    "this node with Paddle's environment (PADDLE_*, FLAGS_selected_gpus) and torch's.\n\n"
    "usage: dlaunch-paddle [OPTIONS] SCRIPT [ARGS...]\n"
    "       dlaunch-paddle plan [OPTIONS] [--format table|json|svg] SCRIPT [ARGS...]   (print the plan)\n\n"
    "Replace `python -m paddle.distributed.launch` with `dlaunch-paddle`. With --nnodes N > 1 and no\n"
    "--master (or --ips), this node hosts the rendezvous and prints the command to run on the others.";

constexpr const char* kFooter =
    "SCRIPT ending in .py runs as `$PYTHON_EXEC -u SCRIPT ARGS` (python3 from PATH when PYTHON_EXEC is\n"
    "unset); any other SCRIPT is executed directly. Each option may also come from the PADDLE_* variable\n"
    "Paddle reads for it (named in docs/paddle.md); the command line wins.\n\n"
    "Refused (no effect in dlaunch, so never silently ignored): --legacy, --npus, --xpus,\n"
    "--auto_parallel_config, --auto_tuner_json, --sort_ip, --enable_gpu_log, --scale, --force,\n"
    "--elastic_pre_hook, --run_mode ps-heter|rpc, an IPU job.\n\n"
    "Exit codes: 0 all workers succeeded; 2 usage error (nothing was started); 3 dlaunch could not\n"
    "start or supervise the workers, or the nodes did not all join; otherwise the root-cause worker's\n"
    "exit code (128+N if it died of signal N).";

// Where CLI11 puts each option's text, and the options, to ask whether they were given.
struct Bindings {
    std::map<std::string, std::string> values;
    std::map<std::string, CLI::Option*> opts;  // by first long name
    std::map<std::string, std::string> refused_values;
    cli_app::PlanFormat format;
};

// Registers the options carried out, in Paddle's order, then the refused ones (hidden from --help).
void add_options(cli_app::Sections& s, Bindings& b) {
    for (auto& spec : options()) {
        auto key = first_long(spec.names);
        b.opts[key] = s.next().add_option(spec.names, b.values[key], spec.help)->type_name(spec.metavar);
    }
    for (auto& r : refused()) {
        auto* o = s.next().add_option(r.names, b.refused_values[r.names], "refused")->expected(0, 1);
        o->group("");  // hidden from --help; listed in the footer
    }
}

// Fails on the first refused option given, with the reason it is refused.
Status check_refused(const CLI::App& app) {
    for (auto& r : refused())
        if (app.get_option(r.names)->count()) return usage(std::string(r.names) + ": " + r.why, "");
    return Ok{};
}

// An option's value: the command line's, else its PADDLE_* variable's (when set and not empty).
struct PaddleValues {
    const Bindings& b;
    const EnvMap& env;

    // (where it came from: the option or the variable, text); none when neither is given.
    std::optional<std::pair<std::string, std::string>> raw(const std::string& key) const {
        if (b.opts.at(key)->count()) return std::pair{key, b.values.at(key)};
        for (auto& spec : options())
            if (first_long(spec.names) == key && *spec.env) {
                auto it = env.find(spec.env);
                if (it != env.end() && !it->second.empty()) return std::pair{std::string(spec.env), it->second};
            }
        return std::nullopt;
    }

    // A whole number from `lo` to `hi`; none when not given.
    Result<std::optional<int>> integer(const std::string& key, long long lo, long long hi) const {
        auto v = raw(key);
        if (!v) return std::optional<int>{};
        auto r = parse_integer(v->first, v->second, lo, hi);
        if (!r) return r.error();
        return std::optional<int>(static_cast<int>(*r));
    }
};

// Whether the option's value came from the command line (else from its PADDLE_* variable).
bool on_command_line(const std::pair<std::string, std::string>& v) {
    return v.first.starts_with("--");
}

// An option as the user gave it, for messages: "--master etcd://h:2379", or "PADDLE_MASTER=etcd://h:2379".
std::string given_as(const std::pair<std::string, std::string>& v) {
    return v.first + (on_command_line(v) ? " " : "=") + v.second;
}

// Paddle's elastic modes: the nodes meet through etcd at `host_port` (docs/etcd.md), as under --rdzv-backend
// etcd; `given` says where it came from and what it should have looked like.
Status meet_through_etcd(const std::string& host_port, const std::string& given, const std::string& example,
                         LaunchRequest& req) {
    auto endpoint = etcd::parse_endpoint("http://" + host_port);
    if (!endpoint) return usage(given, example);
    req.rdzv_backend = "etcd";
    req.rdzv_endpoint = endpoint->host + ":" + std::to_string(endpoint->port);
    req.etcd = EtcdTerms{endpoint->url(), "", "", "", 60};
    return Ok{};
}

// Paddle's fleet elastic form (paddle.distributed.fleet.launch, which paddle.distributed.launch runs for
// these options; fleetrun reads its variables): etcd at --elastic_server, else at PADDLE_ELASTIC_SERVER unless
// the command line chose the other form (--master or --ips); none when neither.
std::optional<std::pair<std::string, std::string>> fleet_server(const PaddleValues& in) {
    auto v = in.raw("--elastic_server");
    if (!v || on_command_line(*v)) return v;
    for (const char* other : {"--master", "--ips"})
        if (in.b.opts.at(other)->count()) return std::nullopt;  // the command line wins over the variable
    return v;
}

// Reads --master, --rank and --nnodes.
Status apply_meeting_options(const PaddleValues& in, LaunchRequest& req) {
    if (auto v = in.raw("--master"); v && v->second.starts_with("etcd://")) {
        auto s = meet_through_etcd(v->second.substr(7), v->first + ": '" + v->second + "' is not etcd://HOST[:PORT]",
                                   "e.g. etcd://10.0.0.1:2379", req);
        if (!s) return s;
        req.paddle.etcd_given = given_as(*v);
    } else if (v) {
        auto r = parse_rendezvous_master(v->first, v->second);
        if (!r) return r.error();
        req.rendezvous_master = *r;
    }
    auto rank = in.integer("--rank", -1, 1 << 20);
    if (!rank) return rank.error();
    if (*rank && **rank >= 0 && req.etcd)
        return usage(
            in.raw("--rank")->first + " with --master etcd://: node ranks follow the order the nodes meet in etcd",
            on_command_line(*in.raw("--rank")) ? "leave out --rank" : "unset PADDLE_RANK");
    if (*rank && **rank >= 0) req.node_rank = **rank;
    if (auto v = in.raw("--nnodes")) {
        auto r = parse_nnodes(v->first, v->second);
        if (!r) return r.error();
        req.nnodes = *r;
        req.paddle.nnodes_given = given_as(*v);
    }
    return Ok{};
}

// Reads --master, --rank and --nnodes (unless the fleet form read its own), --nproc_per_node and --devices.
Status apply_node_options(const PaddleValues& in, LaunchRequest& req) {
    if (!fleet_server(in))
        if (auto s = apply_meeting_options(in, req); !s) return s;
    auto nproc = in.integer("--nproc_per_node", 1, 4096);
    if (!nproc) return nproc.error();
    if (auto v = in.raw("--devices")) {
        auto r = parse_device_list(v->first, v->second);
        if (!r) return r.error();
        req.devices = *r;
        req.devices_option = v->first == "--devices" ? "--devices/--gpus" : v->first;  // or PADDLE_DEVICES
    }
    // Paddle: --nproc_per_node, else one per listed device, else one per visible device, else one.
    if (*nproc)
        req.nproc_per_node = NprocSpec{NprocSpec::Kind::Count, **nproc};
    else if (req.devices)
        req.nproc_per_node = NprocSpec{NprocSpec::Kind::Count, static_cast<int>(req.devices->size())};
    else
        req.nproc_per_node = NprocSpec{NprocSpec::Kind::GpuOrOne, 0};
    return Ok{};
}

// The fleet form's job id, as fleet reads it: --job_id, else PADDLE_ELASTIC_JOB_ID, else PADDLE_JOB_ID.
std::optional<std::pair<std::string, std::string>> fleet_job_id(const PaddleValues& in) {
    auto v = in.raw("--job_id");
    if (v && on_command_line(*v)) return v;
    auto it = in.env.find("PADDLE_ELASTIC_JOB_ID");
    if (it != in.env.end() && !it->second.empty()) return std::pair{std::string("PADDLE_ELASTIC_JOB_ID"), it->second};
    return v;
}

// The fleet form given with what it cannot go with (told to drop an option, or unset a variable), or without
// what it needs.
Status check_fleet_form(const PaddleValues& in, const std::string& server) {
    const std::string hint = "give the same --elastic_server HOST:PORT --np N|MIN:MAX --job_id ID on every node";
    auto conflict = [&](const std::pair<std::string, std::string>& v) {
        return usage(server + " with " + v.first + ": in Paddle's fleet elastic form the nodes meet in etcd",
                     (on_command_line(v) ? "drop " : "unset ") + v.first + "; " + hint);
    };
    for (const char* other : {"--master", "--ips"})
        if (auto v = in.raw(other)) return conflict(*v);
    auto rank = in.integer("--rank", -1, 1 << 20);
    if (rank && *rank && **rank >= 0) return conflict(*in.raw("--rank"));
    for (const char* variable : {"PADDLE_ELASTIC_SCALE", "PADDLE_ELASTIC_FORCE"})
        if (auto it = in.env.find(variable); it != in.env.end() && !it->second.empty())
            return usage(std::string(variable) +
                             ": changes a running fleet elastic job's node count in etcd, which dlaunch does not do",
                         std::string("unset ") + variable + "; start or stop nodes instead");
    if (!in.raw("--np"))
        return usage(server + " without --np (PADDLE_ELASTIC_NP): how many nodes the job waits for", hint);
    if (!fleet_job_id(in))
        return usage(server + " without --job_id (PADDLE_ELASTIC_JOB_ID): the nodes of one job meet in etcd under it",
                     hint);
    return Ok{};
}

// --elastic_server HOST:PORT --np N|MIN:MAX --job_id ID: as --master etcd://HOST:PORT --nnodes N|MIN:MAX. Paddle's
// lease TTL, PADDLE_ELASTIC_TTL, is the lease's (dlaunch's --heartbeat-timeout) when set.
Status apply_fleet_elastic(const PaddleValues& in, LaunchRequest& req) {
    auto server = fleet_server(in);
    if (!server) {
        if (auto np = in.raw("--np"); np && on_command_line(*np))  // fleet's variable alone: fleet is not in use
            return usage(np->first + ": the node count of Paddle's fleet elastic form, which needs --elastic_server",
                         "give --nnodes instead, or add --elastic_server HOST:PORT");
        return Ok{};
    }
    if (auto s = check_fleet_form(in, server->first); !s) return s;
    const std::string not_host_port = server->first + ": '" + server->second + "' is not HOST:PORT";
    if (server->second.find(':') == std::string::npos || server->second.find("://") != std::string::npos)
        return usage(not_host_port, "e.g. 10.0.0.1:2379");
    if (auto s = meet_through_etcd(server->second, not_host_port, "e.g. 10.0.0.1:2379", req); !s) return s;
    req.paddle.etcd_given = given_as(*server);
    auto np = in.raw("--np");
    auto nodes = parse_nnodes(np->first, np->second);
    if (!nodes) return nodes.error();
    if (auto nnodes = in.raw("--nnodes")) {
        auto given = parse_nnodes(nnodes->first, nnodes->second);
        if (!given) return given.error();
        const bool both_options = on_command_line(*np) && on_command_line(*nnodes);
        if (!(*given == *nodes))
            return usage(
                given_as(*np) + " and " + given_as(*nnodes) + " disagree",
                both_options ? "give one of them" : "unset " + (on_command_line(*nnodes) ? np->first : nnodes->first));
    }
    req.nnodes = *nodes;
    req.paddle.nnodes_given = given_as(*np);
    if (auto it = in.env.find("PADDLE_ELASTIC_TTL"); it != in.env.end() && !it->second.empty()) {
        auto ttl = parse_integer("PADDLE_ELASTIC_TTL", it->second, 1, 10000000);
        if (!ttl) return ttl.error();
        req.heartbeat_timeout_seconds = static_cast<double>(*ttl);
    }
    return Ok{};
}

// Reads --host, --ips (distinct, no loopback address among several) and --start_port.
Status apply_address_options(const PaddleValues& in, LaunchRequest& req) {
    if (auto v = in.raw("--host")) {
        if (v->second.empty()) return usage(v->first + ": empty address", "give this node's IP address");
        req.local_addr = v->second;
    }
    if (auto v = in.raw("--ips")) {
        for (auto& ip : split(v->second, ',')) {
            if (ip.empty()) return usage(v->first + ": '" + v->second + "' has an empty entry", "give IP,IP,...");
            if (std::find(req.paddle.ips.begin(), req.paddle.ips.end(), ip) != req.paddle.ips.end())
                return usage(v->first + ": " + ip + " given twice", "give each node's IP once");
            req.paddle.ips.push_back(ip);
        }
        if (req.paddle.ips.size() > 1)
            for (auto& ip : req.paddle.ips)
                if (ip == "127.0.0.1" || ip == "localhost")
                    return usage(v->first + ": " + ip + " in a list of several nodes",
                                 "give every node's address as the other nodes reach it");
    }
    auto start_port = in.integer("--start_port", 1, 65535);
    if (!start_port) return start_port.error();
    if (*start_port) req.paddle.start_port = **start_port;
    return Ok{};
}

// Paddle's log level as dlaunch's verbosity: DEBUG 1, INFO 0, WARNING and above -1 (any case).
Result<int> parse_log_level(const std::string& option, const std::string& text) {
    std::string level;
    for (char c : text) level.push_back(static_cast<char>(std::toupper(static_cast<unsigned char>(c))));
    if (level == "DEBUG") return 1;
    if (level == "INFO") return 0;
    if (level == "WARNING" || level == "WARN" || level == "ERROR" || level == "CRITICAL") return -1;
    return usage(option + ": '" + text + "' is not a log level", "give DEBUG, INFO, WARNING or ERROR");
}

// Reads --log_dir, --log_level and --log_overwrite.
Status apply_log_options(const PaddleValues& in, LaunchRequest& req) {
    if (auto v = in.raw("--log_dir")) {
        if (v->second.empty()) return usage(v->first + ": empty directory name", "give a directory");
        req.log_dir = v->second;
    }
    if (auto v = in.raw("--log_level")) {
        auto r = parse_log_level(v->first, v->second);
        if (!r) return r.error();
        req.verbosity = *r;
    }
    if (auto v = in.raw("--log_overwrite")) {
        auto r = parse_bool(v->first, v->second);
        if (!r) return r.error();
        req.paddle.log_overwrite = *r;
    }
    return Ok{};
}

// Reads --job_id (also the run id), then restarts and the rendezvous timeout: Paddle restarts only in
// elastic mode (--elastic_level 1).
Status apply_job_options(const PaddleValues& in, LaunchRequest& req) {
    if (auto v = fleet_server(in) ? fleet_job_id(in) : in.raw("--job_id")) {
        if (v->second.empty() || v->second.find_first_of("/ \t\n") != std::string::npos)
            return usage(v->first + ": '" + v->second + "' is not a job name", "give a name without '/' or spaces");
        req.paddle.job_id = v->second;
    }
    req.rdzv_id = req.paddle.job_id;
    auto max_restart = in.integer("--max_restart", 0, 1 << 20);
    if (!max_restart) return max_restart.error();
    auto elastic_level = in.integer("--elastic_level", -1, 1);
    if (!elastic_level) return elastic_level.error();
    // Paddle restarts in elastic mode, and always with an etcd master (its elastic controller).
    if ((*elastic_level && **elastic_level == 1) || req.etcd) req.max_restarts = max_restart->value_or(3);
    auto elastic_timeout = in.integer("--elastic_timeout", 1, 1 << 20);
    if (!elastic_timeout) return elastic_timeout.error();
    int timeout = elastic_timeout->value_or(fleet_server(in) ? 120 : 30);  // as each of Paddle's launchers
    req.rendezvous_timeout_seconds = req.nnodes.min == req.nnodes.max ? 10.0 * timeout : timeout;
    return Ok{};
}

// --run_mode: collective (default) or ps; ps-heter and rpc are refused.
Result<std::string> read_run_mode(const PaddleValues& in) {
    if (auto v = in.raw("--run_mode")) {
        if (v->second == "ps-heter" || v->second == "rpc")
            return usage(v->first + " " + v->second + ": not supported by dlaunch", "use collective or ps");
        if (v->second != "collective" && v->second != "ps")
            return usage(v->first + ": '" + v->second + "' is not a run mode", "give collective or ps");
        return v->second;
    }
    return std::string("collective");
}

// The parameter-server options as given; `any` says whether one of the counts or endpoint lists was.
struct PsOptions {
    PsRequest ps;
    bool any = false;
};

// Reads the parameter-server counts, endpoint lists, --gloo_port and --with_gloo.
Result<PsOptions> read_ps_options(const PaddleValues& in) {
    PsOptions out;
    PsRequest& ps = out.ps;
    for (auto [key, field] : {std::pair{"--server_num", &ps.server_num}, std::pair{"--trainer_num", &ps.trainer_num},
                              std::pair{"--heter_worker_num", &ps.heter_worker_num}}) {
        auto r = in.integer(key, 0, 4096);
        if (!r) return r.error();
        if (*r) {
            *field = **r;
            out.any = true;
        }
    }
    for (auto [key, field] : {std::pair{"--servers", &ps.servers}, std::pair{"--trainers", &ps.trainers},
                              std::pair{"--heter_workers", &ps.heter_workers}}) {
        if (auto v = in.raw(key); v && !v->second.empty()) {
            auto r = parse_endpoints(v->first, v->second);
            if (!r) return r.error();
            *field = *r;
            out.any = true;
        }
    }
    auto gloo_port = in.integer("--gloo_port", 1, 65535);
    if (!gloo_port) return gloo_port.error();
    if (*gloo_port) ps.gloo_port = **gloo_port;
    if (auto v = in.raw("--with_gloo")) {
        auto r = parse_bool(v->first, v->second);
        if (!r) return r.error();
        ps.with_gloo = *r;
    }
    return out;
}

// Fails when the parameter-server options contradict each other or the collective options
// (`nproc_or_devices`: --nproc_per_node or --devices was given).
Status check_ps_options(const PsRequest& ps, bool nproc_or_devices, const LaunchRequest& req) {
    if (!ps.servers.empty() != !ps.trainers.empty())
        return usage("--servers and --trainers: give both endpoint lists, or neither",
                     "list every server and every trainer as IP:PORT, or use --server_num/--trainer_num");
    if (!ps.servers.empty() && (ps.server_num || ps.trainer_num))
        return usage("--servers/--trainers with --server_num/--trainer_num",
                     "give endpoint lists or per-node counts, not both");
    if (!ps.heter_workers.empty() && ps.servers.empty())
        return usage("--heter_workers without --servers/--trainers",
                     "give all three endpoint lists, or use the *_num options");
    if (ps.heter_worker_num && !ps.servers.empty())
        return usage("--heter_worker_num with --servers/--trainers", "give --heter_workers as endpoints instead");
    if (nproc_or_devices)
        return usage("parameter-server mode with --nproc_per_node/--devices",
                     "give --server_num and --trainer_num (or --servers and --trainers) instead");
    if (!req.paddle.ips.empty())
        return usage("parameter-server mode with --ips", "give --servers and --trainers as IP:PORT lists instead");
    return Ok{};
}

// Parameter-server mode: --run_mode ps, or any of its options (as Paddle decides).
Status apply_ps_options(const PaddleValues& in, LaunchRequest& req) {
    auto mode = read_run_mode(in);
    if (!mode) return mode.error();
    auto ps = read_ps_options(in);
    if (!ps) return ps.error();
    if (*mode == "collective" && ps->any && in.raw("--run_mode"))
        return usage("--run_mode collective with parameter-server options (--server_num, --servers, ...)",
                     "use --run_mode ps, or drop the parameter-server options");
    if (*mode != "ps" && !ps->any) return Ok{};
    const bool nproc_or_devices = in.raw("--nproc_per_node") || req.devices;
    if (auto s = check_ps_options(ps->ps, nproc_or_devices, req); !s) return s;
    if (ps->ps.servers.empty()) {
        if (!ps->ps.server_num) ps->ps.server_num = 1;
        if (!ps->ps.trainer_num) ps->ps.trainer_num = 1;
    }
    req.paddle.ps = ps->ps;
    req.nproc_per_node = NprocSpec{NprocSpec::Kind::Count, 1};  // the plan counts the PS processes itself
    return Ok{};
}

// Reads every option carried out, in the order their errors are reported.
Status apply_options(const PaddleValues& in, LaunchRequest& req) {
    for (auto* apply : {apply_fleet_elastic, apply_node_options, apply_address_options, apply_log_options,
                        apply_job_options, apply_ps_options})  // the fleet form first: it decides which form
        if (auto s = apply(in, req); !s) return s;
    if (req.etcd && req.nnodes.max > static_cast<int>(etcd::kMaxMembers))  // as dlaunch --rdzv-backend etcd
        return usage(req.paddle.nnodes_given + " through etcd: more nodes than one attempt in etcd holds",
                     "give at most " + std::to_string(etcd::kMaxMembers) + " nodes");
    return Ok{};
}

}  // namespace

Result<Command> parse_paddle_command_line(const std::vector<std::string>& in_args, const EnvMap& env) {
    Command cmd;
    std::vector<std::string> args = in_args;
    if (!args.empty() && args.front() == "plan") {
        cmd.mode = Command::Mode::Plan;
        args.erase(args.begin());
    }
    Bindings b;
    CLI::App app{kDescription, "dlaunch-paddle"};
    app.footer(kFooter);
    cli_app::configure(app);
    cli_app::Sections sections(app);
    add_options(sections, b);
    cli_app::add_plan_format_option(sections.next(), cmd.mode, b.format);
    std::vector<std::string> script;
    auto answered = cli_app::parse(app, args, kHint, cmd, &script);
    if (!answered) return answered.error();
    if (*answered) return cmd;
    if (auto s = check_refused(app); !s) return s.error();
    if (b.format.option && b.format.option->count()) cmd.plan_format = b.format.text;

    LaunchRequest& req = cmd.request;
    req.launcher = Launcher::Agent;
    req.env_contract = EnvContract::All;
    req.paddle.layout = true;
    req.forward_signals = default_forward_signals();
    if (auto s = apply_options(PaddleValues{b, env}, req); !s) return s.error();
    if (auto s = cli_app::take_script(app, script, "dlaunch-paddle", kHint, req); !s) return s.error();
    if (req.script == "ipu") return usage("ipu: Graphcore IPU jobs are not supported by dlaunch", "");
    const bool python = req.script.size() > 3 && req.script.compare(req.script.size() - 3, 3, ".py") == 0;
    req.entry = python ? EntryKind::PythonScript : EntryKind::Command;
    return cmd;
}

}  // namespace dlaunch
