// Rendering a LaunchPlan for people (a table, one row per rank) and for tools (JSON).
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "dlaunch/plan.hpp"

namespace dlaunch {

// {"run_id", "nnodes", ..., "ranks": [{"rank", "local_rank", "node_rank", "world_size",
//  "local_world_size", "argv": [...], "env": {...}, ...}]}
nlohmann::json plan_to_json(const LaunchPlan& plan);

std::string plan_to_table(const LaunchPlan& plan);

}  // namespace dlaunch
