#include "dlaunch/host.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "dlaunch/env_map.hpp"
#include "dlaunch/nonce.hpp"

extern char** environ;

namespace dlaunch::host {

std::string tmpdir() {
    const char* t = std::getenv("TMPDIR");
    return t && *t ? t : "/tmp";
}

std::string executable_problem(const std::string& path) {
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) return errno == ENOENT ? "does not exist" : std::strerror(errno);
    if (!S_ISREG(st.st_mode)) return "not a regular file";
    return ::access(path.c_str(), X_OK) == 0 ? "" : "not executable";
}

std::string directory_problem(const std::string& path) {
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) return errno == ENOENT ? "does not exist" : std::strerror(errno);
    return S_ISDIR(st.st_mode) ? "" : "not a directory";
}

namespace {

namespace fs = std::filesystem;

struct Fd {
    int fd = -1;
    explicit Fd(int f) : fd(f) {}
    ~Fd() {
        if (fd >= 0) ::close(fd);
    }
};

// Binds a TCP socket to `port` on all addresses (0: any free port); returns the fd or -errno.
int bind_port(int port, int* bound_port) {
    int s = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (s < 0) return -errno;
    int one = 1;
    // TIME_WAIT leftovers do not stop PyTorch's store from binding (it sets SO_REUSEADDR too).
    ::setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_ANY);
    addr.sin_port = htons(static_cast<uint16_t>(port));
    if (::bind(s, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
        int e = errno;
        ::close(s);
        return -e;
    }
    if (bound_port) {
        socklen_t len = sizeof addr;
        ::getsockname(s, reinterpret_cast<sockaddr*>(&addr), &len);
        *bound_port = ntohs(addr.sin_port);
    }
    return s;
}

bool is_executable_file(const std::string& path) {
    return executable_problem(path).empty();
}

std::string search_path(const std::string& name, const EnvMap& env) {
    auto it = env.find("PATH");
    std::string path = it == env.end() ? "/usr/local/bin:/usr/bin:/bin" : it->second;
    size_t start = 0;
    while (start <= path.size()) {
        auto colon = path.find(':', start);
        std::string dir = path.substr(start, colon == std::string::npos ? std::string::npos : colon - start);
        std::string candidate = (dir.empty() ? "." : dir) + "/" + name;
        if (is_executable_file(candidate)) return candidate;
        if (colon == std::string::npos) break;
        start = colon + 1;
    }
    return "";
}

std::string sanitize(const std::string& id) {
    std::string out;
    for (char c : id)
        out += (std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '.' || c == '_') ? c : '_';
    return out.substr(0, 64);
}

// What this process made in $TMPDIR, kept in plain buffers so that a signal handler can remove it.
struct TemporaryFiles {
    char port_lock[PATH_MAX] = {};
    char private_dir[PATH_MAX] = {};
    pid_t owner = 0;  // a forked child (before its exec) must not remove its parent's files
};

TemporaryFiles& temporary_files() {
    static TemporaryFiles files;
    return files;
}

void remember(char (&slot)[PATH_MAX], const std::string& path) {
    const size_t n = std::min(path.size(), sizeof slot - 1);
    std::memcpy(slot, path.data(), n);
    slot[n] = '\0';
    temporary_files().owner = ::getpid();
}

// What dlaunch puts in a private directory (the only names remove_temporary_files() unlinks there).
constexpr const char* kPrivateFiles[] = {"watchdog", "heartbeat", "stacks.txt", "native-stacks.txt"};

void at_exit_remove_temporary_files() {
    static const bool registered = std::atexit([] { remove_temporary_files(); }) == 0;
    (void)registered;
}

Status check_private_dir(const std::string& path) {
    struct stat st {};
    if (::lstat(path.c_str(), &st) != 0) return Error{path + ": " + std::strerror(errno), ""};
    const std::string problem = private_dir_problem(st, ::geteuid());
    if (!problem.empty())
        return Error{path + " " + problem + ": dlaunch keeps its own files there and trusts nothing else",
                     "remove " + path + " (another user may have made it to catch dlaunch's files)"};
    return Ok{};
}

}  // namespace

std::string private_dir_problem(const struct stat& st, uid_t euid) {
    if (S_ISLNK(st.st_mode)) return "is a symbolic link";
    if (!S_ISDIR(st.st_mode)) return "is not a directory";
    if (st.st_uid != euid) return "is owned by uid " + std::to_string(st.st_uid) + ", not " + std::to_string(euid);
    if ((st.st_mode & 07777) != 0700) {
        char mode[8];
        std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
        return std::string("has mode ") + mode + ", not 0700";
    }
    return "";
}

Result<std::string> make_private_dir(const std::string& prefix) {
    std::string templ = tmpdir() + "/" + prefix + "-XXXXXX";
    if (!::mkdtemp(templ.data()))
        return Error{"launch: private directory " + templ + ": " + std::strerror(errno), "make $TMPDIR writable"};
    if (auto s = check_private_dir(templ); !s) return Error{"launch: " + s.error().what, s.error().hint};
    return templ;
}

Result<std::string> own_private_dir() {
    TemporaryFiles& files = temporary_files();
    if (files.private_dir[0] != '\0') return std::string(files.private_dir);
    auto dir = make_private_dir("dlaunch-private-" + std::to_string(::getpid()));
    if (!dir) return dir;
    remember(files.private_dir, *dir);
    at_exit_remove_temporary_files();
    return dir;
}

std::string private_dir_template(const std::string& pid) {
    return tmpdir() + "/dlaunch-private-" + pid + "-XXXXXX";
}

std::string watchdog_fifo_in(const std::string& dir) {
    return dir + "/watchdog";
}

std::string heartbeat_fifo_in(const std::string& dir) {
    return dir + "/heartbeat";
}

void remove_temporary_files() {
    TemporaryFiles& files = temporary_files();
    if (files.owner != ::getpid()) return;
    if (files.port_lock[0] != '\0') ::unlink(files.port_lock);
    files.port_lock[0] = '\0';
    if (files.private_dir[0] == '\0') return;
    const int dir = ::open(files.private_dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (dir >= 0) {
        for (const char* name : kPrivateFiles) ::unlinkat(dir, name, 0);
        ::close(dir);
    }
    ::rmdir(files.private_dir);
    files.private_dir[0] = '\0';
}

namespace {

const char* stopping_program = "dlaunch";
pid_t stopping_pid = 0;  // a child forked before its exec dies of the signal without a word

void stop_now(int signo) {
    const char* name = signo == SIGINT ? "SIGINT" : signo == SIGTERM ? "SIGTERM" : "SIGHUP";
    if (::getpid() == stopping_pid) {
        for (const char* part : {stopping_program, ": stop: ", name,
                                 ": received while no worker runs; stopped, and removed its port lock and FIFOs\n"})
            (void)!::write(2, part, std::strlen(part));
        remove_temporary_files();
    }
    ::signal(signo, SIG_DFL);
    ::raise(signo);
}

}  // namespace

void stop_cleanly_on_signals(const char* program) {
    stopping_program = program;
    stopping_pid = ::getpid();
    struct sigaction sa {};
    sa.sa_handler = stop_now;
    sigemptyset(&sa.sa_mask);
    for (int s : {SIGTERM, SIGINT, SIGHUP}) sigaddset(&sa.sa_mask, s);
    for (int s : {SIGTERM, SIGINT, SIGHUP}) ::sigaction(s, &sa, nullptr);
}

void release_reserved_port() {
    TemporaryFiles& files = temporary_files();
    if (files.port_lock[0] != '\0') ::unlink(files.port_lock);
    files.port_lock[0] = '\0';
}

Result<int> reserve_free_port() {
    std::string dir = tmpdir() + "/dlaunch-ports-" + std::to_string(::geteuid());
    if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST)
        return Error{"launch: master port: cannot create " + dir + ": " + std::strerror(errno),
                     "make $TMPDIR writable, or give --master-port PORT"};
    if (auto s = check_private_dir(dir); !s)
        return Error{"launch: master port: " + s.error().what, s.error().hint + ", or give --master-port PORT"};
    for (int attempt = 0; attempt < 64; ++attempt) {
        int port = 0;
        int s = bind_port(0, &port);
        if (s < 0)
            return Error{"launch: master port: cannot bind a socket: " + std::string(std::strerror(-s)),
                         "give --master-port PORT"};
        Fd sock(s);
        std::string lock_path = dir + "/" + std::to_string(port);
        int lock = ::open(lock_path.c_str(), O_RDONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (lock < 0) {
            return Error{"launch: master port: cannot create lock file " + lock_path + ": " + std::strerror(errno),
                         "make " + dir + " writable, or give --master-port PORT"};
        }
        if (::flock(lock, LOCK_EX | LOCK_NB) == 0) {
            remember(temporary_files().port_lock, lock_path);  // `lock` stays open: held until exit
            // Every way out of the program removes it (a plan printed, a usage error found later).
            at_exit_remove_temporary_files();
            return port;
        }
        ::close(lock);
    }
    return Error{"launch: master port: no free port found after 64 tries", "give --master-port PORT"};
}

Result<int> pick_free_port() {
    int port = 0;
    int s = bind_port(0, &port);
    if (s < 0) return Error{"launch: cannot bind a socket: " + std::string(std::strerror(-s)), "see `ulimit -n`"};
    ::close(s);
    return port;
}

Result<std::string> address_towards(const std::string& host) {
    addrinfo hints{};
    hints.ai_family = AF_INET;
    hints.ai_socktype = SOCK_DGRAM;
    addrinfo* found = nullptr;
    if (int rc = ::getaddrinfo(host.c_str(), "9", &hints, &found); rc != 0)
        return Error{"'" + host + "' has no IPv4 address here (" + ::gai_strerror(rc) + ")",
                     "give a name this machine resolves, or an address"};
    Fd s(::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
    int rc = s.fd < 0 ? -1 : ::connect(s.fd, found->ai_addr, found->ai_addrlen);  // a UDP connect sends nothing
    sockaddr_in own{};
    socklen_t len = sizeof own;
    if (rc == 0) rc = ::getsockname(s.fd, reinterpret_cast<sockaddr*>(&own), &len);
    const int error = errno;
    ::freeaddrinfo(found);
    if (rc != 0)
        return Error{"no route from this machine to '" + host + "' (" + std::strerror(error) + ")",
                     "check this machine's network, or give --local-addr ADDR"};
    char text[INET_ADDRSTRLEN] = {};
    ::inet_ntop(AF_INET, &own.sin_addr, text, sizeof text);
    return std::string(text);
}

Status check_port_free(int port) {
    int s = bind_port(port, nullptr);
    if (s >= 0) {
        ::close(s);
        return Ok{};
    }
    if (s == -EADDRINUSE)
        return Error{"launch: --master-port " + std::to_string(port) + ": already in use on this host",
                     "choose another port, or leave out --master-port to get a free one"};
    if (s == -EACCES)
        return Error{"launch: --master-port " + std::to_string(port) + ": not allowed (privileged port)",
                     "choose a port above 1023"};
    return Error{"launch: --master-port " + std::to_string(port) + ": cannot bind: " + std::strerror(-s),
                 "choose another port"};
}

std::string find_python(const EnvMap& env) {
    if (auto it = env.find("PYTHON_EXEC"); it != env.end() && !it->second.empty())
        return it->second.find('/') == std::string::npos ? search_path(it->second, env) : it->second;
    return search_path("python3", env);
}

Status check_script(const LaunchRequest& req, const EnvMap& env) {
    const std::string& s = req.script;
    if (req.entry == EntryKind::PythonModule) return Ok{};
    if (req.entry == EntryKind::Command) {
        bool found = s.find('/') != std::string::npos ? is_executable_file(s) : !search_path(s, env).empty();
        if (!found)
            return Error{"launch: command '" + s + "': not found or not executable",
                         s.find('/') == std::string::npos ? "check the name and PATH, or give a path"
                                                          : "check the path and its execute permission"};
        return Ok{};
    }
    struct stat st {};
    if (::stat(s.c_str(), &st) != 0)
        return Error{"launch: script '" + s + "': " + std::strerror(errno),
                     "check the path; use -m for a module or --no-python for a program"};
    // Python runs a directory (or zip file) holding __main__.py as it runs a script.
    struct stat main_py {};
    const bool package_dir =
        S_ISDIR(st.st_mode) && ::stat((s + "/__main__.py").c_str(), &main_py) == 0 && S_ISREG(main_py.st_mode);
    if (!S_ISREG(st.st_mode) && !package_dir)
        return Error{"launch: script '" + s + "': not a regular file, nor a directory with __main__.py",
                     "give the path of a Python file"};
    if (::access(s.c_str(), R_OK) != 0)
        return Error{"launch: script '" + s + "': not readable: " + std::strerror(errno),
                     "fix its permissions (chmod a+r)"};
    return Ok{};
}

Status check_log_dir(const std::string& log_dir) {
    std::error_code ec;
    fs::create_directories(log_dir, ec);
    if (ec)
        return Error{"launch: --log-dir " + log_dir + ": cannot create: " + ec.message(),
                     "choose a directory you can write to"};
    if (!fs::is_directory(log_dir))
        return Error{"launch: --log-dir " + log_dir + ": not a directory", "choose a directory"};
    if (::access(log_dir.c_str(), W_OK | X_OK) != 0)
        return Error{"launch: --log-dir " + log_dir + ": not writable", "choose a directory you can write to"};
    return Ok{};
}

Status check_tmpdir() {
    const char* t = std::getenv("TMPDIR");
    if (!t || !*t) return Ok{};
    std::string problem = directory_problem(t);
    if (problem.empty() && ::access(t, W_OK | X_OK) != 0) problem = "not writable";
    if (problem.empty()) return Ok{};
    return Error{"launch: TMPDIR=" + std::string(t) + ": " + problem,
                 "create it, point TMPDIR at a directory you can write to, or unset it (then /tmp)"};
}

std::string run_dir_template(const std::optional<std::string>& log_dir, const std::string& run_id) {
    std::string base = log_dir ? *log_dir + "/" + sanitize(run_id) : tmpdir() + "/dlaunch_" + sanitize(run_id);
    return fs::absolute(base + "_XXXXXX").string();
}

Result<std::string> make_run_dir(const std::optional<std::string>& log_dir, const std::string& run_id) {
    std::string templ = run_dir_template(log_dir, run_id);
    if (!::mkdtemp(templ.data()))
        return Error{"launch: run directory " + templ + ": " + std::strerror(errno),
                     log_dir ? "choose a writable --log-dir" : "make $TMPDIR writable or give --log-dir"};
    return fs::absolute(templ).string();
}

void remove_tree(const std::string& path) {
    std::error_code ec;
    fs::remove_all(path, ec);
}

std::string hostname() {
    char buf[256] = {};
    if (::gethostname(buf, sizeof buf - 1) != 0) return "localhost";
    return buf;
}

std::string node_name(const EnvMap& env) {
    const std::string slurm = str_var(env, "SLURMD_NODENAME");
    return slurm.empty() ? hostname() : slurm;
}

std::optional<std::string> interface_for(const std::string& address) {
    addrinfo hints{};
    hints.ai_socktype = SOCK_DGRAM;
    addrinfo* found = nullptr;
    if (::getaddrinfo(address.c_str(), "9", &hints, &found) != 0 || !found) return std::nullopt;
    std::optional<std::string> name;
    sockaddr_storage local{};
    socklen_t len = sizeof local;
    int s = ::socket(found->ai_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    // A UDP connect sends nothing; it only asks the kernel which local address the route uses.
    bool routed = s >= 0 && ::connect(s, found->ai_addr, found->ai_addrlen) == 0 &&
                  ::getsockname(s, reinterpret_cast<sockaddr*>(&local), &len) == 0;
    if (s >= 0) ::close(s);
    int family = found->ai_family;
    ::freeaddrinfo(found);
    if (!routed) return std::nullopt;
    ifaddrs* ifs = nullptr;
    if (::getifaddrs(&ifs) != 0) return std::nullopt;
    for (ifaddrs* i = ifs; i && !name; i = i->ifa_next) {
        if (!i->ifa_addr || i->ifa_addr->sa_family != family) continue;
        if (family == AF_INET && reinterpret_cast<sockaddr_in*>(i->ifa_addr)->sin_addr.s_addr ==
                                     reinterpret_cast<sockaddr_in*>(&local)->sin_addr.s_addr)
            name = i->ifa_name;
        if (family == AF_INET6 &&
            std::memcmp(&reinterpret_cast<sockaddr_in6*>(i->ifa_addr)->sin6_addr,
                        &reinterpret_cast<sockaddr_in6*>(&local)->sin6_addr, sizeof(in6_addr)) == 0)
            name = i->ifa_name;
    }
    ::freeifaddrs(ifs);
    return name;
}

std::optional<std::string> boot_id() {
    std::ifstream in("/proc/sys/kernel/random/boot_id");
    std::string id;
    if (!std::getline(in, id) || id.empty()) return std::nullopt;
    return id;
}

std::string topology_cache_dir() {
    return tmpdir() + "/dlaunch-topology-" + std::to_string(::geteuid());
}

namespace {
rlimit inherited_nofile{};
bool nofile_raised = false;
}  // namespace

void raise_descriptor_limit() {
    rlimit r{};
    if (nofile_raised || ::getrlimit(RLIMIT_NOFILE, &r) != 0 || r.rlim_cur >= r.rlim_max) return;
    rlimit raised = r;
    raised.rlim_cur = r.rlim_max;
    if (::setrlimit(RLIMIT_NOFILE, &raised) != 0) return;
    inherited_nofile = r;
    nofile_raised = true;
}

Status check_descriptor_limit(long needed, const std::string& what) {
    rlimit r{};
    if (::getrlimit(RLIMIT_NOFILE, &r) != 0 || r.rlim_cur == RLIM_INFINITY || r.rlim_cur >= rlim_t(needed)) return Ok{};
    return Error{"launch: " + what + " needs about " + std::to_string(needed) + " open files, and its limit is " +
                     std::to_string(r.rlim_cur) + " (`ulimit -Hn`)",
                 "raise the hard limit of open files to " + std::to_string(needed) +
                     " or more (limits.conf nofile, systemd LimitNOFILE=, or `ulimit -n` as root), or use fewer nodes"};
}

const rlimit* inherited_descriptor_limit() {
    return nofile_raised ? &inherited_nofile : nullptr;
}

std::string helper_dir() {
    std::error_code ec;
    auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
    if (ec) return "";
    const auto beside = exe.parent_path(), installed = exe.parent_path().parent_path() / "libexec/dlaunch";
    // (/usr/bin/python is python3 itself on many systems: look for the file, not the name.)
    return (std::filesystem::exists(beside / "python/sitecustomize.py", ec) ? beside : installed)
        .lexically_normal()
        .string();
}

std::string python_hook_dir() {
    const std::string dir = helper_dir();
    std::error_code ec;
    if (dir.empty() || !std::filesystem::exists(dir + "/python/sitecustomize.py", ec)) return "";
    return dir + "/python";
}

std::string temp_path(const std::string& name) {
    return tmpdir() + "/" + name;
}

std::string random_run_id() {
    const std::string bytes = random_bytes(16);
    unsigned char b[16];
    std::memcpy(b, bytes.data(), sizeof b);
    b[6] = static_cast<unsigned char>((b[6] & 0x0f) | 0x40);
    b[8] = static_cast<unsigned char>((b[8] & 0x3f) | 0x80);
    char out[37];
    std::snprintf(out, sizeof out, "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0], b[1],
                  b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]);
    return out;
}

EnvMap environment() {
    EnvMap env;
    for (char** e = environ; e && *e; ++e) {
        std::string kv = *e;
        auto eq = kv.find('=');
        if (eq == std::string::npos) continue;
        env.emplace(kv.substr(0, eq), kv.substr(eq + 1));
    }
    return env;
}

}  // namespace dlaunch::host
