#include "dlaunch/topology/describe.hpp"

#include <sstream>

#include "dlaunch/topology/affinity.hpp"

namespace dlaunch::topology {

std::string describe(const Topology& t) {
    std::ostringstream out;
    out << "topology of " << t.source << "\n";
    out << "cpus: " << t.allowed.to_list() << " (" << t.cpus << " PUs, " << t.cores.size() << " cores, "
        << t.packages.size() << " package(s))\n";
    out << "numa nodes:\n";
    for (auto& n : t.numa_nodes)
        out << "  " << n.os_index << ": cpus " << (n.cpus.empty() ? "(none)" : n.cpus.to_list()) << ", "
            << n.memory / (1024 * 1024 * 1024) << " GiB\n";
    out << "gpus:" << (t.gpus.empty() ? " none" : "") << "\n";
    for (auto& g : t.gpus) {
        out << "  " << g.index << ": " << g.loc.pci << " " << g.vendor << (g.model.empty() ? "" : " " + g.model)
            << ", numa " << (g.loc.numa.empty() ? "?" : g.loc.numa.to_list()) << ", cpus "
            << (g.loc.locality.empty() ? "?" : g.loc.locality.to_list());
        if (g.accessible == false) out << " [hidden by device cgroup]";
        out << "\n";
    }
    out << "rdma nics:" << (t.nics.empty() ? " none" : "") << "\n";
    for (auto& n : t.nics) {
        out << "  " << n.name << ": " << n.loc.pci << (n.netdev.empty() ? "" : ", netdev " + n.netdev) << ", numa "
            << (n.loc.numa.empty() ? "?" : n.loc.numa.to_list()) << ", ports";
        for (auto& p : n.ports)
            out << " " << p.number << (p.active() ? " (active)" : " (down, state " + std::to_string(p.state) + ")");
        out << "\n";
    }
    out << "other network interfaces:" << (t.interfaces.empty() ? " none" : "") << "\n";
    for (auto& i : t.interfaces) out << "  " << i.name << ": " << i.loc.pci << "\n";
    if (!t.gpus.empty() && !t.nics.empty()) {
        out << "gpu x nic affinity (PIX best ... SYS worst):\n      ";
        for (auto& n : t.nics) out << " " << n.name;
        out << "\n";
        for (auto& g : t.gpus) {
            std::string label = "  gpu" + std::to_string(g.index);
            out << label << std::string(label.size() < 6 ? 6 - label.size() : 0, ' ');
            for (auto& n : t.nics) {
                std::string cls = to_string(affinity(g.loc, n.loc));
                out << " " << cls << std::string(n.name.size() > cls.size() ? n.name.size() - cls.size() : 0, ' ');
            }
            out << "\n";
        }
    }
    return out.str();
}

}  // namespace dlaunch::topology
