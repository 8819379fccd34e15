// Pictures of a machine and of a plan on it (`dlaunch topo --format svg`, `dlaunch plan --format svg`): each
// NUMA node with its cores, and the GPUs and RDMA NICs local to it; with a plan, each rank's cores, GPU and
// NIC in the rank's colour and a legend. Pure: plain SVG 1.1 text. Elements carry their facts for tools and
// tests: class="core|gpu|nic|rank" with data-core, data-gpu, data-nic and data-rank attributes.
#pragma once

#include <string>

#include "dlaunch/plan.hpp"
#include "dlaunch/topology/topology.hpp"

namespace dlaunch {

std::string plan_to_svg(const LaunchPlan& plan, const topology::Topology& topo);
std::string topology_to_svg(const topology::Topology& topo);

}  // namespace dlaunch
