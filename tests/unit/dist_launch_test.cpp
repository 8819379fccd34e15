#include "dlaunch/dist_launch.hpp"

#include <gtest/gtest.h>

namespace dlaunch {
namespace {

TEST(DistLaunch, SiteDefaultsThenUserOpts) {
    auto site = parse_site_arguments({"port_range=22000-22999", "bind=none", "python=/usr/bin/python3", "log=verbose",
                                      "pyexec=/usr/libexec/dlaunch/dlaunch-python"});
    ASSERT_TRUE(site.ok()) << site.error().message();
    EXPECT_EQ(site->port_range, (PortRange{22000, 22999}));
    EXPECT_EQ(site->bind_closest, false);
    EXPECT_EQ(site->verbosity, 1);
    auto user = parse_dist_launch_opts("bind=closest,devices=0:2,port=23456,verbose=2", *site);
    ASSERT_TRUE(user.ok()) << user.error().message();
    EXPECT_EQ(user->bind_closest, true);
    EXPECT_EQ(user->devices, (std::vector<int>{0, 2}));
    EXPECT_EQ(user->port, 23456);
    EXPECT_EQ(user->python, "/usr/bin/python3") << "site default kept";
    EXPECT_EQ(user->verbosity, 2);
    EXPECT_EQ(parse_dist_launch_opts("", *site)->port_range, (PortRange{22000, 22999}));
    EXPECT_EQ(parse_dist_launch_opts("verbose", {})->verbosity, 1);
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
        BadOpts{"bind=tight", "dlaunch: --dist-launch: bind=tight: unknown binding; give closest or none"},
        BadOpts{"colour=blue", "dlaunch: --dist-launch: unknown setting 'colour'; known: bind, devices, port, python, env, verbose"},
        BadOpts{"port=80", "dlaunch: --dist-launch: port=80: not a port; give 1024-65535, or LOW-HIGH"},
        BadOpts{"port=30000-20000", "dlaunch: --dist-launch: port=30000-20000: not a port range; give LOW-HIGH within 1024-65535"},
        BadOpts{"devices=0:x", "dlaunch: --dist-launch: devices=0:x: not a device list; give GPU indices separated by ':', e.g. devices=0:1"},
        BadOpts{"python=python3", "dlaunch: --dist-launch: python=python3: not an absolute path; give an absolute path made of letters, digits and / . _ + -"},
        BadOpts{"python=/usr/bin/../../tmp/x", "dlaunch: --dist-launch: python=/usr/bin/../../tmp/x: path with '..' or '//'; give an absolute path made of letters, digits and / . _ + -"},
        BadOpts{"python=/bin/sh;rm", "dlaunch: --dist-launch: python: path contains ';'; give an absolute path made of letters, digits and / . _ + -"},
        BadOpts{"env=jax", "dlaunch: --dist-launch: env=jax: unknown; give env=torch, env=paddle or env=all"},
        BadOpts{"bind", "dlaunch: --dist-launch: 'bind' needs a value; write key=value, e.g. bind=closest"},
        BadOpts{std::string(1100, 'a'), "dlaunch: --dist-launch: OPTS longer than 1024 characters; shorten them"}));

TEST(DistLaunch, EnvSelectsTheContract) {
    for (auto [text, contract] : {std::pair{"env=torch", EnvContract::Torch}, std::pair{"env=paddle", EnvContract::Paddle},
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
    EXPECT_EQ(bad.error().message(), "dlaunch: plugstack.conf: bind=tight: unknown binding; give closest or none");
}

}  // namespace
}  // namespace dlaunch
