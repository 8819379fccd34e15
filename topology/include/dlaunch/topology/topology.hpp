// Topology: what a machine is, as plain values: packages, NUMA nodes, cores, GPUs, NICs and network
// interfaces with their place in the PCI tree. Discovery (discover.cpp, hwloc) fills it from the running
// machine or from an hwloc XML file; everything else (affinity, GPU selection, binding) reads only these
// values. No hwloc type leaves the topology module.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "dlaunch/result.hpp"
#include "dlaunch/topology/cpuset.hpp"

namespace dlaunch::topology {

// Where a PCI device sits: the chain of bridges above it and the CPUs/memory it is local to.
struct PciLocation {
    std::string pci;                // "0000:43:00.0"
    std::vector<uint64_t> bridges;  // bridge ids from the host bridge (front) down to the device's parent
    CpuSet locality;                // PUs of the first non-I/O ancestor (empty: unknown)
    CpuSet numa;                    // NUMA nodes (OS indices) of that ancestor
    int package = -1;               // package (logical index) of that ancestor; -1 when above packages
    bool operator==(const PciLocation&) const = default;
};

struct Gpu {
    int index = 0;       // position among the machine's GPUs in PCI bus order
    std::string vendor;  // "nvidia" or "amd"
    std::string model;   // PCI device name when hwloc knows it, else ""
    PciLocation loc;
    std::optional<bool> accessible;  // can this process open it (device cgroup)? unknown for XML input
    std::optional<int> minor;        // driver device number (/dev/nvidiaN), when known
    bool operator==(const Gpu&) const = default;
};

struct NicPort {
    int number = 1;
    int state = 4;  // InfiniBand port state: 4 = ACTIVE
    bool active() const { return state == 4; }
    bool operator==(const NicPort&) const = default;
};

// An RDMA-capable NIC (InfiniBand, RoCE, EFA): an OpenFabrics device.
struct Nic {
    std::string name;    // "mlx5_0"
    std::string netdev;  // "ib0", "" when none
    std::vector<NicPort> ports;
    PciLocation loc;
    bool operator==(const Nic&) const = default;
};

// A network interface on a PCI device that is not an RDMA NIC (Ethernet).
struct NetInterface {
    std::string name;  // "enp225s0f0"
    PciLocation loc;
    bool operator==(const NetInterface&) const = default;
};

struct Core {
    int index = 0;  // logical index
    CpuSet pus;     // its PUs this process may use (OS indices)
    int numa = -1;  // NUMA node (OS index) holding it
    int package = -1;
    bool operator==(const Core&) const = default;
};

struct NumaNode {
    int os_index = 0;
    CpuSet cpus;          // empty for memory-only nodes
    uint64_t memory = 0;  // bytes
    bool operator==(const NumaNode&) const = default;
};

struct Package {
    int index = 0;
    CpuSet cpus;
    bool operator==(const Package&) const = default;
};

// This machine as hwloc loaded it, kept with a Topology read from it so that binding (Binder) does not load
// the machine a second time: a live load is most of a bound launch's own time, more on big nodes. It lives as
// long as the Topology or a Binder holds it (the agent's: the whole run, bound or not; memory only). Opaque
// outside the topology module. Not part of the value: Topologies that say the same are equal whichever load they
// came from.
class MachineLoad {
public:
    struct Hwloc;  // hwloc's topology (topology/src/hwloc_load.hpp)
    MachineLoad() = default;
    explicit MachineLoad(std::shared_ptr<const Hwloc> hwloc) : hwloc_(std::move(hwloc)) {}
    const std::shared_ptr<const Hwloc>& hwloc() const { return hwloc_; }
    bool operator==(const MachineLoad&) const { return true; }

private:
    std::shared_ptr<const Hwloc> hwloc_;
};

struct Topology {
    std::string source = "this machine";  // or the XML file it came from
    int cpus = 1;                         // PUs this process may run on (= allowed.size())
    CpuSet allowed;                       // PUs to plan with: the cgroup's, narrowed to the process binding if asked
    CpuSet process_binding;               // the CPU affinity this process inherited (empty for XML input)
    std::vector<Package> packages;
    std::vector<NumaNode> numa_nodes;
    std::vector<Core> cores;  // cores with at least one allowed PU
    std::vector<Gpu> gpus;
    std::vector<Nic> nics;
    std::vector<NetInterface> interfaces;
    MachineLoad machine;  // this machine's hwloc load; none for an XML file (discover(), discover_cached())
    bool operator==(const Topology&) const = default;
};

// How much of the machine to plan with: what the process's inherited CPU binding allows (a user's
// `taskset dlaunch ...`), or all its cgroup allows (a launcher's binding that dlaunch replaces).
enum class Scope { ProcessBinding, Cgroup };

// Discovers the machine this process runs on (hwloc, PCI and OS devices kept). Fails only when hwloc
// cannot load a topology.
Result<Topology> discover(Scope scope = Scope::ProcessBinding);

// Loads an hwloc XML export (another machine, or a test fixture). Fails for a missing or corrupt file.
Result<Topology> load_xml(const std::string& path);

// Discovers once per `key` (e.g. the Slurm job id) on this node: the first caller exports the hwloc XML to
// `cache_dir`/<key>.xml, later callers load it (much faster) and re-read only their own CPU binding.
// An unusable cache (not ours, not a regular file, corrupt) is ignored with a full discovery instead.
Result<Topology> discover_cached(const std::string& cache_dir, const std::string& key,
                                 Scope scope = Scope::ProcessBinding);

}  // namespace dlaunch::topology
