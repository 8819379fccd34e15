// Topology: what this machine is, as plain values. Discovery (hwloc) fills it; the planner reads it.
// No hwloc type leaves the topology module.
#pragma once

#include <string>
#include <vector>

#include "dlaunch/result.hpp"

namespace dlaunch::topology {

struct Gpu {
    int index = 0;       // position among the node's GPUs in PCI bus order (CUDA_DEVICE_ORDER=PCI_BUS_ID)
    std::string pci;     // "0000:07:00.0"
    std::string vendor;  // "nvidia", "amd"
    bool operator==(const Gpu&) const = default;
};

struct Topology {
    int cpus = 1;                    // processing units this process may run on
    std::vector<Gpu> gpus;           // accelerators present and usable
    bool operator==(const Topology&) const = default;
};

// Discovers the machine this process runs on (hwloc, with PCI devices kept). Fails only when hwloc
// itself cannot load a topology.
Result<Topology> discover();

}  // namespace dlaunch::topology
