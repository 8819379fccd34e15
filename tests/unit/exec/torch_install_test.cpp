#include "dlaunch/torch_install.hpp"

#include <gtest/gtest.h>

namespace dlaunch::host {
namespace {

// The lines of torch/distributed/run.py (config_from_args) that pass the legacy argument.
TEST(TorchInstall, TheSpellingIsReadFromRunPy) {
    EXPECT_EQ(local_rank_arg_in_run_py("        cmd_args.append(f\"--local_rank={macros.local_rank}\")\n"),
              "--local_rank");  // torch 1.13
    EXPECT_EQ(local_rank_arg_in_run_py("        cmd_args.append(f\"--local-rank={macros.local_rank}\")\n"),
              "--local-rank");  // torch 2.x
    EXPECT_EQ(local_rank_arg_in_run_py("parser.add_argument(\"--local_rank\")"), std::nullopt);
    EXPECT_EQ(torch_facts(""), std::nullopt);
}

// torchrun's agent (torch/distributed/elastic/agent/server/local_elastic_agent.py) names the variable that
// turns on NCCL's async error handling; torch >= 2.2 warns in every rank about the old name.
TEST(TorchInstall, TheAsyncErrorVariableIsTheOneTorchrunSets) {
    EXPECT_EQ(async_error_var_in_agent_py("                \"NCCL_ASYNC_ERROR_HANDLING\": os.getenv(\n"),
              "NCCL_ASYNC_ERROR_HANDLING");  // torch 1.13 to 2.1
    EXPECT_EQ(async_error_var_in_agent_py("                \"TORCH_NCCL_ASYNC_ERROR_HANDLING\": os.getenv(\n"),
              "TORCH_NCCL_ASYNC_ERROR_HANDLING");  // torch 2.2 and later
    EXPECT_EQ(async_error_var_in_agent_py("worker_env = {}"), std::nullopt);
}

}  // namespace
}  // namespace dlaunch::host
