// dlaunch --requeue's pure parts: the checkpoint rule of the failure policy, the attempt ledger, the
// job-wide budget, the summary of every attempt, the checkpoint wait, and the command line.
#include "dlaunch/requeue.hpp"

#include <gtest/gtest.h>
#include <slurm/slurm.h>

#include <csignal>

#include "dlaunch/cli.hpp"
#include "dlaunch/failure_policy.hpp"
#include "dlaunch/ledger_report.hpp"
#include "dlaunch/pmix/job_source.hpp"
#include "dlaunch/slurm/client.hpp"
#include "dlaunch/slurm/task_facts.hpp"

namespace dlaunch {
namespace {

using K = Action::Kind;

WorkerExit exited(int local_rank, int code, double t = 1) {
    return {local_rank, 100 + local_rank, {false, code}, t};
}

FailureRecord failure(int attempt, int rank, int code, bool root, double t) {
    FailureRecord r;
    r.failure = {attempt, exited(rank % 2, code, t), root, !root};
    r.rank = rank;
    r.node_rank = rank / 2;
    r.host = "node" + std::to_string(rank / 2 + 1);
    r.stderr_tail = {"boom " + std::to_string(rank)};
    return r;
}

AttemptRecord failed(int attempt, std::vector<FailureRecord> failures, int code) {
    AttemptRecord r;
    r.attempt = attempt;
    r.end = AttemptEnd::Failed;
    r.detail = "a worker failed";
    r.host = "node1";
    r.nnodes = 2;
    r.world_size = 4;
    r.time = 1000 + attempt;
    r.exit_code = code;
    r.failures = std::move(failures);
    return r;
}

TEST(RequeuePolicy, WarningSignalAsksForACheckpointAndExitsAreNotFailures) {
    FailurePolicy p(2, 0, stop_signals(), {}, CheckpointRule{SIGUSR1, SIGUSR2});
    p.start();
    EXPECT_EQ(p.signal_received(SIGUSR1),
              (std::vector<Action>{{K::SignalWorkers, SIGUSR2}, {K::StartGrace, kCheckpointGrace}}));
    EXPECT_TRUE(p.worker_exited(exited(0, 0)).empty());
    EXPECT_EQ(p.worker_exited(exited(1, 1)), (std::vector<Action>{{K::Exit, 0}}))
        << "a worker that exits non-zero while checkpointing is not the attempt's failure";
    EXPECT_TRUE(p.checkpointed());
    EXPECT_FALSE(p.root_cause());
}

TEST(RequeuePolicy, CheckpointGraceEndsInAKillAndSlurmsSigtermOnlyShortensIt) {
    FailurePolicy p(1, 0, stop_signals(), {}, CheckpointRule{SIGUSR1, SIGUSR1});
    p.start();
    p.signal_received(SIGUSR1);
    EXPECT_EQ(p.signal_received(SIGTERM), (std::vector<Action>{{K::StartGrace, kEndingGrace}}))
        << "Slurm ends the job during the checkpoint: the checkpoint goes on, within KillWait";
    EXPECT_TRUE(p.signal_received(SIGTERM).empty()) << "srun forwards the same SIGTERM once more";
    EXPECT_EQ(p.grace_expired(), (std::vector<Action>{{K::KillWorkers, 0}}));
    EXPECT_EQ(p.worker_exited({0, 100, {true, SIGKILL}, 2}), (std::vector<Action>{{K::Exit, 128 + SIGTERM}}));
    EXPECT_EQ(p.stopped_by_signal(), SIGTERM);
}

TEST(RequeuePolicy, SlurmsSigtermAsksForACheckpointWithTheEndingGrace) {
    FailurePolicy p(2, 0, stop_signals(), {}, CheckpointRule{SIGUSR1, SIGUSR2});
    p.start();
    EXPECT_EQ(p.signal_received(SIGTERM),
              (std::vector<Action>{{K::SignalWorkers, SIGUSR2}, {K::StartGrace, kEndingGrace}}))
        << "the checkpoint signal, not SIGTERM (Slurm sends that to the workers itself)";
    EXPECT_TRUE(p.signal_received(SIGTERM).empty());
    EXPECT_TRUE(p.worker_exited(exited(0, 0)).empty());
    EXPECT_EQ(p.worker_exited({1, 101, {true, SIGTERM}, 2}), (std::vector<Action>{{K::Exit, 128 + SIGTERM}}));
    EXPECT_TRUE(p.checkpointed());
    EXPECT_EQ(p.stopped_by_signal(), SIGTERM);
    EXPECT_FALSE(p.root_cause()) << "a worker killed by Slurm's SIGTERM is not a failure";
}

TEST(RequeuePolicy, SlurmsSigtermWhileStoppingShortensTheStopToTheEndingGrace) {
    FailurePolicy p(2, 0, stop_signals(), {}, CheckpointRule{SIGUSR1, SIGUSR2});
    p.start();
    EXPECT_EQ(p.group_stop(), (std::vector<Action>{{K::SignalWorkers, SIGTERM}, {K::StartGrace, kStopGrace}}));
    EXPECT_EQ(p.signal_received(SIGTERM),
              (std::vector<Action>{{K::SignalWorkers, SIGTERM}, {K::StartGrace, kEndingGrace}}))
        << "workers stuck in a collective ignore SIGTERM: the stop grace would outlast Slurm's KillWait";
    EXPECT_FALSE(p.checkpointed()) << "the workers were stopped, not asked to checkpoint";
    FailurePolicy alone(2, 0, stop_signals());
    alone.start();
    alone.group_stop();
    EXPECT_EQ(alone.signal_received(SIGTERM), (std::vector<Action>{{K::SignalWorkers, SIGTERM}}))
        << "without --requeue nobody is about to SIGKILL the agent";
}

TEST(RequeuePolicy, OtherStopSignalsStopAsWithoutRequeueAndASecondOneKills) {
    FailurePolicy p(1, 0, stop_signals(), {}, CheckpointRule{SIGUSR1, SIGUSR2});
    p.start();
    EXPECT_EQ(p.signal_received(SIGINT),
              (std::vector<Action>{{K::SignalWorkers, SIGINT}, {K::StartGrace, kStopGrace}}));
    EXPECT_FALSE(p.checkpointed());
    FailurePolicy q(1, 0, stop_signals(), {}, CheckpointRule{SIGUSR1, SIGUSR2});
    q.start();
    q.signal_received(SIGTERM);
    EXPECT_EQ(q.signal_received(SIGINT), (std::vector<Action>{{K::KillWorkers, 0}}));
}

TEST(RequeueStop, WhySlurmEndsTheJobDecidesWhetherItComesBack) {
    auto requeueing = decide_after_sigterm(JobEnding::Requeueing);
    EXPECT_EQ(requeueing.end, AttemptEnd::Checkpointed);
    EXPECT_FALSE(requeueing.requeue) << "scontrol requeue: Slurm brings the job back itself";
    for (JobEnding e : {JobEnding::Preempted, JobEnding::NodeFailed}) {
        auto d = decide_after_sigterm(e);
        EXPECT_EQ(d.end, AttemptEnd::Checkpointed);
        EXPECT_TRUE(d.requeue);
    }
    for (JobEnding e : {JobEnding::Cancelled, JobEnding::TimedOut, JobEnding::Running, JobEnding::Unknown}) {
        auto d = decide_after_sigterm(e);
        EXPECT_EQ(d.end, AttemptEnd::Stopped) << d.detail;
        EXPECT_FALSE(d.requeue) << "scancel must never bring a job back: " << d.detail;
    }
    EXPECT_NE(decide_after_sigterm(JobEnding::TimedOut).detail.find("--signal=USR1@120"), std::string::npos);
}

TEST(RequeueStop, SlurmJobStatesMapToWhyTheJobEnds) {
    EXPECT_EQ(slurm::job_ending_from_state(JOB_PENDING | JOB_COMPLETING, false), JobEnding::Requeueing)
        << "scontrol requeue, as slurmctld shows it while the tasks end";
    EXPECT_EQ(slurm::job_ending_from_state(JOB_RUNNING | JOB_REQUEUE, false), JobEnding::Requeueing);
    EXPECT_EQ(slurm::job_ending_from_state(JOB_CANCELLED | JOB_COMPLETING, false), JobEnding::Cancelled);
    EXPECT_EQ(slurm::job_ending_from_state(JOB_RUNNING, true), JobEnding::Preempted) << "in its preemption grace";
    EXPECT_EQ(slurm::job_ending_from_state(JOB_PREEMPTED | JOB_COMPLETING, false), JobEnding::Preempted);
    EXPECT_EQ(slurm::job_ending_from_state(JOB_NODE_FAIL | JOB_COMPLETING, false), JobEnding::NodeFailed);
    EXPECT_EQ(slurm::job_ending_from_state(JOB_TIMEOUT | JOB_COMPLETING, false), JobEnding::TimedOut);
    EXPECT_EQ(slurm::job_ending_from_state(JOB_RUNNING, false), JobEnding::Running);
    EXPECT_EQ(slurm::job_ending_from_state(JOB_COMPLETE, false), JobEnding::Unknown);
}

TEST(RequeuePolicy, WithoutARuleTheSignalIsOnlyForwarded) {
    FailurePolicy p(1, 0, stop_signals());
    p.start();
    EXPECT_EQ(p.signal_received(SIGUSR1), (std::vector<Action>{{K::SignalWorkers, SIGUSR1}}));
    EXPECT_FALSE(p.checkpointed());
}

TEST(RequeueLedger, RecordsSurviveTheirJsonLineAndTornLinesAreSkipped) {
    AttemptRecord r = failed(2, {failure(2, 3, 5, true, 12.5)}, 5);
    r.final = true;
    std::string text = attempt_to_json(r).dump() + "\n{\"attempt\": 3, \"end\": \"fail\n\n";
    int skipped = 0;
    auto back = parse_ledger(text, &skipped);
    ASSERT_EQ(back.size(), 1u);
    EXPECT_EQ(skipped, 1);
    EXPECT_EQ(back[0].attempt, 2);
    EXPECT_TRUE(back[0].final);
    ASSERT_EQ(back[0].failures.size(), 1u);
    EXPECT_EQ(back[0].failures[0].rank, 3);
    EXPECT_EQ(back[0].failures[0].failure.exit.status, (ExitStatus{false, 5}));
    EXPECT_EQ(back[0].failures[0].stderr_tail, std::vector<std::string>{"boom 3"});
}

TEST(RequeueLedger, ARunStartsAfterEveryAttemptEarlierRunsRecorded) {
    EXPECT_EQ(first_attempt_of_run(0, {}), 0);
    EXPECT_EQ(first_attempt_of_run(2, {}), 2) << "runs that recorded nothing still count";
    // Run 0 restarted in the allocation twice (attempts 0 and 1 failed), then attempt 2 left it.
    std::vector<AttemptRecord> ledger = {failed(0, {}, 1), failed(1, {}, 1), failed(2, {}, 1)};
    EXPECT_EQ(first_attempt_of_run(1, ledger), 3);
    // A fast node of this run may have recorded already: that record is not an earlier run's.
    AttemptRecord mine = failed(3, {}, 1);
    mine.slurm_restart = 1;
    ledger.push_back(mine);
    EXPECT_EQ(first_attempt_of_run(1, ledger), 3);
    EXPECT_EQ(first_attempt_of_run(2, ledger), 4);
}

TEST(RequeueLedger, AnAttemptRestartedInTheAllocationThatNobodyRecordedIsNotRunAgain) {
    // Run 0: attempt 0 failed and the group restarted (attempt 1 began); node 0 died before recording
    // attempt 1, and Slurm requeued the job itself. Run 1 starts with attempt 2, not a second attempt 1.
    AttemptRecord restarted = failed(0, {}, 1);
    restarted.restarted = true;
    EXPECT_EQ(first_attempt_of_run(1, {restarted}), 2);
    EXPECT_TRUE(parse_ledger(attempt_to_json(restarted).dump()).at(0).restarted);
    AttemptRecord requeued = failed(0, {}, 1);  // attempt 0 ended in a requeue: nothing began after it
    EXPECT_EQ(first_attempt_of_run(1, {requeued}), 1);
}

TEST(RequeueLedger, RecordsKeepTheirRunAndOlderOnesAreTheirOwnAttempt) {
    AttemptRecord r = failed(4, {}, 1);
    r.slurm_restart = 1;
    EXPECT_EQ(parse_ledger(attempt_to_json(r).dump()).at(0).slurm_restart, 1);
    nlohmann::json old = attempt_to_json(r);
    old.erase("slurm_restart");
    EXPECT_EQ(parse_ledger(old.dump()).at(0).slurm_restart, 4) << "written before attempts were numbered in a run";
}

TEST(RequeueBudget, FailedAttemptsAreCountedOnceJobWideAndCheckpointsAreFree) {
    std::vector<AttemptRecord> ledger{failed(0, {}, 1), failed(0, {}, 1)};  // two nodes recorded attempt 0
    AttemptRecord ckpt;
    ckpt.attempt = 1;
    ckpt.end = AttemptEnd::Checkpointed;
    ledger.push_back(ckpt);
    EXPECT_EQ(failed_attempts(ledger), 1);
    ledger.push_back(failed(2, {}, 1));
    auto d = decide_after_failure(ledger, 2, 2);
    EXPECT_TRUE(d.requeue);
    EXPECT_EQ(d.failures_used, 2);
    ledger.push_back(failed(3, {}, 1));
    d = decide_after_failure(ledger, 3, 2);
    EXPECT_FALSE(d.requeue);
    EXPECT_EQ(d.failures_used, 3);
    EXPECT_NE(d.message.find("3 failed attempts, more than the 2 --max-restarts allows: the job ends here"),
              std::string::npos)
        << d.message;
    // The attempt counts even when this node's record did not reach the ledger.
    EXPECT_FALSE(decide_after_failure({}, 0, 0).requeue);
    EXPECT_TRUE(decide_after_failure({}, 0, 1).requeue);
}

TEST(RequeueSummary, EveryAttemptIsListedAndTheLastRootCauseGivesTheCode) {
    std::vector<AttemptRecord> ledger{
        failed(0, {failure(0, 1, 7, true, 10)}, 7),
        // attempt 1: both nodes saw a failure; the earlier one is the root cause
        failed(1, {failure(1, 3, 9, true, 21), failure(1, 2, 143, false, 22)}, 9),
        failed(1, {failure(1, 0, 4, true, 20.5)}, 4),
    };
    RunOutcome o = outcome_of_all_attempts(ledger, "812", 1);
    EXPECT_EQ(o.exit_code, 4);
    EXPECT_EQ(o.restarts, 1);
    ASSERT_EQ(o.failures.size(), 4u);
    std::string text = render_failure_summary(o);
    EXPECT_NE(text.find("run 812 failed"), std::string::npos);
    EXPECT_NE(text.find("root cause: rank 0 (local rank 0, node 0, host node1"), std::string::npos) << text;
    EXPECT_NE(text.find("attempt 0: rank 1 (local 1): exit code 7"), std::string::npos) << text;
    EXPECT_NE(text.find("attempt 1: rank 3 (local 1): exit code 9"), std::string::npos) << text;
    EXPECT_NE(text.find("restarts used 1 of 1"), std::string::npos) << text;
}

TEST(RequeueTexts, BannerAndCheckpointWait) {
    EXPECT_EQ(attempt_banner("812", 2, 2, 1, 3, 2, 8),
              "dlaunch: job 812: attempt 2 (requeued 2 times; 1 of 3 failed attempts used): 2 nodes, world size 8");
    EXPECT_EQ(attempt_banner("812", 3, 1, 2, 3, 2, 4),
              "dlaunch: job 812: attempt 3 (requeued 1 time; 2 of 3 failed attempts used): 2 nodes, world size 4");
    EXPECT_EQ(checkpoint_wait(120, std::nullopt), 120);
    EXPECT_EQ(checkpoint_wait(120, 65.0), 60) << "never past the job's end, less the requeue's margin";
    EXPECT_EQ(checkpoint_wait(120, 2.0), 0);
    EXPECT_EQ(ending_wait(120, 5.0), 4) << "Slurm sends SIGKILL KillWait after its SIGTERM";
    EXPECT_EQ(ending_wait(10, 60.0), 10);
    EXPECT_EQ(ending_wait(120, std::nullopt), 29) << "unknown: Slurm's default KillWait";
    EXPECT_EQ(ending_wait(120, 0.0), 0);
}

TEST(RequeueCli, OptionsAndTheirErrors) {
    auto ok = parse_command_line({"--requeue", "--checkpoint-signal", "USR2", "--checkpoint-grace", "30", "t.py"}, {},
                                 Program::Agent);
    ASSERT_TRUE(ok) << ok.error().message();
    EXPECT_TRUE(ok->request.requeue.enabled);
    EXPECT_EQ(ok->request.requeue.warning_signal, SIGUSR1);
    EXPECT_EQ(ok->request.requeue.checkpoint_signal, SIGUSR2);
    EXPECT_EQ(ok->request.requeue.checkpoint_grace, 30);
    auto without = parse_command_line({"--checkpoint-grace", "30", "t.py"}, {}, Program::Agent);
    ASSERT_FALSE(without);
    EXPECT_NE(without.error().message().find("--checkpoint-grace only applies with --requeue"), std::string::npos);
    auto stop = parse_command_line({"--requeue", "--warning-signal", "TERM", "t.py"}, {}, Program::Agent);
    ASSERT_FALSE(stop);
    EXPECT_NE(stop.error().message().find("is a stop signal"), std::string::npos);
    EXPECT_FALSE(parse_command_line({"--requeue", "t.py"}, {}, Program::Mpi)) << "dlaunch-mpi has no --requeue";
}

// `dlaunch report` of a requeued job: its ledger as a list of attempt ends.
TEST(LedgerReport, ListsEachAttemptsEndWhatFollowedAndEveryFailure) {
    AttemptRecord gate;
    gate.attempt = 0;
    gate.detail = "n2 (site check `x`: exit code 1) failed the health check";
    gate.nnodes = 2;
    gate.world_size = 4;
    gate.time = 1764111600;
    AttemptRecord crash = gate;
    crash.attempt = 1;
    crash.slurm_restart = 1;
    crash.detail = "rank 3 on n3: exit code 3";
    crash.restarted = true;
    FailureRecord f;
    f.rank = 3;
    f.host = "n3";
    f.failure = {1, {1, 103, {false, 3}, 1764111700}, true, false};
    crash.failures = {f};
    AttemptRecord crash_member = crash;  // another node's record of the same attempt: one line, every failure
    crash_member.failures.clear();
    AttemptRecord ckpt = gate;
    ckpt.attempt = 2;
    ckpt.end = AttemptEnd::Checkpointed;
    ckpt.detail = "SIGUSR1 (the job's warning signal)";
    const std::string text = ledger_report_text("/logs/42", {gate, crash_member, crash, ckpt});
    EXPECT_EQ(text,
              "job /logs/42: 3 attempt(s) on record (attempts.jsonl)\n"
              "  attempt 0  ended 2025-11-25T23:00:00.000Z  (run 0 of the batch job, 2 node(s), world size 4)  "
              "failed: n2 (site check `x`: exit code 1) failed the health check; requeued\n"
              "  attempt 1  ended 2025-11-25T23:00:00.000Z  (run 1 of the batch job, 2 node(s), world size 4)  "
              "failed: rank 3 on n3: exit code 3; the group restarted inside the allocation\n"
              "  attempt 2  ended 2025-11-25T23:00:00.000Z  (run 0 of the batch job, 2 node(s), world size 4)  "
              "checkpointed: SIGUSR1 (the job's warning signal); requeued\n"
              "after the last record: the job succeeded or still runs (a success is not recorded; sacct -j JOB "
              "says)\n"
              "failures:\n"
              "  attempt 1: rank 3 (host n3): exit code 3 (root cause)\n");
    crash.final = true;
    EXPECT_EQ(ledger_report_text("/logs/42", {crash}).find("after the last record"), std::string::npos);
    EXPECT_NE(ledger_report_text("/logs/42", {crash}).find("exit code 3; the job ended here"), std::string::npos);
    AttemptRecord cancelled = ckpt;
    cancelled.end = AttemptEnd::Stopped;
    cancelled.detail = "cancelled (scancel)";
    const std::string stopped = ledger_report_text("/logs/42", {crash, cancelled});
    EXPECT_NE(stopped.find("stopped: cancelled (scancel); the job ended\n"), std::string::npos) << stopped;
    EXPECT_EQ(stopped.find("after the last record"), std::string::npos) << stopped;
    EXPECT_EQ(ledger_report_text("/logs/43", {}),
              "job /logs/43: no attempt has ended yet (attempts.jsonl holds no "
              "record)\n");
}

}  // namespace
}  // namespace dlaunch
