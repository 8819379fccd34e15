#include "dlaunch/spawner.hpp"

#include <sys/prctl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstring>
#include <string>
#include <vector>

#include "dlaunch/host.hpp"

namespace dlaunch {
RenderedEnv::RenderedEnv(const EnvMap& env) {
    entries_.reserve(env.size());
    name_sizes_.reserve(env.size());
    for (auto& [k, v] : env) {
        entries_.push_back(k + "=" + v);
        name_sizes_.push_back(k.size());
    }
}

// One pass over both environments in name order; a name in both takes the overlay's value.
ExecImage::ExecImage(const std::vector<std::string>& argv, const RenderedEnv& inherited, const EnvMap& overlay) {
    overlay_strings_.reserve(overlay.size());  // never reallocated: envp_ points into its strings
    envp_.reserve(inherited.size() + overlay.size() + 1);
    size_t i = 0;
    for (auto& [k, v] : overlay) {
        for (; i < inherited.size() && inherited.name(i) < k; ++i) envp_.push_back(inherited.entry(i));
        if (i < inherited.size() && inherited.name(i) == k) ++i;
        overlay_strings_.push_back(k + "=" + v);
        envp_.push_back(overlay_strings_.back().data());
    }
    for (; i < inherited.size(); ++i) envp_.push_back(inherited.entry(i));
    envp_.push_back(nullptr);
    argv_.reserve(argv.size() + 1);
    for (auto& s : argv) argv_.push_back(const_cast<char*>(s.c_str()));
    argv_.push_back(nullptr);
}

namespace {

// What a new worker process needs between fork and exec: plain pointers into the parent's memory.
struct ChildSetup {
    int in, out, err;
    pid_t parent;
    char** argv;
    char** envp;
    const std::string* exec_error_prefix;
    const std::string* bind_error_prefix;
    const topology::Binder* binder;
    const topology::Binder::Prepared* binding;  // null: no binding
    char* bind_error;
    size_t bind_error_size;
    const rlimit* nofile;  // the descriptor limit the agent inherited (host::raise_descriptor_limit), or null
};

[[noreturn]] void run_child(const ChildSetup& c) {
    ::setpgid(0, 0);
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != c.parent) ::_exit(127);  // the agent died before prctl took effect
    // Under Yama's ptrace_scope 1 only ancestors may trace: let the agent's eu-stack/gdb take native
    // stacks of a hung rank (they are the agent's children, not the worker's). EINVAL without Yama.
    ::prctl(PR_SET_PTRACER, c.parent, 0, 0, 0);
    ::dup2(c.in, 0);
    ::dup2(c.out, 1);
    ::dup2(c.err, 2);
    ::signal(SIGPIPE, SIG_DFL);
    // A shell starts background commands with SIGINT and SIGQUIT ignored, and an ignored signal stays
    // ignored across exec: the stop signals dlaunch forwards must reach the worker. (SIGHUP is left as
    // inherited: nohup ignores it on purpose.)
    ::signal(SIGINT, SIG_DFL);
    ::signal(SIGQUIT, SIG_DFL);
    if (c.nofile) ::setrlimit(RLIMIT_NOFILE, c.nofile);
    if (c.binding) {
        const char* problem = c.binder->apply(*c.binding, c.bind_error, c.bind_error_size);
        if (*problem) {
            (void)!::write(2, c.bind_error_prefix->data(), c.bind_error_prefix->size());
            (void)!::write(2, problem, std::strlen(problem));
            (void)!::write(2, "; use --bind none to run unbound\n", 33);
            ::_exit(126);
        }
    }
    sigset_t empty;
    sigemptyset(&empty);
    ::sigprocmask(SIG_SETMASK, &empty, nullptr);
    ::execvpe(c.argv[0], c.argv, c.envp);
    int e = errno;
    const char* msg = std::strerror(e);
    (void)!::write(2, c.exec_error_prefix->data(), c.exec_error_prefix->size());
    (void)!::write(2, msg, std::strlen(msg));
    (void)!::write(2, "\n", 1);
    ::_exit(e == ENOENT ? 127 : 126);
}

// vfork when the child only makes system calls before exec (no copy of the agent's page tables); fork
// when it runs hwloc's binding code, which may allocate. Returns the child's pid, or -1.
pid_t start_child(const ChildSetup& c) {
    pid_t pid = c.binding ? ::fork() : ::vfork();
    if (pid == 0) run_child(c);
    // After vfork the child has run setpgid itself: the agent resumes once it has exec'd (or ended).
    if (pid > 0 && c.binding) ::setpgid(pid, pid);  // after fork, also from here, so kill(-pid) works at once
    return pid;
}

// The real spawner. The argv and environment arrays are built before fork: between fork and exec the
// child only calls async-signal-safe functions (and hwloc's binding, which is why that path forks).
class ForkExecSpawner : public Spawner {
public:
    ForkExecSpawner(const EnvMap& inherited, const topology::Binder* binder)
        : inherited_(inherited), binder_(binder), agent_(::getpid()) {}

    Result<pid_t> spawn(const RankPlan& rp, int, const SpawnIo& io) override {
        ExecImage image(rp.argv, inherited_, rp.env);
        std::string exec_error_prefix = "dlaunch: exec: " + rp.argv.front() + ": ";
        std::string bind_error_prefix;
        std::shared_ptr<const topology::Binder::Prepared> binding;
        if (binder_ && (!rp.cpuset.empty() || rp.bind_memory)) {
            binding = binder_->prepare(rp.cpuset, rp.bind_memory ? rp.mems : topology::CpuSet{});
            bind_error_prefix = "dlaunch: bind: rank " + std::to_string(rp.rank) + ": ";
        }
        char bind_error[256];
        ChildSetup setup{io.stdin_fd,
                         io.stdout_fd,
                         io.stderr_fd,
                         agent_,
                         image.argv(),
                         image.envp(),
                         &exec_error_prefix,
                         &bind_error_prefix,
                         binder_,
                         binding.get(),
                         bind_error,
                         sizeof bind_error,
                         host::inherited_descriptor_limit()};
        pid_t pid = start_child(setup);
        if (pid < 0)
            return Error{"launch: rank " + std::to_string(rp.rank) + ": fork failed: " + std::strerror(errno),
                         "free memory or raise the process limit (ulimit -u)"};
        return pid;
    }

private:
    const RenderedEnv inherited_;
    const topology::Binder* binder_;
    const pid_t agent_;
};

}  // namespace

std::unique_ptr<Spawner> fork_exec_spawner(const EnvMap& inherited, const topology::Binder* binder) {
    return std::make_unique<ForkExecSpawner>(inherited, binder);
}

}  // namespace dlaunch
