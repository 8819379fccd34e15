// Topology and binding tests on real machines' hwloc exports (tests/data/topologies, see SOURCES.md).
#include "dlaunch/topology/topology.hpp"

#include <gtest/gtest.h>
#include <sched.h>
#include <stdlib.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "dlaunch/topology/affinity.hpp"
#include "dlaunch/topology/binder.hpp"
#include "dlaunch/topology/binding.hpp"
#include "dlaunch/topology/gpu_selection.hpp"

namespace dlaunch::topology {
namespace {

const std::string kData = DLAUNCH_TEST_DATA "/topologies/";

Topology load(const std::string& name) {
    auto t = load_xml(kData + name);
    if (!t) throw std::runtime_error(t.error().message());
    return *t;
}

std::vector<std::string> fixtures() {
    std::vector<std::string> names;
    for (auto& e : std::filesystem::directory_iterator(kData))
        if (e.path().extension() == ".xml") names.push_back(e.path().filename().string());
    std::sort(names.begin(), names.end());
    return names;
}

std::vector<int> all_usable(const Topology& t) {
    auto sel = select_gpus(t, {}, std::nullopt);
    EXPECT_TRUE(sel.ok());
    return sel->usable;
}

// The invariants every binding plan must keep.
void check_invariants(const Topology& t, const BindRequest& req, const BindingPlan& plan) {
    SCOPED_TRACE("ranks=" + std::to_string(req.ranks));
    ASSERT_EQ(plan.ranks.size(), static_cast<size_t>(req.ranks));
    const bool enough_gpus = !req.gpus.empty() && req.ranks <= static_cast<int>(req.gpus.size());
    std::set<int> gpus_seen;
    CpuSet all;
    for (int r = 0; r < req.ranks; ++r) {
        SCOPED_TRACE("rank " + std::to_string(r));
        const auto& rb = plan.ranks[static_cast<size_t>(r)];
        if (enough_gpus) {
            ASSERT_TRUE(rb.gpu);
            EXPECT_TRUE(gpus_seen.insert(*rb.gpu).second) << "GPUs must be distinct";
        }
        // The NIC has the best class available among usable ports.
        if (rb.gpu && !plan.usable_ports.empty()) {
            ASSERT_TRUE(rb.nic);
            Affinity best = Affinity::SYS;
            for (auto& p : plan.usable_ports)
                best = std::min(
                    best, affinity(t.gpus[static_cast<size_t>(*rb.gpu)].loc, t.nics[static_cast<size_t>(p.nic)].loc));
            EXPECT_EQ(affinity(t.gpus[static_cast<size_t>(*rb.gpu)].loc, t.nics[static_cast<size_t>(rb.nic->nic)].loc),
                      best);
        }
        if (req.mode == BindMode::None) continue;
        ASSERT_FALSE(rb.cpus.empty());
        EXPECT_FALSE(all.intersects(rb.cpus)) << "cpusets must be disjoint";
        all.insert(rb.cpus);
        for (auto& core : t.cores) {  // whole cores only
            EXPECT_TRUE(rb.cpus.contains(core.pus) || !rb.cpus.intersects(core.pus)) << "core " << core.index;
        }
        if (rb.gpu) {
            const CpuSet& locality = t.gpus[static_cast<size_t>(*rb.gpu)].loc.locality;
            bool spilled = false;
            for (auto& w : plan.warnings)
                if (w.find("bind: rank " + std::to_string(r) + ":") == 0) spilled = true;
            if (!locality.empty() && !spilled) {
                EXPECT_TRUE(locality.contains(rb.cpus)) << rb.cpus.to_list();
            }
        }
        CpuSet mems;
        for (auto& n : t.numa_nodes)
            if (n.cpus.intersects(rb.cpus)) mems.insert(n.os_index);
        EXPECT_EQ(rb.mems, mems);
    }
}

TEST(Fixtures, EveryFixtureLoadsAndPlansFor1_2_Half_AllGpus) {
    auto names = fixtures();
    ASSERT_GE(names.size(), 15u);
    for (auto& name : names) {
        SCOPED_TRACE(name);
        Topology t = load(name);
        EXPECT_FALSE(t.cores.empty());
        auto gpus = all_usable(t);
        int n = static_cast<int>(gpus.size());
        std::set<int> counts{1, 2};
        if (n > 0)
            counts.insert({std::max(1, n / 2), n});
        else
            counts.insert(static_cast<int>(std::max<size_t>(1, t.numa_nodes.size())));
        for (int ranks : counts) {
            for (BindMode mode : {BindMode::Closest, BindMode::None}) {
                BindRequest req{ranks, mode, std::nullopt, gpus};
                auto plan = plan_binding(t, req);
                if (mode == BindMode::Closest && ranks > static_cast<int>(t.cores.size())) {
                    ASSERT_FALSE(plan.ok());
                    continue;
                }
                ASSERT_TRUE(plan.ok()) << plan.error().message();
                check_invariants(t, req, *plan);
            }
        }
    }
}

TEST(KnownAnswers, Jrc0386EachA100PairsWithTheNicUnderItsSwitch) {
    Topology t = load("jrc0386.xml");
    ASSERT_EQ(t.gpus.size(), 4u);
    ASSERT_EQ(t.nics.size(), 4u);
    for (auto& g : t.gpus) {
        int pix = 0;
        for (auto& n : t.nics) {
            Affinity a = affinity(g.loc, n.loc);
            EXPECT_TRUE(a == Affinity::PIX || a == Affinity::SYS) << g.loc.pci << " " << n.name;
            if (a == Affinity::PIX) {
                ++pix;
                EXPECT_EQ(g.loc.numa, n.loc.numa);
            }
        }
        EXPECT_EQ(pix, 1) << g.loc.pci;
    }
}

TEST(KnownAnswers, Jrc0386RanksWithALiveSwitchNicGetIt) {
    Topology t = load("jrc0386.xml");  // mlx5_0 and mlx5_1 are down in this export
    auto plan = plan_binding(t, {4, BindMode::Closest, std::nullopt, all_usable(t)});
    ASSERT_TRUE(plan.ok());
    ASSERT_EQ(plan->usable_ports.size(), 2u);
    for (auto& rb : plan->ranks) {
        const Nic& nic = t.nics[static_cast<size_t>(rb.nic->nic)];
        const bool own_switch_nic_alive = nic.loc.numa == t.gpus[static_cast<size_t>(*rb.gpu)].loc.numa;
        EXPECT_EQ(rb.nic_affinity, own_switch_nic_alive ? Affinity::PIX : Affinity::SYS);
    }
    EXPECT_NE(std::find(plan->warnings.begin(), plan->warnings.end(), "nic: mlx5_0 port 1 is down (state 1); not used"),
              plan->warnings.end());
}

TEST(KnownAnswers, Mel2001TwoGpusShareEachNic) {
    Topology t = load("mel2001.xml");
    ASSERT_EQ(t.gpus.size(), 4u);
    ASSERT_EQ(t.nics.size(), 2u);
    for (auto& nic : t.nics)
        for (auto& p : nic.ports) p.state = 4;  // as on a day both links are up
    auto plan = plan_binding(t, {4, BindMode::Closest, std::nullopt, all_usable(t)});
    ASSERT_TRUE(plan.ok());
    std::map<int, int> per_nic;
    for (auto& rb : plan->ranks) ++per_nic[rb.nic->nic];
    EXPECT_EQ(per_nic, (std::map<int, int>{{0, 2}, {1, 2}}));
    // Each NIC's own switch GPU gets it at PIX.
    int pix = 0;
    for (auto& rb : plan->ranks) pix += rb.nic_affinity == Affinity::PIX;
    EXPECT_EQ(pix, 2);
}

TEST(KnownAnswers, Mel2001WithOneNicDownEveryRankUsesTheOther) {
    Topology t = load("mel2001.xml");
    auto plan = plan_binding(t, {4, BindMode::Closest, std::nullopt, all_usable(t)});
    ASSERT_TRUE(plan.ok());
    for (auto& rb : plan->ranks) EXPECT_EQ(t.nics[static_cast<size_t>(rb.nic->nic)].name, "mlx5_1");
}

TEST(KnownAnswers, DGX2NvSwitchesAreNotGpus) {
    std::ifstream in(kData + "nvidiaDGX2.xml");
    std::stringstream xml;
    xml << in.rdbuf();
    ASSERT_NE(xml.str().find("pci_type=\"0680 [10de:"), std::string::npos) << "the fixture has NVSwitches";
    Topology t = load("nvidiaDGX2.xml");
    EXPECT_EQ(t.gpus.size(), 16u);
    for (auto& g : t.gpus) EXPECT_EQ(g.vendor, "nvidia");
    // Two levels of PCIe switches: neighbours on a leaf switch are PIX, across leaves PXB.
    EXPECT_EQ(affinity(t.gpus[0].loc, t.gpus[1].loc), Affinity::PIX);
    EXPECT_EQ(affinity(t.gpus[0].loc, t.gpus[2].loc), Affinity::PXB);
    EXPECT_EQ(affinity(t.gpus[0].loc, t.gpus[8].loc), Affinity::SYS);
}

TEST(KnownAnswers, AmdComputeGpusCountButServerBoardGraphicsDoesNot) {
    EXPECT_EQ(load("epyc-corona.xml").gpus.size(), 4u);  // 4 MI50 (Vega 20) with OpenCL devices
    auto old = load("24em64t-2n6c2t-pci.xml");           // 3 Teslas and an ATI ES1000 BMC chip
    EXPECT_EQ(old.gpus.size(), 3u);
    for (auto& g : old.gpus) EXPECT_EQ(g.vendor, "nvidia");
}

TEST(Binding, FewerRanksThanGpusSpreadAcrossSockets) {
    Topology t = load("g4dnmetal.xml");  // 8 T4: 4 per socket
    auto plan = plan_binding(t, {2, BindMode::Closest, std::nullopt, all_usable(t)});
    ASSERT_TRUE(plan.ok());
    int p0 = t.gpus[static_cast<size_t>(*plan->ranks[0].gpu)].loc.package;
    int p1 = t.gpus[static_cast<size_t>(*plan->ranks[1].gpu)].loc.package;
    EXPECT_NE(p0, p1);
}

// torchrun's --numa-binding node and socket: every rank on all cores of its GPU's NUMA node or package.
TEST(Binding, NumaAndSocketModesShareTheGpusWholeNumaNodeOrPackage) {
    for (const char* name : {"jrc0386.xml", "mel2001.xml", "g4dnmetal.xml"}) {
        SCOPED_TRACE(name);
        Topology t = load(name);
        for (BindMode mode : {BindMode::Numa, BindMode::Socket}) {
            auto plan = plan_binding(t, {4, mode, std::nullopt, all_usable(t)});
            ASSERT_TRUE(plan.ok()) << plan.error().message();
            for (const auto& rb : plan->ranks) {
                ASSERT_TRUE(rb.gpu);
                const auto& gpu = t.gpus[static_cast<size_t>(*rb.gpu)];
                CpuSet expected;
                for (const auto& core : t.cores) {
                    bool near = false;
                    for (const auto& n : t.numa_nodes)
                        near = near || (n.cpus.contains(core.pus) && n.cpus.intersects(gpu.loc.locality));
                    if (mode == BindMode::Socket ? core.package == gpu.loc.package : near) expected.insert(core.pus);
                }
                EXPECT_EQ(rb.cpus, expected) << bind_mode_name(mode) << " rank on GPU " << *rb.gpu;
                EXPECT_FALSE(rb.mems.empty());
            }
        }
    }
    EXPECT_EQ(parse_bind_mode("socket"), BindMode::Socket);
    EXPECT_EQ(parse_bind_mode("exclusive"), std::nullopt);
}

TEST(Binding, FewerGpusThanRanksShareWithAWarning) {
    Topology t = load("cts1-pascal.xml");  // 2 P100
    auto plan = plan_binding(t, {4, BindMode::Closest, std::nullopt, all_usable(t)});
    ASSERT_TRUE(plan.ok());
    EXPECT_EQ(plan->ranks[0].gpu, 0);
    EXPECT_EQ(plan->ranks[1].gpu, 0);
    EXPECT_EQ(plan->ranks[2].gpu, 1);
    EXPECT_EQ(plan->ranks[3].gpu, 1);
    ASSERT_FALSE(plan->warnings.empty());
    EXPECT_NE(plan->warnings[0].find("4 ranks share 2 GPU(s)"), std::string::npos) << plan->warnings[0];
    check_invariants(t, {4, BindMode::Closest, std::nullopt, all_usable(t)}, *plan);
}

TEST(Binding, NoGpusSpreadsRanksOverNumaNodes) {
    Topology t = load("jrc0732.xml");  // CPU node, 8 NUMA nodes
    ASSERT_TRUE(t.gpus.empty());
    auto plan = plan_binding(t, {8, BindMode::Closest, std::nullopt, {}});
    ASSERT_TRUE(plan.ok());
    std::set<std::string> nodes;
    for (auto& rb : plan->ranks) {
        EXPECT_EQ(rb.mems.size(), 1u);
        nodes.insert(rb.mems.to_list());
    }
    EXPECT_EQ(nodes.size(), 8u);
}

TEST(Binding, CpusPerRank) {
    Topology t = load("jwc09n003.xml");
    auto plan = plan_binding(t, {4, BindMode::Closest, 3, all_usable(t)});
    ASSERT_TRUE(plan.ok());
    for (auto& rb : plan->ranks) EXPECT_EQ(rb.cpus.size(), 6u) << "3 cores with 2 hardware threads";
}

TEST(Binding, Errors) {
    Topology t = load("dp-dam01.xml");  // 48 cores
    auto too_many = plan_binding(t, {49, BindMode::Closest, std::nullopt, {}});
    ASSERT_FALSE(too_many.ok());
    EXPECT_EQ(too_many.error().message(),
              "dlaunch: bind: 49 ranks but only 48 whole cores usable on this node; use fewer ranks, or --bind none to "
              "let ranks share cores");
    auto too_wide = plan_binding(t, {4, BindMode::Closest, 13, {}});
    ASSERT_FALSE(too_wide.ok());
    EXPECT_EQ(
        too_wide.error().message(),
        "dlaunch: bind: --cpus-per-rank 13: 4 ranks need 52 cores, 48 usable; lower --cpus-per-rank or the number "
        "of ranks");
    EXPECT_TRUE(plan_binding(t, {49, BindMode::None, std::nullopt, {}}).ok());
}

TEST(XmlErrors, MissingAndCorruptFiles) {
    auto missing = load_xml("/nonexistent/topo.xml");
    ASSERT_FALSE(missing.ok());
    EXPECT_EQ(missing.error().message(),
              "dlaunch: topology: /nonexistent/topo.xml: No such file or directory; give an hwloc XML file (lstopo "
              "--of xml)");
    auto path = std::filesystem::temp_directory_path() / "dlaunch-corrupt-topology.xml";
    std::ofstream(path) << "<topology><object type=\"Machine\"";
    auto corrupt = load_xml(path.string());
    ASSERT_FALSE(corrupt.ok());
    EXPECT_NE(corrupt.error().message().find("not a valid hwloc XML topology"), std::string::npos)
        << corrupt.error().message();
    std::filesystem::remove(path);
}

// A Topology of this machine keeps hwloc's load, and the binder binds with it instead of loading the machine
// again; another machine's XML file has none. Two loads that say the same are equal.
TEST(MachineLoad, KeptForThisMachineAndUsedForBinding) {
    EXPECT_FALSE(load("jwc09n003.xml").machine.hwloc());
    // No PCI walk: hwloc's PCI plugin leaves libpciaccess's device list allocated when hwloc unloads it, which
    // LeakSanitizer reports at the end of the sanitizer build's run; this test needs no device.
    struct NoPciPlugin {
        NoPciPlugin() { ::setenv("HWLOC_PLUGINS_BLACKLIST", "hwloc_gl,hwloc_opencl,hwloc_xml_libxml,hwloc_pci", 1); }
        ~NoPciPlugin() { ::unsetenv("HWLOC_PLUGINS_BLACKLIST"); }
    } no_pci;
    char dir_template[] = "/tmp/dlaunch-machine-load-XXXXXX";
    ASSERT_NE(::mkdtemp(dir_template), nullptr);
    const std::string cache = std::string(dir_template) + "/cache";
    ASSERT_TRUE(discover_cached(cache, "key", Scope::ProcessBinding).ok());  // the discoverer's
    auto first = discover_cached(cache, "key", Scope::ProcessBinding);
    auto second = discover_cached(cache, "key", Scope::ProcessBinding);
    std::filesystem::remove_all(dir_template);
    ASSERT_TRUE(first.ok() && second.ok());
    ASSERT_TRUE(first->machine.hwloc() && second->machine.hwloc());
    EXPECT_NE(first->machine.hwloc(), second->machine.hwloc());
    EXPECT_EQ(*first, *second);

    cpu_set_t before;
    ASSERT_EQ(::sched_getaffinity(0, sizeof before, &before), 0);
    if (CPU_COUNT(&before) < 2) GTEST_SKIP() << "SKIP: needs two usable CPUs to see a binding take effect";
    const int cpu = *first->allowed.begin();
    auto binder = Binder::for_this_machine(*first);
    ASSERT_TRUE(binder.ok());
    char buf[256];
    CpuSet one;
    one.insert(cpu);
    const char* problem = binder->apply(*binder->prepare(one, {}), buf, sizeof buf);
    cpu_set_t after;
    ASSERT_EQ(::sched_getaffinity(0, sizeof after, &after), 0);
    ASSERT_EQ(::sched_setaffinity(0, sizeof before, &before), 0);
    EXPECT_STREQ(problem, "");
    EXPECT_EQ(CPU_COUNT(&after), 1);
    EXPECT_TRUE(CPU_ISSET(cpu, &after));
}

Topology four_gpus() {
    Topology t = load("jwc09n003.xml");
    EXPECT_EQ(t.gpus.size(), 4u);
    return t;
}

TEST(GpuSelection, CudaVisibleDevicesFilters) {
    auto sel = select_gpus(four_gpus(), {{"CUDA_VISIBLE_DEVICES", "3,1"}}, std::nullopt);
    ASSERT_TRUE(sel.ok());
    EXPECT_EQ(sel->usable, (std::vector<int>{1, 3}));
    EXPECT_EQ(sel->warnings.size(), 1u);
}

TEST(GpuSelection, CgroupHiddenGpusShiftCudaNumbering) {
    Topology t = four_gpus();
    t.gpus[0].accessible = false;
    auto sel = select_gpus(t, {{"CUDA_VISIBLE_DEVICES", "0"}}, std::nullopt);
    ASSERT_TRUE(sel.ok());
    EXPECT_EQ(sel->cuda_visible_base, (std::vector<int>{1, 2, 3}));
    EXPECT_EQ(sel->usable, (std::vector<int>{1})) << "CUDA's device 0 is the first GPU the cgroup lets us open";
    EXPECT_EQ(cuda_visible_devices({3, 1}, sel->cuda_visible_base), "2,0");
}

TEST(GpuSelection, SlurmAllocationByMinor) {
    Topology t = four_gpus();
    for (auto& g : t.gpus) g.minor = 3 - g.index;  // minors need not follow PCI order
    auto sel = select_gpus(t, {{"SLURM_STEP_GPUS", "0,1"}, {"SLURM_JOB_GPUS", "0,1,2,3"}}, std::nullopt);
    ASSERT_TRUE(sel.ok());
    EXPECT_EQ(sel->usable, (std::vector<int>{2, 3}));
}

TEST(GpuSelection, UuidsAreLeftAlone) {
    auto sel = select_gpus(four_gpus(), {{"CUDA_VISIBLE_DEVICES", "GPU-8f3b"}}, std::nullopt);
    ASSERT_TRUE(sel.ok());
    EXPECT_TRUE(sel->cuda_visible_unmappable);
    EXPECT_TRUE(sel->usable.empty());
}

TEST(GpuSelection, DevicesPickAmongUsable) {
    auto sel = select_gpus(four_gpus(), {{"CUDA_VISIBLE_DEVICES", "1,2,3"}}, std::vector<int>{2, 0});
    ASSERT_TRUE(sel.ok());
    EXPECT_EQ(sel->usable, (std::vector<int>{1, 3}));
    auto bad = select_gpus(four_gpus(), {{"CUDA_VISIBLE_DEVICES", "1,2,3"}}, std::vector<int>{3});
    ASSERT_FALSE(bad.ok());
    EXPECT_EQ(bad.error().message(),
              "dlaunch: plan: --devices: device 3 does not exist; this node has 3 usable GPU(s), numbered 0-2");
}

TEST(GpuSelection, EmptyCudaVisibleDevicesHidesAll) {
    auto sel = select_gpus(four_gpus(), {{"CUDA_VISIBLE_DEVICES", ""}}, std::nullopt);
    ASSERT_TRUE(sel.ok());
    EXPECT_TRUE(sel->usable.empty());
}

TEST(CpuSetText, RoundTrip) {
    auto s = CpuSet::parse("0-3,8,10-11");
    ASSERT_TRUE(s);
    EXPECT_EQ(s->size(), 7u);
    EXPECT_EQ(s->to_list(), "0-3,8,10-11");
    EXPECT_EQ(CpuSet::parse("")->to_list(), "");
    EXPECT_FALSE(CpuSet::parse("3-1"));
    EXPECT_FALSE(CpuSet::parse("1,"));
    EXPECT_FALSE(CpuSet::parse("a"));
}

}  // namespace
}  // namespace dlaunch::topology
