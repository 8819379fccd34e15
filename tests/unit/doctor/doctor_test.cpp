#include "dlaunch/doctor.hpp"

#include <gtest/gtest.h>

#include "dlaunch/exit_codes.hpp"

namespace dlaunch::doctor {
namespace {

TEST(DoctorGpus, AbsentHardwareIsNotPresentNeverOk) {
    EXPECT_EQ(check_gpus({}).verdict, Verdict::Absent);
    GpuFacts no_nvml;
    no_nvml.topology_nvidia_gpus = 2;
    no_nvml.nvml_error = "libnvidia-ml.so.1: cannot open shared object file";
    const Check c = check_gpus(no_nvml);
    EXPECT_EQ(c.verdict, Verdict::Fail);
    EXPECT_EQ(c.detail, "2 NVIDIA GPUs on the PCI bus, but NVML: libnvidia-ml.so.1: cannot open shared object file");
    EXPECT_NE(c.fix.find("NVIDIA driver"), std::string::npos);
}

TEST(DoctorGpus, EccErrorsAPendingRetirementOrAMissingGpuFail) {
    GpuFacts f;
    f.nvml = true;
    f.topology_nvidia_gpus = 2;
    f.gpus = {{0, "GPU-a", "", 0, false, ""}, {1, "GPU-b", "", 0, false, ""}};
    EXPECT_EQ(check_gpus(f),
              (Check{"gpus", Verdict::Ok, "2 GPUs usable, no uncorrected ECC errors: GPU 0 GPU-a, GPU 1 GPU-b", ""}));
    f.driver = "580.95.05";  // what NVML said of the driver and the boards is shown
    f.gpus[0].name = f.gpus[1].name = "NVIDIA H100 80GB HBM3";
    f.gpus[0].memory_bytes = f.gpus[1].memory_bytes = 85520809984ULL;
    EXPECT_EQ(
        check_gpus(f).detail,
        "2 GPUs usable, no uncorrected ECC errors, driver 580.95.05: GPU 0 GPU-a (NVIDIA H100 80GB HBM3, 79.6 GiB), "
        "GPU 1 GPU-b (NVIDIA H100 80GB HBM3, 79.6 GiB)");
    f.gpus[1].uncorrected_ecc = 3;
    EXPECT_EQ(check_gpus(f).detail, "GPU 1 GPU-b (NVIDIA H100 80GB HBM3, 79.6 GiB): 3 uncorrected ECC errors");
    f.gpus[1].uncorrected_ecc = 0;
    f.gpus[0].retirement_pending = true;
    EXPECT_EQ(check_gpus(f).verdict, Verdict::Fail);
    f.gpus[0].retirement_pending = false;
    f.gpus.pop_back();
    EXPECT_EQ(check_gpus(f).detail, "NVML sees 1 GPU, the PCI bus 2");
}

TEST(DoctorIbPorts, AllDownFailsSomeDownWarnsNoneIsNotPresent) {
    PortFacts f;
    f.verbs_error = "ibv_get_device_list: Function not implemented";
    EXPECT_EQ(check_ib_ports(f).verdict, Verdict::Absent);
    f.topology_nics = 1;
    EXPECT_EQ(check_ib_ports(f).verdict, Verdict::Fail);
    f.verbs = true;
    f.ports = {{"mlx5_0", 1, true, "ACTIVE", "InfiniBand", "4x HDR"}, {"mlx5_1", 1, false, "DOWN", "InfiniBand", ""}};
    const Check some = check_ib_ports(f);
    EXPECT_EQ(some.verdict, Verdict::Warn);
    EXPECT_EQ(some.detail, "ACTIVE: mlx5_0:1 InfiniBand 4x HDR; not active: mlx5_1:1 DOWN");
    f.ports[0].active = false;
    f.ports[0].state = "INIT";
    EXPECT_EQ(check_ib_ports(f).verdict, Verdict::Fail);
    f.ports.clear();  // NICs on the bus, but no provider: libibverbs lists no device
    f.verbs_error.clear();
    EXPECT_EQ(check_ib_ports(f).detail, "1 RDMA NIC(s) on the bus, but libibverbs lists no port");
    f.topology_nics = 0;
    EXPECT_EQ(check_ib_ports(f).verdict, Verdict::Absent);
}

TEST(DoctorPlugin, NotListedNotThereNotLoadedOrNoHelperEachNameTheFix) {
    PluginFacts f;
    EXPECT_EQ(check_plugin(f).verdict, Verdict::Absent);
    f.slurm = true;
    f.plugstack = "/etc/slurm/plugstack.conf";
    Check c = check_plugin(f);
    EXPECT_EQ(c.detail, "/etc/slurm/plugstack.conf does not list spank_dlaunch.so");
    EXPECT_NE(c.fix.find("dlaunch-slurm"), std::string::npos);
    f.listed = "optional /p/spank_dlaunch.so";
    f.plugin = "/p/spank_dlaunch.so";
    EXPECT_EQ(check_plugin(f).detail, "/p/spank_dlaunch.so (listed in /etc/slurm/plugstack.conf) is not there");
    f.file_ok = true;
    f.srun_checked = true;
    f.srun_said = "srun: error: spank: /p/spank_dlaunch.so: Incompatible plugin version";
    EXPECT_EQ(check_plugin(f).detail,
              "srun does not offer --dist-launch: Slurm did not load /p/spank_dlaunch.so (" + f.srun_said + ")");
    f.srun_offers = true;
    f.helper = "/usr/libexec/dlaunch/dlaunch-python";
    c = check_plugin(f);
    EXPECT_EQ(c.verdict, Verdict::Fail);
    EXPECT_NE(c.fix.find("pyexec="), std::string::npos);
    f.helper_ok = true;
    EXPECT_EQ(check_plugin(f).verdict, Verdict::Ok);
}

TEST(DoctorMpi, SrunNeedsPmixOrPmi2AndTheLaunchersFoundAreListed) {
    EXPECT_EQ(check_srun_mpi({true, {"none", "pmi2"}, ""}).verdict, Verdict::Ok);
    Check none = check_srun_mpi({true, {"none", "cray_shasta"}, ""});
    EXPECT_EQ(none.verdict, Verdict::Warn);
    EXPECT_EQ(none.detail, "srun --mpi plugins: none, cray_shasta (neither pmix nor pmi2)");
    EXPECT_EQ(check_mpi_launchers({}).verdict, Verdict::Absent);
    Check found = check_mpi_launchers(
        {{{"mpirun", "/usr/bin/orterun", "Open MPI 4.1.4"}, {"mpirun_rsh", "/opt/mvapich2/bin/mpirun_rsh", ""}}});
    EXPECT_EQ(found.verdict, Verdict::Ok);
    EXPECT_EQ(found.detail, "mpirun: Open MPI 4.1.4 (/usr/bin/orterun); mpirun_rsh: /opt/mvapich2/bin/mpirun_rsh");
}

TEST(DoctorPortsAndLogDir, BusyPortsAndAnUnwritableOrFullDirectoryFail) {
    PortRangeFacts p{"master port 29500 (several nodes by hand) and its group port", {29500, 29501}, {}};
    EXPECT_EQ(check_ports(p).verdict, Verdict::Ok);
    p.in_use = {29500};
    EXPECT_EQ(check_ports(p).detail, "master port 29500 (several nodes by hand) and its group port: in use: 29500");
    LogDirFacts d{"/logs", true, false, "cannot create a file: Permission denied", 0};
    EXPECT_EQ(check_log_dir(d, 1 << 30).detail, "/logs: cannot create a file: Permission denied");
    d.writable = true;
    d.error.clear();
    d.free_bytes = 1 << 20;
    EXPECT_EQ(check_log_dir(d, 1 << 30).detail, "/logs: only 0.0 GiB free");
    d.free_bytes = 3ULL << 30;
    EXPECT_EQ(check_log_dir(d, 1 << 30), (Check{"log-dir", Verdict::Ok, "/logs: writable, 3.0 GiB free", ""}));
}

TEST(DoctorReport, ReadyUnlessACheckFailedAndSaysWhich) {
    Report r{"node1",
             {{"gpus", Verdict::Absent, "no NVIDIA GPU on the PCI bus, no NVML", ""},
              {"ib-ports", Verdict::Warn, "ACTIVE: a; not active: b", "check the cable"}}};
    EXPECT_EQ(exit_code(r), exit_code::kSuccess);
    EXPECT_EQ(to_text(r),
              "dlaunch doctor on node1\n"
              "  not present  gpus          no NVIDIA GPU on the PCI bus, no NVML\n"
              "  warn         ib-ports      ACTIVE: a; not active: b\n"
              "                             fix: check the cable\n"
              "ready (warnings: ib-ports)\n");
    r.checks.push_back({"python", Verdict::Fail, "python3: not found", "set PYTHON_EXEC"});
    EXPECT_EQ(exit_code(r), exit_code::kNotReady);
    EXPECT_NE(to_text(r).find("not ready: 1 check failed (python)\n"), std::string::npos);
    const auto j = to_json(r);
    EXPECT_EQ(j["ready"], false);
    EXPECT_EQ(j["checks"][0]["verdict"], "not present");
    EXPECT_TRUE(j["checks"][0]["fix"].is_null());
}

// --- every node of an allocation ----------------------------------------------------------------------

Report ready_node(const std::string& host) {
    return {host,
            {{"gpus", Verdict::Absent, "no NVIDIA GPU", ""}, {"log-dir", Verdict::Ok, "/shared: 9 GiB free", ""}}};
}

AllocationFacts three_nodes() {
    AllocationFacts f;
    f.log_dir = "/shared/logs";
    f.waited = 1.5;
    f.nodes = {{"n1", true, 0, true, ready_node("n1")},
               {"n2", true, 0.004, true, ready_node("n2")},
               {"n3", true, -0.002, true, ready_node("n3")}};
    return f;
}

TEST(DoctorAllocation, EveryNodeReadyClocksCloseAndOneLogDirectory) {
    const Report r = allocation_report(three_nodes());
    EXPECT_EQ(r.host, "every node (3 nodes)");
    EXPECT_EQ(exit_code(r), exit_code::kSuccess);
    ASSERT_EQ(r.checks.size(), 5u);
    EXPECT_EQ(r.checks[1], (Check{"node n2", Verdict::Ok, "ready", ""}));
    EXPECT_EQ(r.checks[3].detail,
              "against n1: n2 +0.004 s, n3 -0.002 s (one message each: within the network's one-way delay)");
    EXPECT_EQ(r.checks[4], (Check{"shared-log-dir", Verdict::Ok, "/shared/logs is one directory on all 3 nodes", ""}));
}

TEST(DoctorAllocation, ANodeNotReadyOrSilentAClockOffOrAPrivateLogDirectoryFail) {
    AllocationFacts f = three_nodes();
    f.nodes[1].report.checks.push_back({"python", Verdict::Fail, "not found", "set PYTHON_EXEC"});
    f.nodes[1].clock_offset = 3.25;
    f.nodes[1].sees_log_dir = false;
    f.nodes[2].heard = false;
    const Report r = allocation_report(f);
    EXPECT_EQ(exit_code(r), exit_code::kNotReady);
    EXPECT_EQ(r.checks[1].verdict, Verdict::Fail);
    EXPECT_EQ(r.checks[1].detail, "not ready: python failed");
    EXPECT_EQ(r.checks[2].detail, "did not report within 2 s");
    EXPECT_EQ(r.checks[3].verdict, Verdict::Fail);
    EXPECT_NE(r.checks[3].fix.find("n2 differ by more than 1 s"), std::string::npos) << r.checks[3].fix;
    EXPECT_EQ(r.checks[4].verdict, Verdict::Fail);
    EXPECT_EQ(r.checks[4].detail, "/shared/logs is not the directory n1 has on n2 (they do not see its marker file)");
    EXPECT_NE(to_text(r).find("not ready: 4 checks failed (node n2, node n3, clock-skew, shared-log-dir)"),
              std::string::npos)
        << to_text(r);
}

TEST(DoctorAllocation, AReportSurvivesItsJson) {
    Report r = ready_node("n2");
    r.checks.push_back({"python", Verdict::Fail, "not found", "set PYTHON_EXEC"});
    r.checks.push_back({"ib-ports", Verdict::Warn, "one down", "check the cable"});
    auto back = report_from_json(nlohmann::json::parse(to_json(r).dump()));
    ASSERT_TRUE(back);
    EXPECT_EQ(back->host, r.host);
    EXPECT_EQ(back->checks, r.checks);
    EXPECT_FALSE(report_from_json(nlohmann::json::parse(R"({"host":"x","checks":[{"name":"a","verdict":"meh",)"
                                                        R"("detail":"","fix":null}]})")));
    EXPECT_FALSE(report_from_json(nlohmann::json::parse(R"({"checks":[]})")));
}

}  // namespace
}  // namespace dlaunch::doctor
