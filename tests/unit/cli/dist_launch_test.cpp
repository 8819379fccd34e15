#include "dlaunch/dist_launch.hpp"

#include <gtest/gtest.h>

#include "dlaunch/requeue.hpp"

namespace dlaunch {
namespace {

TEST(DistLaunch, SiteDefaultsThenUserOpts) {
    auto site = parse_site_arguments({"port_range=22000-22999", "bind=none", "python=/usr/bin/python3", "log=verbose",
                                      "pyexec=/usr/libexec/dlaunch/dlaunch-python"});
    ASSERT_TRUE(site.ok()) << site.error().message();
    EXPECT_EQ(site->port_range, (PortRange{22000, 22999}));
    EXPECT_EQ(site->bind, topology::BindMode::None);
    EXPECT_EQ(site->verbosity, 1);
    auto user = parse_dist_launch_opts("bind=closest,devices=0:2,port=23456,verbose=2", *site);
    ASSERT_TRUE(user.ok()) << user.error().message();
    EXPECT_EQ(user->bind, topology::BindMode::Closest);
    EXPECT_EQ(user->devices, (std::vector<int>{0, 2}));
    EXPECT_EQ(user->port, 23456);
    EXPECT_EQ(user->python, "/usr/bin/python3") << "site default kept";
    EXPECT_EQ(user->verbosity, 2);
    EXPECT_EQ(parse_dist_launch_opts("", *site)->port_range, (PortRange{22000, 22999}));
    EXPECT_EQ(parse_dist_launch_opts("verbose", {})->verbosity, 1);
}

TEST(DistLaunch, HangTimeoutReachesTheRequest) {
    auto s = parse_dist_launch_opts("hang-timeout=7.5", {});
    ASSERT_TRUE(s.ok()) << s.error().message();
    EXPECT_EQ(s->hang_timeout, 7.5);
    EXPECT_EQ(dist_launch_request(*s, "train.py").hang_timeout_seconds, 7.5);
    EXPECT_FALSE(dist_launch_request({}, "train.py").hang_timeout_seconds);
}

TEST(DistLaunch, RequestRunsPyFilesUnderPython) {
    auto req = dist_launch_request({}, "examples/train.py");
    EXPECT_EQ(req.launcher, Launcher::PerRank);
    EXPECT_EQ(req.entry, EntryKind::PythonScript);
    EXPECT_EQ(dist_launch_request({}, "/bin/true").entry, EntryKind::Command);
    EXPECT_FALSE(is_python_script(".py"));
}

struct BadOpts {
    std::string opts;
    std::string message;
};

class DistLaunchBadOpts : public ::testing::TestWithParam<BadOpts> {};

TEST_P(DistLaunchBadOpts, FailWithExactMessage) {
    auto s = parse_dist_launch_opts(GetParam().opts, {});
    ASSERT_FALSE(s.ok());
    EXPECT_EQ(s.error().message(), GetParam().message);
}

INSTANTIATE_TEST_SUITE_P(
    Table, DistLaunchBadOpts,
    ::testing::Values(
        BadOpts{"bind=tight",
                "dlaunch: --dist-launch: bind=tight: unknown binding; give closest, numa, socket or none"},
        BadOpts{"colour=blue",
                "dlaunch: --dist-launch: unknown setting 'colour'; known: bind, devices, port, python, env, verbose, "
                "requeue, max-restarts, checkpoint-exit, hang-timeout"},
        BadOpts{"port=80", "dlaunch: --dist-launch: port=80: not a port; give 1024-65535, or LOW-HIGH"},
        BadOpts{"port=30000-20000",
                "dlaunch: --dist-launch: port=30000-20000: not a port range; give LOW-HIGH within 1024-65535"},
        BadOpts{"devices=0:x",
                "dlaunch: --dist-launch: devices=0:x: not a device list; give GPU indices separated by ':', e.g. "
                "devices=0:1"},
        BadOpts{"python=python3",
                "dlaunch: --dist-launch: python=python3: not an absolute path; give an absolute path made of letters, "
                "digits and / . _ + -"},
        BadOpts{"python=/usr/bin/../../tmp/x",
                "dlaunch: --dist-launch: python=/usr/bin/../../tmp/x: path with '..' or '//'; give an absolute path "
                "made of letters, digits and / . _ + -"},
        BadOpts{"python=/bin/sh;rm",
                "dlaunch: --dist-launch: python: path contains ';'; give an absolute path made of letters, digits and "
                "/ . _ + -"},
        BadOpts{"env=jax", "dlaunch: --dist-launch: env=jax: unknown; give env=torch, env=paddle or env=all"},
        BadOpts{"bind", "dlaunch: --dist-launch: 'bind' needs a value; write key=value, e.g. bind=closest"},
        BadOpts{"hang-timeout=0",
                "dlaunch: --dist-launch: hang-timeout=0: not a number of seconds; give seconds > 0, e.g. "
                "hang-timeout=300"},
        BadOpts{"hang-timeout=0.5",
                "dlaunch: --dist-launch: hang-timeout: 0.5 s is too short to tell a hang: progress is sampled every "
                "0.1 s at best; give at least 1 s"},
        BadOpts{std::string(1100, 'a'), "dlaunch: --dist-launch: OPTS longer than 1024 characters; shorten them"}));

TEST(DistLaunch, EnvSelectsTheContract) {
    for (auto [text, contract] :
         {std::pair{"env=torch", EnvContract::Torch}, std::pair{"env=paddle", EnvContract::Paddle},
          std::pair{"env=all", EnvContract::All}}) {
        auto s = parse_dist_launch_opts(text, DistLaunchSettings{});
        ASSERT_TRUE(s.ok()) << text;
        EXPECT_EQ(dist_launch_request(*s, "train.py").env_contract, contract) << text;
    }
}

TEST(DistLaunch, UnknownSiteArgumentsFailLoudly) {
    auto s = parse_site_arguments({"port_rnage=1-2"});
    ASSERT_FALSE(s.ok());
    EXPECT_EQ(s.error().message(),
              "dlaunch: plugstack.conf: unknown argument 'port_rnage'; known: port_range, bind, python, log, pyexec");
    auto bad = parse_site_arguments({"bind=tight"});
    ASSERT_FALSE(bad.ok());
    EXPECT_EQ(bad.error().message(),
              "dlaunch: plugstack.conf: bind=tight: unknown binding; give closest, numa, socket or none");
}

}  // namespace
}  // namespace dlaunch

namespace dlaunch {
namespace {

TEST(DistLaunch, RequeueSettingsAndTheirErrors) {
    auto s = parse_dist_launch_opts("requeue,max-restarts=3,checkpoint-exit=75", {});
    ASSERT_TRUE(s) << s.error().message();
    EXPECT_TRUE(s->requeue);
    EXPECT_EQ(s->max_restarts, 3);
    EXPECT_EQ(s->checkpoint_exit, 75);
    auto req = dist_launch_request(*s, "train.py");
    EXPECT_TRUE(req.requeue.enabled);
    EXPECT_EQ(req.max_restarts, 3);
    EXPECT_TRUE(parse_dist_launch_opts("requeue=yes", {})->requeue);
    EXPECT_FALSE(parse_dist_launch_opts("requeue=no", {})->requeue);
    EXPECT_FALSE(parse_dist_launch_opts("", {})->requeue);

    auto alone = parse_dist_launch_opts("max-restarts=3", {});
    ASSERT_FALSE(alone);
    EXPECT_NE(alone.error().message().find("max-restarts only applies with requeue"), std::string::npos);
    EXPECT_NE(alone.error().message().find("--dist-launch=requeue,max-restarts=N"), std::string::npos);
    EXPECT_FALSE(parse_dist_launch_opts("checkpoint-exit=75", {}));
    EXPECT_FALSE(parse_dist_launch_opts("requeue,checkpoint-exit=0", {})) << "0 is success, not a checkpoint";
    EXPECT_FALSE(parse_dist_launch_opts("requeue,checkpoint-exit=256", {}));
    EXPECT_FALSE(parse_dist_launch_opts("requeue,max-restarts=-1", {}));
    EXPECT_FALSE(parse_dist_launch_opts("requeue=maybe", {}));
}

TEST(DistLaunch, ATaskEndMeansWhatTheJobStateSays) {
    const ExitStatus ok{false, 0}, crash{false, 3}, ckpt{false, 75}, killed{true, 15};
    EXPECT_EQ(classify_task_end(ok, JobEnding::Running, 75), TaskEnd::Finished);
    EXPECT_EQ(classify_task_end(crash, JobEnding::Running, 75), TaskEnd::Failed);
    EXPECT_EQ(classify_task_end(ckpt, JobEnding::Running, 75), TaskEnd::Checkpointed);
    EXPECT_EQ(classify_task_end(ckpt, JobEnding::Running, std::nullopt), TaskEnd::Failed) << "no checkpoint-exit given";
    EXPECT_EQ(classify_task_end(killed, JobEnding::Running, 15), TaskEnd::Failed) << "a signal is never a checkpoint";
    EXPECT_EQ(classify_task_end(killed, JobEnding::Requeueing, 75), TaskEnd::SlurmEnded);
    EXPECT_EQ(classify_task_end(ckpt, JobEnding::Requeueing, 75), TaskEnd::Checkpointed)
        << "another task's checkpoint requeued the job first: this one checkpointed too";
    EXPECT_EQ(classify_task_end(ckpt, JobEnding::Cancelled, 75), TaskEnd::SlurmEnded)
        << "a checkpoint after scancel must not bring the job back";
    EXPECT_EQ(classify_task_end(crash, JobEnding::Cancelled, 75), TaskEnd::SlurmEnded)
        << "once Slurm ends the job, a task's end is not a failure of the attempt";
}

}  // namespace
}  // namespace dlaunch

namespace dlaunch {
namespace {

TEST(DistLaunch, RequeueOnlyInABatchJob) {
    EXPECT_TRUE(requeue_allowed(std::string("812"), std::string("BATCH")));
    auto salloc = requeue_allowed(std::string("812"), std::nullopt);
    ASSERT_FALSE(salloc);
    EXPECT_NE(salloc.error().message().find("requeue needs a batch job"), std::string::npos);
    EXPECT_NE(salloc.error().message().find("job 812 came from salloc"), std::string::npos);
    EXPECT_NE(requeue_allowed(std::nullopt, std::nullopt).error().message().find("no SLURM_JOB_ID"), std::string::npos);
}

}  // namespace
}  // namespace dlaunch
