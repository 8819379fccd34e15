// Which source dlaunch-mpi takes a job from (RankSources::EveryLauncher), from environments recorded under
// each launcher (PALS, MVAPICH and Flux have no Debian package: these rows are their record), and the check
// of a node's ranks after the exchange.
#include "dlaunch/launcher_env.hpp"

#include <gtest/gtest.h>

#include "dlaunch/job_setup.hpp"

namespace dlaunch {
namespace {

// A rank of `mpiexec -n 8 --ppn 4` under PALS in a PBS job (PBS_NODEFILE lists each node once per rank).
EnvMap pals_rank5(const std::string& nodefile) {
    return {{"PALS_RANKID", "5"},       {"PALS_LOCAL_RANKID", "1"}, {"PALS_LOCAL_SIZE", "4"}, {"PALS_NODEID", "1"},
            {"PALS_APID", "a1b2-c3"},   {"PMI_SIZE", "8"},          {"PMI_RANK", "5"},        {"PALS_DEPTH", "1"},
            {"PBS_NODEFILE", nodefile}, {"PBS_JOBID", "77.pbs01"}};
}

TEST(LauncherEnv, PalsRanksTakeTheirPlaceAndTheNodesFromPbs) {
    const std::string file = testing::TempDir() + "pals_nodefile";
    FILE* f = std::fopen(file.c_str(), "w");
    // PBS lists a node once per slot, not always side by side.
    std::fputs("x1000c0s0b0n0\nx1000c0s0b0n0\nx1000c0s0b1n0\nx1000c0s0b0n0\nx1000c0s0b1n0\nx1000c0s0b0n0\n", f);
    std::fclose(f);
    auto job = detect_job_for_rank(pals_rank5(file), RankSources::EveryLauncher);
    ASSERT_TRUE(job) << job.error().message();
    EXPECT_EQ(job->info.source, "pals");
    EXPECT_EQ(job->info.rank, 5);
    EXPECT_EQ(job->info.size, 8);
    EXPECT_EQ(job->info.local_rank, 1);
    EXPECT_EQ(job->info.local_size, 4);
    EXPECT_EQ(job->info.node_rank, 1);
    EXPECT_EQ(job->info.nodes, (std::vector<std::string>{"x1000c0s0b0n0", "x1000c0s0b1n0"}));
    EXPECT_EQ(job->info.job_id, "a1b2-c3");
    EXPECT_FALSE(job->session);
}

TEST(LauncherEnv, PalsUnderSrunTakesTheStepsNodesAndWinsOverItsVariables) {
    EnvMap env = {{"PALS_RANKID", "3"},
                  {"PALS_LOCAL_RANKID", "1"},
                  {"PALS_LOCAL_SIZE", "2"},
                  {"PALS_NODEID", "1"},
                  {"PMI_SIZE", "4"},
                  {"SLURM_PROCID", "3"},
                  {"SLURM_NTASKS", "4"},
                  {"SLURM_LOCALID", "1"},
                  {"SLURM_NODEID", "1"},
                  {"SLURM_JOB_ID", "42"},
                  {"SLURM_STEP_ID", "0"},
                  {"SLURM_STEP_NUM_NODES", "2"},
                  {"SLURM_STEP_NODELIST", "nid001,nid002"},
                  {"SLURM_MPI_TYPE", "cray_shasta"}};
    auto job = detect_job_for_rank(env, RankSources::EveryLauncher);
    ASSERT_TRUE(job) << job.error().message();
    EXPECT_EQ(job->info.source, "pals");
    EXPECT_EQ(job->info.nodes, (std::vector<std::string>{"nid001", "nid002"}));
    EXPECT_EQ(job->info.job_id, "42");
}

TEST(LauncherEnv, PalsWithoutANodeListOrWithAnImpossiblePlaceStops) {
    EnvMap env = pals_rank5("/nonexistent");
    env.erase("PBS_NODEFILE");
    auto none = from_pals_env(env);
    ASSERT_TRUE(none && !none->ok());
    EXPECT_EQ(none->error().what,
              "job: pals: no node list: neither an srun step (SLURM_PROCID the same as "
              "PALS_RANKID) nor PBS_NODEFILE is there");
    env = pals_rank5("/nonexistent");
    env.erase("PALS_APID");
    auto unnamed = from_pals_env(env);
    ASSERT_TRUE(unnamed && !unnamed->ok());
    EXPECT_EQ(unnamed->error().what, "job: pals: PALS_APID is missing or empty: nothing names this job on the node");
    env = {{"PALS_RANKID", "9"},
           {"PALS_LOCAL_RANKID", "0"},
           {"PALS_LOCAL_SIZE", "1"},
           {"PALS_NODEID", "0"},
           {"PMI_SIZE", "8"}};
    auto beyond = from_pals_env(env);
    ASSERT_TRUE(beyond && !beyond->ok());
    EXPECT_NE(beyond->error().what.find("PALS_RANKID=9 PMI_SIZE=8"), std::string::npos) << beyond->error().what;
}

TEST(LauncherEnv, MvapichOnOneNodeIsReadAndAcrossNodesNeedsItsPmi) {
    EnvMap env = {{"MV2_COMM_WORLD_RANK", "2"},
                  {"MV2_COMM_WORLD_SIZE", "4"},
                  {"MV2_COMM_WORLD_LOCAL_RANK", "2"},
                  {"MV2_COMM_WORLD_LOCAL_SIZE", "4"},
                  {"MPIRUN_ID", "1234"}};
    auto job = detect_job_for_rank(env, RankSources::EveryLauncher);
    ASSERT_TRUE(job) << job.error().message();
    EXPECT_EQ(job->info.source, "mvapich");
    EXPECT_EQ(job->info.rank, 2);
    EXPECT_EQ(job->info.local_size, 4);
    EXPECT_TRUE(job->node_local);  // agreed through the node-local fence: no node list to find a master in
    env["MV2_COMM_WORLD_LOCAL_SIZE"] = "2";
    auto across = detect_job_for_rank(env, RankSources::EveryLauncher);
    ASSERT_FALSE(across);
    EXPECT_NE(across.error().what.find("job: mvapich: MVAPICH's variables do not say which node"), std::string::npos);
}

TEST(LauncherEnv, ABatchScriptsSlurmVariablesAreNoRanksOwn) {
    // What sbatch -N2 -n4 gives the batch script, and so everything it starts without srun or mpiexec.
    EnvMap env = {{"SLURM_JOB_ID", "12"},
                  {"SLURM_PROCID", "0"},
                  {"SLURM_NTASKS", "4"},
                  {"SLURM_LOCALID", "0"},
                  {"SLURM_NODEID", "0"},
                  {"SLURM_NNODES", "2"},
                  {"SLURM_JOB_NODELIST", "nsn[1-2]"}};
    auto job = detect_job_for_rank(env, RankSources::EveryLauncher);
    ASSERT_FALSE(job);
    EXPECT_EQ(job.error().what.substr(0, 60), "job: slurm: SLURM_PROCID=0 is inherited, not this rank's: no");
    env["SLURM_STEP_ID"] = "0";  // a task of an srun step
    EnvMap step = env;
    step["SLURM_STEP_NODELIST"] = "nsn[1-2]";
    step["SLURM_STEP_NUM_NODES"] = "2";
    step["SLURM_STEP_TASKS_PER_NODE"] = "2(x2)";
    // With a PMI server or the launcher's own variables as well, those win (precedence, not a guess).
    step["OMPI_COMM_WORLD_RANK"] = "3";
    step["OMPI_COMM_WORLD_SIZE"] = "4";
    step["OMPI_COMM_WORLD_LOCAL_RANK"] = "3";
    step["OMPI_COMM_WORLD_LOCAL_SIZE"] = "4";
    auto ompi = detect_job_for_rank(step, RankSources::EveryLauncher);
    ASSERT_TRUE(ompi) << ompi.error().message();
    EXPECT_EQ(ompi->info.source, "openmpi");
    EXPECT_EQ(ompi->info.rank, 3);
}

TEST(LauncherEnv, NothingAtAllNamesEveryWayToStart) {
    auto job = detect_job_for_rank({}, RankSources::EveryLauncher);
    ASSERT_FALSE(job);
    EXPECT_NE(job.error().hint.find("mpiexec -n N dlaunch-mpi SCRIPT"), std::string::npos);
}

TEST(NodePeers, ANodesRanksMustSayThisHostAndTheirLocalRanksInOrder) {
    SchedulerInfo info;
    info.source = "pmi-1";
    info.local_peers = {4, 5};
    EXPECT_TRUE(check_node_peers(info, "n1", {{4, "n1", 0}, {5, "n1", 1}}));
    auto elsewhere = check_node_peers(info, "n1", {{4, "n1", 0}, {5, "n2", 1}});
    ASSERT_FALSE(elsewhere);
    EXPECT_EQ(elsewhere.error().what,
              "job: pmi-1: not one world: rank 5 runs on n2, not on n1 where pmi-1 placed it as local rank 1");
    auto twice = check_node_peers(info, "n1", {{4, "n1", 0}, {5, "n1", 0}});
    ASSERT_FALSE(twice);
    EXPECT_EQ(twice.error().what,
              "job: pmi-1: not one world: rank 5 has local rank 0 where pmi-1 placed it as local rank 1");
}

}  // namespace
}  // namespace dlaunch
