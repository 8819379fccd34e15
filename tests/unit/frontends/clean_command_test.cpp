#include "dlaunch/clean_command.hpp"

#include <gtest/gtest.h>

namespace dlaunch {
namespace {

using Kind = TempEntry::Kind;

TEST(Clean, RemovesEndedRunsAndTheFilesOfDeadProcessesOnly) {
    const std::vector<TempEntry> found{
        {"/tmp/dlaunch_a_1", Kind::RunDir, true, 100, true, false},    // ended (run.json), agent still exiting
        {"/tmp/dlaunch_b_2", Kind::RunDir, false, 200, false, false},  // agent killed with -9
        {"/tmp/dlaunch_c_3", Kind::RunDir, false, 300, true, false},   // running
        {"/tmp/dlaunch_d_4", Kind::RunDir, false, 0, false, false},    // older dlaunch, or starting now
        {"/tmp/dlaunch_e_5", Kind::RunDir, false, -1, false, false},   // an agent of another host (shared $TMPDIR)
        {"/tmp/dlaunch-watchdog-400", Kind::PerProcessFile, false, 400, false, false},
        {"/tmp/dlaunch-heartbeat-500", Kind::PerProcessFile, false, 500, true, false},
        {"/tmp/dlaunch-ports/40001", Kind::PortLock, false, 0, false, false},  // its agent was killed
        {"/tmp/dlaunch-ports/40002", Kind::PortLock, false, 0, false, true},   // its run goes on
    };
    EXPECT_EQ(entries_to_clean(found),
              (std::vector<std::string>{"/tmp/dlaunch_a_1", "/tmp/dlaunch_b_2", "/tmp/dlaunch-watchdog-400",
                                        "/tmp/dlaunch-ports/40001"}));
}

}  // namespace
}  // namespace dlaunch
