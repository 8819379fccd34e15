#include "dlaunch/stack_capture.hpp"

#include <fcntl.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "dlaunch/plan.hpp"
#include "dlaunch/proc_files.hpp"
#include "dlaunch/signals.hpp"
#include "dlaunch/text.hpp"

namespace dlaunch {
namespace {

using Clock = std::chrono::steady_clock;

// A rank asked for its Python stacks: its stacks file, where it ended when asked, and the target's index.
struct Signalled {
    std::string file;
    off_t offset = 0;
    pid_t pid = 0;
    size_t index = 0;
};

std::string on_path(const EnvMap& env, const std::string& name) {
    auto it = env.find("PATH");
    for (auto& dir : split(it != env.end() ? it->second : "/usr/bin:/bin", ':')) {
        std::string candidate = (dir.empty() ? "." : dir) + "/" + name;
        if (::access(candidate.c_str(), X_OK) == 0) return candidate;
    }
    return "";
}

off_t file_size(const std::string& path) {
    struct stat st {};
    return ::stat(path.c_str(), &st) == 0 ? st.st_size : -1;
}

// The line the sitecustomize writes after a dump (launcher/python/sitecustomize.py).
std::string dump_end_line(pid_t pid) {
    return "# dlaunch-stacks dumped pid=" + std::to_string(pid) + "\n";
}

bool dump_ended(const std::string& text, pid_t pid) {
    const std::string end = dump_end_line(pid);
    return text.starts_with(end) || text.find("\n" + end) != std::string::npos;
}

// What a rank wrote since it was asked, less the end lines.
std::string python_dump(const Signalled& s) {
    std::string text = read_file_from(s.file, s.offset);
    const std::string end = dump_end_line(s.pid);
    for (auto at = text.find(end); at != std::string::npos; at = text.find(end, at))
        if (at == 0 || text[at - 1] == '\n')
            text.erase(at, end.size());
        else
            at += end.size();
    return text;
}

// Waits until every signalled rank wrote its dump's end line after its offset, or until `limit` (a rank
// that holds the GIL never dumps).
void wait_for_dumps(const std::vector<Signalled>& signalled, std::chrono::milliseconds limit) {
    const auto deadline = Clock::now() + limit;
    std::vector<bool> done(signalled.size(), false);
    while (Clock::now() < deadline) {
        bool all = true;
        for (size_t i = 0; i < signalled.size(); ++i) {
            const auto& s = signalled[i];
            done[i] = done[i] || dump_ended(read_file_from(s.file, s.offset), s.pid);
            all = all && done[i];
        }
        if (all) return;
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
}

// Starts `argv` with stdout and stderr appended to `out_file` and no signal blocked; -1 on failure.
pid_t start_tool(const std::vector<std::string>& argv, const std::string& out_file) {
    posix_spawn_file_actions_t files;
    posix_spawnattr_t attr;
    posix_spawn_file_actions_init(&files);
    posix_spawnattr_init(&attr);
    posix_spawn_file_actions_addopen(&files, 1, out_file.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    posix_spawn_file_actions_adddup2(&files, 1, 2);
    posix_spawn_file_actions_addopen(&files, 0, "/dev/null", O_RDONLY, 0);
    sigset_t none;
    sigemptyset(&none);
    posix_spawnattr_setsigmask(&attr, &none);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK);
    std::vector<char*> args;
    for (auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    pid_t pid = -1;
    if (::posix_spawn(&pid, args[0], &files, &attr, args.data(), environ) != 0) pid = -1;
    posix_spawn_file_actions_destroy(&files);
    posix_spawnattr_destroy(&attr);
    return pid;
}

// Waits for each helper until `limit`, then kills the ones left. Only these pids are reaped. Whether each
// was stopped (true) or ended by itself.
std::vector<bool> wait_tools(const std::vector<pid_t>& pids, std::chrono::milliseconds limit) {
    const auto deadline = Clock::now() + limit;
    std::vector<bool> stopped(pids.size(), false);
    for (size_t i = 0; i < pids.size(); ++i) {
        while (::waitpid(pids[i], nullptr, WNOHANG) == 0) {
            if (Clock::now() >= deadline) {
                ::kill(pids[i], SIGKILL);
                ::waitpid(pids[i], nullptr, 0);
                stopped[i] = true;
                break;
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
        }
    }
    return stopped;
}

void append_line(const std::string& file, const std::string& line) {
    std::ofstream(file, std::ios::app) << line << "\n";
}

// A line after what a killed tool wrote, on a line of its own (the tool may have stopped mid-line).
void append_after_tool(const std::string& file, const std::string& line) {
    std::ifstream in(file, std::ios::binary | std::ios::ate);
    bool mid_line = false;
    if (in && in.tellg() > 0) {
        in.seekg(-1, std::ios::end);
        mid_line = in.get() != '\n';
    }
    append_line(file, (mid_line ? "\n" : "") + line);
}

// One tool over every target at once, each appending to its native file under a header line; one that
// has not finished within `limit` is stopped, and its file says so under what it wrote.
void run_native(const std::vector<CaptureTarget>& targets, std::vector<CapturedStacks>& out, const std::string& name,
                const std::function<std::vector<std::string>(pid_t)>& argv, std::chrono::milliseconds limit) {
    std::vector<pid_t> pids;
    std::vector<size_t> of_target;
    for (size_t i = 0; i < targets.size(); ++i) {
        if (targets[i].native_file.empty()) continue;
        auto args = argv(targets[i].pid);
        std::string command;
        for (auto& a : args) command += (command.empty() ? "" : " ") + a;
        append_line(targets[i].native_file, "# dlaunch: " + command);
        pid_t pid = start_tool(args, targets[i].native_file);
        if (pid <= 0) continue;
        pids.push_back(pid);
        of_target.push_back(i);
        if (out[i].native_tool.empty()) out[i].native_tool = name;
    }
    const std::vector<bool> stopped = wait_tools(pids, limit);
    for (size_t k = 0; k < pids.size(); ++k)
        if (stopped[k])
            append_after_tool(targets[of_target[k]].native_file,
                              "# dlaunch: " + name + " did not finish within " + fixed(limit.count() / 1000.0, 0) +
                                  " s and was stopped: what it wrote above is partial");
}

// The start-up environment of a process (empty when unreadable: gone, or another user's).
EnvMap process_environment(const std::string& pid) {
    std::ifstream in("/proc/" + pid + "/environ", std::ios::binary);
    EnvMap env;
    for (std::string entry; std::getline(in, entry, '\0');)
        if (auto eq = entry.find('='); eq != std::string::npos) env[entry.substr(0, eq)] = entry.substr(eq + 1);
    return env;
}

// dlaunch-watch, the parent of a watched --dist-launch task, has the task's variables too (requeue: the
// stacks file); its child is the rank.
bool is_rank_watcher(const std::string& pid) {
    std::ifstream comm("/proc/" + pid + "/comm");
    std::string name;
    return std::getline(comm, name) && name == "dlaunch-watch";
}

struct Candidate {
    CaptureTarget target;
    pid_t parent = 0;
};

bool matches(const StacksTarget& t, const EnvMap& env, pid_t parent) {
    switch (t.kind) {
        case StacksTarget::Kind::Agent: return parent == t.agent;
        case StacksTarget::Kind::Directory: return env.at("DLAUNCH_STACKS_FILE").starts_with(t.directory + "/");
        case StacksTarget::Kind::SlurmJob: {
            auto it = env.find("SLURM_JOB_ID");
            auto node = env.find("SLURMD_NODENAME");
            // Nodes that share one pid namespace (containers, the test cluster) see each other's ranks.
            return it != env.end() && it->second == t.job_id &&
                   (t.node.empty() || (node != env.end() && node->second == t.node));
        }
    }
    return false;
}

}  // namespace

std::vector<CaptureTarget> find_rank_processes(const StacksTarget& target) {
    std::vector<Candidate> found;
    for (auto& entry : std::filesystem::directory_iterator("/proc")) {
        const std::string pid = entry.path().filename().string();
        if (pid.find_first_not_of("0123456789") != std::string::npos) continue;
        EnvMap env = process_environment(pid);
        if (!env.contains("DLAUNCH_STACKS_FILE") || is_rank_watcher(pid)) continue;
        const auto stat = read_proc_stat(static_cast<pid_t>(std::stoi(pid)));
        const pid_t parent = stat ? stat->ppid : 0;
        if (!matches(target, env, parent)) continue;
        auto rank = env.find("RANK");
        const std::string native = native_stacks_file_for(env["DLAUNCH_STACKS_FILE"]);
        found.push_back({{rank != env.end() ? std::atoi(rank->second.c_str()) : -1, static_cast<pid_t>(std::stoi(pid)),
                          env["DLAUNCH_STACKS_FILE"], native},
                         parent});
    }
    std::vector<CaptureTarget> ranks;
    for (auto& c : found) {
        bool child_of_rank = std::any_of(found.begin(), found.end(), [&](auto& o) {
            return o.target.pid == c.parent && o.target.stacks_file == c.target.stacks_file;
        });
        if (!child_of_rank) ranks.push_back(c.target);
    }
    std::sort(ranks.begin(), ranks.end(), [](auto& a, auto& b) { return a.rank < b.rank; });
    return ranks;
}

StackTools find_stack_tools(const EnvMap& env) {
    return {on_path(env, "eu-stack"), on_path(env, "gdb"), on_path(env, "py-spy")};
}

bool listens_for_stacks(const std::string& stacks_file, pid_t pid) {
    std::ifstream in(stacks_file);
    const std::string announcement = "# dlaunch-stacks pid=" + std::to_string(pid) + " ";
    for (std::string line; std::getline(in, line);)
        if (line.starts_with(announcement)) return true;
    return false;
}

std::vector<CapturedStacks> capture_stacks(const std::vector<CaptureTarget>& targets, const StackTools& tools,
                                           std::chrono::milliseconds python_wait,
                                           std::chrono::milliseconds native_limit) {
    std::vector<CapturedStacks> out(targets.size());
    std::vector<Signalled> signalled;
    for (size_t i = 0; i < targets.size(); ++i) {
        const CaptureTarget& t = targets[i];
        out[i].rank = t.rank;
        if (t.stacks_file.empty() || !listens_for_stacks(t.stacks_file, t.pid)) continue;
        const off_t offset = file_size(t.stacks_file);
        out[i].listened = ::kill(t.pid, stack_signal()) == 0;
        if (out[i].listened) signalled.push_back({t.stacks_file, offset, t.pid, i});
    }
    if (!signalled.empty()) wait_for_dumps(signalled, python_wait);
    for (const Signalled& s : signalled) out[s.index].python = python_dump(s);
    std::vector<off_t> native_sizes;
    for (auto& t : targets)
        native_sizes.push_back(t.native_file.empty() ? 0 : std::max<off_t>(file_size(t.native_file), 0));
    if (!tools.eu_stack.empty())
        run_native(
            targets, out, "eu-stack",
            [&](pid_t p) {
                return std::vector<std::string>{tools.eu_stack, "-p", std::to_string(p)};
            },
            native_limit);
    else if (!tools.gdb.empty())
        run_native(
            targets, out, "gdb",
            [&](pid_t p) {
                return std::vector<std::string>{tools.gdb, "-p",  std::to_string(p),    "-batch",
                                                "-nx",     "-ex", "thread apply all bt"};
            },
            native_limit);
    if (!tools.py_spy.empty())
        run_native(
            targets, out, "py-spy",
            [&](pid_t p) {
                return std::vector<std::string>{tools.py_spy, "dump", "--pid", std::to_string(p)};
            },
            native_limit);
    for (size_t i = 0; i < targets.size(); ++i)
        if (!out[i].native_tool.empty()) out[i].native = read_file_from(targets[i].native_file, native_sizes[i]);
    return out;
}

}  // namespace dlaunch
