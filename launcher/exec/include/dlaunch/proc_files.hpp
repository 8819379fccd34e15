// Reading what the kernel and the workers leave in files: /proc/<pid>/stat, and a file's content from an
// offset (error files, stacks appended by a dump). The one place exec/ parses /proc/<pid>/stat.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>

namespace dlaunch {

struct ProcStat {
    char state = '?';  // R, S, D, Z (exited, not yet reaped), ...
    pid_t ppid = 0;
    double cpu_seconds = 0;  // utime + stime: of every thread of the process, or of the one thread read
};

// /proc/<pid>/stat, read with one read() (the hang monitor reads it for every rank at every sample);
// nullopt once the process is gone.
std::optional<ProcStat> read_proc_stat(pid_t pid);

// /proc/<pid>/task/<pid>/stat: the same fields for the process's main thread alone (its cpu_seconds are
// that thread's); nullopt once the process is gone.
std::optional<ProcStat> read_main_thread_stat(pid_t pid);

// What the hang monitor counts as a rank's CPU time: its main thread's (other threads may spin while the rank
// goes nowhere: gloo's, once a peer is gone), or its process's once the main thread ended before the others.
std::optional<double> main_thread_cpu_seconds(pid_t pid);

// The file's content from byte `offset` on ("" when it cannot be read).
std::string read_file_from(const std::string& path, off_t offset = 0);

}  // namespace dlaunch
