// The launcher's own TORCHELASTIC_ERROR_FILE: when the agent itself runs with that variable set (as
// schedulers that wrap torchrun run it), torchrun leaves there the record of why it failed, and so does
// dlaunch. Pure: the agent reads the worker's file and writes the launcher's (attempt_io.hpp).
//
// What torch's elastic error handler does (torch/distributed/elastic/multiprocessing/errors):
// - workers failed: the first failure's own error file is copied, with "errorCode" set in its "message"
//   object to the worker's exit code (-N for signal N) — only when that worker wrote a file; none else;
// - the launcher failed or was stopped: {"message": {"message": "...", "extraInfo": {"py_callstack": ...,
//   "timestamp": "<epoch seconds>"}}}.
#pragma once

#include <optional>
#include <string>

#include "dlaunch/summary.hpp"

namespace dlaunch {

inline constexpr const char* kTorchErrorFileVariable = "TORCHELASTIC_ERROR_FILE";

// The failure whose error file the launcher copies: this node's root cause of the last attempt, when it
// wrote an error file (FailureRecord::error_file); nullptr else.
const FailureRecord* error_file_root_cause(const RunOutcome& outcome);

// The launcher's record for a root cause whose error file holds `worker_file`: the same JSON with
// message.errorCode set to torch's exit code for `status` (when not 0 and "message" is an object); a file
// that is not JSON is copied as it is.
std::string launcher_record_of_worker(const std::string& worker_file, const ExitStatus& status);

// The launcher's record of its own end: `message` (dlaunch's error line), at `epoch` seconds. dlaunch has
// no Python stack to give: py_callstack is "".
std::string launcher_record_of_error(const std::string& message, double epoch);

}  // namespace dlaunch
