#include "dlaunch/plan.hpp"

#include <gtest/gtest.h>

#include <csignal>

#include "dlaunch/plan_format.hpp"
#include "dlaunch/plan_svg.hpp"
#include "dlaunch/summary.hpp"
#include "dlaunch/text.hpp"

namespace dlaunch {
namespace {

LaunchRequest request(int nproc, std::string script = "train.py") {
    LaunchRequest r;
    r.nproc_per_node = {NprocSpec::Kind::Count, nproc};
    r.script = std::move(script);
    return r;
}

JobContext context() {
    JobContext c;
    c.environ = {{"PATH", "/usr/bin"}};
    c.hostname = "node1";
    c.python = "/usr/bin/python3";
    c.run_id = "none";
    c.free_port = 41000;
    return c;
}

// A one-socket machine with `cpus` single-thread cores and `gpus` NVIDIA GPUs on one PCIe switch.
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

TEST(Plan, SingleNodeMatchesTorchrunsEnvironment) {
    auto p = make_plan(request(4), context(), machine(8, 0));
    ASSERT_TRUE(p.ok()) << p.error().message();
    ASSERT_EQ(p->ranks.size(), 4u);
    for (int i = 0; i < 4; ++i) {
        const auto& r = p->ranks[i];
        EXPECT_EQ(r.rank, i);
        EXPECT_EQ(r.local_rank, i);
        const EnvMap expected{
            {"RANK", std::to_string(i)},
            {"LOCAL_RANK", std::to_string(i)},
            {"GROUP_RANK", "0"},
            {"ROLE_RANK", std::to_string(i)},
            {"ROLE_NAME", "default"},
            {"LOCAL_WORLD_SIZE", "4"},
            {"WORLD_SIZE", "4"},
            {"GROUP_WORLD_SIZE", "1"},
            {"ROLE_WORLD_SIZE", "4"},
            {"MASTER_ADDR", "127.0.0.1"},
            {"MASTER_PORT", "41000"},
            {"TORCHELASTIC_RESTART_COUNT", "0"},
            {"TORCHELASTIC_MAX_RESTARTS", "0"},
            {"TORCHELASTIC_RUN_ID", "none"},
            {"TORCHELASTIC_USE_AGENT_STORE", "False"},
            {"DLAUNCH_RESTART_COUNT", "0"},
            {"OMP_NUM_THREADS", "2"},
            {"NCCL_ASYNC_ERROR_HANDLING", "1"},
        };
        EXPECT_EQ(r.env, expected);
        EXPECT_EQ(r.argv, (std::vector<std::string>{"/usr/bin/python3", "-u", "train.py"}));
        EXPECT_EQ(console_prefix(*p, r), "[" + std::to_string(i) + "]:");
    }
}

TEST(Plan, LegacyLocalRankArgumentGoesBeforeTheScriptArguments) {
    auto req = request(2);
    req.script_args = {"--epochs", "3"};
    req.local_rank_arg = "--local_rank";
    auto p = make_plan(req, context(), machine(4, 0));
    ASSERT_TRUE(p.ok()) << p.error().message();
    EXPECT_EQ(p->ranks[1].argv,
              (std::vector<std::string>{"/usr/bin/python3", "-u", "train.py", "--local_rank=1", "--epochs", "3"}));
    EXPECT_EQ(p->ranks[1].env.at("LOCAL_RANK"), "1") << "the environment stays torchrun's";
}

TEST(Plan, StaticMultiNode) {
    auto req = request(2);
    req.nnodes = {2, 2};
    req.node_rank = 1;
    req.master_addr = "10.1.1.1";
    auto p = make_plan(req, context(), machine(4, 0));
    ASSERT_TRUE(p.ok()) << p.error().message();
    EXPECT_EQ(p->world_size, 4);
    EXPECT_EQ(p->ranks[0].rank, 2);
    EXPECT_EQ(p->ranks[1].rank, 3);
    EXPECT_EQ(p->ranks[1].env.at("GROUP_RANK"), "1");
    EXPECT_EQ(p->ranks[1].env.at("GROUP_WORLD_SIZE"), "2");
    EXPECT_EQ(p->ranks[1].env.at("MASTER_ADDR"), "10.1.1.1");
    EXPECT_EQ(p->ranks[1].env.at("MASTER_PORT"), "29500") << "torchrun's static default, not a local free port";
    EXPECT_EQ(console_prefix(*p, p->ranks[1]), "[1:3]:");
}

TEST(Plan, RdzvEndpointGivesMasterForStatic) {
    auto req = request(1);
    req.nnodes = {2, 2};
    req.rdzv_endpoint = "head:1234";
    auto p = make_plan(req, context(), machine(4, 0));
    ASSERT_TRUE(p.ok()) << p.error().message();
    EXPECT_EQ(p->master_addr, "head");
    EXPECT_EQ(p->master_port, 1234);
}

TEST(Plan, RdzvConfKeysThatDoNothingAreNamed) {
    auto req = request(1);
    req.nnodes = {2, 2};
    req.rdzv_endpoint = "head:1234";
    // The static form across nodes: its agents meet at the master for `timeout`; its other keys do nothing.
    req.rdzv_conf = {{"timeout", "10"}, {"read_timeout", "9"}};
    auto p = make_plan(req, context(), machine(4, 0));
    ASSERT_TRUE(p.ok()) << p.error().message();
    EXPECT_EQ(p->warnings, (std::vector<std::string>{"rdzv: --rdzv-conf read_timeout=9: has no effect with static "
                                                     "rendezvous (dlaunch's agents apply only timeout)"}));
    req.nnodes = {1, 1};  // one node: nothing meets
    p = make_plan(req, context(), machine(4, 0));
    ASSERT_TRUE(p.ok()) << p.error().message();
    EXPECT_EQ(p->warnings.size(), 2U);
    EXPECT_EQ(p->warnings.at(1),
              "rdzv: --rdzv-conf timeout=10: has no effect with static rendezvous (dlaunch runs no "
              "rendezvous store)");
    req.nnodes = {2, 2};
    // c10d by hand, once the node rendezvous placed this node: its join window applies, the rest does not.
    req.rdzv_backend = "c10d";
    req.c10d_endpoint = "head:29400";
    req.rdzv_conf = {{"join_timeout", "60"}, {"last_call_timeout", "5"}, {"read_timeout", "9"}};
    JobContext ctx = context();
    ctx.assignment = NodeAssignment{2, 1, "10.0.0.1", 45000, {"10.0.0.1", "10.0.0.2"}, 0, {}};
    p = make_plan(req, ctx, machine(4, 0));
    ASSERT_TRUE(p.ok()) << p.error().message();
    EXPECT_EQ(p->warnings, (std::vector<std::string>{"rdzv: --rdzv-conf read_timeout=9: has no effect (dlaunch's "
                                                     "c10d rendezvous applies join_timeout and last_call_timeout)"}));
}

// Nodes alike need no list: even_span says what rank_span says of a list of them.
TEST(Plan, NodesAlikeSpanWithoutTheirList) {
    const std::vector<NodeShare> alike(5, NodeShare{3, "trainer"});
    for (int node = 0; node < 5; ++node) EXPECT_EQ(even_span(5, node, 3), rank_span(alike, node)) << node;
    EXPECT_EQ(even_span(1024, 1023, 8), (RankSpan{8184, 8192, 8184, 8192}));
}

// torchrun's rank assignment for nodes that differ: ranks node by node, role ranks within each role.
TEST(Plan, NodesWithDifferentWorkersAndRolesAsTorchrun) {
    const std::vector<NodeShare> nodes{{1, "master"}, {2, "trainer"}, {3, "trainer"}};
    EXPECT_EQ(rank_span(nodes, 0), (RankSpan{0, 6, 0, 1}));
    EXPECT_EQ(rank_span(nodes, 1), (RankSpan{1, 6, 0, 5}));
    EXPECT_EQ(rank_span(nodes, 2), (RankSpan{3, 6, 2, 5}));
    auto req = request(3);
    req.nnodes = {3, 3};
    req.role = "trainer";
    req.c10d_endpoint = "head:29400";
    req.rdzv_backend = "c10d";
    JobContext ctx = context();
    ctx.assignment = NodeAssignment{3, 2, "10.0.0.1", 45000, {"10.0.0.1", "10.0.0.2", "10.0.0.3"}, 0, nodes};
    auto p = make_plan(req, ctx, machine(4, 0));
    ASSERT_TRUE(p.ok()) << p.error().message();
    EXPECT_EQ(p->world_size, 6);
    ASSERT_EQ(p->ranks.size(), 3u);
    EXPECT_EQ(p->ranks[2].rank, 5);
    EXPECT_EQ(p->ranks[2].env.at("ROLE_RANK"), "4");
    EXPECT_EQ(p->ranks[2].env.at("ROLE_WORLD_SIZE"), "5");
    EXPECT_EQ(p->ranks[2].env.at("WORLD_SIZE"), "6");
    EXPECT_EQ(p->ranks[2].env.at("LOCAL_WORLD_SIZE"), "3");
    req.nproc_per_node = {NprocSpec::Kind::Count, 2};
    EXPECT_FALSE(make_plan(req, ctx, machine(4, 0)).ok()) << "a node must run what it told the others";
    // Nodes alike: a joiner keeps no list, only the share every node told (every_share); the same holds.
    ctx.assignment->shares.clear();
    ctx.assignment->every_share = NodeShare{3, "default"};
    auto told = make_plan(req, ctx, machine(4, 0));
    ASSERT_FALSE(told.ok());
    EXPECT_EQ(told.error().what, "plan: this node told the others it runs 3 workers, but plans 2");
    ctx.assignment->every_share = NodeShare{2, "default"};
    ASSERT_TRUE(make_plan(req, ctx, machine(4, 0)).ok());
}

// torchrun's static form across nodes: the agents meet (node_rendezvous) only to learn each other's counts;
// each node keeps its own --master-addr and --master-port for its workers, as torchrun passes them on.
TEST(Plan, TheStaticFormMeetsAcrossNodesAndKeepsEachNodesOwnMaster) {
    auto req = request(2);
    EXPECT_FALSE(static_form_across_nodes(req)) << "one node";
    req.nnodes = {2, 2};
    EXPECT_FALSE(static_form_across_nodes(req)) << "no master: dlaunch's own rendezvous";
    req.node_rank = 1;
    req.master_addr = "localhost";
    req.master_port = 29511;
    EXPECT_TRUE(static_form_across_nodes(req));
    JobContext ctx = context();
    ctx.assignment =
        NodeAssignment{2, 1, "10.0.0.1", 29511, {"10.0.0.1", "10.0.0.2"}, 29511, {{1, "default"}, {2, "default"}}};
    auto p = make_plan(req, ctx, machine(4, 0));
    ASSERT_TRUE(p.ok()) << p.error().message();
    EXPECT_EQ(p->world_size, 3);
    EXPECT_EQ(p->ranks[0].rank, 1);
    EXPECT_EQ(p->ranks[0].env.at("MASTER_ADDR"), "localhost");
    EXPECT_FALSE(p->group_restarts) << "the static form does not restart as a group";
    req.rdzv_backend = "c10d";
    EXPECT_FALSE(static_form_across_nodes(req));
    req.rdzv_backend = "static";
    req.nnodes = {1, 2};
    EXPECT_FALSE(static_form_across_nodes(req)) << "a range is refused (static_form_placement says why)";
    EXPECT_FALSE(static_form_placement(req).ok());
}

TEST(Plan, ThePrefixTemplateIsTorchrunsStringTemplate) {
    EXPECT_EQ(safe_substitute("[${role_name}${rank}|${local_rank}]:",
                              {{"role_name", "trainer"}, {"rank", "7"}, {"local_rank", "3"}}),
              "[trainer7|3]:");
    // What Python's Template("...").safe_substitute(role_name="trainer", rank=7, local_rank=3) gives.
    EXPECT_EQ(safe_substitute("$rank-$local_rankx $$ $ ${nope} $nope ${rank", {{"rank", "7"}, {"local_rank", "3"}}),
              "7-$local_rankx $ $ ${nope} $nope ${rank");
    EXPECT_EQ(safe_substitute("${rank}$", {{"rank", "7"}}), "7$");
    auto req = request(2);
    req.role = "trainer";
    JobContext ctx = context();
    ctx.environ["TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE"] = "${role_name}-${rank}> ";
    auto p = make_plan(req, ctx, machine(4, 0));
    ASSERT_TRUE(p.ok()) << p.error().message();
    EXPECT_EQ(console_prefix(*p, p->ranks[1]), "trainer-1> ");
}

TEST(Plan, MultiNodeRestartsAreNotLocal) {
    auto req = request(1);
    req.nnodes = {2, 2};
    req.master_addr = "h";
    req.max_restarts = 3;
    auto p = make_plan(req, context(), machine(4, 0));
    ASSERT_TRUE(p.ok());
    EXPECT_EQ(p->max_restarts, 0);
    ASSERT_EQ(p->warnings.size(), 1u);
    EXPECT_NE(p->warnings[0].find("--max-restarts 3 is not applied with --nnodes 2 here"), std::string::npos);
    EXPECT_FALSE(p->group_restarts);
    EXPECT_EQ(p->ranks[0].env.at("TORCHELASTIC_MAX_RESTARTS"), "0");
}

TEST(Plan, NodesThatMetByHandRestartAsAGroup) {
    auto req = request(2);
    req.nnodes = {1, 2};
    req.rdzv_backend = "c10d";
    req.c10d_endpoint = "head:29400";
    req.max_restarts = 3;
    JobContext ctx = context();
    ctx.assignment = NodeAssignment{2, 1, "10.0.0.1", 45000, {"10.0.0.1", "10.0.0.2"}, 29400, {}};
    auto p = make_plan(req, ctx, machine(4, 0));
    ASSERT_TRUE(p.ok()) << p.error().message();
    EXPECT_TRUE(p->group_restarts);
    EXPECT_EQ(p->max_restarts, 3);
    EXPECT_TRUE(p->warnings.empty()) << p->warnings[0];
    EXPECT_EQ(p->ranks[0].env.at("TORCHELASTIC_MAX_RESTARTS"), "3");
}

TEST(Plan, UserValuesWinExceptForOwnedVariables) {
    auto ctx = context();
    ctx.environ["OMP_NUM_THREADS"] = "7";
    ctx.environ["NCCL_ASYNC_ERROR_HANDLING"] = "0";
    ctx.environ["RANK"] = "99";
    auto p = make_plan(request(2), ctx, machine(8, 0));
    ASSERT_TRUE(p.ok());
    EXPECT_FALSE(p->ranks[0].env.contains("OMP_NUM_THREADS")) << "the inherited value stays";
    EXPECT_FALSE(p->ranks[0].env.contains("NCCL_ASYNC_ERROR_HANDLING"));
    EXPECT_EQ(p->ranks[1].env.at("RANK"), "1") << "ranks are the launcher's";
}

TEST(Plan, ATorchWithoutTheLibuvStoreItAsksForGetsUseLibuvZeroUnlessTheUserSetIt) {
    auto ctx = context();
    EXPECT_FALSE(make_plan(request(2), ctx, machine(8, 0))->ranks[0].env.contains("USE_LIBUV"))
        << "a torch with libuv, or one that does not read USE_LIBUV, is left as it is";
    ctx.torch_store_without_libuv = true;  // Debian 13's torch 2.6
    EXPECT_EQ(make_plan(request(2), ctx, machine(8, 0))->ranks[1].env.at("USE_LIBUV"), "0");
    ctx.environ["USE_LIBUV"] = "1";
    EXPECT_FALSE(make_plan(request(2), ctx, machine(8, 0))->ranks[1].env.contains("USE_LIBUV")) << "the user's stays";
}

TEST(Plan, OmpThreadsIsAtLeastOne) {
    auto p = make_plan(request(8), context(), machine(2, 0));
    ASSERT_TRUE(p.ok());
    EXPECT_EQ(p->ranks[0].env.at("OMP_NUM_THREADS"), "1");
}

TEST(Plan, AttemptChangesRestartCountAndPaths) {
    auto ctx = context();
    ctx.run_dir = "/logs/run_x";
    ctx.restart_count = 2;
    auto req = request(2);
    req.max_restarts = 3;
    req.log_dir = "/logs";
    auto p = make_plan(req, ctx, machine(4, 0));
    ASSERT_TRUE(p.ok());
    EXPECT_TRUE(p->log_files);
    EXPECT_EQ(p->attempt_dir, "/logs/run_x/attempt_2");
    EXPECT_EQ(p->ranks[1].error_file, "/logs/run_x/attempt_2/1/error.json");
    EXPECT_EQ(p->ranks[1].stdout_log, "/logs/run_x/attempt_2/1/stdout.log");
    EXPECT_EQ(p->ranks[1].env.at("TORCHELASTIC_ERROR_FILE"), "/logs/run_x/attempt_2/1/error.json");
    EXPECT_EQ(p->ranks[1].env.at("TORCHELASTIC_RESTART_COUNT"), "2");
    EXPECT_EQ(p->ranks[1].env.at("DLAUNCH_RESTART_COUNT"), "2");
    EXPECT_EQ(p->ranks[1].env.at("TORCHELASTIC_MAX_RESTARTS"), "3");
}

TEST(Plan, LogFilesOnlyWhenAskedForOrWhenOutputWouldBeLost) {
    auto ctx = context();
    ctx.run_dir = "/tmp/dlaunch_none_x";
    auto req = request(1);
    auto p = make_plan(req, ctx, machine(4, 0));
    ASSERT_TRUE(p.ok());
    EXPECT_FALSE(p->log_files);
    EXPECT_EQ(p->ranks[0].stdout_log, "");
    EXPECT_EQ(p->ranks[0].error_file, "/tmp/dlaunch_none_x/attempt_0/0/error.json") << "error files always";
    for (const auto& change : std::vector<std::function<void(LaunchRequest&)>>{
             [](auto& r) { r.log_dir = "/logs"; }, [](auto& r) { r.redirects.all = kStdErr; },
             [](auto& r) { r.tee.all = kStdOut; }, [](auto& r) { r.local_ranks_filter = std::set<int>{0}; }}) {
        auto changed = request(1);
        change(changed);
        EXPECT_TRUE(make_plan(changed, ctx, machine(4, 0))->log_files);
    }
}

TEST(Plan, WorkerCommands) {
    auto req = request(2);
    req.script_args = {"--local_rank=${local_rank}", "x"};
    auto p = make_plan(req, context(), machine(4, 0));
    EXPECT_EQ(p->ranks[1].argv,
              (std::vector<std::string>{"/usr/bin/python3", "-u", "train.py", "--local_rank=1", "x"}));
    req.entry = EntryKind::PythonModule;
    EXPECT_EQ(make_plan(req, context(), machine(4, 0))->ranks[0].argv,
              (std::vector<std::string>{"/usr/bin/python3", "-u", "-m", "train.py", "--local_rank=0", "x"}));
    req.entry = EntryKind::Command;
    EXPECT_EQ(make_plan(req, context(), machine(4, 0))->ranks[0].argv,
              (std::vector<std::string>{"train.py", "--local_rank=0", "x"}));
    req.entry = EntryKind::RunPath;
    auto run_path = make_plan(req, context(), machine(4, 0))->ranks[0].argv;
    ASSERT_EQ(run_path.size(), 7u);
    EXPECT_EQ(run_path[2], "-c");
    EXPECT_NE(run_path[3].find("runpy.run_path"), std::string::npos);
    EXPECT_EQ(run_path[4], "train.py");
}

TEST(Plan, NprocFromTheMachine) {
    auto req = request(1);
    req.nproc_per_node = {NprocSpec::Kind::Gpu, 0};
    EXPECT_EQ(make_plan(req, context(), machine(16, 4))->ranks.size(), 4u);
    req.nproc_per_node = {NprocSpec::Kind::Cpu, 0};
    EXPECT_EQ(make_plan(req, context(), machine(16, 4))->ranks.size(), 16u);
    req.nproc_per_node = {NprocSpec::Kind::Auto, 0};
    EXPECT_EQ(make_plan(req, context(), machine(16, 4))->ranks.size(), 4u);
    EXPECT_EQ(make_plan(req, context(), machine(3, 0))->ranks.size(), 3u);
    req.nproc_per_node = {NprocSpec::Kind::Gpu, 0};
    req.devices = std::vector<int>{1, 3};
    auto p = make_plan(req, context(), machine(16, 4));
    ASSERT_EQ(p->ranks.size(), 2u);
    EXPECT_EQ(p->ranks[0].env.at("CUDA_VISIBLE_DEVICES"), "1,3");
    EXPECT_EQ(p->ranks[0].env.at("CUDA_DEVICE_ORDER"), "PCI_BUS_ID");
}

TEST(Plan, ConsoleSelection) {
    auto req = request(3);
    req.redirects.all = kStdAll;
    req.tee.per_rank = {{1, kStdErr}};
    req.local_ranks_filter = std::set<int>{0, 1};
    auto p = make_plan(req, context(), machine(4, 0));
    ASSERT_TRUE(p.ok());
    EXPECT_FALSE(p->ranks[0].console_stdout);
    EXPECT_FALSE(p->ranks[0].console_stderr);
    EXPECT_FALSE(p->ranks[1].console_stdout);
    EXPECT_TRUE(p->ranks[1].console_stderr) << "tee puts it back on the console";
    EXPECT_FALSE(p->ranks[2].console_stderr) << "filtered out";
}

TEST(Plan, StandaloneUsesTheReservedPort) {
    auto req = request(1);
    req.standalone = true;
    req.rdzv_endpoint = "localhost:29400";  // what torchrun's --standalone would set; not our master
    auto p = make_plan(req, context(), machine(4, 0));
    ASSERT_TRUE(p.ok()) << p.error().message();
    EXPECT_EQ(p->master_port, 41000);
}

TEST(Plan, WhenAFreePortIsNeeded) {
    auto req = request(2);
    EXPECT_TRUE(needs_free_port(req));
    req.rdzv_backend = "c10d";
    req.rdzv_endpoint = "localhost:29400";  // torchrun's single-node c10d: the endpoint is not the master
    EXPECT_TRUE(needs_free_port(req));
    req.rdzv_backend = "static";
    EXPECT_FALSE(needs_free_port(req)) << "static endpoint HOST:PORT is the master";
    req.rdzv_endpoint = "localhost";
    EXPECT_TRUE(needs_free_port(req));
    req.master_port = 1234;
    EXPECT_FALSE(needs_free_port(req));
    auto multi = request(2);
    multi.nnodes = {2, 2};
    EXPECT_FALSE(needs_free_port(multi));
}

// A run directory under $TMPDIR is removed after a run that succeeded and wrote no log files (and then no
// run.json is written into it); kept, with its record, when anything in it could be read.
TEST(Plan, WhenTheRunDirectoryIsKept) {
    auto req = request(2);
    RunOutcome succeeded;
    EXPECT_FALSE(keeps_run_dir(req, false, succeeded));
    EXPECT_TRUE(keeps_run_dir(req, true, succeeded)) << "a --requeue job's records";
    RunOutcome failed;
    failed.failed = true;
    EXPECT_TRUE(keeps_run_dir(req, false, failed));
    RunOutcome stopped;
    stopped.stop_signal = SIGINT;
    EXPECT_TRUE(keeps_run_dir(req, false, stopped));
    auto logged = req;
    logged.log_dir = "/logs";
    EXPECT_TRUE(keeps_run_dir(logged, false, succeeded));
    auto filtered = req;
    filtered.local_ranks_filter = std::set<int>{0};
    EXPECT_TRUE(keeps_run_dir(filtered, false, succeeded)) << "the other ranks' output is in files";
    auto redirected = req;
    redirected.redirects.all = kStdErr;
    EXPECT_TRUE(keeps_run_dir(redirected, false, succeeded)) << "stderr is in files only";
    auto teed = req;
    teed.tee.per_rank[1] = kStdOut;
    EXPECT_TRUE(keeps_run_dir(teed, false, succeeded)) << "rank 1's stdout is in a file too";
}

// The process-layout hook (how another launcher's layout, e.g. Paddle's, plugs in): it sees the node's
// placement and default process count, and may fix the count and drop torch's variables.
TEST(Plan, LayoutHookFixesTheProcessCountAndTheContract) {
    auto p = make_plan(request(4), context(), machine(8, 0),
                       [](const NodePlacement& node, int nproc) -> Result<ProcessLayout> {
                           EXPECT_EQ(node.nnodes, 1);
                           EXPECT_EQ(node.master_port, 41000);
                           EXPECT_EQ(nproc, 4);
                           return ProcessLayout{.nproc = 2, .torch_env = false};
                       });
    ASSERT_TRUE(p.ok()) << p.error().message();
    ASSERT_EQ(p->ranks.size(), 2u);
    EXPECT_EQ(p->nproc_per_node, 2);
    EXPECT_EQ(p->world_size, 2);
    EXPECT_FALSE(p->ranks[1].env.contains("RANK"));
    EXPECT_EQ(p->ranks[1].env.at("DLAUNCH_RESTART_COUNT"), "0");
    EXPECT_EQ(p->ranks[1].env.at("OMP_NUM_THREADS"), "4");
}

TEST(Plan, LayoutHookErrorIsThePlansError) {
    auto p = make_plan(request(4), context(), machine(8, 0), [](const NodePlacement&, int) -> Result<ProcessLayout> {
        return Error{"plan: x: no", "fix"};
    });
    ASSERT_FALSE(p.ok());
    EXPECT_EQ(p.error().message(), "dlaunch: plan: x: no; fix");
}

TEST(Plan, JsonHasTheDocumentedShape) {
    auto p = make_plan(request(2), context(), machine(4, 0));
    auto j = plan_to_json(*p);
    ASSERT_EQ(j["ranks"].size(), 2u);
    for (const char* key : {"rank", "local_rank", "node_rank", "world_size", "local_world_size", "argv", "env"})
        EXPECT_TRUE(j["ranks"][1].contains(key)) << key;
    EXPECT_EQ(j["ranks"][1]["env"]["RANK"], "1");
    auto table = plan_to_table(*p);
    EXPECT_NE(table.find("RANK  LOCAL"), std::string::npos) << table;
}

TEST(Plan, TableRowsStayOneLineWhateverTheScriptIsCalled) {
    auto p = make_plan(request(1, "odd\nname's.py"), context(), machine(4, 0));
    ASSERT_TRUE(p.ok()) << p.error().message();
    auto table = plan_to_table(*p);
    EXPECT_NE(table.find("/usr/bin/python3 -u $'odd\\x0aname\\'s.py'\n"), std::string::npos) << table;
}

TEST(PlanSvg, TheHeadingNamesTheNodeTheSourceFitsAndADownNicIsNotDrawnAsUnused) {
    auto topo = machine(4, 0);
    topo.source = "this machine (cached in /" + std::string(200, 'd') + "/machine-whole-1.xml)";
    const topology::PciLocation loc{"0000:05:00.0", {1}, topo.allowed, topology::CpuSet{0}, 0};
    topo.nics.push_back({"mlx5_0", "ib0", {{1, 4}}, loc});
    topo.nics.push_back({"mlx5_1", "ib1", {{1, 1}}, loc});  // port state 1: DOWN
    auto p = make_plan(request(2), context(), topo);
    ASSERT_TRUE(p.ok()) << p.error().message();
    const std::string svg = plan_to_svg(*p, topo);
    EXPECT_NE(svg.find(">dlaunch: node1, node 0 of 1, 2 ranks of 2</text>"), std::string::npos) << svg;
    const auto line = svg.find(">topology: ...");
    ASSERT_NE(line, std::string::npos) << "the long source is cut at its start: " << svg;
    EXPECT_LE(svg.find("</text>", line) - line - 1, 140u) << "fits the 960 px picture at 11 px";
    EXPECT_NE(svg.find("d/machine-whole-1.xml)</text>", line), std::string::npos) << svg;
    EXPECT_NE(svg.find("data-nic=\"mlx5_1\" data-state=\"down\""), std::string::npos) << svg;
    EXPECT_NE(svg.find("NIC mlx5_1 (port down)"), std::string::npos) << svg;
    EXPECT_EQ(svg.find("data-nic=\"mlx5_0\" data-state"), std::string::npos) << svg;
}

TEST(ShellQuote, KeepsEveryWordOnOneLineAndPasteable) {
    const std::pair<std::string, std::string> rows[] = {
        {"train.py", "train.py"}, {"", "''"},
        {"a b", "'a b'"},         {"it's", "'it'\\''s'"},
        {"a\nb", "$'a\\x0ab'"},   {"tab\there's\\", "$'tab\\x09here\\'s\\\\'"},
    };
    for (const auto& [word, quoted] : rows) EXPECT_EQ(shell_quote(word), quoted) << word;
}

struct BadPlan {
    std::string name;
    std::function<void(LaunchRequest&, JobContext&)> change;
    int gpus;
    std::string message;
};

class PlanBadInput : public ::testing::TestWithParam<BadPlan> {};

TEST_P(PlanBadInput, FailsWithExactMessage) {
    auto req = request(2);
    auto ctx = context();
    GetParam().change(req, ctx);
    auto p = make_plan(req, ctx, machine(4, GetParam().gpus));
    ASSERT_FALSE(p.ok());
    EXPECT_EQ(p.error().message(), GetParam().message);
}

INSTANTIATE_TEST_SUITE_P(
    Table, PlanBadInput,
    ::testing::Values(
        BadPlan{"node_rank_out_of_range",
                [](auto& r, auto&) {
                    r.nnodes = {2, 2};
                    r.node_rank = 2;
                    r.master_addr = "h";
                },
                0, "dlaunch: rdzv: --node-rank 2: out of range for --nnodes 2; node ranks run from 0 to 1"},
        BadPlan{"no_master_across_nodes",
                [](auto& r, auto&) {
                    r.nnodes = {2, 2};
                },
                0,
                "dlaunch: rdzv: --nnodes 2: no master address; give --master-addr with the address of node rank 0 "
                "(the same on every node), or leave out --node-rank to let the nodes meet in dlaunch's rendezvous"},
        BadPlan{"elastic_range",
                [](auto& r, auto&) {
                    r.nnodes = {1, 4};
                },
                0,
                "dlaunch: rdzv: --nnodes 1:4: a node range needs a rendezvous that assigns node ranks; add "
                "--rdzv-backend c10d --rdzv-endpoint HOST:PORT (the same on every node), or give a fixed --nnodes N; "
                "under Slurm, start one dlaunch per node with srun: the agents restart in the range"},
        BadPlan{"zookeeper", [](auto& r, auto&) { r.rdzv_backend = "zookeeper"; }, 0,
                "dlaunch: rdzv: --rdzv-backend zookeeper: not supported by dlaunch; across nodes use --rdzv-backend "
                "c10d --rdzv-endpoint HOST:PORT (dlaunch's node rendezvous, the same command on every node), etcd or "
                "etcd-v2 with --rdzv-endpoint at etcd, the static "
                "form (--nnodes N --node-rank R --master-addr HOST --master-port PORT), or one dlaunch per node "
                "under Slurm (srun --ntasks-per-node=1 dlaunch ...)"},
        BadPlan{"standalone_multinode",
                [](auto& r, auto&) {
                    r.standalone = true;
                    r.nnodes = {2, 2};
                },
                0,
                "dlaunch: rdzv: --standalone with --nnodes 2: standalone means a single node; drop --standalone and "
                "give --node-rank and --master-addr for each node"},
        BadPlan{"gpu_workers_without_gpu",
                [](auto& r, auto&) {
                    r.nproc_per_node = {NprocSpec::Kind::Gpu, 0};
                },
                0,
                "dlaunch: plan: --nproc-per-node gpu: no GPU visible on this node; give a number of workers, or "
                "'cpu' / 'auto'"},
        BadPlan{"absent_device", [](auto& r, auto&) { r.devices = std::vector<int>{0}; }, 0,
                "dlaunch: plan: --devices: device 0 does not exist; this node has no usable GPU; drop --devices"},
        BadPlan{"device_out_of_range",
                [](auto& r, auto&) {
                    r.devices = std::vector<int>{0, 2};
                },
                2, "dlaunch: plan: --devices: device 2 does not exist; this node has 2 usable GPU(s), numbered 0-1"},
        BadPlan{"device_twice",
                [](auto& r, auto&) {
                    r.devices = std::vector<int>{1, 1};
                },
                2, "dlaunch: plan: --devices: device 1 listed twice; list each device once"},
        BadPlan{"no_python", [](auto&, auto& c) { c.python = ""; }, 0,
                "dlaunch: launch: python: no python3 found on PATH and PYTHON_EXEC is not set; set "
                "PYTHON_EXEC=/path/to/python3, or use --no-python to run SCRIPT directly"},
        BadPlan{"bad_endpoint_port", [](auto& r, auto&) { r.rdzv_endpoint = "h:99999"; }, 0,
                "dlaunch: rdzv: --rdzv-endpoint 'h:99999': port '99999' is not 1-65535; write HOST:PORT"}),
    [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace dlaunch
