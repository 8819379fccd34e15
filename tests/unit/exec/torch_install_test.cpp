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
    EXPECT_EQ(torch_launch_local_rank_arg(""), std::nullopt);
}

}  // namespace
}  // namespace dlaunch::host
