#include "dlaunch/launcher_env.hpp"

#include <fstream>
#include <set>

#include "dlaunch/slurm/task_facts.hpp"

namespace dlaunch {
namespace {

Result<SchedulerInfo> required(const std::string& source, const EnvMap& env, std::initializer_list<const char*> names) {
    for (const char* name : names)
        if (!int_var(env, name)) return bad_var(source, name, env);
    return SchedulerInfo{};
}

// The job's nodes in the order PBS lists them, each once (the file names a node once per slot).
std::vector<std::string> pbs_nodes(const EnvMap& env) {
    std::vector<std::string> nodes;
    std::set<std::string> seen;
    std::ifstream in(str_var(env, "PBS_NODEFILE"));
    for (std::string line; nodes.size() < 100000 && std::getline(in, line);)
        if (!line.empty() && seen.insert(line).second) nodes.push_back(line);
    return nodes;
}

// Every rank of a job names its node-local sockets after the job's id: without one, two jobs would meet.
Result<SchedulerInfo> without_job_id(const std::string& source, const char* name) {
    return Error{"job: " + source + ": " + name + " is missing or empty: nothing names this job on the node",
                 "start dlaunch-mpi directly under the launcher, which sets " + std::string(name)};
}

}  // namespace

std::optional<Result<SchedulerInfo>> from_pals_env(const EnvMap& env) {
    if (!env.contains("PALS_RANKID")) return std::nullopt;
    auto info =
        required("pals", env, {"PALS_RANKID", "PMI_SIZE", "PALS_LOCAL_RANKID", "PALS_LOCAL_SIZE", "PALS_NODEID"});
    if (!info) return info;
    SchedulerInfo& i = *info;
    i.source = "pals";
    i.rank = *int_var(env, "PALS_RANKID");
    i.size = *int_var(env, "PMI_SIZE");
    i.local_rank = *int_var(env, "PALS_LOCAL_RANKID");
    i.local_size = *int_var(env, "PALS_LOCAL_SIZE");
    i.node_rank = *int_var(env, "PALS_NODEID");
    i.job_id = str_var(env, "PALS_APID");
    auto misplaced = [&] {
        return Result<SchedulerInfo>(
            Error{"job: pals: PALS_RANKID=" + std::to_string(i.rank) + " PMI_SIZE=" + std::to_string(i.size) +
                      " PALS_LOCAL_RANKID=" + std::to_string(i.local_rank) +
                      " PALS_LOCAL_SIZE=" + std::to_string(i.local_size) +
                      " PALS_NODEID=" + std::to_string(i.node_rank) + " are not one rank's place",
                  "start dlaunch-mpi directly under PALS's mpiexec or srun --mpi=cray_shasta"});
    };
    if (i.rank < 0 || i.rank >= i.size || i.local_rank < 0 || i.local_rank >= i.local_size || i.node_rank < 0)
        return misplaced();
    if (auto slurm = slurm::from_slurm_env(env); slurm && slurm->ok() && slurm->value().rank == i.rank) {
        i.nodes = slurm->value().nodes;
        if (i.job_id.empty()) i.job_id = slurm->value().job_id;
        i.step_id = slurm->value().step_id;
    } else if (env.contains("PBS_NODEFILE")) {
        i.nodes = pbs_nodes(env);
    }
    if (i.job_id.empty()) return without_job_id("pals", "PALS_APID");
    if (i.nodes.empty())
        return Result<SchedulerInfo>(Error{"job: pals: no node list: neither an srun step (SLURM_PROCID " +
                                               std::string("the same as PALS_RANKID) nor PBS_NODEFILE is there"),
                                           "start dlaunch-mpi under PALS's mpiexec in a PBS job, or under srun"});
    i.nnodes = static_cast<int>(i.nodes.size());
    if (i.node_rank >= i.nnodes) return misplaced();
    return std::optional<Result<SchedulerInfo>>(std::move(info));
}

std::optional<Result<SchedulerInfo>> from_mvapich_env(const EnvMap& env) {
    if (!env.contains("MV2_COMM_WORLD_RANK")) return std::nullopt;
    auto info = required(
        "mvapich", env,
        {"MV2_COMM_WORLD_RANK", "MV2_COMM_WORLD_SIZE", "MV2_COMM_WORLD_LOCAL_RANK", "MV2_COMM_WORLD_LOCAL_SIZE"});
    if (!info) return info;
    SchedulerInfo& i = *info;
    i.source = "mvapich";
    i.rank = *int_var(env, "MV2_COMM_WORLD_RANK");
    i.size = *int_var(env, "MV2_COMM_WORLD_SIZE");
    i.local_rank = *int_var(env, "MV2_COMM_WORLD_LOCAL_RANK");
    i.local_size = *int_var(env, "MV2_COMM_WORLD_LOCAL_SIZE");
    i.job_id = str_var(env, "MPIRUN_ID");
    if (i.job_id.empty()) return without_job_id("mvapich", "MPIRUN_ID");
    if (i.local_size != i.size)
        return Result<SchedulerInfo>(Error{"job: mvapich: MVAPICH's variables do not say which node this is (" +
                                               std::to_string(i.local_size) + " of the " + std::to_string(i.size) +
                                               " ranks run here) and no PMI server was offered",
                                           "start across nodes with mpirun_rsh's PMI (PMI_PORT set), or use srun"});
    return std::optional<Result<SchedulerInfo>>(std::move(info));
}

}  // namespace dlaunch
