// Plan and topology timings (Google Benchmark). Built only with -DDLAUNCH_BUILD_BENCH=ON; run by hand:
//   build/bench/dlaunch_plan_bench --benchmark_min_time=0.5
// Figures and method: bench/README.md ("Topology and plan").
#include <benchmark/benchmark.h>

#include "dlaunch/plan.hpp"
#include "dlaunch/topology/binding.hpp"
#include "dlaunch/topology/gpu_selection.hpp"
#include "dlaunch/topology/topology.hpp"

namespace {

using namespace dlaunch;

const topology::Topology& dgx2() {
    static topology::Topology t = *topology::load_xml(DLAUNCH_SOURCE_DIR "/tests/data/topologies/nvidiaDGX2.xml");
    return t;
}

const topology::Topology& jrc0386() {
    static topology::Topology t = *topology::load_xml(DLAUNCH_SOURCE_DIR "/tests/data/topologies/jrc0386.xml");
    return t;
}

// make_plan for 16 ranks on a DGX-2 (16 V100): GPU selection, GPU/NIC assignment, env for every rank.
// The DGX-2 export allows only 4 PUs, so 16 ranks run with --bind none here; BM_PlanBindClosest times
// the core split on a 128-core node.
void BM_MakePlan16RanksDGX2(benchmark::State& state) {
    LaunchRequest req;
    req.nproc_per_node = {NprocSpec::Kind::Count, 16};
    req.bind_closest = false;
    req.script = "train.py";
    JobContext ctx;
    ctx.environ = {{"PATH", "/usr/bin"}};
    ctx.python = "/usr/bin/python3";
    ctx.run_id = "bench";
    ctx.free_port = 29500;
    for (auto _ : state) benchmark::DoNotOptimize(make_plan(req, ctx, dgx2()));
}
BENCHMARK(BM_MakePlan16RanksDGX2)->Unit(benchmark::kMicrosecond);

void BM_PlanBindClosest(benchmark::State& state) {
    const auto& t = jrc0386();
    auto gpus = topology::select_gpus(t, {}, std::nullopt)->usable;
    topology::BindRequest req{static_cast<int>(state.range(0)), topology::BindMode::Closest, std::nullopt, gpus};
    for (auto _ : state) benchmark::DoNotOptimize(topology::plan_binding(t, req));
}
BENCHMARK(BM_PlanBindClosest)->Arg(4)->Arg(16)->Arg(64)->Unit(benchmark::kMicrosecond);

void BM_LoadXmlDGX2(benchmark::State& state) {
    for (auto _ : state)
        benchmark::DoNotOptimize(topology::load_xml(DLAUNCH_SOURCE_DIR "/tests/data/topologies/nvidiaDGX2.xml"));
}
BENCHMARK(BM_LoadXmlDGX2)->Unit(benchmark::kMillisecond);

// This machine: full hwloc discovery against loading the per-job cache.
void BM_DiscoverThisMachine(benchmark::State& state) {
    for (auto _ : state) benchmark::DoNotOptimize(topology::discover());
}
BENCHMARK(BM_DiscoverThisMachine)->Unit(benchmark::kMillisecond);

void BM_DiscoverCachedThisMachine(benchmark::State& state) {
    std::string dir = "/tmp/dlaunch-plan-bench-cache";
    (void)topology::discover_cached(dir, "bench");  // the first task of a job pays the discovery
    for (auto _ : state) benchmark::DoNotOptimize(topology::discover_cached(dir, "bench"));
}
BENCHMARK(BM_DiscoverCachedThisMachine)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
