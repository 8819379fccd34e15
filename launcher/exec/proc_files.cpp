#include "dlaunch/proc_files.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

namespace dlaunch {

namespace {

std::optional<ProcStat> read_stat_file(const char* path) {
    const int fd = ::open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return std::nullopt;
    char buf[1024];
    const ssize_t n = ::read(fd, buf, sizeof buf - 1);
    ::close(fd);
    if (n <= 0) return std::nullopt;
    buf[n] = '\0';
    // After the command in parentheses: field 3 (state), 4 (ppid) ... 14 (utime), 15 (stime); proc(5).
    const char* p = std::strrchr(buf, ')');
    if (!p || p[1] != ' ' || p[2] == '\0') return std::nullopt;
    ProcStat stat;
    stat.state = p[2];
    if (!(p = std::strchr(p + 1, ' ')) || !(p = std::strchr(p + 1, ' '))) return std::nullopt;
    stat.ppid = static_cast<pid_t>(std::strtol(p + 1, nullptr, 10));
    for (int field = 5; field <= 14 && p; ++field) p = std::strchr(p + 1, ' ');  // the space before it
    if (!p) return std::nullopt;
    char* end = nullptr;
    const unsigned long long utime = std::strtoull(p + 1, &end, 10);
    const unsigned long long stime = std::strtoull(end, nullptr, 10);
    static const double ticks = static_cast<double>(::sysconf(_SC_CLK_TCK));
    stat.cpu_seconds = static_cast<double>(utime + stime) / ticks;
    return stat;
}

}  // namespace

std::optional<ProcStat> read_proc_stat(pid_t pid) {
    char path[32];
    std::snprintf(path, sizeof path, "/proc/%d/stat", static_cast<int>(pid));
    return read_stat_file(path);
}

std::optional<ProcStat> read_main_thread_stat(pid_t pid) {
    char path[48];
    std::snprintf(path, sizeof path, "/proc/%d/task/%d/stat", static_cast<int>(pid), static_cast<int>(pid));
    return read_stat_file(path);
}

std::optional<double> main_thread_cpu_seconds(pid_t pid) {
    auto stat = read_main_thread_stat(pid);
    if (stat && stat->state == 'Z') stat = read_proc_stat(pid);
    return stat ? std::optional<double>(stat->cpu_seconds) : std::nullopt;
}

std::string read_file_from(const std::string& path, off_t offset) {
    std::ifstream in(path, std::ios::binary);
    if (offset > 0) in.seekg(offset);
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
}

}  // namespace dlaunch
