// The pure parts of the bootstrap: who the rank is, which ranks are roots, the tunables.
#include "dlaunch/bootstrap.hpp"

#include <gtest/gtest.h>

using namespace dlaunch;
using namespace dlaunch::bootstrap;

TEST(BootstrapRoots, OneRootUpToTheBlockSize) {
    EXPECT_EQ(roots(1, 1024), (std::vector<int>{0}));
    EXPECT_EQ(roots(1024, 1024), (std::vector<int>{0}));
    EXPECT_EQ(roots(1025, 1024), (std::vector<int>{0, 512}));
    EXPECT_EQ(roots(4, 2), (std::vector<int>{0, 2}));
    EXPECT_EQ(roots(5, 2), (std::vector<int>{0, 1, 3}));
    EXPECT_EQ(roots(4, 1), (std::vector<int>{0, 1, 2, 3}));
    EXPECT_TRUE(roots(0, 8).empty());
}

TEST(BootstrapRoots, AreDistinctSortedAndStartAtZero) {
    for (int size : {1, 2, 3, 7, 100, 4097})
        for (int per : {1, 2, 3, 64, 1024}) {
            auto r = roots(size, per);
            ASSERT_FALSE(r.empty());
            EXPECT_EQ(r.front(), 0);
            EXPECT_EQ(static_cast<int>(r.size()), (size + per - 1) / per) << size << "/" << per;
            for (size_t i = 1; i < r.size(); ++i) EXPECT_LT(r[i - 1], r[i]);
            EXPECT_LT(r.back(), size);
        }
}

TEST(BootstrapIdentify, RanksStartedByDlaunchUseTcpEvenWithPmix) {
    // An agent's worker (the PMIx variables are the agent's) or a dlaunch-mpi rank alike.
    EnvMap env{{"RANK", "3"},
               {"WORLD_SIZE", "8"},
               {"LOCAL_RANK", "1"},
               {"MASTER_ADDR", "n1"},
               {"MASTER_PORT", "29500"},
               {"PMIX_RANK", "0"},
               {"PMIX_NAMESPACE", "slurm.1"}};
    auto p = identify(env);
    ASSERT_TRUE(p) << p.error().message();
    EXPECT_EQ(p->via, Via::Tcp);
    EXPECT_EQ(p->rank, 3);
    EXPECT_EQ(p->size, 8);
    EXPECT_EQ(p->local_rank, 1);
    EXPECT_EQ(p->master_addr, "n1");
    EXPECT_EQ(p->master_port, 29500);
}

TEST(BootstrapIdentify, PmixTasksWithoutMasterUsePmix) {
    EnvMap env{{"RANK", "3"}, {"WORLD_SIZE", "8"}, {"PMIX_RANK", "3"}, {"PMIX_NAMESPACE", "prterun-1@1"}};
    auto p = identify(env);
    ASSERT_TRUE(p);
    EXPECT_EQ(p->via, Via::Pmix);
    EXPECT_EQ(p->rank, 3);
}

TEST(BootstrapIdentify, PlainMpirunLeavesRankToPmix) {
    auto p = identify({{"PMIX_RANK", "1"}, {"PMIX_NAMESPACE", "prterun-1@1"}});
    ASSERT_TRUE(p);
    EXPECT_EQ(p->via, Via::Pmix);
    EXPECT_EQ(p->size, 0);
}

TEST(BootstrapIdentify, ErrorsSayWhatToDo) {
    auto none = identify({});
    ASSERT_FALSE(none);
    EXPECT_NE(none.error().message().find("RANK=unset, WORLD_SIZE=unset"), std::string::npos);
    EXPECT_NE(none.error().hint.find("dlaunch-mpi"), std::string::npos);
    EXPECT_FALSE(identify({{"RANK", "4"}, {"WORLD_SIZE", "4"}}));  // rank out of range
    auto no_master = identify({{"RANK", "1"}, {"WORLD_SIZE", "2"}});
    ASSERT_FALSE(no_master);
    EXPECT_NE(no_master.error().what.find("MASTER_ADDR/MASTER_PORT"), std::string::npos);
    EXPECT_FALSE(identify({{"RANK", "1"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "h"}, {"MASTER_PORT", "70000"}}));
    // A single rank needs no master.
    EXPECT_TRUE(identify({{"RANK", "0"}, {"WORLD_SIZE", "1"}}));
}

TEST(BootstrapSettings, FromTheEnvironment) {
    EXPECT_EQ(*ranks_per_root({}), kDefaultRanksPerRoot);
    EXPECT_EQ(*ranks_per_root({{"DLAUNCH_NCCL_RANKS_PER_ROOT", "64"}}), 64);
    EXPECT_FALSE(ranks_per_root({{"DLAUNCH_NCCL_RANKS_PER_ROOT", "0"}}));
    EXPECT_FALSE(ranks_per_root({{"DLAUNCH_NCCL_RANKS_PER_ROOT", "many"}}));
    EXPECT_DOUBLE_EQ(*timeout_seconds({}), kDefaultTimeoutSeconds);
    EXPECT_DOUBLE_EQ(*timeout_seconds({{"DLAUNCH_BOOTSTRAP_TIMEOUT", "2.5"}}), 2.5);
    EXPECT_FALSE(timeout_seconds({{"DLAUNCH_BOOTSTRAP_TIMEOUT", "-1"}}));
    EXPECT_FALSE(timeout_seconds({{"DLAUNCH_BOOTSTRAP_TIMEOUT", ""}}));
}
