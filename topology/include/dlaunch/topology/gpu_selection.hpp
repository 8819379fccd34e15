// Which GPUs this node's workers may use, and how CUDA in a worker will number them.
//
// One vendor per node: the one with most GPUs (NVIDIA on a tie); others are left out with a warning.
// Its visibility variable is CUDA_VISIBLE_DEVICES (NVIDIA) or HIP_VISIBLE_DEVICES (AMD; assumes ROCm
// numbers devices in PCI order).
// usable = exists ∩ accessible (device cgroup) ∩ <visibility variable> ∩ Slurm's allocation
//          (SLURM_STEP_GPUS, else SLURM_JOB_GPUS), then --devices picks among those.
// CUDA numbers the devices a process can open (the cgroup-visible ones); with CUDA_DEVICE_ORDER=PCI_BUS_ID
// that numbering is PCI order. Incoming CUDA_VISIBLE_DEVICES indices are read in that numbering, and so
// are the values dlaunch writes. Slurm's GPU lists are device minors (/dev/nvidiaN) where known.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "dlaunch/result.hpp"
#include "dlaunch/topology/topology.hpp"

namespace dlaunch::topology {

struct GpuSelection {
    std::string visible_var = "CUDA_VISIBLE_DEVICES";  // the vendor's visibility variable
    std::vector<int> usable;                           // indices into Topology::gpus, PCI order
    std::vector<int> cuda_visible_base;    // the GPUs CUDA enumerates in a worker (its index = CUDA's index)
    bool cuda_visible_unmappable = false;  // CUDA_VISIBLE_DEVICES holds UUIDs: leave GPUs alone
    std::vector<std::string> warnings;
};

// `env` is the inherited environment (CUDA_VISIBLE_DEVICES, SLURM_STEP_GPUS, SLURM_JOB_GPUS);
// `devices` is --devices: indices among the GPUs left after the other filters. Errors name `option`, the
// spelling the user gave (--devices, dlaunch-paddle's --gpus, --dist-launch=devices).
Result<GpuSelection> select_gpus(const Topology& topo, const std::map<std::string, std::string>& env,
                                 const std::optional<std::vector<int>>& devices,
                                 const std::string& option = "--devices");

// The CUDA_VISIBLE_DEVICES value that makes CUDA index i the i-th GPU of `order` (Topology::gpus
// indices), given what CUDA enumerates (`base`).
std::string cuda_visible_devices(const std::vector<int>& order, const std::vector<int>& base);

}  // namespace dlaunch::topology
