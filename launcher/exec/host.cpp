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

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>

#include "dlaunch/env_map.hpp"

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

std::string& reserved_lock_path() {
    static std::string path;
    return path;
}

}  // namespace

void release_reserved_port() {
    if (!reserved_lock_path().empty()) ::unlink(reserved_lock_path().c_str());
    reserved_lock_path().clear();
}

Result<int> reserve_free_port() {
    std::string dir = tmpdir() + "/dlaunch-ports";
    if (::mkdir(dir.c_str(), 01777) == 0) ::chmod(dir.c_str(), 01777);
    for (int attempt = 0; attempt < 64; ++attempt) {
        int port = 0;
        int s = bind_port(0, &port);
        if (s < 0)
            return Error{"launch: master port: cannot bind a socket: " + std::string(std::strerror(-s)),
                         "give --master-port PORT"};
        Fd sock(s);
        std::string lock_path = dir + "/" + std::to_string(port);
        int lock = ::open(lock_path.c_str(), O_RDONLY | O_CREAT | O_CLOEXEC, 0644);
        if (lock < 0) {
            return Error{"launch: master port: cannot create lock file " + lock_path + ": " + std::strerror(errno),
                         "make " + dir + " writable, or give --master-port PORT"};
        }
        if (::flock(lock, LOCK_EX | LOCK_NB) == 0) {
            reserved_lock_path() = lock_path;  // `lock` stays open: held until exit
            // Every way out of the program removes it (a plan printed, a usage error found later).
            static const bool at_exit = std::atexit([] { release_reserved_port(); }) == 0;
            (void)at_exit;
            return port;
        }
        ::close(lock);
    }
    return Error{"launch: master port: no free port found after 64 tries", "give --master-port PORT"};
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

std::string watchdog_fifo_path(const std::string& pid) {
    return tmpdir() + "/dlaunch-watchdog-" + pid;
}

std::string heartbeat_fifo_path(const std::string& pid) {
    return tmpdir() + "/dlaunch-heartbeat-" + pid;
}

std::string temp_path(const std::string& name) {
    return tmpdir() + "/" + name;
}

std::string random_run_id() {
    std::random_device rd;
    unsigned char b[16];
    for (auto& c : b) c = static_cast<unsigned char>(rd());
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
