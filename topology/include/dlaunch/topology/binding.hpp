// The binding planner: per local rank a GPU (or none), its NIC port, a cpuset of whole cores local to
// its GPU and disjoint from the other ranks', and the memory (NUMA) nodes of those cores. Pure.
//
// Rules:
// - GPUs: ranks <= GPUs: one GPU each, chosen across packages and NUMA nodes first, then in PCI order;
//   ranks > GPUs: consecutive ranks share a GPU (warning).
// - Cores: ranks whose GPUs share a locality split its free cores evenly (or take --cpus-per-rank each);
//   without GPUs, ranks are spread over the NUMA nodes. A locality too small borrows free cores from the
//   same package, then anywhere (warning).
// - NIC: among active ports, the best affinity class to the rank's GPU (or NUMA node), then the least
//   used one. Down ports are skipped (warning). NCCL gets every usable port.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "dlaunch/result.hpp"
#include "dlaunch/topology/affinity.hpp"
#include "dlaunch/topology/topology.hpp"

namespace dlaunch::topology {

// Closest: each rank on whole cores of its own near its GPU (ranks sharing a locality split it).
// Numa, Socket: each rank on every usable core of its GPU's NUMA node(s) or package, shared with the ranks
// of the same one (torchrun's --numa-binding node and socket); without a GPU, a NUMA node in turn.
enum class BindMode { None, Closest, Numa, Socket };

// "none", "closest", "numa", "socket"; parse_bind_mode() is its inverse (nullopt for any other word).
std::string bind_mode_name(BindMode mode);
std::optional<BindMode> parse_bind_mode(const std::string& name);

struct BindRequest {
    int ranks = 1;
    BindMode mode = BindMode::Closest;
    std::optional<int> cores_per_rank;  // --cpus-per-rank: whole cores per rank
    std::vector<int> gpus;              // usable GPUs (Topology::gpus indices), from select_gpus
};

struct NicPortRef {
    int nic = 0;  // index into Topology::nics
    int port = 1;
    bool operator==(const NicPortRef&) const = default;
};

struct RankBinding {
    std::optional<int> gpu;  // index into Topology::gpus
    std::optional<NicPortRef> nic;
    std::optional<Affinity> nic_affinity;  // class between the GPU (or cores) and the NIC
    CpuSet cpus;                           // empty with BindMode::None
    CpuSet mems;                           // NUMA nodes; empty with BindMode::None
    bool operator==(const RankBinding&) const = default;
};

struct BindingPlan {
    std::vector<RankBinding> ranks;
    std::vector<NicPortRef> usable_ports;  // every active port on the node, for NCCL_IB_HCA
    std::vector<std::string> warnings;
};

// Fails (usage errors) when the ranks cannot get whole cores: more ranks than usable cores, or
// --cpus-per-rank that does not fit.
Result<BindingPlan> plan_binding(const Topology& topo, const BindRequest& request);

// "mlx5_0:1"
std::string port_name(const Topology& topo, const NicPortRef& ref);

}  // namespace dlaunch::topology
