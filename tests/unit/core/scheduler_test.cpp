// Job facts from launchers' environments, the port rule without PMIx, and plans under a launcher.
#include "dlaunch/scheduler.hpp"

#include <gtest/gtest.h>

#include <set>

#include "dlaunch/plan.hpp"
#include "dlaunch/pmix/job_source.hpp"
#include "dlaunch/slurm/client.hpp"
#include "dlaunch/slurm/task_facts.hpp"

namespace dlaunch {
namespace {

TEST(SlurmEnv, ReadsTheTaskAndExpandsTheNodeList) {
    EnvMap env{{"SLURM_PROCID", "3"},
               {"SLURM_NTASKS", "5"},
               {"SLURM_STEP_NUM_TASKS", "5"},
               {"SLURM_LOCALID", "0"},
               {"SLURM_NODEID", "1"},
               {"SLURM_STEP_NUM_NODES", "3"},
               {"SLURM_STEP_NODELIST", "gpu[07-08],cpu1"},
               {"SLURM_STEP_TASKS_PER_NODE", "3,1(x2)"},
               {"SLURM_JOB_ID", "812"},
               {"SLURM_STEP_ID", "4"}};
    auto info = slurm::from_slurm_env(env);
    ASSERT_TRUE(info && info->ok()) << (info ? info->error().message() : "no source");
    const SchedulerInfo& s = info->value();
    EXPECT_EQ(s.source, "slurm");
    EXPECT_EQ(s.rank, 3);
    EXPECT_EQ(s.size, 5);
    EXPECT_EQ(s.node_rank, 1);
    EXPECT_EQ(s.nnodes, 3);
    EXPECT_EQ(s.local_size, 1);
    EXPECT_EQ(s.nodes, (std::vector<std::string>{"gpu07", "gpu08", "cpu1"}));
    EXPECT_EQ(s.job_id, "812");
    EXPECT_EQ(s.step_id, "4");
}

TEST(SlurmEnv, AbsentOrBroken) {
    EXPECT_FALSE(slurm::from_slurm_env({}));
    auto broken = slurm::from_slurm_env({{"SLURM_PROCID", "x"}});
    ASSERT_TRUE(broken);
    ASSERT_FALSE(broken->ok());
    EXPECT_EQ(broken->error().message(),
              "dlaunch: job: slurm: SLURM_PROCID='x' is not a number; start dlaunch-mpi directly under slurm (not "
              "from a script that changes its variables)");
}

// Slurm gives a batch script ENVIRONMENT=BATCH and srun passes it on: requeue needs no RPC to know the
// job is a batch job. Anything else means "ask slurmctld", never "not a batch job".
TEST(SlurmEnv, ABatchScriptsStepNeedsNoQuestionToSlurmctld) {
    EXPECT_TRUE(slurm::started_from_batch_script({{"ENVIRONMENT", "BATCH"}}));
    EXPECT_FALSE(slurm::started_from_batch_script({}));
    EXPECT_FALSE(slurm::started_from_batch_script({{"ENVIRONMENT", "batch"}}));
    EXPECT_FALSE(slurm::started_from_batch_script({{"ENVIRONMENT", ""}}));
    // Node 0 asks all the same (a salloc started from a batch script inherits the variable too).
    EXPECT_FALSE(slurm::batch_job_known_without_asking({{"ENVIRONMENT", "BATCH"}}, 0));
    EXPECT_TRUE(slurm::batch_job_known_without_asking({{"ENVIRONMENT", "BATCH"}}, 1));
    EXPECT_FALSE(slurm::batch_job_known_without_asking({}, 1));
}

TEST(OpenMpiEnv, ReadsAOneNodeJob) {
    auto info = pmix::from_openmpi_env({{"OMPI_COMM_WORLD_RANK", "2"},
                                        {"OMPI_COMM_WORLD_SIZE", "4"},
                                        {"OMPI_COMM_WORLD_LOCAL_RANK", "2"},
                                        {"OMPI_COMM_WORLD_LOCAL_SIZE", "4"},
                                        {"OMPI_COMM_WORLD_NODE_RANK", "2"},  // a rank on the node, not a node
                                        {"OMPI_MCA_ess_base_jobid", "299499521"}});
    ASSERT_TRUE(info && info->ok());
    EXPECT_EQ(info->value().rank, 2);
    EXPECT_EQ(info->value().local_size, 4);
    EXPECT_EQ(info->value().node_rank, 0);
    EXPECT_EQ(info->value().nnodes, 1);
    EXPECT_EQ(info->value().job_id, "299499521");
}

TEST(OpenMpiEnv, OpenMpi5NamesTheJobOnlyInItsPmixNamespace) {
    auto info = pmix::from_openmpi_env({{"OMPI_COMM_WORLD_RANK", "1"},
                                        {"OMPI_COMM_WORLD_SIZE", "2"},
                                        {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
                                        {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"},
                                        {"PMIX_NAMESPACE", "prterun-vm-24343@1"},
                                        {"PRTE_LAUNCHED", "1"}});
    ASSERT_TRUE(info && info->ok());
    EXPECT_EQ(info->value().job_id, "prterun-vm-24343@1");
}

TEST(OpenMpiEnv, SeveralNodesWithoutPmixIsAnErrorNotAGuess) {
    auto info = pmix::from_openmpi_env({{"OMPI_COMM_WORLD_RANK", "2"},
                                        {"OMPI_COMM_WORLD_SIZE", "4"},
                                        {"OMPI_COMM_WORLD_LOCAL_RANK", "0"},
                                        {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"},
                                        {"OMPI_COMM_WORLD_NODE_RANK", "1"}});
    ASSERT_TRUE(info);
    ASSERT_FALSE(info->ok());
    EXPECT_NE(info->error().message().find("do not say which node this is (2 of the 4 ranks run here)"),
              std::string::npos)
        << info->error().message();
}

TEST(Hostlist, ExpandsLikeSlurm) {
    auto hosts = slurm::expand_hostlist("node[1-3,5]");
    ASSERT_TRUE(hosts) << hosts.error().message();
    EXPECT_EQ(*hosts, (std::vector<std::string>{"node1", "node2", "node3", "node5"}));
}

TEST(DeterministicPort, StepsOfAJobAndNeighbouringJobsNeverShare) {
    PortRange range{21000, 28999};
    std::set<int> seen;
    for (int job = 5000; job < 5100; ++job)
        for (int step = 0; step < kStepSlots; ++step)
            EXPECT_TRUE(seen.insert(deterministic_port(std::to_string(job), std::to_string(step), range)).second)
                << job << "." << step;
}

TEST(DeterministicPort, SameForTheStepDifferentAcrossStepsInsideTheRange) {
    PortRange range{21000, 28999};
    int a = deterministic_port("812", "0", range);
    EXPECT_EQ(a, deterministic_port("812", "0", range));
    EXPECT_NE(a, deterministic_port("812", "1", range));
    EXPECT_NE(a, deterministic_port("813", "0", range));
    for (int step = 0; step < 200; ++step) {
        int p = deterministic_port("99", std::to_string(step), range);
        EXPECT_GE(p, 21000);
        EXPECT_LE(p, 28999);
    }
}

TEST(GroupPort, InsideTheRangeAndNeverTheDerivedPortOfANeighbouringJobsStep) {
    PortRange range{21000, 28999};
    std::set<int> masters;
    for (int job = 5000; job < 5100; ++job)
        for (int step = 0; step < kStepSlots; ++step)
            masters.insert(deterministic_port(std::to_string(job), std::to_string(step), range));
    for (int master : masters) {
        int g = group_port(master, range);
        EXPECT_GE(g, 21000);
        EXPECT_LE(g, 28999);
        EXPECT_FALSE(masters.contains(g)) << master << " -> " << g;
    }
    EXPECT_EQ(group_port(29500, range), 29501) << "a --master-port outside the range: the next port";
}

topology::Topology two_cores() {
    topology::Topology t;
    t.cpus = 2;
    t.allowed = {0, 1};
    t.cores = {{0, topology::CpuSet{0}, 0, 0}, {1, topology::CpuSet{1}, 0, 0}};
    t.numa_nodes = {{0, topology::CpuSet{0, 1}, 0}};
    return t;
}

JobContext scheduled(SchedulerInfo s) {
    JobContext c;
    c.hostname = "node2";
    c.python = "/usr/bin/python3";
    c.run_id = "812.4";
    c.scheduler = s;
    c.master = AgreedMaster{};
    c.master->addr = "node1";
    c.master->port = 23456;
    return c;
}

// Slurm's job 812, step 4: this agent is task 1 of 2, one a node, on node2 of node1 and node2.
SchedulerInfo second_of_two_slurm_nodes() {
    return {"slurm", "812", "4", 1, 2, 0, 1, 1, 2, {"node1", "node2"}, {}, {}};
}

TEST(ScheduledPlan, AgentsAreTheLaunchersTasks) {
    LaunchRequest req;
    req.nproc_per_node = {NprocSpec::Kind::Count, 2};
    req.script = "train.py";
    SchedulerInfo s = second_of_two_slurm_nodes();
    auto p = make_plan(req, scheduled(s), two_cores());
    ASSERT_TRUE(p.ok()) << p.error().message();
    EXPECT_EQ(p->nnodes, 2);
    EXPECT_EQ(p->ranks[0].rank, 2);
    EXPECT_EQ(p->ranks[1].env.at("RANK"), "3");
    EXPECT_EQ(p->ranks[1].env.at("MASTER_ADDR"), "node1");
    EXPECT_EQ(p->ranks[1].env.at("MASTER_PORT"), "23456");
    EXPECT_EQ(p->ranks[1].env.at("GROUP_RANK"), "1");
    EXPECT_FALSE(p->own_local_rank);

    req.node_rank = 0;
    auto wrong = make_plan(req, scheduled(s), two_cores());
    ASSERT_FALSE(wrong.ok());
    EXPECT_EQ(wrong.error().message(),
              "dlaunch: rdzv: --node-rank 0: slurm says this is node 1; leave out --node-rank under slurm");
}

// One worker a node on two nodes, meeting through etcd at 10.0.0.9 (as the command line says).
LaunchRequest etcd_across_two_nodes() {
    LaunchRequest req;
    req.nproc_per_node = {NprocSpec::Kind::Count, 1};
    req.script = "train.py";
    req.nnodes = {2, 2};
    req.rdzv_backend = "etcd";
    req.rdzv_endpoint = "10.0.0.9:2379";
    req.etcd = EtcdTerms{"http://10.0.0.9:2379", "", "", "", 60};
    return req;
}

// torchrun's rendezvous across nodes under srun: the job's nodes meet through Slurm, and the options say so.
TEST(ScheduledPlan, TorchrunsRendezvousAcrossNodesHasNoEffectUnderSrun) {
    LaunchRequest req = etcd_across_two_nodes();
    SchedulerInfo s = second_of_two_slurm_nodes();
    auto p = make_plan(req, scheduled(s), two_cores());
    ASSERT_TRUE(p.ok()) << p.error().message();
    EXPECT_EQ(p->nnodes, 2);
    EXPECT_EQ(p->ranks[0].env.at("GROUP_RANK"), "1") << "Slurm's node rank";
    EXPECT_EQ(p->ranks[0].env.at("MASTER_ADDR"), "node1") << "the master the job's nodes agreed, not etcd's host";
    EXPECT_EQ(p->warnings, (std::vector<std::string>{
                               "rdzv: --rdzv-backend etcd --rdzv-endpoint 10.0.0.9:2379: has no effect under srun: "
                               "the job's nodes meet through srun (drop both options here; outside a job they "
                               "make the nodes meet at the endpoint)"}));

    req.etcd.reset();
    req.rdzv_backend = "c10d";
    req.rdzv_endpoint = "node7:29400";
    req.c10d_endpoint = "node7:29400";
    s.source = "openmpi";
    p = make_plan(req, scheduled(s), two_cores());
    ASSERT_TRUE(p.ok()) << p.error().message();
    EXPECT_EQ(p->ranks[0].env.at("MASTER_ADDR"), "node1");
    ASSERT_EQ(p->warnings.size(), 1U);
    EXPECT_TRUE(p->warnings[0].starts_with(
        "rdzv: --rdzv-backend c10d --rdzv-endpoint node7:29400: has no effect under mpirun: the job's nodes meet "
        "through mpirun"))
        << p->warnings[0];
}

// dlaunch-paddle --master etcd:// under a PMIx launcher: etcd is not used (and the option, which also turns
// Paddle's restarts on, is not one to drop).
TEST(ScheduledPlan, PaddlesEtcdMasterUnderAJobIsNotUsed) {
    LaunchRequest req = etcd_across_two_nodes();
    req.paddle.layout = true;
    req.paddle.etcd_given = "--master etcd://10.0.0.9:2379";  // as dlaunch-paddle's command line sets it
    SchedulerInfo s{"pmix", "812", "4", 1, 2, 0, 1, 1, 2, {"node1", "node2"}, {}, {}};
    auto p = make_plan(req, scheduled(s), two_cores());
    ASSERT_TRUE(p.ok()) << p.error().message();
    EXPECT_EQ(p->warnings, (std::vector<std::string>{
                               "rdzv: --master etcd://10.0.0.9:2379: etcd is not used under the PMIx launcher (srun "
                               "--mpi=pmix, mpirun): the job's nodes meet through it (outside a job the nodes meet "
                               "in etcd)"}));
}

TEST(ScheduledPlan, PaddlesFleetFormUnderAJobIsNamedAsGiven) {
    LaunchRequest req = etcd_across_two_nodes();
    req.paddle.layout = true;
    req.paddle.etcd_given = "PADDLE_ELASTIC_SERVER=10.0.0.9:2379";
    SchedulerInfo s{"pmix", "812", "4", 1, 2, 0, 1, 1, 2, {"node1", "node2"}, {}, {}};
    auto p = make_plan(req, scheduled(s), two_cores());
    ASSERT_TRUE(p.ok()) << p.error().message();
    ASSERT_EQ(p->warnings.size(), 1u);
    EXPECT_TRUE(p->warnings[0].starts_with("rdzv: PADDLE_ELASTIC_SERVER=10.0.0.9:2379: etcd is not used under"))
        << p->warnings[0];
}

// The static form's endpoint and every --rdzv-conf key under srun: the job's first node is the master, and
// its nodes meet through srun; each option that does nothing says so.
TEST(ScheduledPlan, AStaticEndpointAndRdzvConfHaveNoEffectUnderSrunAndSaySo) {
    LaunchRequest req = etcd_across_two_nodes();
    req.etcd.reset();
    req.rdzv_backend = "static";
    req.rdzv_endpoint = "node7:29500";
    req.rdzv_conf = {{"timeout", "90"}};
    const SchedulerInfo s = second_of_two_slurm_nodes();
    auto p = make_plan(req, scheduled(s), two_cores());
    ASSERT_TRUE(p.ok()) << p.error().message();
    EXPECT_EQ(p->ranks[0].env.at("MASTER_ADDR"), "node1") << "the job's master, not the endpoint's host";
    EXPECT_EQ(p->warnings, (std::vector<std::string>{
                               "rdzv: --rdzv-endpoint node7:29500: has no effect under srun: the job's first node is "
                               "the master (drop the option here; --master-addr and --master-port choose another)",
                               "rdzv: --rdzv-conf timeout=90: has no effect under srun: the job's nodes meet through "
                               "srun (--fence-timeout bounds their meeting)"}));
}

// A backend dlaunch does not know is refused under srun as outside a job, not passed over.
TEST(ScheduledPlan, AnUnknownBackendIsRefusedUnderSrunToo) {
    LaunchRequest req = etcd_across_two_nodes();
    req.etcd.reset();
    req.rdzv_backend = "zookeeper";
    const SchedulerInfo s = second_of_two_slurm_nodes();
    auto p = make_plan(req, scheduled(s), two_cores());
    ASSERT_FALSE(p.ok());
    EXPECT_EQ(p.error().what, "rdzv: --rdzv-backend zookeeper: not supported by dlaunch");
}

// Agents under srun whose counts the nodes told each other (gpu, cpu, auto): ranks node by node, as torchrun;
// with a spare, the first MAX nodes' counts, and the spare in the last one's place with its own.
TEST(ScheduledPlan, AgentsWhoseCountsDifferTakeRanksNodeByNode) {
    LaunchRequest req;
    req.script = "train.py";
    SchedulerInfo s{"slurm", "812", "4", 1, 3, 0, 1, 1, 3, {"node1", "node2", "node3"}, {}, {}};
    JobContext c = scheduled(s);
    c.node_shares = {{1, "default"}, {2, "default"}, {3, "default"}};
    req.nproc_per_node = {NprocSpec::Kind::Count, 2};  // this node's count, as it told the others
    auto p = make_plan(req, c, two_cores());
    ASSERT_TRUE(p.ok()) << p.error().message();
    EXPECT_EQ(p->world_size, 6);
    EXPECT_EQ(p->ranks[0].rank, 1);
    EXPECT_EQ(p->ranks[1].env.at("RANK"), "2");
    EXPECT_EQ(p->ranks[1].env.at("LOCAL_WORLD_SIZE"), "2");

    req.nnodes = {2, 2};  // node 3 waits as a spare in node 2's place, with its own count
    req.max_restarts = 1;
    c.environ["SLURM_JOB_ID"] = "812";
    c.scheduler->rank = c.scheduler->node_rank = 2;
    req.nproc_per_node = {NprocSpec::Kind::Count, 3};
    p = make_plan(req, c, two_cores());
    ASSERT_TRUE(p.ok()) << p.error().message();
    EXPECT_TRUE(p->spare);
    EXPECT_EQ(p->world_size, 4) << "1 + its own 3";
    EXPECT_EQ(p->ranks[0].rank, 1);
}

TEST(ScheduledPlan, AgentsOfASlurmStepRestartAsAGroup) {
    LaunchRequest req;
    req.nproc_per_node = {NprocSpec::Kind::Count, 2};
    req.script = "train.py";
    req.max_restarts = 3;
    SchedulerInfo s = second_of_two_slurm_nodes();
    JobContext ctx = scheduled(s);
    ctx.environ["SLURM_JOB_ID"] = "812";
    auto p = make_plan(req, ctx, two_cores());
    ASSERT_TRUE(p.ok()) << p.error().message();
    EXPECT_TRUE(p->group_restarts);
    EXPECT_TRUE(p->warnings.empty());
    EXPECT_EQ(p->ranks[0].env.at("TORCHELASTIC_MAX_RESTARTS"), "3");

    req.requeue.enabled = true;  // in the allocation first; requeued when fewer than MIN nodes are left
    EXPECT_TRUE(make_plan(req, ctx, two_cores())->group_restarts);
    EXPECT_EQ(make_plan(req, ctx, two_cores())->max_restarts, 3);
    req.requeue.enabled = false;
    req.max_restarts = 0;  // nothing to restart, no range to shrink in
    EXPECT_FALSE(make_plan(req, ctx, two_cores())->group_restarts);
    req.nnodes = {1, 2};
    EXPECT_TRUE(make_plan(req, ctx, two_cores())->group_restarts);
}

TEST(ScheduledPlan, NodesPastTheGroupsMaxAreHotSpares) {
    LaunchRequest req;
    req.nproc_per_node = {NprocSpec::Kind::Count, 2};
    req.script = "train.py";
    req.max_restarts = 1;
    req.nnodes = {2, 2};
    SchedulerInfo s{"slurm", "812", "4", 2, 3, 0, 1, 2, 3, {"node1", "node2", "node3"}, {}, {}};
    JobContext ctx = scheduled(s);
    ctx.environ["SLURM_JOB_ID"] = "812";
    auto spare = make_plan(req, ctx, two_cores());
    ASSERT_TRUE(spare.ok()) << spare.error().message();
    EXPECT_TRUE(spare->group_restarts);
    EXPECT_TRUE(spare->spare);
    EXPECT_EQ(spare->spare_nodes, 1);
    EXPECT_EQ(spare->nnodes, 2);
    EXPECT_EQ(spare->node_rank, 1) << "shown in the last node's place";
    EXPECT_EQ(spare->world_size, 4);

    ctx.scheduler->rank = ctx.scheduler->node_rank = 0;
    auto first = make_plan(req, ctx, two_cores());
    ASSERT_TRUE(first.ok()) << first.error().message();
    EXPECT_FALSE(first->spare);
    EXPECT_EQ(first->spare_nodes, 1);
    EXPECT_EQ(first->node_rank, 0);

    req.max_restarts = 0;  // no group: the extra node has no use
    auto refused = make_plan(req, ctx, two_cores());
    ASSERT_FALSE(refused.ok());
    EXPECT_EQ(refused.error().message(),
              "dlaunch: rdzv: --nnodes 2:2: slurm started 3 node(s); give --max-restarts N: the nodes past --nnodes "
              "MAX then wait as hot spares; or leave out --nnodes");
}

TEST(ScheduledPlan, PerRankTakesRanksFromTheLauncher) {
    LaunchRequest req;
    req.launcher = Launcher::PerRank;
    req.script = "train.py";
    // mpirun --map-by node: ranks 1 and 3 on this node.
    SchedulerInfo s{"pmix", "ns", "", 3, 4, 1, 2, 1, 2, {"a", "b"}, {1, 3}, {}};
    auto p = make_plan(req, scheduled(s), two_cores());
    ASSERT_TRUE(p.ok()) << p.error().message();
    ASSERT_EQ(p->own_local_rank, 1);
    const RankPlan& mine = p->ranks[1];
    EXPECT_EQ(mine.rank, 3);
    EXPECT_EQ(p->ranks[0].rank, 1);
    EXPECT_EQ(mine.env.at("WORLD_SIZE"), "4");
    EXPECT_EQ(mine.env.at("LOCAL_WORLD_SIZE"), "2");
    EXPECT_EQ(mine.env.at("GROUP_WORLD_SIZE"), "2");
    EXPECT_EQ(mine.env.at("TORCHELASTIC_MAX_RESTARTS"), "0");
}

TEST(ScheduledPlan, PerRankWithoutALauncherNamesTheWaysToStart) {
    LaunchRequest req;
    req.launcher = Launcher::PerRank;
    req.script = "train.py";
    JobContext c;
    c.python = "/usr/bin/python3";
    auto p = make_plan(req, c, two_cores());
    ASSERT_FALSE(p.ok());
    EXPECT_NE(p.error().message().find("mpirun -np N dlaunch-mpi"), std::string::npos);
}

}  // namespace
}  // namespace dlaunch
