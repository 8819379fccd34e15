#include "dlaunch/topology/binding.hpp"

#include <algorithm>
#include <map>

namespace dlaunch::topology {
namespace {

// GPUs in the order to hand them out when there are more than ranks: one per package in turn, and within
// a package one per NUMA locality in turn, so that 2 ranks on a 2-socket node land on both sockets.
std::vector<int> spread_order(const Topology& topo, const std::vector<int>& gpus) {
    std::map<int, std::map<std::string, std::vector<int>>> by_package;  // package -> numa list -> gpus
    for (int g : gpus) {
        const auto& loc = topo.gpus[static_cast<size_t>(g)].loc;
        by_package[loc.package][loc.numa.to_list()].push_back(g);
    }
    std::vector<int> order;
    std::map<int, size_t> numa_turn;
    std::map<std::pair<int, std::string>, size_t> taken;
    while (order.size() < gpus.size()) {
        for (auto& [pkg, groups] : by_package) {
            // The next group of this package that still has a GPU, starting at its turn.
            for (size_t tries = 0; tries < groups.size(); ++tries) {
                auto it = std::next(groups.begin(), static_cast<long>(numa_turn[pkg]++ % groups.size()));
                auto& used = taken[{pkg, it->first}];
                if (used < it->second.size()) {
                    order.push_back(it->second[used++]);
                    break;
                }
            }
        }
    }
    return order;
}

struct CorePool {
    const Topology& topo;
    std::vector<bool> taken;  // by position in topo.cores

    std::vector<size_t> free_in(const CpuSet& area) const {
        std::vector<size_t> out;
        for (size_t i = 0; i < topo.cores.size(); ++i)
            if (!taken[i] && (area.empty() || area.contains(topo.cores[i].pus))) out.push_back(i);
        return out;
    }
};

CpuSet numa_of(const Topology& topo, const CpuSet& cpus) {
    CpuSet mems;
    for (auto& n : topo.numa_nodes)
        if (n.cpus.intersects(cpus)) mems.insert(n.os_index);
    return mems;
}

CpuSet package_cpus(const Topology& topo, int package) {
    for (auto& p : topo.packages)
        if (p.index == package) return p.cpus;
    return {};
}

}  // namespace

std::string port_name(const Topology& topo, const NicPortRef& ref) {
    return topo.nics[static_cast<size_t>(ref.nic)].name + ":" + std::to_string(ref.port);
}

namespace {

// GPUs: spread over the machine when there are enough, shared round-robin when not.
void assign_gpus(const Topology& topo, const BindRequest& req, BindingPlan& plan) {
    const int n = req.ranks;
    const int k = static_cast<int>(req.gpus.size());
    if (k > 0 && n <= k) {
        auto order = spread_order(topo, req.gpus);
        std::vector<int> chosen(order.begin(), order.begin() + n);
        std::sort(chosen.begin(), chosen.end());
        for (int r = 0; r < n; ++r) plan.ranks[static_cast<size_t>(r)].gpu = chosen[static_cast<size_t>(r)];
        if (n < k)
            plan.warnings.push_back("gpu: " + std::to_string(k) + " GPUs usable, " + std::to_string(n) +
                                    " rank(s): " + std::to_string(k - n) + " GPU(s) stay idle");
    } else if (k > 0) {
        for (int r = 0; r < n; ++r) plan.ranks[static_cast<size_t>(r)].gpu = req.gpus[static_cast<size_t>(r * k / n)];
        plan.warnings.push_back("gpu: " + std::to_string(n) + " ranks share " + std::to_string(k) +
                                " GPU(s); scripts that call torch.cuda.set_device(LOCAL_RANK) fail for LOCAL_RANK >= " +
                                std::to_string(k) + " (use LOCAL_RANK % torch.cuda.device_count())");
    }
}

// Active NIC ports (a port that is down is said once and never used).
std::vector<NicPortRef> active_ports(const Topology& topo, BindingPlan& plan) {
    std::vector<NicPortRef> ports;
    for (size_t i = 0; i < topo.nics.size(); ++i)
        for (auto& p : topo.nics[i].ports) {
            if (p.active())
                ports.push_back({static_cast<int>(i), p.number});
            else
                plan.warnings.push_back("nic: " + topo.nics[i].name + " port " + std::to_string(p.number) +
                                        " is down (state " + std::to_string(p.state) + "); not used");
        }
    return ports;
}

// Each rank's home area: its GPU's locality, else a NUMA node (ranks spread over them).
std::vector<CpuSet> home_areas(const Topology& topo, const BindingPlan& plan, int n) {
    std::vector<CpuSet> home(static_cast<size_t>(n));
    std::vector<CpuSet> numa_areas;
    for (auto& node : topo.numa_nodes) {
        CpuSet usable;
        for (auto& c : topo.cores)
            if (node.cpus.contains(c.pus)) usable.insert(c.pus);
        if (!usable.empty()) numa_areas.push_back(usable);
    }
    for (int r = 0; r < n; ++r) {
        auto& rb = plan.ranks[static_cast<size_t>(r)];
        if (rb.gpu)
            home[static_cast<size_t>(r)] = topo.gpus[static_cast<size_t>(*rb.gpu)].loc.locality.intersect(topo.allowed);
        else if (!numa_areas.empty())
            home[static_cast<size_t>(r)] =
                numa_areas[static_cast<size_t>(r) * numa_areas.size() / static_cast<size_t>(n)];
    }
    return home;
}

// Whole cores per rank near its home; ranks sharing a home split it, borrowing elsewhere when short.
Status assign_cores(const Topology& topo, const BindRequest& req, BindingPlan& plan) {
    const int n = req.ranks;
    const int cores = static_cast<int>(topo.cores.size());
    const int per_rank_wanted = req.cores_per_rank.value_or(1);
    if (n * per_rank_wanted > cores) {
        if (req.cores_per_rank)
            return Error{"bind: --cpus-per-rank " + std::to_string(*req.cores_per_rank) + ": " + std::to_string(n) +
                             " ranks need " + std::to_string(n * *req.cores_per_rank) + " cores, " +
                             std::to_string(cores) + " usable",
                         "lower --cpus-per-rank or the number of ranks"};
        return Error{"bind: " + std::to_string(n) + " ranks but only " + std::to_string(cores) +
                         " whole cores usable on this node",
                     "use fewer ranks, or --bind none to let ranks share cores"};
    }
    std::vector<CpuSet> home = home_areas(topo, plan, n);
    // Ranks sharing a home split it; smaller homes first so nested localities stay disjoint.
    std::map<std::string, std::vector<int>> groups;
    for (int r = 0; r < n; ++r) groups[home[static_cast<size_t>(r)].to_list()].push_back(r);
    std::vector<std::pair<CpuSet, std::vector<int>>> ordered;
    for (auto& [key, ranks] : groups) ordered.push_back({home[static_cast<size_t>(ranks.front())], ranks});
    std::stable_sort(ordered.begin(), ordered.end(), [](auto& a, auto& b) { return a.first.size() < b.first.size(); });

    CorePool pool{topo, std::vector<bool>(topo.cores.size(), false)};
    for (auto& [area, ranks] : ordered) {
        auto free = pool.free_in(area);
        const int m = static_cast<int>(ranks.size());
        int per = req.cores_per_rank.value_or(std::max(1, static_cast<int>(free.size()) / m));
        for (int i = 0; i < m; ++i) {
            const int r = ranks[static_cast<size_t>(i)];
            auto& rb = plan.ranks[static_cast<size_t>(r)];
            auto take = [&](size_t c) {
                pool.taken[c] = true;
                rb.cpus.insert(topo.cores[c].pus);
            };
            int got = 0;
            for (size_t pos = static_cast<size_t>(i * per); got < per && pos < free.size(); ++pos, ++got)
                take(free[pos]);
            if (got < per) {
                // Not enough room near the GPU (or NUMA node): borrow free cores, same package first.
                int pkg = rb.gpu ? topo.gpus[static_cast<size_t>(*rb.gpu)].loc.package : -1;
                CpuSet same_package = pkg >= 0 ? package_cpus(topo, pkg) : CpuSet{};
                for (const CpuSet* scope : std::initializer_list<const CpuSet*>{&same_package, nullptr}) {
                    if (scope && scope->empty()) continue;
                    for (size_t c : pool.free_in(scope ? *scope : CpuSet{})) {
                        if (got == per) break;
                        take(c);
                        ++got;
                    }
                }
                plan.warnings.push_back("bind: rank " + std::to_string(r) + ": not enough free cores near its " +
                                        std::string(rb.gpu ? "GPU" : "NUMA node") + "; using cores elsewhere");
            }
            rb.mems = numa_of(topo, rb.cpus);
        }
    }
    return Ok{};
}

// NIC per rank: best class from its GPU (or its NUMA nodes), then the least used.
void assign_nics(const Topology& topo, const std::vector<NicPortRef>& ports, int gpus, BindingPlan& plan) {
    const int n = static_cast<int>(plan.ranks.size());
    const int k = gpus;
    // Ranks with the
    // closest NICs choose first, so a rank with a PIX NIC is not crowded out by one that has none.
    auto nic_class = [&](const RankBinding& rb, const NicPortRef& port) {
        const Nic& nic = topo.nics[static_cast<size_t>(port.nic)];
        if (rb.gpu) return affinity(topo.gpus[static_cast<size_t>(*rb.gpu)].loc, nic.loc);
        if (!rb.mems.empty() && !nic.loc.numa.empty() && rb.mems.contains(nic.loc.numa)) return Affinity::NODE;
        return Affinity::SYS;
    };
    std::vector<std::pair<Affinity, int>> by_best;
    for (int r = 0; r < n && !ports.empty(); ++r) {
        Affinity best = Affinity::SYS;
        for (auto& p : ports) best = std::min(best, nic_class(plan.ranks[static_cast<size_t>(r)], p));
        by_best.push_back({best, r});
    }
    std::stable_sort(by_best.begin(), by_best.end(), [](auto& a, auto& b) { return a.first < b.first; });
    std::vector<int> load(ports.size(), 0);
    std::map<Affinity, std::string> far;  // class -> ranks whose GPU has no closer NIC
    for (auto [best_class, r] : by_best) {
        auto& rb = plan.ranks[static_cast<size_t>(r)];
        std::optional<size_t> pick;
        for (size_t p = 0; p < ports.size(); ++p)
            if (nic_class(rb, ports[p]) == best_class && (!pick || load[p] < load[*pick])) pick = p;
        rb.nic = ports[*pick];
        rb.nic_affinity = best_class;
        ++load[*pick];
        if (rb.gpu && best_class >= Affinity::NODE)
            far[best_class] += (far[best_class].empty() ? "" : ",") + std::to_string(r);
    }
    for (auto& [cls, ranks] : far)
        plan.warnings.push_back("nic: rank(s) " + ranks + ": the closest usable NIC port is " + to_string(cls) +
                                " from the rank's GPU");
    if (k > 0 && !ports.empty() && ports.size() < static_cast<size_t>(std::min(n, k)))
        plan.warnings.push_back("nic: " + std::to_string(std::min(n, k)) + " GPU rank(s) share " +
                                std::to_string(ports.size()) + " usable NIC port(s)");
}

}  // namespace

// The package whose PUs hold most of `area` (its first one when they tie).
int package_of(const Topology& topo, const CpuSet& area) {
    int best = -1;
    size_t most = 0;
    for (auto& p : topo.packages)
        if (size_t n = p.cpus.intersect(area).size(); n > most) best = p.index, most = n;
    return best;
}

// Every rank on all usable cores of its home's NUMA node(s) or package, shared with the ranks of the same one.
void assign_shared(const Topology& topo, const BindRequest& req, BindingPlan& plan) {
    std::vector<CpuSet> home = home_areas(topo, plan, req.ranks);
    for (size_t r = 0; r < plan.ranks.size(); ++r) {
        CpuSet area;
        if (req.mode == BindMode::Socket)
            area = package_cpus(topo, package_of(topo, home[r]));
        else
            for (auto& n : topo.numa_nodes)
                if (n.cpus.intersects(home[r])) area.insert(n.cpus);
        auto& rb = plan.ranks[r];
        for (auto& c : topo.cores)
            if (area.contains(c.pus)) rb.cpus.insert(c.pus);
        rb.mems = numa_of(topo, rb.cpus);
        if (rb.cpus.empty())
            plan.warnings.push_back("bind: rank " + std::to_string(r) + ": no core this job may use on its " +
                                    (req.mode == BindMode::Socket ? "socket" : "NUMA node") + "; not bound");
    }
}

std::string bind_mode_name(BindMode mode) {
    switch (mode) {
        case BindMode::None: return "none";
        case BindMode::Closest: return "closest";
        case BindMode::Numa: return "numa";
        case BindMode::Socket: return "socket";
    }
    return "none";
}

std::optional<BindMode> parse_bind_mode(const std::string& name) {
    for (BindMode m : {BindMode::None, BindMode::Closest, BindMode::Numa, BindMode::Socket})
        if (bind_mode_name(m) == name) return m;
    return std::nullopt;
}

Result<BindingPlan> plan_binding(const Topology& topo, const BindRequest& req) {
    BindingPlan plan;
    plan.ranks.resize(static_cast<size_t>(req.ranks));
    assign_gpus(topo, req, plan);
    std::vector<NicPortRef> ports = active_ports(topo, plan);
    plan.usable_ports = ports;
    if (req.mode == BindMode::Closest)
        if (auto s = assign_cores(topo, req, plan); !s) return s.error();
    if (req.mode == BindMode::Numa || req.mode == BindMode::Socket) assign_shared(topo, req, plan);
    assign_nics(topo, ports, static_cast<int>(req.gpus.size()), plan);
    return plan;
}

}  // namespace dlaunch::topology
