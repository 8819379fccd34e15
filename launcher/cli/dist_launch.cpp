#include "dlaunch/dist_launch.hpp"

#include <charconv>

#include "dlaunch/cli.hpp"
#include "dlaunch/text.hpp"

namespace dlaunch {
namespace {

constexpr size_t kMaxValue = 256;
constexpr const char* kUserKeys =
    "bind, devices, port, python, env, verbose, requeue, max-restarts, checkpoint-exit, hang-timeout";
constexpr const char* kSiteKeys = "port_range, bind, python, log, pyexec";

Error opts_error(const std::string& what, const std::string& hint) {
    return Error::in("--dist-launch", what, hint);
}

// A shared value parser's error ("cli: hang-timeout: ..."), told as one of OPTS's.
Error as_opts_error(const Error& e) {
    return e.told_as("--dist-launch");
}

// Absolute, no "..", no "//", only [A-Za-z0-9/._+-].
Result<std::string> safe_path(const std::string& key, const std::string& value) {
    const std::string hint = "give an absolute path made of letters, digits and / . _ + -";
    if (value.empty() || value.front() != '/') return opts_error(key + "=" + value + ": not an absolute path", hint);
    for (char c : value)
        if (!std::isalnum(static_cast<unsigned char>(c)) && c != '/' && c != '.' && c != '_' && c != '+' && c != '-')
            return opts_error(key + ": path contains '" + std::string(1, c) + "'", hint);
    if (value.find("/../") != std::string::npos || value.ends_with("/..") || value.find("//") != std::string::npos)
        return opts_error(key + "=" + value + ": path with '..' or '//'", hint);
    return value;
}

std::optional<int> small_int(const std::string& s, int max) {
    int v = 0;
    auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (s.empty() || ec != std::errc{} || p != s.data() + s.size() || v < 0 || v > max) return std::nullopt;
    return v;
}

Status apply_port(DistLaunchSettings& s, const std::string& key, const std::string& value) {
    if (value.find('-') != std::string::npos) {
        auto range = parse_port_range(key, value);
        if (!range) return opts_error(key + "=" + value + ": not a port range", "give LOW-HIGH within 1024-65535");
        s.port_range = *range;
        s.port.reset();
        return Ok{};
    }
    auto port = small_int(value, 65535);
    if (!port || *port < 1024) return opts_error(key + "=" + value + ": not a port", "give 1024-65535, or LOW-HIGH");
    s.port = *port;
    return Ok{};
}

Status apply_bind(DistLaunchSettings& s, const std::string& value) {
    s.bind = topology::parse_bind_mode(value);
    if (!s.bind) return opts_error("bind=" + value + ": unknown binding", "give closest, numa, socket or none");
    return Ok{};
}

// Splits "k=v,k2=v2" into pairs, enforcing the bounds.
Result<std::vector<std::pair<std::string, std::string>>> pairs(const std::vector<std::string>& items) {
    std::vector<std::pair<std::string, std::string>> out;
    for (auto& item : items) {
        if (item.empty()) continue;
        if (item.size() > kMaxValue)
            return opts_error(
                "'" + item.substr(0, 32) + "...': longer than " + std::to_string(kMaxValue) + " characters",
                "shorten it");
        auto eq = item.find('=');
        out.emplace_back(item.substr(0, eq), eq == std::string::npos ? "" : item.substr(eq + 1));
        if (eq == std::string::npos) out.back().second = "\x01";  // a bare key
    }
    return out;
}

}  // namespace

Result<DistLaunchSettings> parse_site_arguments(const std::vector<std::string>& args) {
    DistLaunchSettings s;
    auto kv = pairs(args);
    if (!kv) return Error{"plugstack.conf: " + kv.error().what, kv.error().hint};
    for (auto& [key, value] : *kv) {
        auto site = [](const Error& e) { return e.told_as("plugstack.conf"); };
        if (value == "\x01")
            return Error{"plugstack.conf: argument '" + key + "' has no value",
                         std::string("write key=value; keys: ") + kSiteKeys};
        if (key == "port_range") {
            if (value.find('-') == std::string::npos)
                return Error{"plugstack.conf: port_range=" + value + ": not LOW-HIGH",
                             "give LOW-HIGH within 1024-65535"};
            if (auto st = apply_port(s, key, value); !st) return site(st.error());
        } else if (key == "bind") {
            if (auto st = apply_bind(s, value); !st) return site(st.error());
        } else if (key == "python") {
            auto p = safe_path(key, value);
            if (!p) return site(p.error());
            s.python = *p;
        } else if (key == "pyexec") {
            auto p = safe_path(key, value);
            if (!p) return site(p.error());
            s.pyexec = *p;
        } else if (key == "log") {
            if (value == "quiet")
                s.verbosity = -1;
            else if (value == "info")
                s.verbosity = 0;
            else if (value == "verbose")
                s.verbosity = 1;
            else if (value == "debug")
                s.verbosity = 2;
            else
                return Error{"plugstack.conf: log=" + value + ": unknown level", "give quiet, info, verbose or debug"};
        } else {
            return Error{"plugstack.conf: unknown argument '" + key + "'", std::string("known: ") + kSiteKeys};
        }
    }
    return s;
}

Result<DistLaunchSettings> parse_dist_launch_opts(const std::string& opts, DistLaunchSettings s) {
    if (opts.size() > kMaxOptsLength)
        return opts_error("OPTS longer than " + std::to_string(kMaxOptsLength) + " characters", "shorten them");
    auto kv = pairs(split(opts, ','));
    if (!kv) return kv.error();
    bool max_restarts_given = false;
    for (auto& [key, value] : *kv) {
        const bool bare = value == "\x01";
        if (bare && key != "verbose" && key != "requeue")
            return opts_error("'" + key + "' needs a value", "write key=value, e.g. bind=closest");
        if (key == "bind") {
            if (auto st = apply_bind(s, value); !st) return st.error();
        } else if (key == "devices") {
            std::vector<int> devices;
            for (auto& d : split(value, ':')) {
                auto n = small_int(d, 1023);
                if (!n)
                    return opts_error("devices=" + value + ": not a device list",
                                      "give GPU indices separated by ':', e.g. devices=0:1");
                devices.push_back(*n);
            }
            s.devices = devices;
        } else if (key == "port") {
            if (auto st = apply_port(s, key, value); !st) return st.error();
        } else if (key == "python") {
            auto p = safe_path(key, value);
            if (!p) return p.error();
            s.python = *p;
        } else if (key == "env") {
            if (value != "torch" && value != "paddle" && value != "all")
                return opts_error("env=" + value + ": unknown", "give env=torch, env=paddle or env=all");
            s.env = value;
        } else if (key == "verbose") {
            auto n = bare ? std::optional<int>(1) : small_int(value, 3);
            if (!n) return opts_error("verbose=" + value + ": not a level", "give verbose or verbose=1..3");
            s.verbosity = *n;
        } else if (key == "requeue") {
            if (!bare && value != "yes" && value != "no")
                return opts_error("requeue=" + value + ": not yes or no", "write requeue (or requeue=yes)");
            s.requeue = bare || value == "yes";
        } else if (key == "max-restarts") {
            auto n = small_int(value, 1000);
            if (!n) return opts_error("max-restarts=" + value + ": not a count", "give max-restarts=0..1000");
            s.max_restarts = *n;
            max_restarts_given = true;
        } else if (key == "checkpoint-exit") {
            auto n = small_int(value, 255);
            if (!n || *n == 0)
                return opts_error("checkpoint-exit=" + value + ": not an exit code",
                                  "give 1..255, e.g. checkpoint-exit=75");
            s.checkpoint_exit = *n;
        } else if (key == "hang-timeout") {
            if (!parse_seconds("hang-timeout", value, false))
                return opts_error("hang-timeout=" + value + ": not a number of seconds",
                                  "give seconds > 0, e.g. hang-timeout=300");
            auto seconds = parse_hang_timeout("hang-timeout", value);
            if (!seconds) return as_opts_error(seconds.error());
            s.hang_timeout = *seconds;
        } else {
            return opts_error("unknown setting '" + key + "'", std::string("known: ") + kUserKeys);
        }
    }
    if (!s.requeue && (max_restarts_given || s.checkpoint_exit))
        return opts_error(
            std::string(max_restarts_given ? "max-restarts" : "checkpoint-exit") + " only applies with requeue",
            "write --dist-launch=requeue,max-restarts=N (in an sbatch job; docs/requeue.md)");
    return s;
}

Status requeue_allowed(const std::optional<std::string>& job_id, const std::optional<std::string>& environment) {
    if (job_id && !job_id->empty() && environment == "BATCH") return Ok{};
    return opts_error(
        "requeue needs a batch job, and this srun is not in one (" +
            std::string(job_id ? "job " + *job_id + " came from salloc" : "no SLURM_JOB_ID") + ")",
        "put the srun line in an sbatch script (examples/sbatch/requeue-spank.sbatch), or leave requeue out");
}

bool is_python_script(const std::string& argv0) {
    return argv0.size() > 3 && argv0.ends_with(".py");
}

LaunchRequest dist_launch_request(const DistLaunchSettings& s, const std::string& argv0) {
    LaunchRequest req;
    req.launcher = Launcher::PerRank;
    req.entry = is_python_script(argv0) ? EntryKind::PythonScript : EntryKind::Command;
    req.script = argv0;
    req.devices = s.devices;
    req.devices_option = "--dist-launch=devices";
    req.bind = s.bind;
    req.master_port = s.port;
    req.port_range = s.port_range;
    req.verbosity = s.verbosity;
    req.env_contract = s.env == "paddle" ? EnvContract::Paddle : s.env == "all" ? EnvContract::All : EnvContract::Torch;
    req.requeue.enabled = s.requeue;
    req.max_restarts = s.max_restarts;
    req.hang_timeout_seconds = s.hang_timeout;
    return req;
}

}  // namespace dlaunch
