#include "dlaunch/clean_command.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <regex>

#include "dlaunch/exit_codes.hpp"
#include "dlaunch/host.hpp"

namespace dlaunch {

namespace fs = std::filesystem;

std::vector<std::string> entries_to_clean(const std::vector<TempEntry>& found) {
    std::vector<std::string> out;
    for (const TempEntry& e : found) {
        const bool owner_gone = e.owner_pid > 0 && !e.owner_alive;
        const bool doomed = e.kind == TempEntry::Kind::RunDir     ? e.finished || owner_gone
                            : e.kind == TempEntry::Kind::PortLock ? !e.held
                                                                  : owner_gone;
        if (doomed) out.push_back(e.path);
    }
    return out;
}

namespace {

bool alive(int pid) {
    return pid > 0 && (::kill(pid, 0) == 0 || errno == EPERM);
}

// agent.pid: "PID HOST". A pid of another host (a $TMPDIR shared between nodes) cannot be checked: -1.
int pid_in(const std::string& path) {
    std::ifstream in(path);
    long pid = 0;
    std::string host;
    if (!(in >> pid) || pid <= 0 || pid > 0x7fffffff) return 0;
    if (in >> host && host != host::hostname()) return -1;
    return static_cast<int>(pid);
}

int pid_of_name(const std::string& digits) {
    errno = 0;
    const long pid = std::strtol(digits.c_str(), nullptr, 10);
    return errno == 0 && pid > 0 && pid <= 0x7fffffff ? static_cast<int>(pid) : 0;
}

// Run directories (dlaunch_<run id>_XXXXXX) and per-process entries of this user in `dir`: private
// directories (dlaunch-private-PID-XXXXXX) and what dlaunch before them left in $TMPDIR itself
// (dlaunch-watchdog-PID, dlaunch-heartbeat-PID, [native-]dlaunch-stacks-PID.txt).
std::vector<TempEntry> find_entries(const std::string& dir) {
    static const std::regex per_process(
        R"((native-)?dlaunch-(watchdog|heartbeat|stacks|private)-(\d+)(\.txt|-[A-Za-z0-9]{6})?)");
    std::vector<TempEntry> found;
    std::error_code ec;
    for (const auto& item : fs::directory_iterator(dir, ec)) {
        const std::string name = item.path().filename().string();
        struct stat st {};
        if (::lstat(item.path().c_str(), &st) != 0 || st.st_uid != ::geteuid()) continue;
        std::smatch m;
        if (name.rfind("dlaunch_", 0) == 0 && S_ISDIR(st.st_mode)) {
            TempEntry e{item.path().string(), TempEntry::Kind::RunDir};
            e.finished = fs::exists(item.path() / "run.json") || fs::exists(item.path() / "failure.json");
            e.owner_pid = pid_in((item.path() / "agent.pid").string());
            e.owner_alive = alive(e.owner_pid);
            found.push_back(e);
        } else if (std::regex_match(name, m, per_process)) {
            TempEntry e{item.path().string(), TempEntry::Kind::PerProcessFile};
            e.owner_pid = pid_of_name(m[3].str());
            e.owner_alive = alive(e.owner_pid);
            found.push_back(e);
        }
    }
    return found;
}

// dlaunch-ports-UID/PORT: the master-port locks of agents that picked a free port; held while their run goes.
void find_port_locks(const std::string& dir, std::vector<TempEntry>& found) {
    std::error_code ec;
    for (const auto& item : fs::directory_iterator(dir + "/dlaunch-ports-" + std::to_string(::geteuid()), ec)) {
        struct stat st {};
        if (::lstat(item.path().c_str(), &st) != 0 || st.st_uid != ::geteuid() || !S_ISREG(st.st_mode)) continue;
        TempEntry e{item.path().string(), TempEntry::Kind::PortLock};
        const int fd = ::open(item.path().c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
        e.held = fd < 0 || ::flock(fd, LOCK_EX | LOCK_NB) != 0;
        if (fd >= 0) ::close(fd);
        found.push_back(e);
    }
}

}  // namespace

int run_clean_command(const Command& cmd) {
    std::string dir = host::temp_path("");
    dir.pop_back();  // the "/" temp_path put before the empty name
    std::vector<TempEntry> found = find_entries(dir);
    find_port_locks(dir, found);
    const std::vector<std::string> doomed = entries_to_clean(found);
    int failed = 0;
    for (const std::string& path : doomed) {
        std::error_code ec;
        if (!cmd.clean_dry_run) fs::remove_all(path, ec);
        if (ec) {
            std::cerr << "dlaunch: clean: " << path << ": " << ec.message() << "\n";
            ++failed;
            continue;
        }
        std::cout << (cmd.clean_dry_run ? "would remove " : "removed ") << path << "\n";
    }
    std::cout << (cmd.clean_dry_run ? "would remove " : "removed ") << doomed.size() - failed << " item(s) from " << dir
              << "\n";
    return failed > 0 ? exit_code::kLaunchFailure : exit_code::kSuccess;
}

}  // namespace dlaunch
