#include "dlaunch/topology/affinity.hpp"

namespace dlaunch::topology {

Affinity affinity(const PciLocation& a, const PciLocation& b) {
    if (a.bridges.empty() || b.bridges.empty() || a.bridges.front() != b.bridges.front()) {
        // Different root complexes: the NUMA node decides.
        return !a.numa.empty() && a.numa == b.numa ? Affinity::NODE : Affinity::SYS;
    }
    size_t common = 0;
    while (common < a.bridges.size() && common < b.bridges.size() && a.bridges[common] == b.bridges[common]) ++common;
    if (common == 1) return Affinity::PHB;  // only the host bridge is shared
    // Below the lowest common PCI bridge: one downstream port on each side means one switch.
    size_t below = (a.bridges.size() - common) + (b.bridges.size() - common);
    return below <= 2 ? Affinity::PIX : Affinity::PXB;
}

std::string to_string(Affinity a) {
    switch (a) {
        case Affinity::PIX: return "PIX";
        case Affinity::PXB: return "PXB";
        case Affinity::PHB: return "PHB";
        case Affinity::NODE: return "NODE";
        case Affinity::SYS: return "SYS";
    }
    return "?";
}

}  // namespace dlaunch::topology
