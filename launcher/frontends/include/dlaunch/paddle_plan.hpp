// paddle.distributed.launch's layout, planned on top of the core planner (make_plan knows no Paddle).
//
// Paddle's launcher differs from torchrun's in three places, each handled here:
//   - the nodes: --ips, or the hosts of --servers/--trainers/--heter_workers, name every node, the same on
//     all of them; a node's rank is its position in the list. They reach make_plan as a NodeAssignment.
//   - the processes: in parameter-server mode a node runs its servers, trainers and heter workers instead
//     of --nproc-per-node ranks; make_plan asks for that count through its ProcessLayout hook.
//   - each process: Paddle's variables (env_contract.hpp names them), its role, workerlog.N files and the
//     console rule, written into the plan make_plan produced.
//
// Caveats:
//   - Endpoint ports are computed, not reserved: they start at --start_port with --ips (Paddle's rule),
//     else right above MASTER_PORT.
//   - Every front-end must plan through make_launch_plan: make_plan alone gives torch ranks only.
#pragma once

#include <optional>
#include <string>

#include "dlaunch/job_context.hpp"
#include "dlaunch/plan.hpp"
#include "dlaunch/request.hpp"
#include "dlaunch/result.hpp"
#include "dlaunch/topology/topology.hpp"

namespace dlaunch {

// The plan every front-end applies: make_plan's, with Paddle's layout when the request asks for it
// (dlaunch-paddle, --env paddle|all, parameter-server mode). Fails as make_plan does, and for Paddle
// layouts this launch cannot make (a node not in --ips, endpoints without every node's address).
Result<LaunchPlan> make_launch_plan(const LaunchRequest& request, const JobContext& context,
                                    const topology::Topology& topology);

// The MASTER_ADDR make_launch_plan() will choose (planned_master_addr, with Paddle's node lists);
// nullopt when the nodes cannot be resolved (make_launch_plan says why).
std::optional<std::string> planned_launch_master_addr(const LaunchRequest& request, const JobContext& context);

}  // namespace dlaunch
