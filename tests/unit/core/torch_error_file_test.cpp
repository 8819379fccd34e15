#include "dlaunch/torch_error_file.hpp"

#include <gtest/gtest.h>

namespace dlaunch {
namespace {

FailureRecord failure(int attempt, bool root, const std::string& file) {
    FailureRecord r;
    r.failure.attempt = attempt;
    r.failure.root_cause = root;
    r.error_file = file;
    return r;
}

TEST(TorchErrorFile, TheLastAttemptsRootCauseWithAFile) {
    RunOutcome o;
    o.failures = {failure(0, true, "/a0"), failure(1, false, "/b1"), failure(1, true, "/a1")};
    ASSERT_NE(error_file_root_cause(o), nullptr);
    EXPECT_EQ(error_file_root_cause(o)->error_file, "/a1");
    o.failures.back().error_file = "";
    EXPECT_EQ(error_file_root_cause(o), nullptr) << "the root cause wrote none: torchrun writes none";
    EXPECT_EQ(error_file_root_cause(RunOutcome{}), nullptr);
}

TEST(TorchErrorFile, TheWorkersRecordWithItsExitCode) {
    const std::string worker = R"({"message":{"message":"RuntimeError: x","extraInfo":{"timestamp":"1"}}})";
    EXPECT_EQ(launcher_record_of_worker(worker, {false, 3}),
              R"({"message":{"message":"RuntimeError: x","extraInfo":{"timestamp":"1"},"errorCode":3}})");
    EXPECT_EQ(launcher_record_of_worker(worker, {true, 11}),
              R"({"message":{"message":"RuntimeError: x","extraInfo":{"timestamp":"1"},"errorCode":-11}})")
        << "torch's exit code of a signal: minus its number";
    EXPECT_EQ(launcher_record_of_worker(R"({"message":"plain"})", {false, 3}), R"({"message":"plain"})")
        << "a message that is not an object is not changed";
    EXPECT_EQ(launcher_record_of_worker("not json\n", {false, 3}), "not json\n") << "copied as it is";
}

TEST(TorchErrorFile, TheLaunchersOwnEnd) {
    EXPECT_EQ(launcher_record_of_error("dlaunch: rdzv: no node came; start them", 1795690853.7),
              R"({"message":{"message":"dlaunch: rdzv: no node came; start them","extraInfo":{"py_callstack":"",)"
              R"("timestamp":"1795690853"}}})");
}

}  // namespace
}  // namespace dlaunch
