#include "dlaunch/cli.hpp"

#include <gtest/gtest.h>

#include <csignal>
#include <set>
#include <sstream>

#include "dlaunch/text.hpp"

namespace dlaunch {
namespace {

Result<Command> parse(std::vector<std::string> args, EnvMap env = {}) {
    return parse_command_line(args, env);
}

TEST(Cli, BothSpellingsGiveTheSameRequest) {
    auto dash = parse({"--nproc-per-node", "4", "--node-rank=1", "--nnodes", "2", "--master-addr", "h", "t.py"});
    auto under = parse({"--nproc_per_node", "4", "--node_rank=1", "--nnodes", "2", "--master_addr", "h", "t.py"});
    ASSERT_TRUE(dash.ok()) << dash.error().message();
    ASSERT_TRUE(under.ok()) << under.error().message();
    for (auto* c : {&dash, &under}) {
        const auto& r = (*c)->request;
        EXPECT_EQ(r.nproc_per_node, (NprocSpec{NprocSpec::Kind::Count, 4}));
        EXPECT_EQ(r.node_rank, 1);
        EXPECT_EQ(r.nnodes, (NodeRange{2, 2}));
        EXPECT_EQ(r.master_addr, "h");
        EXPECT_EQ(r.script, "t.py");
    }
}

TEST(Cli, DoubleDashEndsTheOptions) {
    auto c = parse({"--nproc-per-node", "1", "--", "-dash.py", "--lr", "1"});
    ASSERT_TRUE(c.ok()) << c.error().message();
    EXPECT_EQ(c->request.script, "-dash.py");
    EXPECT_EQ(c->request.script_args, (std::vector<std::string>{"--lr", "1"}));
    auto plain = parse({"--nproc-per-node", "1", "t.py", "--", "x"});
    ASSERT_TRUE(plain.ok()) << plain.error().message();
    EXPECT_EQ(plain->request.script_args, (std::vector<std::string>{"--", "x"})) << "after SCRIPT, '--' is an ARG";
}

// PyTorch's own launcher test passes --redirect=3: argparse takes any unique prefix of a long option.
TEST(Cli, UniquePrefixesOfLongOptionsAreTheOptions) {
    auto c = parse({"--redirect=3", "--max_restart=2", "--monitor=1", "--nproc", "2", "--rdzv_i=x", "--no-py", "t.py",
                    "--nproc", "7"});
    ASSERT_TRUE(c.ok()) << c.error().message();
    const auto& r = c->request;
    EXPECT_TRUE(r.redirects.any());
    EXPECT_EQ(r.max_restarts, 2);
    EXPECT_EQ(r.monitor_interval, std::optional<double>(1));
    EXPECT_EQ(r.nproc_per_node, (NprocSpec{NprocSpec::Kind::Count, 2}));
    EXPECT_EQ(r.rdzv_id, "x");
    EXPECT_EQ(r.entry, EntryKind::Command);
    EXPECT_EQ(r.script_args, (std::vector<std::string>{"--nproc", "7"})) << "SCRIPT's own options are its own";
    auto value = parse({"--rdzv_c", "--x=1", "t.py"});
    ASSERT_TRUE(value.ok()) << value.error().message() << ": a value that looks like an option is the value";
}

TEST(Cli, AnAmbiguousPrefixNamesItsCandidates) {
    auto c = parse({"--nn=2", "--no", "t.py"});
    ASSERT_FALSE(c.ok());
    EXPECT_EQ(c.error().what,
              "cli: ambiguous option '--no': it could be --node-rank, --node_rank, --no-python, --no_python, "
              "--no-health-check");
    EXPECT_EQ(c.error().hint, "write more of the option's name; run 'dlaunch --help' for the options");
    auto exact = parse({"--nnodes", "2", "--master", "h:1", "t.py"});
    ASSERT_TRUE(exact.ok()) << exact.error().message() << ": a whole name is never ambiguous, even if it begins others";
    EXPECT_EQ(exact->request.rendezvous_master, std::optional<std::string>("h:1"));
}

TEST(Cli, RestartBackoff) {
    EXPECT_EQ(parse({"t.py"})->request.restart_backoff, (RestartBackoff{1, 30})) << "the default";
    EXPECT_EQ(parse({"--restart-backoff", "0", "t.py"})->request.restart_backoff, (RestartBackoff{0, 30}));
    EXPECT_EQ(parse({"--restart-backoff", "2:8", "t.py"})->request.restart_backoff, (RestartBackoff{2, 8}));
    EXPECT_EQ(parse({"--restart-backoff", "60", "t.py"})->request.restart_backoff, (RestartBackoff{60, 60}));
    auto backwards = parse({"--restart-backoff", "8:2", "t.py"});
    ASSERT_FALSE(backwards.ok());
    EXPECT_EQ(backwards.error().hint, "give S:MAX with MAX >= S, e.g. 1:30");
    auto bad = parse({"--restart-backoff", "soon", "t.py"});
    ASSERT_FALSE(bad.ok());
    EXPECT_EQ(bad.error().what, "cli: --restart-backoff: 'soon' is not a number of seconds");
}

TEST(Cli, OptionsWithoutEffectAreKnownGivenWhateverTheirValue) {
    auto given = parse({"--monitor-interval", "5", "--start-method", "spawn", "t.py"});
    ASSERT_TRUE(given.ok()) << given.error().message();
    EXPECT_EQ(given->request.monitor_interval, std::optional<double>(5)) << "the default value, given";
    EXPECT_EQ(given->request.start_method, std::optional<std::string>("spawn"));
    auto absent = parse({"t.py"});
    EXPECT_FALSE(absent->request.monitor_interval);
    EXPECT_FALSE(absent->request.start_method);
}

TEST(Cli, EveryTorchrunOptionIsAccepted) {
    auto c = parse({"--nnodes=1:1",
                    "--nproc-per-node=2",
                    "--node-rank=0",
                    "--master-addr=a",
                    "--master-port=1234",
                    "--rdzv-backend=static",
                    "--rdzv-endpoint=a:1234",
                    "--rdzv-id=job7",
                    "--rdzv-conf=timeout=5",
                    "--standalone",
                    "--max-restarts=3",
                    "--monitor-interval=0.5",
                    "--start-method=fork",
                    "--role=trainer",
                    "--log-dir=/tmp/x",
                    "-r",
                    "1",
                    "-t",
                    "2",
                    "--local-ranks-filter=0,1",
                    "--local-addr=10.0.0.1",
                    "--devices=0",
                    "--grace=2.5",
                    "--signals=TERM,usr1",
                    "-vv",
                    "t.py"});
    ASSERT_TRUE(c.ok()) << c.error().message();
    const auto& r = c->request;
    EXPECT_EQ(r.master_port, 1234);
    EXPECT_EQ(r.rdzv_endpoint, "a:1234");
    EXPECT_EQ(r.rdzv_id, "job7");
    EXPECT_EQ(r.rdzv_conf.at("timeout"), "5");
    EXPECT_TRUE(r.standalone);
    EXPECT_EQ(r.max_restarts, 3);
    EXPECT_EQ(r.monitor_interval, std::optional<double>(0.5));
    EXPECT_EQ(r.start_method, std::optional<std::string>("fork"));
    EXPECT_EQ(r.role, "trainer");
    EXPECT_EQ(r.log_dir, "/tmp/x");
    EXPECT_EQ(r.redirects.all, kStdOut);
    EXPECT_EQ(r.tee.all, kStdErr);
    EXPECT_EQ(r.local_ranks_filter, (std::set<int>{0, 1}));
    EXPECT_EQ(r.local_addr, "10.0.0.1");
    EXPECT_EQ(r.devices, (std::vector<int>{0}));
    EXPECT_DOUBLE_EQ(r.grace_seconds, 2.5);
    EXPECT_EQ(r.forward_signals, (std::vector<int>{SIGTERM, SIGUSR1}));
    EXPECT_EQ(r.verbosity, 2);
}

TEST(Cli, RecentTorchrunOptionsAreDlaunchsOwnUnderTorchrunsNames) {
    auto c = parse({"--numa-binding=node", "--signals-to-handle=SIGTERM,SIGUSR1", "--shutdown-timeout=7",
                    "--virtual-local-rank", "t.py"});
    ASSERT_TRUE(c.ok()) << c.error().message();
    EXPECT_EQ(c->request.bind, topology::BindMode::Numa);
    EXPECT_EQ(c->request.forward_signals, (std::vector<int>{SIGTERM, SIGUSR1}));
    EXPECT_DOUBLE_EQ(c->request.grace_seconds, 7);
    EXPECT_TRUE(c->request.virtual_local_rank);
    EXPECT_EQ(parse({"--numa_binding", "socket", "t.py"})->request.bind, topology::BindMode::Socket);
    EXPECT_EQ(parse({"--numa-binding", "exclusive", "t.py"})->request.bind, topology::BindMode::Closest);
    EXPECT_FALSE(parse({"t.py"})->request.virtual_local_rank);
    EXPECT_EQ(parse({"t.py"})->request.forward_signals, default_forward_signals());

    EnvMap env{{"TORCH_ELASTIC_SHUTDOWN_TIMEOUT", "4"}, {"PET_VIRTUAL_LOCAL_RANK", "1"}};
    EXPECT_DOUBLE_EQ(parse({"t.py"}, env)->request.grace_seconds, 4);
    EXPECT_DOUBLE_EQ(parse({"--shutdown-timeout", "9", "t.py"}, env)->request.grace_seconds, 9);
    EXPECT_TRUE(parse({"t.py"}, env)->request.virtual_local_rank);

    EXPECT_TRUE(parse({"--logs-specs", "default", "t.py"}).ok()) << "torch's own DefaultLogsSpecs is what dlaunch does";
    EXPECT_TRUE(parse({"--logs_specs=default", "t.py"}).ok());
    auto plugin = parse({"--logs-specs", "s3", "t.py"});
    ASSERT_FALSE(plugin.ok());
    EXPECT_EQ(plugin.error().what,
              "cli: --logs-specs s3: dlaunch cannot load torchrun.logs_specs entry points (they are Python classes); "
              "it writes the layout of torch's default one");
}

TEST(Cli, EntryKinds) {
    EXPECT_EQ(parse({"t.py"})->request.entry, EntryKind::PythonScript);
    EXPECT_EQ(parse({"-m", "pkg.train"})->request.entry, EntryKind::PythonModule);
    EXPECT_EQ(parse({"--module", "pkg.train"})->request.entry, EntryKind::PythonModule);
    EXPECT_EQ(parse({"--no-python", "/bin/true"})->request.entry, EntryKind::Command);
    EXPECT_EQ(parse({"--no_python", "/bin/true"})->request.entry, EntryKind::Command);
    EXPECT_EQ(parse({"--run-path", "t.py"})->request.entry, EntryKind::RunPath);
}

TEST(Cli, ScriptArgumentsAreNotParsed) {
    auto c = parse({"--nproc-per-node", "2", "t.py", "--nproc-per-node", "9", "-v", "--lr=1"});
    ASSERT_TRUE(c.ok());
    EXPECT_EQ(c->request.nproc_per_node.count, 2);
    EXPECT_EQ(c->request.verbosity, 0);
    EXPECT_EQ(c->request.script_args, (std::vector<std::string>{"--nproc-per-node", "9", "-v", "--lr=1"}));
    auto dashdash = parse({"--", "t.py", "x"});
    ASSERT_TRUE(dashdash.ok());
    EXPECT_EQ(dashdash->request.script, "t.py");
}

TEST(Cli, PetVariablesAreFallbacksAndTheCommandLineWins) {
    EnvMap env{{"PET_NPROC_PER_NODE", "3"}, {"PET_NNODES", "2"},     {"PET_NODE_RANK", "1"}, {"PET_MASTER_ADDR", "m"},
               {"PET_MAX_RESTARTS", "4"},   {"PET_STANDALONE", "0"}, {"PET_NO_PYTHON", "1"}, {"PET_RDZV_ID", "abc"}};
    auto c = parse({"/bin/true"}, env);
    ASSERT_TRUE(c.ok()) << c.error().message();
    EXPECT_EQ(c->request.nproc_per_node.count, 3);
    EXPECT_EQ(c->request.nnodes.min, 2);
    EXPECT_EQ(c->request.node_rank, 1);
    EXPECT_EQ(c->request.master_addr, "m");
    EXPECT_EQ(c->request.max_restarts, 4);
    EXPECT_FALSE(c->request.standalone);
    EXPECT_EQ(c->request.entry, EntryKind::Command);
    EXPECT_EQ(c->request.rdzv_id, "abc");
    auto wins = parse({"--nproc-per-node", "5", "/bin/true"}, env);
    EXPECT_EQ(wins->request.nproc_per_node.count, 5);
}

TEST(Cli, NprocKinds) {
    EXPECT_EQ(parse({"--nproc-per-node", "gpu", "t.py"})->request.nproc_per_node.kind, NprocSpec::Kind::Gpu);
    EXPECT_EQ(parse({"--nproc-per-node", "cpu", "t.py"})->request.nproc_per_node.kind, NprocSpec::Kind::Cpu);
    EXPECT_EQ(parse({"--nproc-per-node", "auto", "t.py"})->request.nproc_per_node.kind, NprocSpec::Kind::Auto);
}

TEST(Cli, StdSelections) {
    auto per_rank = parse_std_selection("--tee", "0:1,3:3");
    ASSERT_TRUE(per_rank.ok());
    EXPECT_EQ(per_rank->for_rank(0), kStdOut);
    EXPECT_EQ(per_rank->for_rank(1), kStdNone);
    EXPECT_EQ(per_rank->for_rank(3), kStdAll);
}

TEST(Cli, RankListsAndSignals) {
    EXPECT_EQ(*parse_rank_list("--local-ranks-filter", "0,2-4"), (std::set<int>{0, 2, 3, 4}));
    EXPECT_EQ(*parse_signal_list("--signals", "SIGTERM,int,10"), (std::vector<int>{SIGTERM, SIGINT, SIGUSR1}));
    EXPECT_EQ(signal_name(SIGSEGV), "SIGSEGV");
}

TEST(Cli, PlanModeAndFormat) {
    auto c = parse({"plan", "--format", "json", "--nproc-per-node", "2", "t.py"});
    ASSERT_TRUE(c.ok()) << c.error().message();
    EXPECT_EQ(c->mode, Command::Mode::Plan);
    EXPECT_EQ(c->plan_format, "json");
    EXPECT_FALSE(parse({"--format", "json", "t.py"}).ok()) << "--format only exists for plan";
}

TEST(Cli, LegacyLaunchContract) {
    // torchrun's contract by default: no argument appended.
    EXPECT_EQ(parse({"t.py"})->request.local_rank_arg, "");
    EXPECT_EQ(parse({"--local-rank-arg", "dash", "t.py"})->request.local_rank_arg, "--local-rank");
    EXPECT_EQ(parse({"--local-rank-arg", "underscore", "t.py"})->request.local_rank_arg, "--local_rank");
    EXPECT_EQ(parse({"--local-rank-arg", "dash", "--use_env", "t.py"})->request.local_rank_arg, "");
    // The alias implies it; --use-env / --use_env and none turn it off.
    auto legacy = [](std::vector<std::string> args) {
        return parse_command_line(args, {}, Program::LegacyLaunch)->request.local_rank_arg;
    };
    EXPECT_EQ(legacy({"--nproc_per_node", "2", "t.py", "--lr", "1"}), "--local-rank");
    EXPECT_EQ(legacy({"--use_env", "t.py"}), "");
    EXPECT_EQ(legacy({"--use-env", "t.py"}), "");
    EXPECT_EQ(legacy({"--local-rank-arg", "underscore", "t.py"}), "--local_rank");
    EXPECT_EQ(legacy({"--local-rank-arg", "none", "t.py"}), "");
    EXPECT_EQ(program_from_argv0("/usr/bin/dlaunch-launch", Program::Agent), Program::LegacyLaunch);
    EXPECT_EQ(program_from_argv0("dlaunch", Program::Agent), Program::Agent);
    EXPECT_FALSE(parse_command_line({"--use-env", "t.py"}, {}, Program::Mpi)) << "dlaunch-mpi has no such option";
}

TEST(Cli, HelpTellsUsageAndExitCodes) {
    auto c = parse({"--help"});
    ASSERT_TRUE(c.ok());
    EXPECT_EQ(c->mode, Command::Mode::Help);
    EXPECT_NE(c->help_text.find("dlaunch [OPTIONS] SCRIPT [ARGS...]"), std::string::npos);
    EXPECT_NE(c->help_text.find("--nproc_per_node"), std::string::npos);
    EXPECT_NE(c->help_text.find("Exit codes"), std::string::npos);
}

size_t count(const std::string& text, const std::string& part) {
    size_t n = 0;
    for (size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) ++n;
    return n;
}

TEST(Cli, HelpListsTheOptionsOfEverySectionOnceUnderOneHeadingInTheOrderAdded) {
    auto c = parse({"--help"});
    ASSERT_TRUE(c.ok());
    const std::string& help = c->help_text;
    EXPECT_EQ(count(help, "Options:"), 1u);
    EXPECT_EQ(count(help, "-h,--help"), 1u) << "the sections have no help flag of their own";
    const size_t first = help.find("  --nnodes"), last = help.find("  -q,--quiet");
    ASSERT_NE(first, std::string::npos);
    ASSERT_NE(last, std::string::npos);
    EXPECT_LT(help.find("Options:"), first);
    EXPECT_LT(first, last);
    EXPECT_LT(last, help.find("Exit codes"));
}

TEST(Cli, AnEmptyScriptIsTheScriptAndTheWordsAfterItItsArguments) {
    // CLI11 would take "" for the name of a section and parse the words after it as dlaunch's options (or,
    // for an option the section does not hold, loop for ever): it is not given the words from SCRIPT on.
    for (const std::vector<std::string>& args : std::vector<std::vector<std::string>>{
             {"--no-python", "", "-v", "--nnodes", "2"}, {"--no-python", "--", "", "-v", "--nnodes", "2"}}) {
        auto c = parse(args);
        ASSERT_TRUE(c.ok()) << c.error().describe();
        EXPECT_EQ(c->request.script, "");
        EXPECT_EQ(c->request.script_args, (std::vector<std::string>{"-v", "--nnodes", "2"}));
        EXPECT_EQ(c->request.verbosity, 0);
    }
    auto unknown = parse({"--no-python", "", "--foo"});
    ASSERT_TRUE(unknown.ok()) << unknown.error().describe();
    EXPECT_EQ(unknown->request.script_args, (std::vector<std::string>{"--foo"}));
    auto paddle = parse_command_line({"--log_level", "DEBUG", "", "/bin/true"}, {}, Program::Paddle);
    ASSERT_TRUE(paddle.ok()) << paddle.error().describe();
    EXPECT_EQ(paddle->request.script, "");
    EXPECT_EQ(paddle->request.script_args, (std::vector<std::string>{"/bin/true"}));
}

// Every option name in --help's left column (what CLI11 would have refused twice in one App: in sections
// it compares only within each).
TEST(Cli, NoOptionNameIsGivenTwiceInAnyProgram) {
    for (Program program : {Program::Agent, Program::Mpi, Program::LegacyLaunch, Program::Paddle}) {
        auto c = parse_command_line({"--help"}, {}, program);
        ASSERT_TRUE(c.ok()) << c.error().describe();
        std::set<std::string> seen;
        std::istringstream lines(c->help_text);
        for (std::string line; std::getline(lines, line);) {
            if (line.rfind("  -", 0) != 0) continue;
            const std::string column = line.substr(2, line.find(' ', 2) - 2);
            for (const std::string& name : split(column, ','))
                EXPECT_TRUE(seen.insert(name).second) << name << " twice, program " << static_cast<int>(program);
        }
        EXPECT_GT(seen.size(), 20u);
    }
}

TEST(Cli, HelpAfterAnUnknownOptionIsStillHelpAsInArgparse) {
    auto c = parse({"--bogus", "--help"});
    ASSERT_TRUE(c.ok()) << c.error().describe();
    EXPECT_EQ(c->mode, Command::Mode::Help);
    auto value = parse({"--bogus", "", "--foo"});
    ASSERT_FALSE(value.ok());
    EXPECT_EQ(value.error().what, "cli: unknown option '--bogus'");
}

TEST(Cli, OptionsOfDifferentSectionsAreParsedAndAbbreviatedAsOne) {
    // --nproc-per-node and --quiet are sections apart (cli_app::Sections::kPerSection).
    auto c = parse({"--nproc=3", "--qui", "--no-py", "t"});
    ASSERT_TRUE(c.ok()) << c.error().describe();
    EXPECT_EQ(c->request.nproc_per_node.count, 3);
    EXPECT_EQ(c->request.verbosity, -1);
    EXPECT_EQ(c->request.entry, EntryKind::Command);
    auto ambiguous = parse({"--n", "t.py"});
    ASSERT_FALSE(ambiguous.ok());
    EXPECT_NE(ambiguous.error().what.find("--nnodes"), std::string::npos);
    EXPECT_NE(ambiguous.error().what.find("--no-health-check"), std::string::npos);
}

struct BadInput {
    std::vector<std::string> args;
    EnvMap env;
    std::string message;  // exact
};

class CliBadInput : public ::testing::TestWithParam<BadInput> {};

TEST_P(CliBadInput, FailsWithExactMessage) {
    auto c = parse(GetParam().args, GetParam().env);
    ASSERT_FALSE(c.ok());
    EXPECT_EQ(c.error().message(), GetParam().message);
}

INSTANTIATE_TEST_SUITE_P(
    Table, CliBadInput,
    ::testing::Values(
        BadInput{
            {"--bogus", "t.py"}, {}, "dlaunch: cli: unknown option '--bogus'; run 'dlaunch --help' for the options"},
        BadInput{{},
                 {},
                 "dlaunch: cli: no SCRIPT given; usage: dlaunch [OPTIONS] SCRIPT [ARGS...]; run 'dlaunch --help' for "
                 "the options"},
        BadInput{
            {"--nnodes", "x", "t.py"},
            {},
            "dlaunch: cli: --nnodes: 'x' is not N or MIN:MAX; write N or MIN:MAX with 1 <= MIN <= MAX, e.g. 2 or 2:2"},
        BadInput{
            {"--nnodes", "0", "t.py"},
            {},
            "dlaunch: cli: --nnodes: '0' is not N or MIN:MAX; write N or MIN:MAX with 1 <= MIN <= MAX, e.g. 2 or 2:2"},
        BadInput{{"--nnodes", "3:2", "t.py"},
                 {},
                 "dlaunch: cli: --nnodes: '3:2' is not N or MIN:MAX; write N or MIN:MAX with 1 <= MIN <= MAX, e.g. 2 "
                 "or 2:2"},
        BadInput{{"--nnodes", "1:2:3", "t.py"},
                 {},
                 "dlaunch: cli: --nnodes: '1:2:3' is not N or MIN:MAX; write N or MIN:MAX with 1 <= MIN <= MAX, e.g. 2 "
                 "or 2:2"},
        BadInput{{"--nproc-per-node", "0", "t.py"},
                 {},
                 "dlaunch: cli: --nproc-per-node: '0' is not a worker count; give a number from 1 to 4096, or gpu, cpu "
                 "or auto"},
        BadInput{{"--nproc_per_node", "four", "t.py"},
                 {},
                 "dlaunch: cli: --nproc-per-node: 'four' is not a worker count; give a number from 1 to 4096, or gpu, "
                 "cpu or auto"},
        BadInput{{"t.py"},
                 {{"PET_NPROC_PER_NODE", "-1"}},
                 "dlaunch: cli: PET_NPROC_PER_NODE: '-1' is not a worker count; give a number from 1 to 4096, or gpu, "
                 "cpu or auto"},
        BadInput{{"--local-ranks-filter", "a", "t.py"},
                 {},
                 "dlaunch: cli: --local-ranks-filter: 'a' is not a rank or range; give local ranks as a comma list "
                 "with ranges, e.g. 0 or 0,2-3"},
        BadInput{{"--local-ranks-filter", "3-1", "t.py"},
                 {},
                 "dlaunch: cli: --local-ranks-filter: '3-1' is not a rank or range; give local ranks as a comma list "
                 "with ranges, e.g. 0 or 0,2-3"},
        BadInput{{"--redirects", "5", "t.py"},
                 {},
                 "dlaunch: cli: --redirects: '5' is not a stream selection; give 0 (none), 1 (stdout), 2 (stderr) or 3 "
                 "(both), or per local rank, e.g. 0:1,1:3"},
        BadInput{{"--tee", "0:9", "t.py"},
                 {},
                 "dlaunch: cli: --tee: '0:9' is not LOCAL_RANK:STREAMS; give 0 (none), 1 (stdout), 2 (stderr) or 3 "
                 "(both), or per local rank, e.g. 0:1,1:3"},
        BadInput{{"--master-port", "70000", "t.py"},
                 {},
                 "dlaunch: cli: --master-port: 70000 is out of range; give a number from 1 to 65535"},
        BadInput{{"--master-port", "99999999999999999999", "t.py"},
                 {},
                 "dlaunch: cli: --master-port: 99999999999999999999 is out of range; give a number from 1 to 65535"},
        BadInput{{"--max-restarts", "-1", "t.py"},
                 {},
                 "dlaunch: cli: --max-restarts: -1 is out of range; give a number from 0 to 1048576"},
        BadInput{{"--hang-timeout", "0.001", "t.py"},
                 {},
                 "dlaunch: cli: --hang-timeout: 0.001 s is too short to tell a hang: progress is sampled every 0.1 s "
                 "at best; give at least 1 s"},
        BadInput{{"t.py"},
                 {{"DLAUNCH_HANG_TIMEOUT", "1e-9"}},
                 "dlaunch: cli: DLAUNCH_HANG_TIMEOUT: 1e-9 s is too short to tell a hang: progress is sampled every "
                 "0.1 s at best; give at least 1 s"},
        BadInput{{"--hang-timeout", "99999999999999", "t.py"},
                 {},
                 "dlaunch: cli: --hang-timeout: 99999999999999 s is more than the longest wait dlaunch takes "
                 "(10000000 s, 115 days); give at most 10000000 seconds"},
        BadInput{{"--start-method", "thread", "t.py"},
                 {},
                 "dlaunch: cli: --start-method: 'thread' is not a start method; give spawn, fork or forkserver"},
        BadInput{{"--signals", "KILL", "t.py"},
                 {},
                 "dlaunch: cli: --signals: SIGKILL cannot be forwarded; SIGKILL and SIGSTOP cannot be caught and "
                 "SIGCHLD is dlaunch's own; leave them out"},
        BadInput{{"--signals", "FOO", "t.py"},
                 {},
                 "dlaunch: cli: --signals: 'FOO' is not a signal; give names or numbers, e.g. TERM,INT,USR1"},
        BadInput{
            {"--grace", "-1", "t.py"},
            {},
            "dlaunch: cli: --grace: '-1' is not a number of seconds; give seconds as a number >= 0, e.g. 30 or 0.5"},
        BadInput{{"--devices", "0,x", "t.py"},
                 {},
                 "dlaunch: cli: --devices: '0,x' is not a device list; give indices, e.g. 0,1"},
        BadInput{{"--rdzv-conf", "timeout", "t.py"},
                 {},
                 "dlaunch: cli: --rdzv-conf: 'timeout' is not KEY=VALUE; write KEY=VALUE,KEY=VALUE"},
        BadInput{{"-m", "--no-python", "t.py"},
                 {},
                 "dlaunch: cli: --module and --no-python: a module needs Python; use one of them"},
        BadInput{{"t.py"},
                 {{"PET_STANDALONE", "yes"}},
                 "dlaunch: cli: PET_STANDALONE='yes' is not a boolean; set it to 1 or 0"},
        BadInput{{"--nnodes"},
                 {},
                 "dlaunch: cli: --nnodes: 1 required N|MIN:MAX missing; run 'dlaunch --help' for the options"},
        BadInput{{"--local-rank-arg", "camel", "t.py"},
                 {},
                 "dlaunch: cli: --local-rank-arg: 'camel' is not a spelling; give dash (--local-rank=N), underscore "
                 "(--local_rank=N) or none"},
        BadInput{{"--numa-binding", "core-complex", "t.py"},
                 {},
                 "dlaunch: cli: --numa-binding core-complex: dlaunch does not plan by L3 cache domain; give exclusive "
                 "(each rank on cores of its own next to its GPU), node or socket"},
        BadInput{{"--numa-binding", "numa", "t.py"},
                 {},
                 "dlaunch: cli: --numa-binding: 'numa' is not a binding mode; give node, socket or exclusive"},
        BadInput{{"--shutdown-timeout", "5", "--grace", "5", "t.py"},
                 {},
                 "dlaunch: cli: --shutdown-timeout and --grace set the same thing; give one of them"},
        BadInput{{"--signals", "TERM", "t.py"},
                 {{"PET_SIGNALS_TO_HANDLE", "SIGTERM"}},
                 "dlaunch: cli: PET_SIGNALS_TO_HANDLE and --signals set the same thing; give one of them"},
        BadInput{{"t.py"},
                 {{"TORCH_ELASTIC_SHUTDOWN_TIMEOUT", "soon"}},
                 "dlaunch: cli: TORCH_ELASTIC_SHUTDOWN_TIMEOUT: 'soon' is not a number of seconds; give seconds as a "
                 "number >= 0, e.g. 30 or 0.5"},
        // c10d across nodes: what dlaunch's node rendezvous cannot serve.
        BadInput{{"--rdzv-backend=c10d", "--nnodes=2", "t.py"},
                 {},
                 "dlaunch: cli: --rdzv-backend c10d --nnodes 2: no --rdzv-endpoint; give --rdzv-endpoint HOST[:PORT], "
                 "the same on every node; the agent on HOST serves it"},
        BadInput{{"--rdzv-backend=c10d", "--rdzv-endpoint=[::1]:5", "--nnodes=2", "t.py"},
                 {},
                 "dlaunch: cli: --rdzv-endpoint '[::1]:5': dlaunch's c10d rendezvous takes HOST[:PORT] over IPv4; give "
                 "a host name or IPv4 address, e.g. node1:29400"},
        BadInput{{"--rdzv-backend=c10d", "--rdzv-endpoint=h:5", "--nnodes=2", "--rdzv-conf=join_timeout=x", "t.py"},
                 {},
                 "dlaunch: cli: --rdzv-conf join_timeout: 'x' is not a number of seconds; give seconds as a number > "
                 "0, e.g. 30 or 0.5"},
        BadInput{{"--rdzv-backend=c10d", "--rdzv-endpoint=h:5", "--nnodes=2", "--rdzv-conf=join_timeout=9",
                  "--join-timeout=9", "t.py"},
                 {},
                 "dlaunch: cli: --join-timeout and --rdzv-conf join_timeout: one setting given twice; give one of "
                 "them"}));

TEST(Cli, C10dAcrossNodesMeetsAtTheEndpointWithTorchrunsWindow) {
    auto c = parse({"--rdzv-backend=c10d", "--rdzv-endpoint=node1", "--rdzv-id=812", "--nnodes=1:4", "t.py"});
    ASSERT_TRUE(c.ok()) << c.error().message();
    EXPECT_EQ(c->request.c10d_endpoint, "node1:29400");
    EXPECT_DOUBLE_EQ(c->request.rendezvous_timeout_seconds, 600);
    EXPECT_EQ(c->request.rendezvous_last_call_seconds, 30.0);
    c = parse({"--rdzv-backend", "c10d", "--rdzv-endpoint", "10.0.0.1:1234", "--nnodes", "2", "--rdzv-conf",
               "join_timeout=20,last_call_timeout=0,read_timeout=5", "t.py"});
    ASSERT_TRUE(c.ok()) << c.error().message();
    EXPECT_EQ(c->request.c10d_endpoint, "10.0.0.1:1234");
    EXPECT_DOUBLE_EQ(c->request.rendezvous_timeout_seconds, 20);
    EXPECT_EQ(c->request.rendezvous_last_call_seconds, 0.0);
    EXPECT_FALSE(parse({"--rdzv-backend=c10d", "--nnodes=1", "t.py"})->request.c10d_endpoint)
        << "one node keeps the local rendezvous";
}

}  // namespace
}  // namespace dlaunch
