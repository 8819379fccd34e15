// Job facts from Open MPI's task environment (OMPI_COMM_WORLD_*), for when PMIx is not there.

#include "dlaunch/env_map.hpp"
#include "dlaunch/pmix/job_source.hpp"

namespace dlaunch::pmix {
std::optional<Result<SchedulerInfo>> from_openmpi_env(const EnvMap& env) {
    if (!env.contains("OMPI_COMM_WORLD_RANK")) return std::nullopt;
    SchedulerInfo info;
    info.source = "openmpi";
    const char* required[] = {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
                              "OMPI_COMM_WORLD_LOCAL_SIZE"};
    for (const char* name : required)
        if (!int_var(env, name)) return Result<SchedulerInfo>(bad_var("mpirun", name, env));
    info.rank = *int_var(env, "OMPI_COMM_WORLD_RANK");
    info.size = *int_var(env, "OMPI_COMM_WORLD_SIZE");
    info.local_rank = *int_var(env, "OMPI_COMM_WORLD_LOCAL_RANK");
    info.local_size = *int_var(env, "OMPI_COMM_WORLD_LOCAL_SIZE");
    // OMPI_COMM_WORLD_NODE_RANK is a rank among the processes on the node, not the node's index, and
    // nothing else in Open MPI's variables says which node this is: only a one-node job is described.
    if (info.local_size != info.size)
        return Result<SchedulerInfo>(Error{
            "mpirun: Open MPI's variables do not say which node this is (" + std::to_string(info.local_size) +
                " of the " + std::to_string(info.size) + " ranks run here) and PMIx is not reachable",
            "start across nodes with an mpirun whose PMIx server the ranks can reach (PMIX_NAMESPACE set), or use "
            "srun"});
    info.node_rank = 0;
    info.nnodes = 1;
    // Open MPI 4.1's mpirun names the job in OMPI_MCA_ess_base_jobid (seen on Debian 12's 4.1.4, where
    // PMIX_NAMESPACE holds the same number); Open MPI 5's (PRRTE) only in PMIX_NAMESPACE, e.g.
    // "prterun-vm-24343@1" (seen on Debian 13's 5.0.7).
    if (auto it = env.find("OMPI_MCA_ess_base_jobid"); it != env.end())
        info.job_id = it->second;
    else if (auto ns = env.find("PMIX_NAMESPACE"); ns != env.end())
        info.job_id = ns->second;
    return Result<SchedulerInfo>(info);
}

}  // namespace dlaunch::pmix
