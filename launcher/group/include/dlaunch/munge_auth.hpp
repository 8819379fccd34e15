// MUNGE credentials for the group channel under Slurm (libmunge; munged runs on every Slurm node). A member
// signs its run id; the leader verifies the credential (once: MUNGE refuses a replay) and learns the uid
// that made it, which refusal() in group_protocol.hpp checks against the job's.
#pragma once

#include <string>

#include "dlaunch/group_protocol.hpp"
#include "dlaunch/result.hpp"

namespace dlaunch::group {

Result<std::string> munge_credential(const std::string& payload);
Result<Sender> munge_verify(const std::string& credential);

}  // namespace dlaunch::group
