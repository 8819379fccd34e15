#include "dlaunch/topology/binder.hpp"

#include <hwloc.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "hwloc_load.hpp"

namespace dlaunch::topology {

struct Binder::Impl {
    std::shared_ptr<const MachineLoad::Hwloc> machine;
};

class Binder::Prepared {
public:
    hwloc_bitmap_t cpus = nullptr;  // null: leave CPU binding alone
    hwloc_bitmap_t mems = nullptr;  // null: leave memory policy alone
    std::string cpus_text, mems_text;
    ~Prepared() {
        if (cpus) hwloc_bitmap_free(cpus);
        if (mems) hwloc_bitmap_free(mems);
    }
};

Binder::Binder(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Binder::~Binder() = default;
Binder::Binder(Binder&&) noexcept = default;
Binder& Binder::operator=(Binder&&) noexcept = default;

Result<Binder> Binder::for_this_machine(const Topology& planned) {
    auto impl = std::make_unique<Impl>();
    impl->machine = planned.machine.hwloc();
    if (impl->machine) return Binder(std::move(impl));
    // No I/O devices: binding needs only CPUs and NUMA nodes.
    hwloc_topology_t topo = nullptr;
    if (hwloc_topology_init(&topo) != 0) return Error{"bind: hwloc: cannot initialise", "use --bind none"};
    if (hwloc_topology_load(topo) != 0) {
        hwloc_topology_destroy(topo);
        return Error{"bind: hwloc: cannot load this machine's topology", "use --bind none"};
    }
    impl->machine = std::make_shared<const MachineLoad::Hwloc>(topo);
    return Binder(std::move(impl));
}

std::shared_ptr<const Binder::Prepared> Binder::prepare(const CpuSet& cpus, const CpuSet& mems) const {
    auto p = std::make_shared<Prepared>();
    if (!cpus.empty()) {
        p->cpus = hwloc_bitmap_alloc();
        for (int id : cpus) hwloc_bitmap_set(p->cpus, static_cast<unsigned>(id));
        p->cpus_text = cpus.to_list();
    }
    if (!mems.empty()) {
        p->mems = hwloc_bitmap_alloc();
        for (int id : mems) hwloc_bitmap_set(p->mems, static_cast<unsigned>(id));
        p->mems_text = mems.to_list();
    }
    return p;
}

const char* Binder::apply(const Prepared& p, char* buf, size_t size) const {
    if (p.cpus && hwloc_set_cpubind(impl_->machine->t, p.cpus, HWLOC_CPUBIND_PROCESS) != 0) {
        std::snprintf(buf, size, "cpu binding to %s: %s", p.cpus_text.c_str(), std::strerror(errno));
        return buf;
    }
    if (p.mems && hwloc_set_membind(impl_->machine->t, p.mems, HWLOC_MEMBIND_BIND,
                                    HWLOC_MEMBIND_PROCESS | HWLOC_MEMBIND_BYNODESET) != 0) {
        std::snprintf(buf, size, "memory binding to NUMA node(s) %s: %s", p.mems_text.c_str(), std::strerror(errno));
        return buf;
    }
    return "";
}

}  // namespace dlaunch::topology
