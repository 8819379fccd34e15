#include "dlaunch/plan_svg.hpp"

#include <algorithm>

#include "dlaunch/svg_canvas.hpp"

namespace dlaunch {
namespace {

using topology::Topology;

constexpr int kWidth = 960;
constexpr int kMargin = 16;
constexpr int kCoreW = 34, kCoreH = 22, kCoresPerRow = 24;
constexpr int kDevW = 132, kDevH = 34;
constexpr const char* kPalette[] = {"#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948",
                                    "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac", "#86bcb6", "#d37295"};
constexpr const char* kIdle = "#e9e9e9";
constexpr const char* kDown = "#9a9a9a";  // a NIC none of whose ports is active: unusable, not just unused

std::string colour(int rank) {
    return kPalette[rank % static_cast<int>(std::size(kPalette))];
}

// The first rank of the plan that uses a thing, or -1.
template <class Uses>
int rank_using(const LaunchPlan& plan, Uses uses) {
    for (const RankPlan& r : plan.ranks)
        if (uses(r)) return r.rank;
    return -1;
}

using Canvas = SvgCanvas;

std::string rank_attr(int rank) {
    return rank >= 0 ? " data-rank=\"" + std::to_string(rank) + "\"" : "";
}

// A NUMA node's cores, in rows; returns the height used.
int draw_cores(Canvas& c, const LaunchPlan& plan, const std::vector<const topology::Core*>& cores, int x, int y) {
    for (size_t i = 0; i < cores.size(); ++i) {
        const topology::Core& core = *cores[i];
        const int rank = rank_using(plan, [&](const RankPlan& r) { return r.cpuset.intersects(core.pus); });
        const int cx = x + static_cast<int>(i % kCoresPerRow) * (kCoreW + 4);
        const int cy = y + static_cast<int>(i / kCoresPerRow) * (kCoreH + 4);
        c.rect(cx, cy, kCoreW, kCoreH, rank >= 0 ? colour(rank) : kIdle,
               "class=\"core\" data-core=\"" + std::to_string(core.index) + "\"" + rank_attr(rank));
        c.text(cx + 4, cy + 15, std::to_string(core.index), 10);
    }
    const int rows = static_cast<int>((cores.size() + kCoresPerRow - 1) / kCoresPerRow);
    return rows * (kCoreH + 4);
}

// The box a device is drawn in: the first NUMA node (in the machine's order) it is local to; none when its
// locality is unknown. (A KNL's NIC is local to a DDR and an MCDRAM node: drawn once.)
bool local_to(const topology::PciLocation& loc, std::optional<int> numa, const Topology& topo) {
    std::optional<int> home;
    for (const topology::NumaNode& n : topo.numa_nodes)
        if (!home && loc.numa.contains(n.os_index)) home = n.os_index;
    return home == numa;
}

// The GPUs and NICs local to `numa` (none: those of unknown locality), in one row; returns the height used.
int draw_devices(Canvas& c, const LaunchPlan& plan, const Topology& topo, std::optional<int> numa, int x, int y) {
    int n = 0;
    auto place = [&](const std::string& label, const std::string& attrs, int rank, const char* unused) {
        const int dx = x + (n % 6) * (kDevW + 8), dy = y + (n / 6) * (kDevH + 6);
        c.rect(dx, dy, kDevW, kDevH, rank >= 0 ? colour(rank) : unused, attrs + rank_attr(rank));
        c.text(dx + 6, dy + 21, label, 11);
        ++n;
    };
    for (const topology::Gpu& g : topo.gpus) {
        if (!local_to(g.loc, numa, topo)) continue;
        const int rank = rank_using(plan, [&](const RankPlan& r) { return r.gpu && r.gpu->index == g.index; });
        place("GPU " + std::to_string(g.index) + " " + g.vendor,
              "class=\"gpu\" data-gpu=\"" + std::to_string(g.index) + "\"", rank, kIdle);
    }
    for (const topology::Nic& nic : topo.nics) {
        if (!local_to(nic.loc, numa, topo)) continue;
        const int rank = rank_using(plan, [&](const RankPlan& r) {
            return std::any_of(r.nics.begin(), r.nics.end(), [&](const RankNic& m) { return m.name == nic.name; });
        });
        const bool up = nic.ports.empty() || std::any_of(nic.ports.begin(), nic.ports.end(),
                                                         [](const topology::NicPort& p) { return p.active(); });
        place("NIC " + nic.name + (up ? "" : " (port down)"),
              "class=\"nic\" data-nic=\"" + xml_escape(nic.name) + "\"" + (up ? "" : " data-state=\"down\""), rank,
              up ? kIdle : kDown);
    }
    return n == 0 ? 0 : ((n + 5) / 6) * (kDevH + 6);
}

// One box per NUMA node (or one for the machine when it has none); returns the y below it.
// A box titled `title` with `cores` and the devices local to `numa`; returns the y below it.
int draw_box(Canvas& c, const LaunchPlan& plan, const Topology& topo, const std::string& title,
             const std::vector<const topology::Core*>& cores, std::optional<int> numa, int y) {
    const int inner = y + 24;
    int h = draw_cores(c, plan, cores, kMargin + 10, inner);
    h += draw_devices(c, plan, topo, numa, kMargin + 10, inner + h + (h ? 6 : 0));
    c.rect(kMargin, y, kWidth - 2 * kMargin, h + 36, "none", "class=\"numa\"");
    c.text(kMargin + 8, y + 16, title, 13);
    return y + h + 36 + 10;
}

int draw_numa(Canvas& c, const LaunchPlan& plan, const Topology& topo, const topology::NumaNode& n, int y) {
    std::vector<const topology::Core*> cores;
    for (const topology::Core& core : topo.cores)
        if (core.numa == n.os_index) cores.push_back(&core);
    std::string title = "NUMA node " + std::to_string(n.os_index);
    if (n.memory > 0) title += " (" + std::to_string(n.memory >> 30) + " GiB)";
    return draw_box(c, plan, topo, title, cores, n.os_index, y);
}

// Cores without a NUMA node and devices of unknown locality (none on most machines).
int draw_rest(Canvas& c, const LaunchPlan& plan, const Topology& topo, int y) {
    std::vector<const topology::Core*> cores;
    for (const topology::Core& core : topo.cores)
        if (std::none_of(topo.numa_nodes.begin(), topo.numa_nodes.end(),
                         [&](auto& n) { return n.os_index == core.numa; }))
            cores.push_back(&core);
    Canvas probe(kWidth);
    if (cores.empty() && draw_devices(probe, plan, topo, std::nullopt, 0, 0) == 0) return y;
    return draw_box(c, plan, topo, topo.numa_nodes.empty() ? "machine" : "elsewhere (locality unknown)", cores,
                    std::nullopt, y);
}

int draw_legend(Canvas& c, const LaunchPlan& plan, int y) {
    for (const RankPlan& r : plan.ranks) {
        std::string what = "rank " + std::to_string(r.rank) + " (local " + std::to_string(r.local_rank) + ")";
        if (!r.cpuset.empty()) what += ": CPUs " + r.cpuset.to_list();
        if (r.gpu) what += ", GPU " + std::to_string(r.gpu->index);
        for (const RankNic& n : r.nics) what += ", NIC " + n.name + ":" + std::to_string(n.port);
        c.rect(kMargin, y, 14, 14, colour(r.rank), "class=\"rank\"" + rank_attr(r.rank));
        c.text(kMargin + 20, y + 12, what, 12);
        y += 20;
    }
    return y;
}

}  // namespace

std::string plan_to_svg(const LaunchPlan& plan, const Topology& topo) {
    Canvas c(kWidth);
    // The heading names the node; where the topology came from (a long cache path) goes on a line of its own,
    // cut at the start when it does not fit.
    std::string heading = "dlaunch: " + (plan.hostname.empty() ? std::string("topology") : plan.hostname);
    if (!plan.ranks.empty())
        heading += ", node " + std::to_string(plan.node_rank) + " of " + std::to_string(plan.nnodes) + ", " +
                   std::to_string(plan.ranks.size()) + " ranks of " + std::to_string(plan.world_size);
    c.text(kMargin, 22, heading, 14);
    c.text(kMargin, 40, "topology: " + fit_width(topo.source, 11, kWidth - 2 * kMargin - 66), 11);
    int y = 52;
    for (const topology::NumaNode& n : topo.numa_nodes) {
        Canvas probe(kWidth);
        const bool has_cores =
            std::any_of(topo.cores.begin(), topo.cores.end(), [&](auto& core) { return core.numa == n.os_index; });
        if (has_cores || draw_devices(probe, plan, topo, n.os_index, 0, 0) > 0) y = draw_numa(c, plan, topo, n, y);
    }
    y = draw_rest(c, plan, topo, y);
    y = draw_legend(c, plan, y + 4);
    return c.done(y + kMargin, heading + " (topology: " + topo.source + ")");
}

std::string topology_to_svg(const Topology& topo) {
    return plan_to_svg(LaunchPlan{}, topo);
}

}  // namespace dlaunch
