// The one place for dlaunch's exit codes. README.md ("Exit codes"), the man pages and `dlaunch --help`
// document the same table.
//
// dlaunch's own outcomes use the sysexits.h range (64-78), which programs rarely use, so that a worker's
// own exit code (kept as the run's code when a worker is the root cause) is not mistaken for one of them.
// When dlaunch itself is stopped by a signal it dies of that signal once its workers are gone (as a shell
// expects of a program it waited for), while a worker that died of signal S makes the run exit 128+S: the
// wait status (Python's returncode -S, Slurm's ExitCode 0:S) tells the two apart.
#pragma once

namespace dlaunch::exit_code {

inline constexpr int kSuccess = 0;
// Bad command line or bad input found before anything started (nothing was launched). EX_USAGE.
inline constexpr int kUsage = 64;
// Several nodes: the group could not form (a rendezvous that timed out or refused this node) or a node
// was lost and no worker failure explains the end. EX_UNAVAILABLE.
inline constexpr int kGroupFailure = 69;
// dlaunch failed in a way that is a bug (an internal error). EX_SOFTWARE.
inline constexpr int kInternal = 70;
// dlaunch could not start or keep supervising workers (fork failed, log file vanished, ...). EX_OSERR.
inline constexpr int kLaunchFailure = 71;
// A worker's log could not be written in full (a full or failing log directory) in a run that otherwise
// succeeded; --ignore-log-errors keeps 0. EX_IOERR.
inline constexpr int kLogFailure = 74;
// The node is not ready: a check of `dlaunch doctor` failed, or the health gate refused an attempt (this
// node failed it, or too few nodes of the group passed). EX_CONFIG.
inline constexpr int kNotReady = 78;
// A rank hung (no progress for --hang-timeout) and no restart was left: the code timeout(1) uses.
inline constexpr int kHang = 124;
// A worker that died of signal N (the root cause): 128+N. dlaunch stopped by signal N: killed by N.
inline constexpr int kSignalBase = 128;

}  // namespace dlaunch::exit_code
