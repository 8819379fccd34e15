#include "dlaunch/clean_command.hpp"

#include <gtest/gtest.h>

namespace dlaunch {
namespace {

using Kind = TempEntry::Kind;

TEST(Clean, RemovesEndedRunsAndTheFilesOfDeadProcessesOnly) {
    const std::vector<TempEntry> found{
        {"/tmp/dlaunch_a_1", Kind::RunDir, true, 100, true},    // ended (run.json), agent still exiting
        {"/tmp/dlaunch_b_2", Kind::RunDir, false, 200, false},  // agent killed with -9
        {"/tmp/dlaunch_c_3", Kind::RunDir, false, 300, true},   // running
        {"/tmp/dlaunch_d_4", Kind::RunDir, false, 0, false},    // older dlaunch, or starting now
        {"/tmp/dlaunch_e_5", Kind::RunDir, false, -1, false},   // an agent of another host (shared $TMPDIR)
        {"/tmp/dlaunch-watchdog-400", Kind::PerProcessFile, false, 400, false},
        {"/tmp/dlaunch-heartbeat-500", Kind::PerProcessFile, false, 500, true},
    };
    EXPECT_EQ(entries_to_clean(found),
              (std::vector<std::string>{"/tmp/dlaunch_a_1", "/tmp/dlaunch_b_2", "/tmp/dlaunch-watchdog-400"}));
}

}  // namespace
}  // namespace dlaunch
