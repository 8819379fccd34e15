// `dlaunch report` of a job run with --requeue: its record is the ledger (attempts.jsonl, requeue.hpp), which
// keeps when each attempt ended and why, but not when it started, nor a success (the job's end in Slurm says
// that). Told as a list of the attempts' ends, with every failure. Pure: records in, text out.
#pragma once

#include <string>
#include <vector>

#include "dlaunch/requeue.hpp"

namespace dlaunch {

std::string ledger_report_text(const std::string& job_dir, const std::vector<AttemptRecord>& ledger);

}  // namespace dlaunch
