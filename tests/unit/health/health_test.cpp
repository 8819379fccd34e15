// The health gate's verdict on a node, from facts (no NVML, no NIC, no program run).
#include "dlaunch/health.hpp"

#include <gtest/gtest.h>

namespace dlaunch::health {
namespace {

doctor::LogDirFacts roomy_log_dir() {
    doctor::LogDirFacts f;
    f.path = "/scratch/logs";
    f.exists = f.writable = true;
    f.free_bytes = 10ULL << 30;
    return f;
}

Facts healthy_node() {
    Facts f;
    f.gpus = doctor::GpuFacts{};
    f.ports = doctor::PortFacts{};
    f.log_dir = roomy_log_dir();
    return f;
}

TEST(Health, ANodeWithoutGpusOrNicsAndRoomForLogsPasses) {
    EXPECT_EQ(judge(healthy_node()), "");
}

TEST(Health, APassingNodeSaysWhatItWasCheckedFor) {
    Facts f = healthy_node();
    f.gpus->nvml = true;
    f.gpus->topology_nvidia_gpus = 1;
    f.gpus->gpus = {{0, "GPU-a", "", 0, false, ""}};
    f.site = SiteCheckFacts{"true", 0, false, ""};
    EXPECT_EQ(passed_note(f),
              "gpus ok (1 GPU usable, no uncorrected ECC errors: GPU 0 GPU-a); ib-ports not present (no RDMA NIC); "
              "log-dir ok (/scratch/logs: writable, 10.0 GiB free); site check `true` passed");
    EXPECT_EQ(passed_note(Facts{}), "nothing checked");
}

TEST(Health, AGpuWithUncorrectedEccErrorsFailsTheNode) {
    Facts f = healthy_node();
    f.gpus->nvml = true;
    f.gpus->topology_nvidia_gpus = 2;
    f.gpus->gpus = {{0, "GPU-a", "H100", 0, false, ""}, {1, "GPU-b", "H100", 3, false, ""}};
    EXPECT_EQ(judge(f), "gpus: GPU 1 GPU-b (H100): 3 uncorrected ECC errors");
}

TEST(Health, EveryRdmaPortDownFailsButOneDownBesideActiveOnesPasses) {
    Facts f = healthy_node();
    f.ports->verbs = true;
    f.ports->topology_nics = 2;
    f.ports->ports = {{"mlx5_0", 1, false, "DOWN", "InfiniBand", ""}, {"mlx5_1", 1, false, "INIT", "InfiniBand", ""}};
    EXPECT_EQ(judge(f), "ib-ports: no port is ACTIVE: mlx5_0:1 DOWN, mlx5_1:1 INIT");
    f.ports->ports[1] = {"mlx5_1", 1, true, "ACTIVE", "InfiniBand", "4x HDR"};
    EXPECT_EQ(judge(f), "") << "a warning is not a failure";
}

TEST(Health, ALogDirectoryWithoutRoomOrWritePermissionFails) {
    Facts f = healthy_node();
    f.log_dir->free_bytes = 1 << 20;
    EXPECT_EQ(judge(f), "log-dir: /scratch/logs: only 0.0 GiB free");
    f.log_dir = doctor::LogDirFacts{"/scratch/logs", true, false, "cannot create a file: Permission denied", 0};
    EXPECT_EQ(judge(f), "log-dir: /scratch/logs: cannot create a file: Permission denied");
}

TEST(Health, TheSiteCheckFailsWithItsLastLine) {
    Facts f = healthy_node();
    f.site = SiteCheckFacts{"/etc/dlaunch/check", 0, false, "all good\n"};
    EXPECT_EQ(judge(f), "");
    f.site = SiteCheckFacts{"/etc/dlaunch/check", 2, false, "checking /scratch\nno scratch mounted\n\n"};
    EXPECT_EQ(judge(f), "site check `/etc/dlaunch/check`: exit code 2: no scratch mounted");
    f.site = SiteCheckFacts{"sleep 100", -1, true, ""};
    EXPECT_EQ(judge(f), "site check `sleep 100`: did not finish within 60 s");
    f.site = SiteCheckFacts{"kill -9 $$", -1, false, ""};
    EXPECT_EQ(judge(f), "site check `kill -9 $$`: could not run or was killed");
}

TEST(Health, EveryFailureIsNamedWithoutTheBuiltInChecks) {
    Facts f;  // --no-health-check: only the site's check
    f.site = SiteCheckFacts{"false", 1, false, ""};
    EXPECT_EQ(judge(f), "site check `false`: exit code 1");
    Facts both = healthy_node();
    both.log_dir->writable = false;
    both.log_dir->error = "not a directory";
    both.site = f.site;
    EXPECT_EQ(judge(both), "log-dir: /scratch/logs: not a directory; site check `false`: exit code 1");
}

// A group's agent runs a quick check inline and one that may take long beside its channel (group_run.cpp).
TEST(Health, OnlyASiteCheckOrADriverToAskMayTakeLong) {
    auto with = [](std::vector<topology::Gpu> gpus, std::vector<topology::Nic> nics) {
        auto t = std::make_shared<topology::Topology>();
        t->gpus = std::move(gpus);
        t->nics = std::move(nics);
        return Settings{true, "", "/scratch/logs", t};
    };
    topology::Gpu nvidia, amd;
    nvidia.vendor = "nvidia";
    amd.vendor = "amd";
    EXPECT_FALSE(may_take_long(with({}, {}))) << "the log directory alone";
    EXPECT_FALSE(may_take_long(with({amd}, {}))) << "NVML is asked only for NVIDIA GPUs";
    EXPECT_TRUE(may_take_long(with({nvidia}, {})));
    EXPECT_TRUE(may_take_long(with({}, {topology::Nic{}})));
    EXPECT_TRUE(may_take_long(Settings{true, "", "/scratch/logs", nullptr})) << "unknown topology: ask";
    EXPECT_FALSE(may_take_long(Settings{false, "", "/scratch/logs", nullptr})) << "--no-health-check asks nothing";
    Settings site = with({}, {});
    site.command = "test -d /scratch";
    EXPECT_TRUE(may_take_long(site));
}

}  // namespace
}  // namespace dlaunch::health
