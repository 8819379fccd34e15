#include "dlaunch/doctor.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "dlaunch/exit_codes.hpp"
#include "dlaunch/text.hpp"

namespace dlaunch::doctor {
namespace {

Check ok(const std::string& name, const std::string& detail) {
    return {name, Verdict::Ok, detail, ""};
}
Check absent(const std::string& name, const std::string& detail) {
    return {name, Verdict::Absent, detail, ""};
}
Check fail(const std::string& name, const std::string& detail, const std::string& fix) {
    return {name, Verdict::Fail, detail, fix};
}
Check warn(const std::string& name, const std::string& detail, const std::string& fix) {
    return {name, Verdict::Warn, detail, fix};
}

std::string join(const std::vector<std::string>& items, const std::string& sep = ", ") {
    std::string out;
    for (const std::string& s : items) out += (out.empty() ? "" : sep) + s;
    return out;
}

std::string count(int n, const std::string& what) {
    return std::to_string(n) + " " + what + (n == 1 ? "" : "s");
}

std::string gib(unsigned long long bytes) {
    return fixed(static_cast<double>(bytes) / (1ULL << 30), 1) + " GiB";
}

}  // namespace

namespace {

constexpr std::array<Verdict, 4> kVerdicts{Verdict::Ok, Verdict::Absent, Verdict::Warn, Verdict::Fail};

}  // namespace

std::string verdict_name(Verdict v) {
    switch (v) {
        case Verdict::Ok: return "ok";
        case Verdict::Absent: return "not present";
        case Verdict::Warn: return "warn";
        case Verdict::Fail: return "FAIL";
    }
    return "?";
}

Check check_topology(const TopologyFacts& f) {
    if (!f.error.empty())
        return fail("topology", f.error,
                    "check that hwloc sees this machine (lstopo); dlaunch binds nothing without it");
    return ok("topology", count(f.numa_nodes, "NUMA node") + ", " + count(f.cores, "core") + " (" +
                              std::to_string(f.pus) + " CPUs), " + count(f.gpus, "GPU") + ", " +
                              count(f.nics, "RDMA NIC") + " (" + f.source + ")");
}

Check check_cpuset(const CpusetFacts& f) {
    std::string detail = "CPUs " + f.allowed + " (" + std::to_string(f.count) + " of " + std::to_string(f.online) +
                         ")" + (f.cgroup.empty() ? "" : ", cgroup " + f.cgroup);
    detail += f.slurm_bind.empty() ? ", no Slurm binding" : ", Slurm binding " + f.slurm_bind;
    return ok("cpuset", detail);
}

namespace {

// " (NVIDIA H100 80GB HBM3, 79.6 GiB)": what NVML said of the board, "" when it said nothing.
std::string gpu_model(const GpuFacts::Gpu& g) {
    std::vector<std::string> parts;
    if (!g.name.empty()) parts.push_back(g.name);
    if (g.memory_bytes > 0) parts.push_back(gib(g.memory_bytes));
    return parts.empty() ? "" : " (" + join(parts, ", ") + ")";
}

}  // namespace

Check check_gpus(const GpuFacts& f) {
    if (!f.nvml) {
        if (f.topology_nvidia_gpus == 0)
            return absent("gpus", "no NVIDIA GPU on the PCI bus" +
                                      (f.nvml_error.empty() ? ", no NVML" : " (NVML: " + f.nvml_error + ")"));
        return fail("gpus", count(f.topology_nvidia_gpus, "NVIDIA GPU") + " on the PCI bus, but NVML: " + f.nvml_error,
                    "install or repair the NVIDIA driver (libnvidia-ml.so.1; nvidia-smi must work)");
    }
    if (f.gpus.empty() && f.topology_nvidia_gpus == 0) return absent("gpus", "NVML loaded, no GPU");
    std::vector<std::string> bad, good;
    for (const GpuFacts::Gpu& g : f.gpus) {
        const std::string id = "GPU " + std::to_string(g.index) + " " + g.uuid + gpu_model(g);
        if (!g.error.empty())
            bad.push_back(id + ": " + g.error);
        else if (g.uncorrected_ecc > 0)
            bad.push_back(id + ": " + std::to_string(g.uncorrected_ecc) + " uncorrected ECC errors");
        else if (g.retirement_pending)
            bad.push_back(id + ": a retired page waits for a GPU reset");
        else
            good.push_back(id);
    }
    if (!bad.empty())
        return fail("gpus", join(bad, "; "), "drain this node and reset the GPU (nvidia-smi -r) or have it replaced");
    if (f.topology_nvidia_gpus > static_cast<int>(f.gpus.size()))
        return fail("gpus",
                    "NVML sees " + count(static_cast<int>(f.gpus.size()), "GPU") + ", the PCI bus " +
                        std::to_string(f.topology_nvidia_gpus),
                    "a GPU fell off the bus (dmesg: Xid 79): drain this node");
    return ok("gpus", count(static_cast<int>(f.gpus.size()), "GPU") + " usable, no uncorrected ECC errors" +
                          (f.driver.empty() ? "" : ", driver " + f.driver) + ": " + join(good));
}

Check check_ib_ports(const PortFacts& f) {
    if (!f.verbs || (f.ports.empty() && f.topology_nics > 0 && !f.verbs_error.empty()))
        return f.topology_nics == 0
                   ? absent("ib-ports", "no RDMA NIC" + (f.verbs_error.empty() ? "" : " (" + f.verbs_error + ")"))
                   : fail("ib-ports",
                          count(f.topology_nics, "RDMA NIC") + " on the bus, but libibverbs: " + f.verbs_error,
                          "install rdma-core's providers (ibverbs-providers) and load the NIC's driver");
    if (f.ports.empty() && f.topology_nics > 0)
        return fail("ib-ports",
                    std::to_string(f.topology_nics) + " RDMA NIC(s) on the bus, but libibverbs lists no port",
                    "install rdma-core's providers (ibverbs-providers) and load the NIC's driver");
    if (f.ports.empty()) return absent("ib-ports", "no InfiniBand or RoCE port");
    std::vector<std::string> up, down;
    for (const PortFacts::Port& p : f.ports) {
        const std::string id = p.device + ":" + std::to_string(p.port);
        if (p.active)
            up.push_back(id + " " + p.link_layer + " " + p.rate);
        else
            down.push_back(id + " " + p.state);
    }
    if (up.empty())
        return fail("ib-ports", "no port is ACTIVE: " + join(down),
                    "check the cable and the subnet manager (ibstat); NCCL would fall back to TCP");
    if (!down.empty())
        return warn("ib-ports", "ACTIVE: " + join(up) + "; not active: " + join(down),
                    "ranks bound to the down ports' NICs use the others; check the cable (ibstat)");
    return ok("ib-ports", "ACTIVE: " + join(up));
}

Check check_plugin(const PluginFacts& f) {
    if (!f.slurm) return absent("spank-plugin", "no Slurm configuration on this node");
    if (f.listed.empty())
        return fail("spank-plugin", f.plugstack + " does not list spank_dlaunch.so",
                    "install the dlaunch-slurm package, or add to " + f.plugstack +
                        ": optional /path/to/spank_dlaunch.so pyexec=/path/to/dlaunch-python");
    if (!f.file_ok)
        return fail("spank-plugin", f.plugin + " (listed in " + f.plugstack + ") is not there",
                    "install the dlaunch-slurm package, or correct the path in " + f.plugstack);
    if (f.srun_checked && !f.srun_offers)
        return fail("spank-plugin",
                    "srun does not offer --dist-launch: Slurm did not load " + f.plugin +
                        (f.srun_said.empty() ? "" : " (" + f.srun_said + ")"),
                    "install dlaunch-slurm built for this Slurm's version (srun -v --help says why it is refused)");
    if (!f.helper_ok)
        return fail("spank-plugin", "its helper " + f.helper + " is not an executable",
                    "point the plugin's pyexec= argument (" + f.plugstack + ") at dlaunch-python");
    return ok("spank-plugin", f.plugin + " listed in " + f.plugstack +
                                  (f.srun_checked ? ", srun offers --dist-launch" : " (no srun here to load it)") +
                                  ", helper " + f.helper);
}

Check check_helpers(const HelperFacts& f) {
    if (!f.missing.empty())
        return fail("helpers", "missing in " + f.expected_at + ": " + join(f.missing),
                    "reinstall dlaunch (the dlaunch package), or run dlaunch from its build tree, where they are built "
                    "beside it");
    return ok("helpers", "sitecustomize.py and dlaunch_heartbeat.py in " + f.python_dir);
}

Check check_ports(const PortRangeFacts& f) {
    std::vector<std::string> busy;
    for (int p : f.in_use) busy.push_back(std::to_string(p));
    if (!busy.empty())
        return fail("ports", f.scope + ": in use: " + join(busy),
                    "stop what listens there (ss -ltnp), or choose other ports (--port-range, the plugin's "
                    "port_range=, --master-port, --rdzv-endpoint HOST:PORT)");
    return ok("ports", f.scope + ": " + count(static_cast<int>(f.checked.size()), "port") + " free");
}

Check check_log_dir(const LogDirFacts& f, unsigned long long min_free) {
    if (!f.writable)
        return fail("log-dir", f.path + ": " + f.error, "give a --log-dir this user can write, or fix its permissions");
    if (f.free_bytes < min_free)
        return fail(
            "log-dir", f.path + ": only " + gib(f.free_bytes) + " free",
            "free space there or choose another --log-dir (logs and stacks need at least " + gib(min_free) + ")");
    return ok("log-dir", f.path + ": writable, " + gib(f.free_bytes) + " free");
}

Check check_python(const PythonFacts& f) {
    if (!f.runs) return fail("python", f.python + ": " + f.error, "set PYTHON_EXEC to a Python 3 that runs here");
    if (f.torch_version.empty())
        return fail("python", f.python + " (Python " + f.version + "): torch is not importable: " + f.error,
                    "install PyTorch for it (Debian: python3-torch) or set PYTHON_EXEC to a Python that has it");
    return ok("python", f.python + " (Python " + f.version + "), torch " + f.torch_version);
}

Check check_library(const LibraryFacts& f, bool needed) {
    const std::string name = f.name == "PMIx" ? "pmix" : f.name == "NCCL" ? "nccl" : f.name;
    if (f.loaded) return ok(name, f.name + " " + f.version + " (" + f.detail + ")");
    if (needed)
        return fail(name, f.name + " does not load: " + f.detail,
                    "install it (Debian: libpmix2); dlaunch-mpi needs it");
    return absent(name, f.detail);
}

Check check_srun_mpi(const SrunFacts& f) {
    if (!f.present) return absent("srun-mpi", "no srun, or no Slurm configuration");
    if (!f.error.empty())
        return warn("srun-mpi", "srun --mpi=list failed: " + f.error, "check that srun works on this node");
    const bool pmi = std::any_of(f.mpi_plugins.begin(), f.mpi_plugins.end(),
                                 [](const std::string& p) { return p.rfind("pmix", 0) == 0 || p == "pmi2"; });
    if (!pmi)
        return warn("srun-mpi", "srun --mpi plugins: " + join(f.mpi_plugins) + " (neither pmix nor pmi2)",
                    "srun --mpi=pmix or --mpi=pmi2 dlaunch-mpi needs one of Slurm's plugins (Debian: "
                    "slurm-wlm-basic-plugins); srun dlaunch-mpi (SLURM_* variables) and mpirun still work");
    return ok("srun-mpi", "srun --mpi plugins: " + join(f.mpi_plugins));
}

Check check_mpi_launchers(const MpiLauncherFacts& f) {
    if (f.found.empty())
        return absent("mpi-launchers",
                      "no mpirun, mpiexec, mpiexec.hydra, mpirun_rsh or flux on PATH (dlaunch-mpi "
                      "runs under one of them or srun)");
    std::vector<std::string> each;
    for (auto& l : f.found)
        each.push_back(l.command + ": " + (l.version.empty() ? l.path : l.version + " (" + l.path + ")"));
    return ok("mpi-launchers", join(each, "; "));
}

int exit_code(const Report& r) {
    const bool failed =
        std::any_of(r.checks.begin(), r.checks.end(), [](const Check& c) { return c.verdict == Verdict::Fail; });
    return failed ? exit_code::kNotReady : exit_code::kSuccess;
}

std::string to_text(const Report& r) {
    std::ostringstream out;
    out << "dlaunch doctor on " << r.host << "\n";
    std::vector<std::string> failed, warned;
    for (const Check& c : r.checks) {
        char head[64];
        std::snprintf(head, sizeof head, "  %-12s %-13s ", verdict_name(c.verdict).c_str(), c.name.c_str());
        out << head << c.detail << "\n";
        if (!c.fix.empty()) out << std::string(29, ' ') << "fix: " << c.fix << "\n";
        if (c.verdict == Verdict::Fail) failed.push_back(c.name);
        if (c.verdict == Verdict::Warn) warned.push_back(c.name);
    }
    if (failed.empty())
        out << "ready" << (warned.empty() ? "" : " (warnings: " + join(warned) + ")") << "\n";
    else
        out << "not ready: " << count(static_cast<int>(failed.size()), "check") << " failed (" << join(failed) << ")\n";
    return out.str();
}

nlohmann::ordered_json to_json(const Report& r) {
    nlohmann::ordered_json checks = nlohmann::ordered_json::array();
    for (const Check& c : r.checks)
        checks.push_back({{"name", c.name},
                          {"verdict", verdict_name(c.verdict)},
                          {"detail", c.detail},
                          {"fix", c.fix.empty() ? nlohmann::ordered_json() : nlohmann::ordered_json(c.fix)}});
    return {{"host", r.host}, {"ready", exit_code(r) == exit_code::kSuccess}, {"checks", checks}};
}

std::optional<Report> report_from_json(const nlohmann::json& j) {
    try {
        Report r;
        r.host = j.at("host").get<std::string>();
        for (const auto& c : j.at("checks")) {
            Check check{c.at("name").get<std::string>(), Verdict::Ok, c.at("detail").get<std::string>(),
                        c.at("fix").is_string() ? c.at("fix").get<std::string>() : ""};
            const std::string verdict = c.at("verdict").get<std::string>();
            const auto v =
                std::find_if(kVerdicts.begin(), kVerdicts.end(), [&](Verdict x) { return verdict_name(x) == verdict; });
            if (v == kVerdicts.end()) return std::nullopt;
            check.verdict = *v;
            r.checks.push_back(std::move(check));
        }
        return r;
    } catch (const nlohmann::json::exception&) {
        return std::nullopt;
    }
}

namespace {

Check node_check(const NodeFacts& n, double waited) {
    const std::string name = "node " + n.host;
    if (!n.heard)
        return fail(name, "did not report within " + fixed(waited, 0) + " s",
                    "see that node's own report (srun -l prefixes each line with its task); is it up?");
    std::vector<std::string> failed, warned;
    for (const Check& c : n.report.checks) {
        if (c.verdict == Verdict::Fail) failed.push_back(c.name);
        if (c.verdict == Verdict::Warn) warned.push_back(c.name);
    }
    if (!failed.empty())
        return fail(name, "not ready: " + join(failed) + " failed", "see " + n.host + "'s report for the fixes");
    return ok(name, "ready" + (warned.empty() ? "" : " (warnings: " + join(warned) + ")"));
}

std::string signed_seconds(double s) {
    if (std::abs(s) < 0.0005) s = 0;  // no "-0.000"
    return (s >= 0 ? "+" : "") + fixed(s, 3) + " s";
}

Check check_clock_skew(const AllocationFacts& f) {
    std::vector<std::string> offsets, off;
    double worst = 0;
    for (size_t i = 1; i < f.nodes.size(); ++i) {
        const NodeFacts& n = f.nodes[i];
        if (!n.heard) continue;
        offsets.push_back(n.host + " " + signed_seconds(n.clock_offset));
        worst = std::max(worst, std::abs(n.clock_offset));
        if (std::abs(n.clock_offset) > kMaxClockSkew) off.push_back(n.host);
    }
    if (offsets.empty()) return absent("clock-skew", "no other node reported");
    const std::string detail = "against " + f.nodes.front().host + ": " + join(offsets) +
                               " (one message each: within the network's one-way delay)";
    if (!off.empty())
        return fail("clock-skew", detail,
                    "synchronise the clocks (chrony or ntpd on every node): " + join(off) + " differ by more than " +
                        fixed(kMaxClockSkew, 0) + " s; MUNGE credentials and the logs' times depend on them");
    return ok("clock-skew", detail);
}

Check check_shared_log_dir(const AllocationFacts& f) {
    std::vector<std::string> apart;
    int heard = 0;
    for (size_t i = 1; i < f.nodes.size(); ++i) {
        if (!f.nodes[i].heard) continue;
        ++heard;
        if (!f.nodes[i].sees_log_dir) apart.push_back(f.nodes[i].host);
    }
    if (heard == 0) return absent("shared-log-dir", "no other node reported");
    if (!f.log_dir_given)
        return absent("shared-log-dir", "no --log-dir: runs log to each node's own " + f.log_dir +
                                            " (give the --log-dir your jobs use to check it)");
    if (!f.marker_error.empty())
        return warn("shared-log-dir",
                    "not checked: " + f.nodes.front().host + " could not leave its marker in " + f.log_dir + " (" +
                        f.marker_error + ")",
                    "see its log-dir check");
    if (!apart.empty())
        return fail("shared-log-dir",
                    f.log_dir + " is not the directory " + f.nodes.front().host + " has on " + join(apart) +
                        " (they do not see its marker file)",
                    "give --log-dir a directory on a file system every node mounts: --requeue's ledger and a "
                    "group's records are read by every node");
    return ok("shared-log-dir", f.log_dir + " is one directory on all " + count(heard + 1, "node"));
}

}  // namespace

Report allocation_report(const AllocationFacts& f) {
    Report r;
    r.host = "every node (" + count(static_cast<int>(f.nodes.size()), "node") + ")";
    for (const NodeFacts& n : f.nodes) r.checks.push_back(node_check(n, f.waited));
    r.checks.push_back(check_clock_skew(f));
    r.checks.push_back(check_shared_log_dir(f));
    return r;
}

}  // namespace dlaunch::doctor
