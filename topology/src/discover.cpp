// Discovery of the running machine through hwloc. Design note: this is the only file that sees hwloc
// types; it keeps PCI devices (hwloc's default I/O filter drops them) so GPUs can be found as PCI
// devices: Debian's hwloc has no CUDA/NVML plugin.
//
// Caveats:
// - GPUs are recognised by PCI vendor and class (NVIDIA 0x10de, AMD 0x1002; class 0x0300 VGA or 0x0302
//   3D). NVSwitches (class 0x0680) are not GPUs.
// - `cpus` counts the PUs this process is allowed to run on (cgroup and inherited affinity), not all PUs.
#include <hwloc.h>

#include <cstdio>
#include <memory>

#include "dlaunch/topology/topology.hpp"

namespace dlaunch::topology {
namespace {

struct TopologyHandle {
    hwloc_topology_t topo = nullptr;
    ~TopologyHandle() {
        if (topo) hwloc_topology_destroy(topo);
    }
};

std::string pci_address(const hwloc_obj_t obj) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%04x:%02x:%02x.%01x", obj->attr->pcidev.domain, obj->attr->pcidev.bus,
                  obj->attr->pcidev.dev, obj->attr->pcidev.func);
    return buf;
}

}  // namespace

Result<Topology> discover() {
    TopologyHandle h;
    if (hwloc_topology_init(&h.topo) != 0)
        return Error{"topology: hwloc: cannot initialise", "check that libhwloc is installed"};
    hwloc_topology_set_io_types_filter(h.topo, HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
    if (hwloc_topology_load(h.topo) != 0)
        return Error{"topology: hwloc: cannot load this machine's topology", "run lstopo to see what hwloc reports"};

    Topology t;
    int allowed = hwloc_bitmap_weight(hwloc_topology_get_allowed_cpuset(h.topo));
    hwloc_bitmap_t bound = hwloc_bitmap_alloc();
    if (hwloc_get_cpubind(h.topo, bound, HWLOC_CPUBIND_PROCESS) == 0) {
        hwloc_bitmap_and(bound, bound, hwloc_topology_get_allowed_cpuset(h.topo));
        int w = hwloc_bitmap_weight(bound);
        if (w > 0) allowed = w;
    }
    hwloc_bitmap_free(bound);
    t.cpus = allowed > 0 ? allowed : 1;

    for (hwloc_obj_t pci = hwloc_get_next_pcidev(h.topo, nullptr); pci; pci = hwloc_get_next_pcidev(h.topo, pci)) {
        unsigned vendor = pci->attr->pcidev.vendor_id;
        unsigned cls = pci->attr->pcidev.class_id;
        if ((cls != 0x0300 && cls != 0x0302) || (vendor != 0x10de && vendor != 0x1002)) continue;
        t.gpus.push_back({static_cast<int>(t.gpus.size()), pci_address(pci), vendor == 0x10de ? "nvidia" : "amd"});
    }
    return t;
}

}  // namespace dlaunch::topology
