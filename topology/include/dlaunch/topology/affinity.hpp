// GPU-NIC (or any two PCI devices') affinity classes, as `nvidia-smi topo -m` names them, computed
// from the PCI tree:
//   PIX  through at most one PCIe switch (both under the same switch)
//   PXB  through several PCIe switches, not through the host bridge
//   PHB  through the PCIe host bridge (same root complex)
//   NODE through the interconnect between host bridges within one NUMA node
//   SYS  through the SMP interconnect between NUMA nodes (QPI/UPI/Infinity Fabric)
#pragma once

#include <string>

#include "dlaunch/topology/topology.hpp"

namespace dlaunch::topology {

enum class Affinity { PIX = 0, PXB = 1, PHB = 2, NODE = 3, SYS = 4 };  // best first

Affinity affinity(const PciLocation& a, const PciLocation& b);
std::string to_string(Affinity a);

}  // namespace dlaunch::topology
