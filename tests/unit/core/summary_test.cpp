#include "dlaunch/summary.hpp"

#include <gtest/gtest.h>

#include <csignal>

#include "dlaunch/exit_codes.hpp"
#include "dlaunch/plan.hpp"
#include "dlaunch/run_report.hpp"

namespace dlaunch {
namespace {

TEST(ErrorFile, ReadsTorchelasticFormat) {
    auto [message, traceback] = parse_error_file(
        R"({"message": {"message": "ValueError: boom", "extraInfo": {"py_callstack": "Traceback...\nValueError: boom", "timestamp": "1"}}})");
    EXPECT_EQ(message, "ValueError: boom");
    EXPECT_EQ(traceback, "Traceback...\nValueError: boom");
}

TEST(ErrorFile, KeepsTextThatIsNotJson) {
    auto [message, traceback] = parse_error_file("plain text");
    EXPECT_EQ(message, "plain text");
    EXPECT_FALSE(traceback);
    EXPECT_FALSE(parse_error_file("").first);
}

RunOutcome outcome() {
    RunOutcome o;
    o.run_id = "job1";
    o.exit_code = 3;
    o.failed = true;
    o.restarts = 1;
    o.max_restarts = 1;
    FailureRecord a0;
    a0.failure = {0, {2, 4001, {false, 1}, 1000.0}, true, false};
    a0.rank = 2;
    a0.host = "node1";
    FailureRecord a1;
    a1.failure = {1, {1, 4002, {false, 3}, 1002.5}, true, false};
    a1.rank = 1;
    a1.host = "node1";
    a1.stderr_log = "/logs/attempt_1/1/stderr.log";
    a1.stderr_tail = {"line one", "ValueError: bad"};
    a1.traceback = "Traceback (most recent call last):\nValueError: bad";
    FailureRecord stopped;
    stopped.failure = {1, {0, 4003, {true, SIGTERM}, 1002.6}, false, true};
    o.failures = {a0, a1, stopped};
    return o;
}

TEST(Summary, NamesTheRootCauseOfTheLastAttemptWithDetails) {
    auto text = render_failure_summary(outcome());
    EXPECT_NE(text.find("root cause: rank 1 (local rank 1, node 0, host node1, pid 4002)"), std::string::npos) << text;
    EXPECT_NE(text.find("exit code 3 at 1970-01-01T00:16:42.500Z (attempt 1; restarts used 1 of 1)"), std::string::npos)
        << text;
    EXPECT_NE(text.find("/logs/attempt_1/1/stderr.log"), std::string::npos);
    EXPECT_NE(text.find("    | ValueError: bad"), std::string::npos);
    EXPECT_NE(text.find("traceback (from TORCHELASTIC_ERROR_FILE)"), std::string::npos);
    EXPECT_NE(text.find("attempt 0: rank 2 (local 2): exit code 1"), std::string::npos);
    EXPECT_NE(text.find("[while dlaunch was stopping the group]"), std::string::npos);
}

TEST(Summary, AStderrInNoFileIsSaidToBeOnTheConsole) {
    RunOutcome o = outcome();
    o.failures[1].stderr_log.clear();
    auto text = render_failure_summary(o);
    EXPECT_NE(text.find("  stderr:   on the console only (no log file)\n  last stderr lines:\n    | line one\n"),
              std::string::npos)
        << text;
}

TEST(Summary, JsonHasEveryFailureAndTheRootCause) {
    auto j = failure_summary_json(outcome());
    EXPECT_EQ(j["exit_code"], 3);
    EXPECT_EQ(j["failures"].size(), 3u);
    EXPECT_EQ(j["root_cause"]["rank"], 1);
    EXPECT_EQ(j["root_cause"]["attempt"], 1);
    EXPECT_EQ(j["failures"][2]["signal"], SIGTERM);
    EXPECT_TRUE(j["failures"][2]["exit_code"].is_null());
}

FailureRecord hung_rank() {
    FailureRecord r;
    r.failure = {0, {2, 4001, {true, SIGTERM}, 1000.0}, true, false, 5.2};
    r.rank = 2;
    r.host = "node1";
    r.culprit = "rank 2 (host node1, pid 4001): the other ranks wait in a collective for rank 2";
    r.hang_evidence = {"ranks 0,1,3 wait in all_reduce", "rank 2 is not in a collective: at train.py:10"};
    r.stacks_files = "/logs/attempt_0/*/stacks.txt";
    r.notes = {"torchrun's watchdog: timer 'step' expired; sent SIGKILL to pid 4001 (rank 2)"};
    return r;
}

TEST(Summary, AHangNamesTheCulpritItsEvidenceAndTheStacks) {
    RunOutcome o;
    o.run_id = "job1";
    o.exit_code = 124;
    o.failed = true;
    o.failures = {hung_rank()};
    auto text = render_failure_summary(o);
    EXPECT_NE(text.find("status:   hung: no progress for 5 s (then signal SIGTERM (15))"), std::string::npos) << text;
    EXPECT_NE(text.find("culprit:  rank 2 (host node1, pid 4001): the other ranks wait"), std::string::npos) << text;
    EXPECT_NE(text.find("    - ranks 0,1,3 wait in all_reduce\n"), std::string::npos) << text;
    EXPECT_NE(text.find("stacks:   /logs/attempt_0/*/stacks.txt"), std::string::npos) << text;
    EXPECT_NE(text.find("note:     torchrun's watchdog: timer 'step' expired"), std::string::npos) << text;
}

TEST(Summary, AHangRecordSurvivesItsJsonAndOlderRecordsReadWithDefaults) {
    auto j = failure_record_json(hung_rank());
    EXPECT_EQ(j["hung_after_seconds"], 5.2);
    EXPECT_EQ(failure_record_from_json(j), hung_rank());
    for (auto key : {"hung_after_seconds", "stacks_files", "culprit", "hang_evidence", "notes"}) j.erase(key);
    auto old = failure_record_from_json(j);
    ASSERT_TRUE(old);
    EXPECT_FALSE(old->failure.hung_after);
    EXPECT_TRUE(old->hang_evidence.empty());
}

TEST(Summary, EmptyWithoutFailure) {
    EXPECT_EQ(render_failure_summary(RunOutcome{}), "");
}

TEST(Summary, EmptyWhenARestartSucceeded) {
    auto o = outcome();
    o.failed = false;
    o.exit_code = 0;
    EXPECT_EQ(render_failure_summary(o), "");
    EXPECT_EQ(restarts_line(o), "succeeded after 1 restart (attempt 0: rank 2, exit code 1)");
    EXPECT_EQ(run_end_word(o), "succeeded");
}

TEST(Waiting, NamesTheRanksStillRunningAndSaysItLessOften) {
    EXPECT_EQ(waiting_line(3, 4, {{2, 123, "node1", 40.4, "", ""}}),
              "3 of 4 ranks finished; waiting for rank 2 (pid 123, host node1, running 40 s)");
    std::vector<Straggler> six;
    for (int r = 0; r < 6; ++r) six.push_back({r, 100 + r, "n", 1, "", ""});
    const std::string many = waiting_line(2, 8, six);
    EXPECT_EQ(many.substr(many.size() - 11), " and 2 more") << many;
    EXPECT_EQ(many.find("rank 4"), std::string::npos) << "four named, the rest counted";
    EXPECT_EQ(waiting_note_after(0), 10);
    EXPECT_EQ(waiting_note_after(1), 30);
    EXPECT_EQ(waiting_note_after(2), 70);
    EXPECT_EQ(waiting_note_after(20) - waiting_note_after(19), 300) << "at most every 5 minutes";
}

TEST(Waiting, AStopNamesTheRanksStillRunningAndWhereEachWas) {
    EXPECT_EQ(still_running_line({{0, 11, "n1", 40.2, "train.py:14 in main: time.sleep(60)", "/l/0/stacks.txt"},
                                  {1, 12, "n1", 40.2, "", ""}}),
              "ranks still running: 0 (pid 11, host n1, running 40 s, at train.py:14 in main: time.sleep(60)), "
              "1 (pid 12, host n1, running 40 s)");
    EXPECT_EQ(still_running_line({{3, 13, "n2", 1, "", ""}}), "rank still running: 3 (pid 13, host n2, running 1 s)");
    EXPECT_EQ(still_running_line({{3, 13, "n2", 1, kNoPythonStack, ""}}),
              std::string("rank still running: 3 (pid 13, host n2, running 1 s, ") + kNoPythonStack + ")");
}

TEST(RunRecord, SaysHowTheRunEndedAndEachAttempt) {
    auto o = outcome();
    o.attempts = {{0, 1000.0, 1000.5}, {1, 1001.0, 1003.0}};
    auto j = run_record_json(o, "/logs/job1_x");
    EXPECT_EQ(j["outcome"], "failed");
    EXPECT_EQ(j["exit_code"], 3);
    ASSERT_EQ(j["attempts"].size(), 2u);
    EXPECT_EQ(j["attempts"][0]["ended_by"], "rank 2, exit code 1");
    EXPECT_EQ(j["attempts"][1]["ended_by"], "rank 1, exit code 3");
    EXPECT_DOUBLE_EQ(j["attempts"][1]["duration_s"].get<double>(), 2.0);
    EXPECT_EQ(j["attempts"][1]["logs"], "/logs/job1_x/attempt_1");
    EXPECT_DOUBLE_EQ(j["duration_s"].get<double>(), 3.0);
    EXPECT_EQ(j["failures"].size(), 3u);
    EXPECT_EQ(restarts_line(o), "") << "it did not succeed";
    o.stop_signal = SIGINT;
    EXPECT_EQ(run_end_word(o), "stopped by SIGINT");
}

// `dlaunch report`: the run record read back and told as a timeline.

TEST(RunReport, TellsEachAttemptWhatEndedItAndTheWaitsBetween) {
    RunOutcome o = outcome();
    o.attempts = {{0, 1000.0, 1000.6}, {1, 1002.6, 1004.1}};
    auto report = run_report_from_json(run_record_json(o, "/logs/job1_x"));
    ASSERT_TRUE(report) << report.error().describe();
    const std::string text = run_report_text(*report);
    EXPECT_NE(text.find("run job1 (/logs/job1_x): failed, exit code 3, 1 of 1 restarts\n"), std::string::npos) << text;
    EXPECT_NE(text.find("  attempt 0  1970-01-01T00:16:40.000Z  +0.0 s  ran 0.6 s  ended by rank 2, exit code 1\n"),
              std::string::npos)
        << text;
    EXPECT_NE(text.find("  waited 2.0 s before attempt 1\n"), std::string::npos) << text;
    EXPECT_NE(text.find("  attempt 1: rank 1 (host node1): exit code 3 (root cause)\n"), std::string::npos) << text;
    EXPECT_NE(text.find("  attempt 1: rank 0: signal SIGTERM (15) (while dlaunch was stopping the group)\n"),
              std::string::npos)
        << text;
    const std::string svg = run_report_svg(*report);
    EXPECT_NE(svg.find("class=\"attempt\" data-attempt=\"1\""), std::string::npos) << svg;
}

TEST(RunReport, SaysWhichNodesTheHealthGateLeftOutAndWhatEndedTheRun) {
    RunOutcome o;
    o.run_id = "42";
    o.exit_code = 78;
    o.failed = true;
    o.not_ready = "node2 (site check `x`: exit code 1) failed the health check";
    o.end_cause = "attempt 1: " + o.not_ready;
    o.attempts = {{0, 1000.0, 1001.0}};
    o.left_out = {{0, "node3", "gpus: GPU 1 GPU-b: 3 uncorrected ECC errors"}};
    auto j = run_record_json(o, "/logs/42");
    EXPECT_EQ(j["outcome"], "not ready");
    EXPECT_EQ(j["end_cause"], o.end_cause);
    EXPECT_EQ(j["left_out"][0]["host"], "node3");
    auto report = run_report_from_json(j);
    ASSERT_TRUE(report) << report.error().describe();
    const std::string text = run_report_text(*report);
    EXPECT_NE(text.find("ended by attempt 1: node2 (site check `x`: exit code 1) failed the health check\n"),
              std::string::npos)
        << text;
    EXPECT_NE(text.find("left out by the health gate:\n  attempt 0: node3 left out (health check: gpus: GPU 1 "
                        "GPU-b: 3 uncorrected ECC errors)\n"),
              std::string::npos)
        << text;
    EXPECT_NE(run_report_svg(*report).find("attempt 0: node3 left out"), std::string::npos);
    EXPECT_NE(render_failure_summary(o).find("root cause: " + o.end_cause), std::string::npos);
    EXPECT_NE(render_failure_summary(o).find("attempt 0: node3 left out (health check: gpus:"), std::string::npos);
}

// A cut worker log turns a success into exit_code::kLogFailure, unless ignored; a failure keeps its own code.
TEST(LogErrors, OnlyASuccessBecomesTheLogFailureCode) {
    RunOutcome cut;
    cut.log_errors = {"rank 0: /logs/r_X/attempt_0/0/stdout.log: No space left on device"};
    const RunOutcome whole;
    struct Row {
        int code;
        const RunOutcome& outcome;
        bool ignore;
        int expected;
    };
    for (const Row& r : std::vector<Row>{{0, cut, false, exit_code::kLogFailure},
                                         {0, cut, true, 0},
                                         {3, cut, false, 3},
                                         {exit_code::kHang, cut, false, exit_code::kHang},
                                         {0, whole, false, 0}})
        EXPECT_EQ(exit_code_after_logs(r.code, r.outcome, r.ignore), r.expected) << r.code << " " << r.ignore;
    EXPECT_EQ(run_record_json(cut, "/logs/r_X")["log_errors"], nlohmann::json(cut.log_errors));
    EXPECT_FALSE(run_record_json(whole, "/logs/r_X").contains("log_errors"));
}

// `dlaunch report --exit-code`: a group job's log directory holds one run per node; the leader's code is
// the job's (srun --no-kill exits 1 after a node failure from Slurm 23.02 on).
TEST(RunReport, TheExitCodeIsTheOnlyRunsOrTheGroupLeaders) {
    auto node = [](int code, std::optional<bool> led) {
        RunOutcome o;
        o.run_id = "job7";
        o.exit_code = code;
        o.led_group = led;
        auto report = run_report_from_json(run_record_json(o, "/logs/job7_x"));
        EXPECT_TRUE(report);
        EXPECT_EQ(report->led_group, led);
        return *report;
    };
    EXPECT_EQ(run_exit_code({node(3, std::nullopt)}, "/logs").value(), 3) << "one run, no group";
    EXPECT_EQ(run_exit_code({node(3, true)}, "/logs").value(), 3);
    auto member = run_exit_code({node(0, false)}, "/logs");
    ASSERT_FALSE(member) << "a member's record alone does not say how the group ended";
    EXPECT_EQ(member.error().what, "report: the only run in /logs was a member of a group, not its leader");
    EXPECT_EQ(run_exit_code({node(69, false), node(0, true), node(0, false)}, "/logs").value(), 0);
    auto none = run_exit_code({node(0, false), node(0, false)}, "/logs");
    ASSERT_FALSE(none);
    EXPECT_EQ(none.error().what,
              "report: none of the 2 runs in /logs led its group when the group ended (the leader's run.json says "
              "so; a leader killed before the end writes none)");
    auto two = run_exit_code({node(0, true), node(0, true), node(0, false)}, "/logs");
    ASSERT_FALSE(two);
    EXPECT_NE(two.error().what.find("2 of the 3 runs in /logs led a group at its end"), std::string::npos);
    EXPECT_FALSE(run_report_from_json(nlohmann::json::parse(R"({"run_id": "a", "run_dir": "/l/a", "outcome":
        "succeeded", "exit_code": 0, "restarts": 0, "max_restarts": 0, "attempts": [], "failures": []})"))
                     ->led_group.has_value())
        << "a run not in a group";
}

TEST(RunReport, RefusesWhatIsNotARunRecord) {
    auto report = run_report_from_json(nlohmann::json{{"outcome", "failed"}});
    ASSERT_FALSE(report);
    EXPECT_NE(report.error().what.find("not a dlaunch run record"), std::string::npos) << report.error().what;
}

TEST(Summary, TimesAreUtcToTheMillisecond) {
    EXPECT_EQ(format_utc(0.5), "1970-01-01T00:00:00.500Z");
    EXPECT_EQ(format_utc(1795886973.25), "2026-11-28T17:29:33.250Z");
    EXPECT_EQ(format_utc(1795886973.9996), "2026-11-28T17:29:34.000Z") << "rounding carries into the second";
    EXPECT_EQ(format_utc(1798761599.9996), "2027-01-01T00:00:00.000Z") << "... and into the year";
    EXPECT_EQ(format_utc(1709251199.999), "2024-02-29T23:59:59.999Z") << "a leap day";
}

}  // namespace
}  // namespace dlaunch
