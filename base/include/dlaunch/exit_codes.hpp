// The one place for dlaunch's exit codes. README.md ("Exit codes") documents the same table.
#pragma once

namespace dlaunch::exit_code {

inline constexpr int kSuccess = 0;
// Bad command line or bad input found before anything started (nothing was launched).
inline constexpr int kUsage = 2;
// dlaunch could not start or keep supervising workers (fork failed, log file vanished, ...).
inline constexpr int kLaunchFailure = 3;
// A rank hung (no progress for --hang-timeout) and no restart was left: the code timeout(1) uses.
inline constexpr int kHang = 124;
// Otherwise: the root-cause rank's exit code, 128+N when that rank died of signal N, and
// 128+N when dlaunch itself was stopped by signal N.
inline constexpr int kSignalBase = 128;

}  // namespace dlaunch::exit_code
