// `dlaunch doctor`: is this node ready to run dlaunch jobs? One check per line, each with a verdict and,
// when it is not ok, the fix. The checks are pure: facts in (gathered by doctor/probes.cpp), a Check out.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace dlaunch::doctor {

// Absent: the hardware or software is not on this node, which is not an error ("not present", never "ok").
enum class Verdict { Ok, Absent, Warn, Fail };
std::string verdict_name(Verdict v);  // "ok", "not present", "warn", "FAIL"

struct Check {
    std::string name;  // "gpus", "ib-ports", "spank-plugin", ...
    Verdict verdict = Verdict::Ok;
    std::string detail;  // what was found
    std::string fix;     // what to do, when the verdict is Warn or Fail
    bool operator==(const Check&) const = default;
};

struct Report {
    std::string host;
    std::vector<Check> checks;
};

// --- facts, as the probes gather them ------------------------------------------------------------------

struct GpuFacts {
    bool nvml = false;             // libnvidia-ml was loaded and initialised
    std::string nvml_error;        // why not, when a GPU is there but NVML is not usable
    int topology_nvidia_gpus = 0;  // NVIDIA GPUs hwloc sees on the PCI bus that this process may open
    std::string driver;            // the driver's version, as NVML gives it ("" when it did not)
    struct Gpu {
        int index = 0;
        std::string uuid, name;
        unsigned long long uncorrected_ecc = 0;  // volatile (since the driver loaded)
        bool retirement_pending = false;         // a retired page waits for a reset
        std::string error;                       // NVML refused to answer for this GPU
        unsigned long long memory_bytes = 0;     // the board's memory (0: NVML did not say)
    };
    std::vector<Gpu> gpus;
};

struct PortFacts {
    bool verbs = false;  // libibverbs listed the devices (false: it failed)
    std::string verbs_error;
    int topology_nics = 0;  // InfiniBand/RoCE NICs hwloc sees
    struct Port {
        std::string device;  // "mlx5_0"
        int port = 1;
        bool active = false;
        std::string state, link_layer, rate;  // "ACTIVE", "InfiniBand", "200 Gb/s"
    };
    std::vector<Port> ports;
};

struct PluginFacts {
    bool slurm = false;                              // a Slurm configuration is on this node
    std::string plugstack;                           // the plugstack.conf Slurm reads
    std::string listed;                              // the plugstack line that names spank_dlaunch.so ("" when none)
    std::string plugin;                              // its path
    bool file_ok = false;                            // the listed plugin file is there
    bool srun_checked = false, srun_offers = false;  // srun --help offers --dist-launch (Slurm loaded it)
    std::string srun_said;                           // srun's first error line, when it does not
    std::string helper;  // the dlaunch-python it will use (pyexec=, beside it, or the installed default)
    bool helper_ok = false;
};

struct HelperFacts {
    std::string python_dir;            // sitecustomize.py's directory, "" when not found beside dlaunch
    std::vector<std::string> missing;  // helpers dlaunch runs that are not where it looks for them
    std::string expected_at;           // where it looked
};

struct PortRangeFacts {
    std::string scope;  // "Slurm job 42 (ports of its steps)", "--master-port 29500 (several nodes by hand)"
    std::vector<int> checked;
    std::vector<int> in_use;
};

struct LogDirFacts {
    std::string path;
    bool exists = false, writable = false;
    std::string error;
    unsigned long long free_bytes = 0;
};

struct PythonFacts {
    std::string python;  // PYTHON_EXEC or python3
    bool runs = false;
    std::string version, torch_version, error;  // torch_version "": not importable (error says why)
};

struct LibraryFacts {
    std::string name;  // "PMIx", "NCCL"
    bool loaded = false;
    std::string version;  // "4.2.2"
    std::string detail;   // where it was found, or why not
};

struct TopologyFacts {
    std::string error;  // discovery failed
    int numa_nodes = 0, cores = 0, pus = 0, gpus = 0, nics = 0;
    std::string source;  // "this machine (hwloc 2.9.0)"
};

struct CpusetFacts {
    std::string allowed;  // "0-15" (Cpus_allowed_list)
    int count = 0, online = 0;
    std::string cgroup;      // "/system.slice/slurmstepd.scope/job_42/step_0"
    std::string slurm_bind;  // SLURM_CPU_BIND ("" outside a step)
};

struct SrunFacts {
    bool present = false;                  // srun is on PATH (and Slurm is configured)
    std::vector<std::string> mpi_plugins;  // srun --mpi=list
    std::string error;                     // srun --mpi=list failed: its first line
};

// The MPI launchers on PATH that dlaunch-mpi runs under (docs/mpi-launchers.md), with what they say they are.
struct MpiLauncherFacts {
    struct Launcher {
        std::string command;  // "mpirun", "mpiexec.hydra", ...
        std::string path;     // what it resolves to ("/usr/bin/orterun")
        std::string version;  // "Open MPI 4.1.4", "Hydra 4.0.2"; "" when it did not say
    };
    std::vector<Launcher> found;
};

// --- the checks ----------------------------------------------------------------------------------------

Check check_topology(const TopologyFacts& f);
Check check_cpuset(const CpusetFacts& f);
Check check_srun_mpi(const SrunFacts& f);
// Not present when no launcher is on PATH (the agent needs none); never a failure.
Check check_mpi_launchers(const MpiLauncherFacts& f);
Check check_gpus(const GpuFacts& f);
Check check_ib_ports(const PortFacts& f);
Check check_plugin(const PluginFacts& f);
Check check_helpers(const HelperFacts& f);
Check check_ports(const PortRangeFacts& f);
// Fails when the directory cannot be written or has less than `min_free` bytes.
Check check_log_dir(const LogDirFacts& f, unsigned long long min_free);
Check check_python(const PythonFacts& f);
// `needed`: a missing library fails (PMIx for dlaunch-mpi); otherwise it is "not present".
Check check_library(const LibraryFacts& f, bool needed);

// --- every node of an allocation ------------------------------------------------------------------------
// `srun --ntasks-per-node=1 dlaunch doctor` on several nodes: each node prints its own report and sends it to
// node 0, which adds the checks only the nodes together can make, and one verdict for them all.

// A node's clock may differ from node 0's by this much (MUNGE credentials, the ledger's and logs' times).
inline constexpr double kMaxClockSkew = 1.0;

struct NodeFacts {
    std::string host;
    bool heard = false;         // its report reached node 0
    double clock_offset = 0;    // its clock minus node 0's, in seconds (its send time against the arrival)
    bool sees_log_dir = false;  // it found node 0's marker in its own --log-dir
    Report report;
};

struct AllocationFacts {
    std::string log_dir;
    bool log_dir_given = true;     // --log-dir; without it each node logs to its own $TMPDIR, which is fine
    std::string marker_error;      // node 0 could not leave its marker there (the check cannot be made)
    double waited = 0;             // how long node 0 waited for the others, in seconds
    std::vector<NodeFacts> nodes;  // node 0 first
};

// "allocation": one check per node (ready, or which of its checks failed), the nodes heard, the clock skew and
// whether the log directory is one directory on every node.
Report allocation_report(const AllocationFacts& f);

// A report as to_json() wrote it (what a node sends to node 0); nullopt when it is not one.
std::optional<Report> report_from_json(const nlohmann::json& j);

// 0 when no check failed, exit_code::kNotReady otherwise.
int exit_code(const Report& r);
std::string to_text(const Report& r);
nlohmann::ordered_json to_json(const Report& r);

}  // namespace dlaunch::doctor
