// Job facts from the variables an MPI launcher without a PMI server dlaunch speaks sets in each rank: Cray
// PALS (its mpiexec, srun --mpi=cray_shasta, flux run -opmi=cray-pals) and MVAPICH's mpirun_rsh. Pure:
// the environment in, SchedulerInfo out. Open MPI's are pmix/'s (from_openmpi_env), Slurm's slurm/'s.
#pragma once

#include <optional>

#include "dlaunch/env_map.hpp"
#include "dlaunch/scheduler.hpp"

namespace dlaunch {

// From PALS_RANKID, PALS_LOCAL_RANKID, PALS_LOCAL_SIZE, PALS_NODEID and PMI_SIZE; nullopt without
// PALS_RANKID. The node names come from the srun step around it when its SLURM_PROCID is this rank, else
// from PBS_NODEFILE's order; an Error when neither is there.
std::optional<Result<SchedulerInfo>> from_pals_env(const EnvMap& env);

// From MV2_COMM_WORLD_{RANK,SIZE,LOCAL_RANK,LOCAL_SIZE}; nullopt without MV2_COMM_WORLD_RANK. They do not
// say which node this is, so only a job whose ranks all run on one node is described; across nodes
// mpirun_rsh's PMI server (PMI_PORT) is read instead.
std::optional<Result<SchedulerInfo>> from_mvapich_env(const EnvMap& env);

}  // namespace dlaunch
