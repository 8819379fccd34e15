// The worker environment contract: the one place that names the variables every dlaunch front-end
// (agent, dlaunch-mpi, SPANK plugin) gives a rank, and their values. Identical in names and values to
// torchrun's (torch.distributed.elastic LocalElasticAgent) for the same layout; docs/env-contract.md
// lists them with their meaning.
#pragma once

#include <string>

#include "dlaunch/job_context.hpp"

namespace dlaunch {

struct RankFacts {
    int rank = 0;
    int local_rank = 0;
    int node_rank = 0;
    int world_size = 1;
    int local_world_size = 1;
    int nnodes = 1;
    std::string role = "default";
    std::string master_addr;
    int master_port = 0;
    int restart_count = 0;
    int max_restarts = 0;
    std::string run_id;
    std::string error_file;  // "" leaves TORCHELASTIC_ERROR_FILE unset
    int omp_threads = 1;     // used only when the user has not exported OMP_NUM_THREADS
};

// Variables the launcher owns: always set, whatever the inherited environment says.
EnvMap owned_rank_env(const RankFacts& facts);

// Variables that default only when the inherited environment lacks them (user values win).
EnvMap default_rank_env(const RankFacts& facts, const EnvMap& inherited);

// Both of the above: the variables to set on top of `inherited`.
EnvMap rank_env(const RankFacts& facts, const EnvMap& inherited);

}  // namespace dlaunch
