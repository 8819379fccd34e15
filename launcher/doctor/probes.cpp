#include <dlfcn.h>
#include <glob.h>
#include <infiniband/verbs.h>
#include <sched.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "dlaunch/doctor_probes.hpp"
#include "dlaunch/host.hpp"
#include "dlaunch/plan.hpp"
#include "dlaunch/pmix/job_source.hpp"
#include "dlaunch/run_output.hpp"
#include "dlaunch/shared_library.hpp"
#include "dlaunch/text.hpp"

namespace dlaunch::doctor {
namespace {

namespace fs = std::filesystem;

std::string first_line(const std::string& text) {
    return text.substr(0, text.find('\n'));
}

}  // namespace

TopologyFacts topology_facts(const Result<topology::Topology>& topo) {
    TopologyFacts f;
    if (!topo) {
        f.error = topo.error().message();
        return f;
    }
    f.numa_nodes = static_cast<int>(topo->numa_nodes.size());
    f.cores = static_cast<int>(topo->cores.size());
    f.pus = topo->cpus;
    f.gpus = static_cast<int>(topo->gpus.size());
    f.nics = static_cast<int>(topo->nics.size());
    f.source = topo->source;
    return f;
}

CpusetFacts probe_cpuset(const EnvMap& env) {
    CpusetFacts f;
    std::ifstream status("/proc/self/status");
    for (std::string line; std::getline(status, line);)
        if (line.rfind("Cpus_allowed_list:", 0) == 0) f.allowed = line.substr(line.find_first_not_of(" \t", 18));
    cpu_set_t set;
    if (::sched_getaffinity(0, sizeof set, &set) == 0) f.count = CPU_COUNT(&set);
    f.online = static_cast<int>(::sysconf(_SC_NPROCESSORS_ONLN));
    // cgroup v2: "0::/path"; v1: the cpuset controller's line, "N:cpuset:/path".
    std::ifstream cgroups("/proc/self/cgroup");
    for (std::string line; std::getline(cgroups, line);) {
        const auto colon = line.find(':');
        const std::string controllers = line.substr(colon + 1, line.find(':', colon + 1) - colon - 1);
        if (line.rfind("0::", 0) == 0 || controllers == "cpuset" || controllers.find("cpuset,") == 0)
            f.cgroup = line.substr(line.find(':', colon + 1) + 1);
    }
    const std::string bind = str_var(env, "SLURM_CPU_BIND");
    f.slurm_bind = bind.empty() ? str_var(env, "SLURM_CPU_BIND_TYPE") : bind;
    return f;
}

// --- GPUs: NVML, loaded at run time (libnvidia-ml comes with the driver) --------------------------------

namespace {

struct NvmlDevice;
using NvmlHandle = NvmlDevice*;
constexpr int kNvmlSuccess = 0, kNvmlNotSupported = 3;
constexpr int kUncorrected = 1, kVolatile = 0;  // nvmlMemoryErrorType_t, nvmlEccCounterType_t
struct NvmlMemory {                             // nvmlMemory_t (version 1)
    unsigned long long total, free, used;
};

struct Nvml {
    int (*init)() = nullptr;
    const char* (*error_string)(int) = nullptr;
    int (*count)(unsigned*) = nullptr;
    int (*handle)(unsigned, NvmlHandle*) = nullptr;
    int (*uuid)(NvmlHandle, char*, unsigned) = nullptr;
    int (*name)(NvmlHandle, char*, unsigned) = nullptr;
    int (*ecc)(NvmlHandle, int, int, unsigned long long*) = nullptr;
    int (*pending)(NvmlHandle, int*) = nullptr;
    int (*memory)(NvmlHandle, NvmlMemory*) = nullptr;
    int (*driver)(char*, unsigned) = nullptr;
};

const Nvml* nvml(std::string& error) {
    static SharedLibrary so("libnvidia-ml.so.1");
    static Nvml api;
    static const bool loaded = [] {
        so.bind(api.init, "nvmlInit_v2");
        so.bind(api.error_string, "nvmlErrorString");
        so.bind(api.count, "nvmlDeviceGetCount_v2");
        so.bind(api.handle, "nvmlDeviceGetHandleByIndex_v2");
        so.bind(api.uuid, "nvmlDeviceGetUUID");
        so.bind(api.name, "nvmlDeviceGetName");
        so.bind(api.ecc, "nvmlDeviceGetTotalEccErrors");
        so.bind(api.pending, "nvmlDeviceGetRetiredPagesPendingStatus");
        so.bind(api.memory, "nvmlDeviceGetMemoryInfo");
        so.bind(api.driver, "nvmlSystemGetDriverVersion");
        return so.ok();
    }();
    if (!loaded) error = so.error();
    return loaded ? &api : nullptr;
}

GpuFacts::Gpu nvml_gpu(const Nvml& api, unsigned index) {
    GpuFacts::Gpu g;
    g.index = static_cast<int>(index);
    NvmlHandle h = nullptr;
    if (int rc = api.handle(index, &h); rc != kNvmlSuccess) {
        g.error = api.error_string(rc);
        return g;
    }
    char text[96] = {};
    if (api.uuid(h, text, sizeof text) == kNvmlSuccess) g.uuid = text;
    if (api.name(h, text, sizeof text) == kNvmlSuccess) g.name = text;
    if (NvmlMemory m{}; api.memory(h, &m) == kNvmlSuccess) g.memory_bytes = m.total;
    // An answer other than success or "not supported" (no ECC on the board; H100 and later remap rows
    // instead of retiring pages) is the GPU's fault: a GPU that is lost answers so.
    auto note = [&](const char* what, int rc) {
        if (rc != kNvmlSuccess && rc != kNvmlNotSupported && g.error.empty())
            g.error = std::string(what) + ": " + api.error_string(rc);
    };
    note("ECC errors", api.ecc(h, kUncorrected, kVolatile, &g.uncorrected_ecc));
    int pending = 0;
    const int rc = api.pending(h, &pending);
    note("retired pages", rc);
    g.retirement_pending = rc == kNvmlSuccess && pending != 0;
    return g;
}

}  // namespace

GpuFacts probe_gpus(const topology::Topology* topo) {
    GpuFacts f;
    // The GPUs this process may use: inside a Slurm step with ConstrainDevices only the allocated ones are
    // open to it, and NVML sees only those.
    if (topo)
        f.topology_nvidia_gpus =
            static_cast<int>(std::count_if(topo->gpus.begin(), topo->gpus.end(), [](const auto& g) {
                return g.vendor == "nvidia" && g.accessible != false;
            }));
    const Nvml* api = nvml(f.nvml_error);
    if (!api) return f;
    if (int rc = api->init(); rc != kNvmlSuccess) {
        f.nvml_error = std::string("nvmlInit: ") + api->error_string(rc);
        return f;
    }
    f.nvml = true;
    if (char version[96] = {}; api->driver(version, sizeof version) == kNvmlSuccess) f.driver = version;
    unsigned n = 0;
    if (int rc = api->count(&n); rc != kNvmlSuccess) {
        f.nvml_error = std::string("nvmlDeviceGetCount: ") + api->error_string(rc);
        f.nvml = false;
        return f;
    }
    for (unsigned i = 0; i < n; ++i) f.gpus.push_back(nvml_gpu(*api, i));
    return f;  // NVML stays initialised: nvmlShutdown would cost the next caller its init again
}

// --- RDMA ports: libibverbs -----------------------------------------------------------------------------

namespace {

// libibverbs, opened on first use: linked, it and what it brings (libnl-route-3, libnl-3, libudev) would cost
// every agent's start their loading whether it read a port or not.
struct Verbs {
    decltype(&::ibv_get_device_list) get_device_list = nullptr;
    decltype(&::ibv_free_device_list) free_device_list = nullptr;
    decltype(&::ibv_get_device_name) get_device_name = nullptr;
    decltype(&::ibv_open_device) open_device = nullptr;
    decltype(&::ibv_close_device) close_device = nullptr;
    decltype(&::ibv_query_device) query_device = nullptr;
    decltype(&::ibv_port_state_str) port_state_str = nullptr;
    // verbs.h's ibv_query_port() is an inline that asks the device's own op, else this (the library's).
    int (*compat_query_port)(ibv_context*, uint8_t, _compat_ibv_port_attr*) = nullptr;
    std::string error;  // why it cannot be used ("" when it can)
};

const Verbs& verbs() {
    static const Verbs v = [] {
        static SharedLibrary so(DLAUNCH_LIBIBVERBS_SONAME);
        Verbs f;
        so.bind(f.get_device_list, "ibv_get_device_list");
        so.bind(f.free_device_list, "ibv_free_device_list");
        so.bind(f.get_device_name, "ibv_get_device_name");
        so.bind(f.open_device, "ibv_open_device");
        so.bind(f.close_device, "ibv_close_device");
        so.bind(f.query_device, "ibv_query_device");
        so.bind(f.port_state_str, "ibv_port_state_str");
        so.bind(f.compat_query_port, "ibv_query_port");
        f.error = so.error();
        return f;
    }();
    return v;
}

// What verbs.h's ibv_query_port() does, with the library's function taken from the opened library.
int query_port(const Verbs& v, ibv_context* ctx, uint8_t port, ibv_port_attr* attr) {
    if (verbs_context* vctx = verbs_get_ctx_op(ctx, query_port)) return vctx->query_port(ctx, port, attr, sizeof *attr);
    std::memset(attr, 0, sizeof *attr);
    return v.compat_query_port(ctx, port, reinterpret_cast<_compat_ibv_port_attr*>(attr));
}

// "4x HDR": the port's lanes and signalling (InfiniBand's encodings of active_width and active_speed).
std::string port_rate(const ibv_port_attr& a) {
    static const std::pair<int, const char*> widths[] = {{1, "1x"}, {2, "4x"}, {4, "8x"}, {8, "12x"}, {16, "2x"}};
    static const std::pair<int, const char*> speeds[] = {{1, "SDR"},  {2, "DDR"},  {4, "QDR"},  {8, "FDR10"},
                                                         {16, "FDR"}, {32, "EDR"}, {64, "HDR"}, {128, "NDR"}};
    std::string width = "?", speed = "?";
    for (auto [code, name] : widths)
        if (a.active_width == code) width = name;
    for (auto [code, name] : speeds)
        if (a.active_speed == code) speed = name;
    return width + " " + speed;
}

void add_ports(const Verbs& v, ibv_device* dev, PortFacts& f) {
    ibv_context* ctx = v.open_device(dev);
    if (!ctx) {
        f.verbs_error = std::string(v.get_device_name(dev)) + ": ibv_open_device: " + std::strerror(errno);
        return;
    }
    ibv_device_attr attr{};
    if (int rc = v.query_device(ctx, &attr); rc != 0)
        f.verbs_error = std::string(v.get_device_name(dev)) + ": ibv_query_device: " + std::strerror(rc);
    else
        for (int p = 1; p <= attr.phys_port_cnt; ++p) {
            ibv_port_attr pa{};
            if (query_port(v, ctx, static_cast<uint8_t>(p), &pa) != 0) continue;
            f.ports.push_back({v.get_device_name(dev), p, pa.state == IBV_PORT_ACTIVE, v.port_state_str(pa.state),
                               pa.link_layer == IBV_LINK_LAYER_ETHERNET ? "RoCE" : "InfiniBand", port_rate(pa)});
        }
    v.close_device(ctx);
}

}  // namespace

PortFacts probe_ib_ports(const topology::Topology* topo) {
    PortFacts f;
    if (topo) f.topology_nics = static_cast<int>(topo->nics.size());
    const Verbs& v = verbs();
    if (!v.error.empty()) {
        f.verbs_error = "cannot open libibverbs: " + v.error;
        return f;
    }
    int n = 0;
    ibv_device** list = v.get_device_list(&n);
    if (!list) {
        f.verbs_error = std::string("ibv_get_device_list: ") + std::strerror(errno);
        return f;
    }
    f.verbs = true;
    for (int i = 0; i < n; ++i) add_ports(v, list[i], f);
    v.free_device_list(list);
    return f;
}

// --- the SPANK plugin: listed in Slurm's plugstack.conf, loadable, its helper there ---------------------

namespace {

// Slurm's configuration: $SLURM_CONF or /etc/slurm/slurm.conf; PlugStackConfig= in it, else plugstack.conf
// beside it.
std::string plugstack_path(const EnvMap& env, bool& slurm) {
    const std::string conf = str_var(env, "SLURM_CONF").empty() ? "/etc/slurm/slurm.conf" : str_var(env, "SLURM_CONF");
    slurm = fs::exists(conf);
    std::ifstream in(conf);
    for (std::string line; std::getline(in, line);)
        if (line.rfind("PlugStackConfig=", 0) == 0) return line.substr(16, line.find_first_of(" \t#") - 16);
    return (fs::path(conf).parent_path() / "plugstack.conf").string();
}

// The first line of `path` (and the files it includes) that names spank_dlaunch.so.
std::string find_listing(const std::string& path, int depth = 0) {
    std::ifstream in(path);
    for (std::string line; std::getline(in, line);) {
        std::istringstream words(line);
        std::string kind, target;
        words >> kind >> target;
        if ((kind == "required" || kind == "optional") && fs::path(target).filename() == "spank_dlaunch.so")
            return line;
        if (kind != "include" || depth > 4) continue;
        // Slurm reads a relative include against the including file's directory.
        if (!target.empty() && target[0] != '/') target = (fs::path(path).parent_path() / target).string();
        glob_t g{};
        if (::glob(target.c_str(), 0, nullptr, &g) == 0)
            for (size_t i = 0; i < g.gl_pathc; ++i)
                if (std::string found = find_listing(g.gl_pathv[i], depth + 1); !found.empty()) {
                    ::globfree(&g);
                    return found;
                }
        ::globfree(&g);
    }
    return "";
}

}  // namespace

PluginFacts probe_plugin(const EnvMap& env) {
    PluginFacts f;
    f.plugstack = plugstack_path(env, f.slurm);
    if (!f.slurm) return f;
    f.listed = find_listing(f.plugstack);
    if (f.listed.empty()) return f;
    std::istringstream words(f.listed);
    std::string kind, arg;
    words >> kind >> f.plugin;
    while (words >> arg)
        if (arg.rfind("pyexec=", 0) == 0) f.helper = arg.substr(7);
    f.file_ok = fs::is_regular_file(f.plugin);
    // Loaded as Slurm loads it: srun adds a plugin's options to its --help (the plugin needs srun's own
    // symbols, so dlopen() outside Slurm cannot tell).
    const host::Output help = host::run_output({"srun", "--help"}, 10000, true);
    f.srun_checked = help.exit_code >= 0 && help.exit_code != 127;
    f.srun_offers = help.text.find("--dist-launch") != std::string::npos;
    for (const std::string& line : split(help.text, '\n'))  // "srun: error: spank: ...: Incompatible plugin version"
        if (f.srun_said.empty() && line.rfind("srun: error:", 0) == 0) f.srun_said = line;
    if (f.helper.empty()) {
        const fs::path beside = fs::path(f.plugin).parent_path() / "dlaunch-python";
        f.helper = fs::exists(beside) ? beside.string() : DLAUNCH_PYEXEC_DEFAULT;
    }
    f.helper_ok = ::access(f.helper.c_str(), X_OK) == 0;
    return f;
}

HelperFacts probe_helpers() {
    HelperFacts f;
    const fs::path helpers = host::helper_dir();
    f.expected_at = helpers.string();
    f.python_dir = host::python_hook_dir();
    for (const char* name :
         {"python/sitecustomize.py", "python/dlaunch_heartbeat.py", "dlaunch-python", "dlaunch-watch"})
        if (!fs::exists(helpers / name)) f.missing.push_back(name);
    return f;
}

PortRangeFacts probe_ports(const EnvMap& env, const PortRange& range, int master_port) {
    PortRangeFacts f;
    const std::string job = str_var(env, "SLURM_JOB_ID");
    if (!job.empty()) {
        f.scope = "Slurm job " + job + " (its steps' derived ports, --port-range " + std::to_string(range.low) + "-" +
                  std::to_string(range.high) + ")";
        for (int step = 0; step < kStepSlots; ++step) {
            const int port = deterministic_port(job, std::to_string(step), range);
            f.checked.push_back(port);
            f.checked.push_back(group_port(port, range));
        }
    } else {
        f.scope = "master port " + std::to_string(master_port) +
                  " (several nodes by hand), its group port and c10d's " + std::to_string(kDefaultC10dPort) +
                  " (--rdzv-endpoint HOST)";
        f.checked = {master_port, group_port(master_port, range), kDefaultC10dPort};
    }
    std::sort(f.checked.begin(), f.checked.end());
    f.checked.erase(std::unique(f.checked.begin(), f.checked.end()), f.checked.end());
    for (int port : f.checked)
        if (!host::check_port_free(port)) f.in_use.push_back(port);
    return f;
}

LogDirFacts probe_log_dir(const std::string& dir) {
    LogDirFacts f;
    f.path = dir;
    f.error = host::directory_problem(dir);
    f.exists = f.error.empty();
    if (!f.exists) return f;
    std::string probe = dir + "/.dlaunch-doctor-XXXXXX";
    const int fd = ::mkstemp(probe.data());
    if (fd < 0) {
        f.error = std::string("cannot create a file: ") + std::strerror(errno);
        return f;
    }
    ::close(fd);
    ::unlink(probe.c_str());
    f.writable = true;
    struct statvfs st {};
    if (::statvfs(dir.c_str(), &st) == 0) f.free_bytes = static_cast<unsigned long long>(st.f_bavail) * st.f_frsize;
    return f;
}

PythonFacts probe_python(const EnvMap& env) {
    PythonFacts f;
    f.python = host::find_python(env);
    if (f.python.empty()) {
        f.python = str_var(env, "PYTHON_EXEC").empty() ? "python3" : str_var(env, "PYTHON_EXEC");
        f.error = "not found";
        return f;
    }
    f.error = host::executable_problem(f.python);
    if (!f.error.empty()) return f;
    // torch's import takes seconds; a minute is an import that hangs (a broken CUDA driver does that). The
    // answers are marked: warnings (stderr, kept for the error text) may come between them.
    const host::Output out = host::run_output({f.python, "-c",
                                               "import sys; print('DLAUNCH_PY=' + sys.version.split()[0], flush=True); "
                                               "import torch; print('DLAUNCH_TORCH=' + torch.__version__)"},
                                              60000, true);
    std::string last;
    for (const std::string& line : split(out.text, '\n')) {
        if (line.rfind("DLAUNCH_PY=", 0) == 0)
            f.version = line.substr(11);
        else if (line.rfind("DLAUNCH_TORCH=", 0) == 0)
            f.torch_version = line.substr(14);
        else if (!line.empty())
            last = line;
    }
    f.runs = !f.version.empty();
    if (out.exit_code != 0) f.torch_version.clear();
    if (f.torch_version.empty())
        f.error = out.timed_out ? "timed out after 60 s" : last.empty() ? "printed nothing" : last;
    return f;
}

LibraryFacts probe_pmix() {
    LibraryFacts f;
    f.name = "PMIx";
    auto version = pmix::library_version();
    if (!version) {
        f.detail = version.error().what;
        return f;
    }
    f.loaded = true;
    std::istringstream words(first_line(*version));  // "OpenPMIx 4.2.2rc2 (PMIx Standard: 4.2, ...)"
    words >> f.detail >> f.version;
    return f;
}

LibraryFacts probe_nccl() {
    LibraryFacts f;
    f.name = "NCCL";
    void* h = ::dlopen("libnccl.so.2", RTLD_LAZY | RTLD_LOCAL);
    if (!h) {
        f.detail = "libnccl.so.2 not found on the loader's path (GPU jobs bring their own NCCL, e.g. torch's)";
        return f;
    }
    int v = 0;
    auto get_version = reinterpret_cast<int (*)(int*)>(::dlsym(h, "ncclGetVersion"));
    if (get_version && get_version(&v) == 0) {
        f.loaded = true;
        f.version = std::to_string(v / 10000) + "." + std::to_string(v / 100 % 100) + "." + std::to_string(v % 100);
        f.detail = "libnccl.so.2";
    } else {
        f.detail = "libnccl.so.2 has no working ncclGetVersion";
    }
    return f;
}

SrunFacts probe_srun(bool slurm_configured) {
    SrunFacts f;
    if (!slurm_configured) return f;
    const host::Output out = host::run_output({"srun", "--mpi=list"}, 10000, true);
    f.present = out.timed_out || (out.exit_code >= 0 && out.exit_code != 127);
    if (out.exit_code != 0) f.error = out.timed_out ? "timed out after 10 s" : first_line(out.text);
    // "MPI plugin types are...\n\tnone\n\tpmi2\n\tpmix\nspecific pmix plugin versions available: pmix_v4"
    for (const std::string& line : split(out.text, '\n'))
        if (!line.empty() && line[0] == '\t') f.mpi_plugins.push_back(line.substr(1));
    return f;
}

namespace {

std::string on_path(const std::string& command, const EnvMap& env) {
    for (const std::string& dir : split(str_var(env, "PATH"), ':')) {
        if (dir.empty()) continue;
        std::string candidate = dir + "/" + command;
        if (::access(candidate.c_str(), X_OK) == 0) return candidate;
    }
    return "";
}

// "mpirun (Open MPI) 4.1.4" or "mpiexec (OpenRTE) 4.1.4" -> "Open MPI 4.1.4"; Hydra's "HYDRA build details: ...
// Version: 4.0.2" -> "Hydra 4.0.2"; otherwise the first line.
std::string launcher_version(const std::string& text) {
    for (const char* name : {"(Open MPI) ", "(OpenRTE) "})  // Open MPI's mpirun, and its mpiexec
        if (auto at = text.find(name); at != std::string::npos)
            return "Open MPI " + first_line(text.substr(at + std::strlen(name)));
    if (text.find("HYDRA") != std::string::npos)
        for (const std::string& line : split(text, '\n'))
            if (auto at = line.find("Version:"); at != std::string::npos) {
                std::string v = line.substr(at + 8);
                v.erase(0, v.find_first_not_of(" \t"));
                return "Hydra " + v;
            }
    return first_line(text);
}

}  // namespace

MpiLauncherFacts probe_mpi_launchers(const EnvMap& env) {
    MpiLauncherFacts f;
    for (const char* command : {"mpirun", "mpiexec", "mpiexec.hydra", "mpirun_rsh", "flux"}) {
        const std::string path = on_path(command, env);
        if (path.empty()) continue;
        std::error_code ec;
        const auto real = std::filesystem::canonical(path, ec);
        MpiLauncherFacts::Launcher l{command, ec ? path : real.string(), ""};
        if (std::string(command) != "mpirun_rsh") {
            const host::Output out = host::run_output({path, "--version"}, 10000, true);
            if (out.exit_code == 0) l.version = launcher_version(out.text);
        }
        f.found.push_back(std::move(l));
    }
    return f;
}

}  // namespace dlaunch::doctor
