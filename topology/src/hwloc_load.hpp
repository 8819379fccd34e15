// What MachineLoad holds: one hwloc topology of this machine, shared by the Topology read from it and the
// Binder that binds with it. Internal to the topology module (discover.cpp makes it, binder.cpp uses it).
#pragma once

#include <hwloc.h>

#include "dlaunch/topology/topology.hpp"

namespace dlaunch::topology {

struct MachineLoad::Hwloc {
    hwloc_topology_t t;  // loaded, with binding hooks for this machine (never null)
    explicit Hwloc(hwloc_topology_t loaded) : t(loaded) {}
    Hwloc(const Hwloc&) = delete;
    Hwloc& operator=(const Hwloc&) = delete;
    ~Hwloc() { hwloc_topology_destroy(t); }
};

}  // namespace dlaunch::topology
