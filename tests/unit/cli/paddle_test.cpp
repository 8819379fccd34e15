// paddle.distributed.launch drop-in: dlaunch-paddle's command line, Paddle's environment contract (table
// against the names Paddle 2.4-2.6 sets, launch/controllers/collective.py and ps.py), the PS layout, the
// services rule and the node rendezvous's pure parts.
#include <gtest/gtest.h>

#include <csignal>

#include "dlaunch/cli.hpp"
#include "dlaunch/failure_policy.hpp"
#include "dlaunch/node_rendezvous.hpp"
#include "dlaunch/paddle_plan.hpp"

namespace dlaunch {
namespace {

Result<Command> paddle(std::vector<std::string> args, EnvMap env = {}) {
    return parse_command_line(args, env, Program::Paddle);
}

JobContext context() {
    JobContext c;
    c.environ = {{"PATH", "/usr/bin"}};
    c.hostname = "node1";
    c.python = "/usr/bin/python3";
    c.run_id = "default";
    c.free_port = 41000;
    c.local_addrs = {"10.0.0.1", "127.0.0.1"};
    return c;
}

topology::Topology machine(int cpus, int gpus) {
    topology::Topology t;
    t.cpus = cpus;
    topology::NumaNode node;
    for (int i = 0; i < cpus; ++i) {
        t.allowed.insert(i);
        node.cpus.insert(i);
        t.cores.push_back({i, topology::CpuSet{i}, 0, 0});
    }
    t.numa_nodes.push_back(node);
    t.packages.push_back({0, t.allowed});
    for (int i = 0; i < gpus; ++i) {
        topology::Gpu g;
        g.index = i;
        g.vendor = "nvidia";
        g.loc = {"0000:0" + std::to_string(i) + ":00.0", {1, 2}, t.allowed, topology::CpuSet{0}, 0};
        t.gpus.push_back(g);
    }
    return t;
}

TEST(PaddleCli, ProgramFromArgv0) {
    EXPECT_EQ(program_from_argv0("/usr/bin/dlaunch-paddle", Program::Agent), Program::Paddle);
}

TEST(PaddleCli, AnEtcdMasterIsPaddlesElasticModeThroughEtcd) {
    auto c = paddle({"--master", "etcd://10.0.0.1:2379", "--nnodes", "2:4", "train.py"});
    ASSERT_TRUE(c.ok()) << c.error().message();
    const auto& r = c->request;
    EXPECT_EQ(r.rdzv_backend, "etcd");
    ASSERT_TRUE(r.etcd);
    EXPECT_EQ(r.etcd->endpoint, "http://10.0.0.1:2379");
    EXPECT_FALSE(r.rendezvous_master);
    EXPECT_EQ(r.nnodes, (NodeRange{2, 4}));
    EXPECT_EQ(r.max_restarts, 3) << "Paddle restarts with an etcd master: --max_restart, 3 by default";
    EXPECT_EQ(r.rendezvous_timeout_seconds, 30) << "a range waits --elastic_timeout";
}

// paddle.distributed.fleet.launch's elastic form: the same meeting through etcd as --master etcd://.
TEST(PaddleCli, TheFleetElasticFormMeetsThroughEtcdAsAnEtcdMasterDoes) {
    auto fleet = paddle({"--elastic_server=10.0.0.1:2379", "--np=2:4", "--job_id=j1", "train.py"});
    ASSERT_TRUE(fleet.ok()) << fleet.error().message();
    auto master = paddle(
        {"--master", "etcd://10.0.0.1:2379", "--nnodes", "2:4", "--job_id=j1", "--elastic_timeout", "120", "train.py"});
    ASSERT_TRUE(master.ok()) << master.error().message();
    const LaunchRequest &f = fleet->request, &m = master->request;
    EXPECT_EQ(std::tie(f.rdzv_backend, f.rdzv_endpoint, f.etcd, f.nnodes, f.max_restarts, f.rdzv_id, f.paddle.job_id),
              std::tie(m.rdzv_backend, m.rdzv_endpoint, m.etcd, m.nnodes, m.max_restarts, m.rdzv_id, m.paddle.job_id));
    EXPECT_EQ(f.paddle.etcd_given, "--elastic_server 10.0.0.1:2379") << "what messages name";
    EXPECT_EQ(m.paddle.etcd_given, "--master etcd://10.0.0.1:2379");
    EXPECT_EQ(f.rendezvous_timeout_seconds, 120) << "Paddle fleet's wait for MAX by default";
    EXPECT_EQ(f.heartbeat_timeout_seconds, m.heartbeat_timeout_seconds);
    EXPECT_EQ(f.rdzv_id, "j1");
}

TEST(PaddleCli, TheFleetElasticFormFromPaddlesVariables) {
    const EnvMap env{{"PADDLE_ELASTIC_SERVER", "10.0.0.1:2379"},
                     {"PADDLE_ELASTIC_NP", "3"},
                     {"PADDLE_ELASTIC_JOB_ID", "j2"},
                     {"PADDLE_ELASTIC_TTL", "20"}};
    auto c = paddle({"train.py"}, env);
    ASSERT_TRUE(c.ok()) << c.error().message();
    EXPECT_EQ(c->request.etcd->endpoint, "http://10.0.0.1:2379");
    EXPECT_EQ(c->request.nnodes, (NodeRange{3, 3}));
    EXPECT_EQ(c->request.paddle.job_id, "j2");
    EXPECT_EQ(c->request.heartbeat_timeout_seconds, 20) << "Paddle's lease TTL is the lease's";
    EXPECT_EQ(c->request.rendezvous_timeout_seconds, 1200) << "N fixed: 10 x PADDLE_ELASTIC_TIMEOUT (120)";

    const EnvMap both{{"PADDLE_ELASTIC_SERVER", "10.0.0.1:2379"},
                      {"PADDLE_ELASTIC_NP", "2"},
                      {"PADDLE_JOB_ID", "stale"},
                      {"PADDLE_ELASTIC_JOB_ID", "j3"}};
    EXPECT_EQ(paddle({"train.py"}, both)->request.paddle.job_id, "j3") << "fleet's own variable first";
    EXPECT_EQ(paddle({"--job_id", "j4", "train.py"}, both)->request.paddle.job_id, "j4") << "the command line first";
    auto master = paddle({"--master", "10.0.0.2:8090", "--nnodes", "2", "train.py"}, both);
    ASSERT_TRUE(master.ok()) << master.error().message();
    EXPECT_FALSE(master->request.etcd) << "--master on the command line wins over PADDLE_ELASTIC_SERVER";
    EXPECT_EQ(master->request.rendezvous_master, "10.0.0.2:8090");
    auto np_alone = paddle({"train.py"}, {{"PADDLE_ELASTIC_NP", "2"}});
    ASSERT_TRUE(np_alone.ok()) << "fleet's variable without its server: fleet is not in use";
    EXPECT_EQ(np_alone->request.nnodes, (NodeRange{1, 1}));
    EXPECT_TRUE(paddle({"--elastic_server", "h:2379", "--np", "2", "--job_id", "j", "--rank", "-01", "t.py"}).ok());
}

TEST(PaddleCli, TheFleetFormSaysToUnsetAVariableThatContradictsIt) {
    auto c = paddle({"--elastic_server", "10.0.0.1:2379", "--np", "2", "--job_id", "j", "train.py"},
                    {{"PADDLE_MASTER", "10.0.0.1:8090"}});
    ASSERT_FALSE(c.ok());
    EXPECT_EQ(c.error().message(),
              "dlaunch: cli: --elastic_server with PADDLE_MASTER: in Paddle's fleet elastic form the nodes meet in "
              "etcd; unset PADDLE_MASTER; give the same --elastic_server HOST:PORT --np N|MIN:MAX --job_id ID on "
              "every node");
    auto etcd_master = paddle({"--elastic_server", "10.0.0.1:2379", "--np", "2", "--job_id", "j", "train.py"},
                              {{"PADDLE_MASTER", "etcd://10.0.0.1:2379"}, {"PADDLE_RANK", "0"}});
    ASSERT_FALSE(etcd_master.ok());
    EXPECT_NE(etcd_master.error().message().find("--elastic_server with PADDLE_MASTER: "), std::string::npos)
        << "the form is decided first: " << etcd_master.error().message();
    auto nnodes = paddle({"--nnodes", "3", "--elastic_server", "10.0.0.1:2379", "--job_id", "j", "train.py"},
                         {{"PADDLE_ELASTIC_NP", "2"}});
    ASSERT_FALSE(nnodes.ok());
    EXPECT_EQ(nnodes.error().message(),
              "dlaunch: cli: PADDLE_ELASTIC_NP=2 and --nnodes 3 disagree; unset PADDLE_ELASTIC_NP");
    auto scale = paddle({"--elastic_server", "10.0.0.1:2379", "--np", "2", "--job_id", "j", "train.py"},
                        {{"PADDLE_ELASTIC_SCALE", "1"}});
    ASSERT_FALSE(scale.ok());
    EXPECT_NE(scale.error().message().find("unset PADDLE_ELASTIC_SCALE"), std::string::npos);
}

TEST(PaddleCli, CollectiveOptionsMapOntoTheRequest) {
    auto c =
        paddle({"--nnodes", "2", "--nproc_per_node=4", "--devices", "0,1,2,3", "--master", "10.0.0.1:8090", "--rank",
                "1", "--job_id", "j7", "--log_dir", "log", "--host", "10.0.0.2", "train.py", "--lr", "1"});
    ASSERT_TRUE(c.ok()) << c.error().message();
    const auto& r = c->request;
    EXPECT_EQ(r.nnodes, (NodeRange{2, 2}));
    EXPECT_EQ(r.nproc_per_node, (NprocSpec{NprocSpec::Kind::Count, 4}));
    EXPECT_EQ(r.devices, (std::vector<int>{0, 1, 2, 3}));
    EXPECT_EQ(r.rendezvous_master, "10.0.0.1:8090");
    EXPECT_EQ(r.node_rank, 1);
    EXPECT_EQ(r.paddle.job_id, "j7");
    EXPECT_EQ(r.rdzv_id, "j7");
    EXPECT_EQ(r.log_dir, "log");
    EXPECT_EQ(r.local_addr, "10.0.0.2");
    EXPECT_EQ(r.env_contract, EnvContract::All);
    EXPECT_TRUE(r.paddle.layout);
    EXPECT_EQ(r.entry, EntryKind::PythonScript);
    EXPECT_EQ(r.script_args, (std::vector<std::string>{"--lr", "1"}));
    EXPECT_EQ(r.rendezvous_timeout_seconds, 300);
}

TEST(PaddleCli, DefaultsFollowPaddle) {
    auto c = paddle({"run.sh"});
    ASSERT_TRUE(c.ok());
    EXPECT_EQ(c->request.nproc_per_node.kind, NprocSpec::Kind::GpuOrOne);
    EXPECT_EQ(c->request.entry, EntryKind::Command);  // not a .py file: executed as it is
    EXPECT_EQ(c->request.max_restarts, 0);            // Paddle restarts only in elastic mode
    auto g = paddle({"--gpus", "2,3", "t.py"});
    ASSERT_TRUE(g.ok());
    EXPECT_EQ(g->request.nproc_per_node, (NprocSpec{NprocSpec::Kind::Count, 2}));
    auto e = paddle({"--elastic_level", "1", "t.py"});
    ASSERT_TRUE(e.ok());
    EXPECT_EQ(e->request.max_restarts, 3);
    auto range = paddle({"--nnodes", "2:4", "--elastic_timeout", "7", "t.py"});
    ASSERT_TRUE(range.ok());
    EXPECT_EQ(range->request.rendezvous_timeout_seconds, 7);
}

TEST(PaddleCli, VariablesAreFallbacksAndTheCommandLineWins) {
    auto c = paddle({"--nproc_per_node", "3", "t.py"}, {{"PADDLE_NPROC_PER_NODE", "5"}, {"PADDLE_JOB_ID", "envjob"}});
    ASSERT_TRUE(c.ok());
    EXPECT_EQ(c->request.nproc_per_node.count, 3);
    EXPECT_EQ(c->request.paddle.job_id, "envjob");
}

TEST(PaddleCli, ParameterServerOptions) {
    auto c = paddle({"--server_num", "2", "--trainer_num", "3", "t.py"});
    ASSERT_TRUE(c.ok()) << c.error().message();
    ASSERT_TRUE(c->request.paddle.ps);
    EXPECT_EQ(c->request.paddle.ps->server_num, 2);
    EXPECT_EQ(c->request.paddle.ps->trainer_num, 3);
    auto l = paddle({"--servers", "10.0.0.1:6170,10.0.0.2:6170", "--trainers", "10.0.0.1:6171", "--heter_workers",
                     "10.0.0.2:6172", "--gloo_port", "7000", "--with_gloo", "0", "t.py"});
    ASSERT_TRUE(l.ok()) << l.error().message();
    EXPECT_EQ(l->request.paddle.ps->servers.size(), 2u);
    EXPECT_EQ(l->request.paddle.ps->heter_workers, (std::vector<std::string>{"10.0.0.2:6172"}));
    EXPECT_FALSE(l->request.paddle.ps->with_gloo);
    auto m = paddle({"--run_mode", "ps", "t.py"});
    ASSERT_TRUE(m.ok());
    EXPECT_EQ(m->request.paddle.ps->server_num, 1);
    EXPECT_EQ(m->request.paddle.ps->trainer_num, 1);
}

struct Refusal {
    std::vector<std::string> args;
    std::string message;
};

class PaddleRefusals : public ::testing::TestWithParam<Refusal> {};

TEST_P(PaddleRefusals, SayWhyAndWhatToDo) {
    auto args = GetParam().args;
    args.push_back("t.py");
    auto c = paddle(args);
    ASSERT_FALSE(c.ok());
    EXPECT_EQ(c.error().message(), GetParam().message);
}

INSTANTIATE_TEST_SUITE_P(
    Table, PaddleRefusals,
    ::testing::Values(
        Refusal{{"--master", "etcd://10.0.0.1:2379", "--rank", "0"},
                "dlaunch: cli: --rank with --master etcd://: node ranks follow the order the nodes meet in etcd; "
                "leave out --rank"},
        Refusal{{"--master", "etcd://10.0.0.1:x"},
                "dlaunch: cli: --master: 'etcd://10.0.0.1:x' is not etcd://HOST[:PORT]; e.g. etcd://10.0.0.1:2379"},
        Refusal{{"--elastic_server", "10.0.0.1:2379", "--job_id", "j"},
                "dlaunch: cli: --elastic_server without --np (PADDLE_ELASTIC_NP): how many nodes the job waits for; "
                "give the same --elastic_server HOST:PORT --np N|MIN:MAX --job_id ID on every node"},
        Refusal{{"--elastic_server", "10.0.0.1:2379", "--np", "2"},
                "dlaunch: cli: --elastic_server without --job_id (PADDLE_ELASTIC_JOB_ID): the nodes of one job meet "
                "in etcd under it; give the same --elastic_server HOST:PORT --np N|MIN:MAX --job_id ID on every node"},
        Refusal{{"--elastic_server", "10.0.0.1:2379", "--np", "2", "--job_id", "j", "--master", "10.0.0.1:8090"},
                "dlaunch: cli: --elastic_server with --master: in Paddle's fleet elastic form the nodes meet in etcd; "
                "drop --master; give the same --elastic_server HOST:PORT --np N|MIN:MAX --job_id ID on every node"},
        Refusal{{"--elastic_server", "10.0.0.1", "--np", "2", "--job_id", "j"},
                "dlaunch: cli: --elastic_server: '10.0.0.1' is not HOST:PORT; e.g. 10.0.0.1:2379"},
        Refusal{{"--elastic_server", "10.0.0.1:2379", "--np", "2:4", "--job_id", "j", "--nnodes", "2"},
                "dlaunch: cli: --np 2:4 and --nnodes 2 disagree; give one of them"},
        Refusal{{"--master", "etcd://10.0.0.1:2379", "--nnodes", "2:70000"},
                "dlaunch: cli: --nnodes 2:70000 through etcd: more nodes than one attempt in etcd holds; give at most "
                "65536 nodes"},
        Refusal{{"--elastic_server", "10.0.0.1:2379", "--np", "2:70000", "--job_id", "j"},
                "dlaunch: cli: --np 2:70000 through etcd: more nodes than one attempt in etcd holds; give at most "
                "65536 nodes"},
        Refusal{{"--np", "2"},
                "dlaunch: cli: --np: the node count of Paddle's fleet elastic form, which needs --elastic_server; give "
                "--nnodes instead, or add --elastic_server HOST:PORT"},
        Refusal{{"--scale", "1"},
                "dlaunch: cli: --scale: changes a running fleet elastic job's node count in etcd; dlaunch's jobs grow "
                "by starting another node with the same command while they are below MAX of --np"},
        Refusal{{"--legacy", "true"},
                "dlaunch: cli: --legacy: selects Paddle's old fleet launcher; dlaunch-paddle has one behaviour; drop "
                "--legacy"},
        Refusal{{"--xpus", "0"},
                "dlaunch: cli: --xpus: Kunlun XPUs are not supported by dlaunch; use NVIDIA or AMD GPUs (--devices)"},
        Refusal{{"--auto_tuner_json", "a.json"},
                "dlaunch: cli: --auto_tuner_json: Paddle's auto-tuner is not part of dlaunch; run it with "
                "paddle.distributed.launch"},
        Refusal{{"--run_mode", "rpc"}, "dlaunch: cli: --run_mode rpc: not supported by dlaunch; use collective or ps"},
        Refusal{{"--servers", "10.0.0.1:1"},
                "dlaunch: cli: --servers and --trainers: give both endpoint lists, or neither; list every server and "
                "every trainer as IP:PORT, or use --server_num/--trainer_num"},
        Refusal{{"--ips", "127.0.0.1,10.0.0.2"},
                "dlaunch: cli: --ips: 127.0.0.1 in a list of several nodes; give every node's address as the other "
                "nodes reach it"},
        Refusal{{"--elastic_level", "2"},
                "dlaunch: cli: --elastic_level: 2 is out of range; give a number from -1 to 1"},
        Refusal{{"--frobnicate", "1"},
                "dlaunch: cli: unknown option '--frobnicate'; run 'dlaunch-paddle --help' for the options"}));

// Paddle's collective variables, checked by name against what paddle.distributed.launch sets.
TEST(PaddlePlan, CollectiveEnvironmentOnOneNode) {
    auto c = paddle({"--nproc_per_node", "2", "--job_id", "j", "t.py"});
    ASSERT_TRUE(c.ok());
    auto p = make_launch_plan(c->request, context(), machine(4, 2));
    ASSERT_TRUE(p.ok()) << p.error().message();
    ASSERT_EQ(p->ranks.size(), 2u);
    for (int i = 0; i < 2; ++i) {
        const EnvMap& env = p->ranks[i].env;
        const EnvMap expected{
            {"PADDLE_TRAINER_ID", std::to_string(i)},
            {"PADDLE_GLOBAL_RANK", std::to_string(i)},
            {"PADDLE_TRAINERS_NUM", "2"},
            {"PADDLE_GLOBAL_SIZE", "2"},
            {"PADDLE_RANK_IN_NODE", std::to_string(i)},
            {"PADDLE_LOCAL_RANK", std::to_string(i)},
            {"PADDLE_LOCAL_SIZE", "2"},
            {"PADDLE_NNODES", "1"},
            {"PADDLE_MASTER", "127.0.0.1:41000"},
            {"PADDLE_CURRENT_ENDPOINT", "127.0.0.1:" + std::to_string(41001 + i)},
            {"PADDLE_TRAINER_ENDPOINTS", "127.0.0.1:41001,127.0.0.1:41002"},
            {"PADDLE_JOB_ID", "j"},
            {"FLAGS_selected_gpus", std::to_string(i)},
            // and torch's, for the same rank
            {"RANK", std::to_string(i)},
            {"WORLD_SIZE", "2"},
            {"TORCHELASTIC_RUN_ID", "default"},
        };
        for (auto& [k, v] : expected) EXPECT_EQ(env.count(k) ? env.at(k) : "<unset>", v) << k;
        EXPECT_FALSE(env.contains("PADDLE_DISTRI_BACKEND"));
    }
}

TEST(PaddlePlan, PaddleOnlyContractHasNoTorchVariablesAndGlooWithoutGpus) {
    auto c = parse_command_line({"--env", "paddle", "--nproc-per-node", "2", "t.py"}, {}, Program::Agent);
    ASSERT_TRUE(c.ok());
    auto p = make_launch_plan(c->request, context(), machine(4, 0));
    ASSERT_TRUE(p.ok()) << p.error().message();
    const EnvMap& env = p->ranks[1].env;
    EXPECT_EQ(env.at("PADDLE_TRAINER_ID"), "1");
    EXPECT_EQ(env.at("PADDLE_DISTRI_BACKEND"), "gloo");
    EXPECT_EQ(env.at("DLAUNCH_RESTART_COUNT"), "0");
    EXPECT_FALSE(env.contains("RANK"));
    EXPECT_FALSE(env.contains("FLAGS_selected_gpus"));
}

TEST(PaddlePlan, RendezvousAssignmentGivesEndpointsNodeByNode) {
    auto c = paddle({"--nnodes", "2", "--nproc_per_node", "2", "t.py"});
    ASSERT_TRUE(c.ok());
    JobContext ctx = context();
    ctx.assignment = NodeAssignment{2, 1, "10.0.0.1", 45000, {"10.0.0.1", "10.0.0.2"}, 0, {}};
    auto p = make_launch_plan(c->request, ctx, machine(4, 0));
    ASSERT_TRUE(p.ok()) << p.error().message();
    EXPECT_EQ(p->ranks[1].rank, 3);
    EXPECT_EQ(p->ranks[1].env.at("PADDLE_TRAINER_ENDPOINTS"),
              "10.0.0.1:45001,10.0.0.1:45002,10.0.0.2:45001,10.0.0.2:45002");
    EXPECT_EQ(p->ranks[1].env.at("PADDLE_CURRENT_ENDPOINT"), "10.0.0.2:45002");
    EXPECT_EQ(p->ranks[1].env.at("MASTER_ADDR"), "10.0.0.1");
    EXPECT_EQ(p->ranks[1].env.at("PADDLE_MASTER"), "10.0.0.1:45000");
}

TEST(PaddlePlan, IpsGiveTheNodeRankByPositionAndPortsFromStartPort) {
    auto c = paddle({"--ips", "10.0.0.5,10.0.0.1", "--nproc_per_node", "1", "t.py"});
    ASSERT_TRUE(c.ok());
    auto p = make_launch_plan(c->request, context(), machine(4, 0));
    ASSERT_TRUE(p.ok()) << p.error().message();
    EXPECT_EQ(p->node_rank, 1);
    EXPECT_EQ(p->ranks[0].env.at("PADDLE_TRAINER_ENDPOINTS"), "10.0.0.5:6070,10.0.0.1:6070");
    EXPECT_FALSE(p->ranks[0].env.contains("PADDLE_MASTER"));  // as Paddle on its --ips path
    auto other = paddle({"--ips", "10.0.0.5,10.0.0.6", "t.py"});
    auto q = make_launch_plan(other->request, context(), machine(4, 0));
    ASSERT_FALSE(q.ok());
    EXPECT_NE(q.error().message().find("this node (10.0.0.1, 127.0.0.1) is not in the list"), std::string::npos)
        << q.error().message();
}

TEST(PaddlePlan, ParameterServerRolesAndEndpoints) {
    auto c = paddle({"--server_num", "1", "--trainer_num", "2", "--log_dir", "L", "t.py"});
    ASSERT_TRUE(c.ok());
    auto p = make_launch_plan(c->request, context(), machine(4, 0));
    ASSERT_TRUE(p.ok()) << p.error().message();
    ASSERT_EQ(p->ranks.size(), 3u);
    const auto& s = p->ranks[0];
    const auto& t1 = p->ranks[2];
    EXPECT_EQ(s.role, "server");
    EXPECT_TRUE(s.service);
    EXPECT_EQ(s.env.at("TRAINING_ROLE"), "PSERVER");
    EXPECT_EQ(s.env.at("PADDLE_PORT"), "41001");
    EXPECT_FALSE(s.env.contains("PADDLE_TRAINER_ID"));
    EXPECT_EQ(t1.role, "trainer");
    EXPECT_FALSE(t1.service);
    EXPECT_EQ(t1.env.at("TRAINING_ROLE"), "TRAINER");
    EXPECT_EQ(t1.env.at("PADDLE_TRAINER_ID"), "1");
    EXPECT_EQ(t1.env.at("PADDLE_PSERVERS_IP_PORT_LIST"), "127.0.0.1:41001");
    EXPECT_EQ(t1.env.at("PADDLE_TRAINER_ENDPOINTS"), "127.0.0.1:41002,127.0.0.1:41003");
    EXPECT_EQ(t1.env.at("PADDLE_TRAINERS_NUM"), "2");
    EXPECT_EQ(t1.env.at("POD_IP"), "127.0.0.1");
    EXPECT_EQ(t1.env.at("PADDLE_GLOO_HTTP_ENDPOINT"), "127.0.0.1:41004");
    EXPECT_FALSE(t1.env.contains("RANK"));
    EXPECT_EQ(s.stdout_log, "L/serverlog.0");
    EXPECT_EQ(t1.stdout_log, "L/workerlog.1");
    EXPECT_EQ(t1.stderr_log, t1.stdout_log);
    EXPECT_TRUE(s.console_stdout);  // the node's first process, as Paddle shows
    EXPECT_FALSE(t1.console_stdout);
    EXPECT_EQ(p->endpoints_log, "L/endpoints.log");
}

TEST(PaddlePlan, ParameterServerListsPickThisHostsEntries) {
    auto c = paddle({"--servers", "10.0.0.2:6170,10.0.0.1:6170", "--trainers", "10.0.0.1:6171,10.0.0.2:6171", "t.py"});
    ASSERT_TRUE(c.ok());
    auto p = make_launch_plan(c->request, context(), machine(4, 0));
    ASSERT_TRUE(p.ok()) << p.error().message();
    ASSERT_EQ(p->ranks.size(), 2u);
    EXPECT_EQ(p->ranks[0].env.at("PADDLE_PORT"), "6170");
    EXPECT_EQ(p->ranks[0].rank, 1);  // the second server of the job
    EXPECT_EQ(p->ranks[1].env.at("PADDLE_TRAINER_ID"), "0");
    EXPECT_EQ(p->ranks[1].env.at("PADDLE_GLOO_HTTP_ENDPOINT"), "10.0.0.2:6767");
    EXPECT_EQ(p->nnodes, 2);
    EXPECT_EQ(p->node_rank, 1);
}

TEST(PaddlePlan, LogLayoutHeaderAndOverwrite) {
    auto c = paddle({"--nproc_per_node", "2", "--log_dir", "L", "--log_overwrite", "true", "t.py"});
    ASSERT_TRUE(c.ok());
    JobContext ctx = context();
    auto p = make_launch_plan(c->request, ctx, machine(4, 0));
    ASSERT_TRUE(p.ok());
    EXPECT_EQ(p->ranks[1].stdout_log, "L/workerlog.1");
    EXPECT_TRUE(p->ranks[1].log_truncate);
    EXPECT_EQ(p->ranks[1].log_header, "==== dlaunch-paddle: job default, attempt 0, rank 1 (local 1) on node1 ====");
    EXPECT_TRUE(p->ranks[0].console_stdout && p->ranks[0].console_stderr);
    EXPECT_FALSE(p->ranks[1].console_stdout || p->ranks[1].console_stderr);
    ctx.restart_count = 1;
    auto again = make_launch_plan(c->request, ctx, machine(4, 0));
    EXPECT_FALSE(again->ranks[1].log_truncate);  // a restart appends to the same file
}

TEST(PaddleServices, ServersAreStoppedOnceTheTrainersSucceeded) {
    FailurePolicy p(3, 0, {SIGTERM, SIGINT}, {0});
    p.start();
    EXPECT_TRUE(p.worker_exited({1, 11, {false, 0}, 0}).empty());
    auto a = p.worker_exited({2, 12, {false, 0}, 0});
    ASSERT_EQ(a.size(), 2u);
    EXPECT_EQ(a[0], (Action{Action::Kind::SignalWorkers, SIGTERM}));
    EXPECT_EQ(a[1].kind, Action::Kind::StartGrace);
    auto end = p.worker_exited({0, 10, {true, SIGTERM}, 0});
    ASSERT_EQ(end.size(), 1u);
    EXPECT_EQ(end[0], (Action{Action::Kind::Exit, 0}));
    EXPECT_TRUE(p.failures().empty());
}

TEST(PaddleServices, AServerFailingWhileTrainersRunIsAFailure) {
    FailurePolicy p(2, 0, {SIGTERM}, {0});
    p.start();
    auto a = p.worker_exited({0, 10, {false, 3}, 0});
    EXPECT_EQ(a[0], (Action{Action::Kind::SignalWorkers, SIGTERM}));
    auto end = p.worker_exited({1, 11, {true, SIGTERM}, 0});
    EXPECT_EQ(end.back(), (Action{Action::Kind::Exit, 3}));
}

TEST(NodeRendezvous, WireFormatRoundTrips) {
    JoinHello h{"job", "env=2", 1, "10.0.0.2", NodeShare{3, "trainer node, \"b\""}};
    auto back = decode_hello(encode_hello(h));
    ASSERT_TRUE(back.ok()) << back.error().message();
    EXPECT_EQ(*back, h) << "any role passes as one word";
    EXPECT_FALSE(decode_hello("GET / HTTP/1.1\r\n").ok());
    Met m;
    m.assignment = {2, 1, "10.0.0.1", 45000, {"10.0.0.1", "10.0.0.2"}, 41000, {{1, "master"}, {2, ""}}};
    m.attempt = 3;
    m.restarts_used = 2;
    NodeAssignment& a = m.assignment;
    const auto none_ = rdzv_auth::with_secret("");
    auto r = decode_reply(encode_assignment(m, none_, "-").value(), none_, "-");
    ASSERT_TRUE(r.ok()) << r.error().message();
    EXPECT_EQ(r->assignment.node_rank, 1);
    EXPECT_EQ(r->assignment.node_addrs, a.node_addrs);
    EXPECT_EQ(r->assignment.shares, a.shares);
    EXPECT_EQ(r->assignment.rendezvous_port, 41000) << "the group's port";
    EXPECT_EQ(r->attempt, 3) << "a node taken into a run under way starts at its attempt";
    EXPECT_EQ(r->restarts_used, 2);
    a.shares.clear();
    auto none = decode_reply(encode_assignment(m, none_, "-").value(), none_, "-");
    ASSERT_TRUE(none.ok()) << none.error().message();
    EXPECT_TRUE(none->assignment.shares.empty()) << "Paddle's parameter-server layout sends none";
    auto refused = decode_reply(encode_refusal("rank 1 is taken"), none_, "-");
    ASSERT_FALSE(refused.ok());
    EXPECT_EQ(refused.error().message(), "dlaunch: rdzv: the rendezvous host refused this node: rank 1 is taken");
}

TEST(NodeRendezvous, RanksKeepRequestsAndFillInJoiningOrder) {
    EXPECT_EQ(*assign_node_ranks({-1, -1, -1}), (std::vector<int>{0, 1, 2}));
    EXPECT_EQ(*assign_node_ranks({-1, 0, -1}), (std::vector<int>{1, 0, 2}));
    EXPECT_FALSE(assign_node_ranks({1, 1}).ok());
    EXPECT_FALSE(assign_node_ranks({-1, 5}).ok());
}

TEST(NodeRendezvous, WhenItIsNeeded) {
    LaunchRequest r;
    EXPECT_FALSE(needs_node_rendezvous(r));
    r.nnodes = {2, 2};
    EXPECT_TRUE(needs_node_rendezvous(r));
    r.master_addr = "10.0.0.1";
    EXPECT_FALSE(needs_node_rendezvous(r));
    r.rendezvous_master = "10.0.0.1:1234";
    EXPECT_TRUE(needs_node_rendezvous(r));
    LaunchRequest s;  // torchrun's static form without a master address stays an error
    s.nnodes = {2, 2};
    s.node_rank = 1;
    EXPECT_FALSE(needs_node_rendezvous(s));
    s.paddle.layout = true;  // Paddle: --rank with an auto-detected master
    EXPECT_TRUE(needs_node_rendezvous(s));
    LaunchRequest t;
    t.nnodes = {2, 2};
    t.standalone = true;
    EXPECT_FALSE(needs_node_rendezvous(t));
}

TEST(NodeRendezvous, JoinCommandDropsThisNodesOptionsAndQuotes) {
    std::vector<std::string> argv{
        "/usr/bin/dlaunch-paddle", "--host", "10.0.0.1", "--rank=0", "--nnodes", "2", "train.py", "--rank", "3", "a b"};
    EXPECT_EQ(join_command(argv, 6, "10.0.0.1:4000"),
              "dlaunch-paddle --master 10.0.0.1:4000 --nnodes 2 train.py --rank 3 'a b'");
}

}  // namespace
}  // namespace dlaunch
