// Heartbeats from a rank to the dlaunch agent (docs/hangs.md): header-only, for C++ programs run under
// dlaunch; the agent reads the same protocol with parse().
//
// The channel: DLAUNCH_HEARTBEAT_FILE names a FIFO the agent reads. A heartbeat is one line, written with
// one write() (atomic up to PIPE_BUF):  "beat <RANK> [NOTE]\n"  where RANK is the global rank ($RANK) and
// NOTE free text (e.g. "step 1200") shown when the rank hangs. From a shell:
//   echo "beat $RANK step 3" > "$DLAUNCH_HEARTBEAT_FILE"
#pragma once

#include <fcntl.h>
#include <unistd.h>

#include <charconv>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>

namespace dlaunch::heartbeat {

inline constexpr const char* kVariable = "DLAUNCH_HEARTBEAT_FILE";
inline constexpr size_t kMaxNote = 400;

struct Beat {
    int rank = 0;
    std::string note;
    bool operator==(const Beat&) const = default;
};

inline std::string format(int rank, std::string_view note) {
    std::string line = "beat " + std::to_string(rank);
    if (!note.empty()) line += " " + std::string(note.substr(0, kMaxNote));
    for (size_t i = 5; i < line.size(); ++i)
        if (line[i] == '\n' || line[i] == '\r') line[i] = ' ';
    return line + "\n";
}

// One line without its '\n'; nullopt when it is not a heartbeat.
inline std::optional<Beat> parse(std::string_view line) {
    constexpr std::string_view prefix = "beat ";
    if (!line.starts_with(prefix)) return std::nullopt;
    line.remove_prefix(prefix.size());
    Beat b;
    auto [end, ec] = std::from_chars(line.data(), line.data() + line.size(), b.rank);
    if (ec != std::errc{} || b.rank < 0 || (end != line.data() + line.size() && *end != ' ')) return std::nullopt;
    if (end != line.data() + line.size()) b.note = std::string(end + 1, line.data() + line.size());
    return b;
}

// Sends one heartbeat for this process's rank to the agent. Never blocks, never throws; false when no
// agent listens (not run by dlaunch, or the pipe is full).
inline bool beat(std::string_view note = {}) {
    const char* path = std::getenv(kVariable);
    const char* rank = std::getenv("RANK");
    if (!path || !*path || !rank) return false;
    const int fd = ::open(path, O_WRONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) return false;
    const std::string line = format(std::atoi(rank), note);
    const bool sent = ::write(fd, line.data(), line.size()) == static_cast<ssize_t>(line.size());
    ::close(fd);
    return sent;
}

}  // namespace dlaunch::heartbeat
