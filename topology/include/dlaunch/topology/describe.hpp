// `dlaunch topo`: what was discovered, for people.
#pragma once

#include <string>

#include "dlaunch/topology/topology.hpp"

namespace dlaunch::topology {

// GPUs, NICs (ports, state, netdev), other interfaces, NUMA nodes, and the GPU x NIC affinity matrix.
std::string describe(const Topology& topo);

}  // namespace dlaunch::topology
