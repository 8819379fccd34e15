// MASTER_ADDR/PORT agreement over a key-value exchange, with an in-memory exchange instead of PMIx.
#include <gtest/gtest.h>
#include <unistd.h>

#include <map>
#include <memory>
#include <string>

#include "dlaunch/job_setup.hpp"

namespace dlaunch {
namespace {

// What every task of a job would see: one table of (rank, key) -> value.
struct SharedTable {
    std::map<std::pair<int, std::string>, std::string> values;
    int fences = 0;
    bool fence_fails = false;
};

class FakeExchange : public pmix::Exchange {
public:
    FakeExchange(SharedTable& table, int rank) : table_(table), rank_(rank) {}
    Status put(const std::string& key, const std::string& value) override {
        table_.values[{rank_, key}] = value;
        return Ok{};
    }
    Status fence(double) override {
        ++table_.fences;
        if (table_.fence_fails) return Error{"pmix: fence: 1 of 2 tasks never arrived", "check the other task"};
        return Ok{};
    }
    Result<std::string> get(int rank, const std::string& key) const override {
        auto it = table_.values.find({rank, key});
        if (it == table_.values.end()) return Error{"pmix: no " + key + " from rank " + std::to_string(rank), ""};
        return it->second;
    }

private:
    SharedTable& table_;
    int rank_;
};

ScheduledJob task(SharedTable& table, int rank) {
    SchedulerInfo info;
    info.source = "pmix";
    info.job_id = "ns-1";
    info.rank = rank;
    info.size = 2;
    return ScheduledJob{info, std::make_unique<FakeExchange>(table, rank)};
}

LaunchRequest fixed_master() {
    static const LaunchRequest req = [] {
        LaunchRequest r;
        r.master_addr.emplace("10.1.2.3");
        r.master_port.emplace(24600);
        return r;
    }();
    return req;
}

TEST(AgreeMaster, TaskZeroPublishesAndEveryTaskLearnsTheSameMaster) {
    SharedTable table;
    const LaunchRequest req = fixed_master();
    ScheduledJob zero = task(table, 0), one = task(table, 1);
    auto m0 = agree_master(zero, req);
    auto m1 = agree_master(one, req);
    ASSERT_TRUE(m0) << m0.error().message();
    ASSERT_TRUE(m1) << m1.error().message();
    EXPECT_EQ(m0->addr, "10.1.2.3");
    EXPECT_EQ(m0->port, 24600);
    EXPECT_EQ(m1->addr, m0->addr);
    EXPECT_EQ(m1->port, m0->port);
    EXPECT_EQ(table.fences, 2);
}

TEST(AgreeMaster, AFenceThatFailsIsTheError) {
    SharedTable table;
    table.fence_fails = true;
    const LaunchRequest req = fixed_master();
    ScheduledJob one = task(table, 1);
    auto m = agree_master(one, req);
    ASSERT_FALSE(m);
    EXPECT_EQ(m.error().what, "pmix: fence: 1 of 2 tasks never arrived");
}

// The SPANK plugin reads a step once per node, in slurmstepd: no other process of this node's ranks comes
// to a fence, so none is held (it would wait for ranks that never arrive).
TEST(AgreeMaster, AStepReadForTheWholeNodeCountsNoRanksOnIt) {
    SchedulerInfo info;
    info.source = "slurm";
    info.job_id = "agree-master-test-" + std::to_string(::getpid());
    info.step_id = "0";
    info.rank = 0;
    info.size = 4;
    info.local_size = 2;
    info.nodes = {"10.1.2.3", "10.1.2.4"};
    ScheduledJob job{info, nullptr};
    job.whole_node = true;
    LaunchRequest req = fixed_master();
    req.launcher = Launcher::PerRank;
    req.fence_timeout_seconds = 0.2;
    auto m = agree_master(job, req);
    ASSERT_TRUE(m) << m.error().message();
    EXPECT_EQ(m->addr, "10.1.2.3");
    EXPECT_EQ(m->port, 24600);

    job.whole_node = false;  // one rank's own process: its node's other rank is awaited, and missed
    auto alone = agree_master(job, req);
    ASSERT_FALSE(alone);
    EXPECT_NE(alone.error().what.find("missing: local rank 1"), std::string::npos) << alone.error().what;
}

}  // namespace
}  // namespace dlaunch
