// Discovery through hwloc: the only file that sees hwloc topology objects. It keeps PCI and OS devices
// (hwloc's default I/O filter drops them, for XML input too) and turns what it finds into Topology values.
//
// Caveats:
// - GPUs are PCI devices by vendor and class: NVIDIA 0x10de with class 0x0300 (VGA) or 0x0302 (3D); AMD
//   0x1002 with 0x0302/0x0380, or 0x0300 with a compute OS device under it (RSMI, or OpenCL in XML files:
//   the OpenCL plugin is not loaded for live discovery, see open_topology).
//   Debian's hwloc has no CUDA/NVML plugin. NVSwitches (0x0680) are not GPUs.
// - RDMA NICs are OpenFabrics OS devices; their netdev is the Network OS device on the same PCI device;
//   a port's state is hwloc's "Port<N>State" info (4 = active). A NIC without port info counts as one
//   active port 1.
// - hwloc_get_common_ancestor_obj() crashes on I/O objects; we only walk parents.
// - Device-cgroup access to NVIDIA GPUs is probed by opening /dev/nvidia<minor> (minor from
//   /proc/driver/nvidia); unknown (nullopt) elsewhere and for XML input.
#include <fcntl.h>
#include <hwloc.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <utility>

#include "dlaunch/topology/topology.hpp"
#include "hwloc_load.hpp"

namespace dlaunch::topology {
namespace {

struct Handle {
    hwloc_topology_t t = nullptr;
    Handle() = default;
    Handle(const Handle&) = delete;
    ~Handle() {
        if (t) hwloc_topology_destroy(t);
    }
    // The loaded topology, for the Topology read from it to keep (binding on this machine uses it).
    MachineLoad keep() { return MachineLoad(std::make_shared<const MachineLoad::Hwloc>(std::exchange(t, nullptr))); }
};

CpuSet to_cpuset(hwloc_const_bitmap_t bitmap) {
    CpuSet set;
    if (!bitmap || hwloc_bitmap_iszero(bitmap)) return set;
    if (hwloc_bitmap_weight(bitmap) < 0) return set;  // infinite set: treat as unknown
    int id;
    hwloc_bitmap_foreach_begin(id, bitmap) set.insert(id);
    hwloc_bitmap_foreach_end();
    return set;
}

std::string pci_address(hwloc_obj_t obj) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%04x:%02x:%02x.%01x", obj->attr->pcidev.domain, obj->attr->pcidev.bus,
                  obj->attr->pcidev.dev, obj->attr->pcidev.func);
    return buf;
}

PciLocation locate(hwloc_topology_t t, hwloc_obj_t pci) {
    PciLocation loc;
    loc.pci = pci_address(pci);
    for (hwloc_obj_t p = pci->parent; p && p->type == HWLOC_OBJ_BRIDGE; p = p->parent)
        loc.bridges.insert(loc.bridges.begin(), p->gp_index);
    hwloc_obj_t anc = hwloc_get_non_io_ancestor_obj(t, pci);
    if (anc) {
        loc.locality = to_cpuset(anc->cpuset);
        loc.numa = to_cpuset(anc->nodeset);
        hwloc_obj_t pkg =
            anc->type == HWLOC_OBJ_PACKAGE ? anc : hwloc_get_ancestor_obj_by_type(t, HWLOC_OBJ_PACKAGE, anc);
        if (pkg) loc.package = static_cast<int>(pkg->logical_index);
    }
    return loc;
}

bool has_coprocessor_osdev(hwloc_obj_t pci) {
    for (hwloc_obj_t c = pci->io_first_child; c; c = c->next_sibling)
        if (c->type == HWLOC_OBJ_OS_DEVICE && c->attr->osdev.type == HWLOC_OBJ_OSDEV_COPROC) return true;
    return false;
}

bool is_gpu(hwloc_obj_t pci) {
    unsigned vendor = pci->attr->pcidev.vendor_id, cls = pci->attr->pcidev.class_id;
    if (vendor == 0x10de) return cls == 0x0300 || cls == 0x0302;
    // AMD VGA-class devices are often server-board graphics (ES1000); count those only when hwloc
    // found a compute device (OpenCL/RSMI) on them.
    if (vendor == 0x1002) return cls == 0x0302 || cls == 0x0380 || (cls == 0x0300 && has_coprocessor_osdev(pci));
    return false;
}

void probe_nvidia_access(Gpu& gpu) {
    std::ifstream info("/proc/driver/nvidia/gpus/" + gpu.loc.pci + "/information");
    for (std::string line; std::getline(info, line);) {
        if (line.rfind("Device Minor:", 0) != 0) continue;
        gpu.minor = std::atoi(line.c_str() + 13);
        std::string dev = "/dev/nvidia" + std::to_string(*gpu.minor);
        int fd = ::open(dev.c_str(), O_RDONLY | O_CLOEXEC);
        gpu.accessible = fd >= 0 || (errno != EPERM && errno != EACCES);
        if (fd >= 0) ::close(fd);
    }
}

// The CPUs this process may use (the cgroup's, and with Scope::ProcessBinding its own binding), the
// packages, NUMA nodes and cores; a machine described without Core objects gets one "core" per PU.
void extract_cpus(hwloc_topology_t t, bool this_system, Scope scope, Topology& topo) {
    hwloc_bitmap_t allowed = hwloc_bitmap_dup(hwloc_topology_get_allowed_cpuset(t));
    if (this_system) {
        hwloc_bitmap_t bound = hwloc_bitmap_alloc();
        if (hwloc_get_cpubind(t, bound, HWLOC_CPUBIND_PROCESS) == 0 && hwloc_bitmap_intersects(bound, allowed)) {
            topo.process_binding = to_cpuset(bound);
            if (scope == Scope::ProcessBinding) hwloc_bitmap_and(allowed, allowed, bound);
        }
        hwloc_bitmap_free(bound);
    }
    topo.allowed = to_cpuset(allowed);
    topo.cpus = std::max<int>(1, static_cast<int>(topo.allowed.size()));

    for (hwloc_obj_t o = nullptr; (o = hwloc_get_next_obj_by_type(t, HWLOC_OBJ_PACKAGE, o));)
        topo.packages.push_back({static_cast<int>(o->logical_index), to_cpuset(o->cpuset)});
    for (hwloc_obj_t o = nullptr; (o = hwloc_get_next_obj_by_type(t, HWLOC_OBJ_NUMANODE, o));)
        topo.numa_nodes.push_back(
            {static_cast<int>(o->os_index), to_cpuset(o->cpuset), o->attr->numanode.local_memory});

    hwloc_obj_type_t core_type = hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_CORE) > 0 ? HWLOC_OBJ_CORE : HWLOC_OBJ_PU;
    for (hwloc_obj_t o = nullptr; (o = hwloc_get_next_obj_by_type(t, core_type, o));) {
        hwloc_bitmap_t pus = hwloc_bitmap_dup(o->cpuset);
        hwloc_bitmap_and(pus, pus, allowed);
        Core core{static_cast<int>(o->logical_index), to_cpuset(pus), -1, -1};
        hwloc_bitmap_free(pus);
        if (core.pus.empty()) continue;
        for (auto& n : topo.numa_nodes)
            if (n.cpus.intersects(core.pus)) {
                core.numa = n.os_index;
                break;
            }
        if (hwloc_obj_t pkg = hwloc_get_ancestor_obj_by_type(t, HWLOC_OBJ_PACKAGE, o))
            core.package = static_cast<int>(pkg->logical_index);
        topo.cores.push_back(core);
    }
    hwloc_bitmap_free(allowed);
}

// GPUs in PCI order (their index is their position).
void extract_gpus(hwloc_topology_t t, bool this_system, Topology& topo) {
    for (hwloc_obj_t pci = nullptr; (pci = hwloc_get_next_pcidev(t, pci));) {
        if (!is_gpu(pci)) continue;
        Gpu gpu;
        gpu.vendor = pci->attr->pcidev.vendor_id == 0x10de ? "nvidia" : "amd";
        if (const char* name = hwloc_obj_get_info_by_name(pci, "PCIDevice")) gpu.model = name;
        gpu.loc = locate(t, pci);
        if (this_system && gpu.vendor == "nvidia") probe_nvidia_access(gpu);
        topo.gpus.push_back(gpu);
    }
    std::sort(topo.gpus.begin(), topo.gpus.end(), [](auto& a, auto& b) { return a.loc.pci < b.loc.pci; });
    for (size_t i = 0; i < topo.gpus.size(); ++i) topo.gpus[i].index = static_cast<int>(i);
}

// RDMA NICs with their ports' states, and the plain network interfaces that are not an RDMA NIC's.
void extract_nics(hwloc_topology_t t, Topology& topo) {
    for (hwloc_obj_t os = nullptr; (os = hwloc_get_next_osdev(t, os));) {
        hwloc_obj_t pci = os->parent;
        if (!pci || pci->type != HWLOC_OBJ_PCI_DEVICE || !os->name) continue;
        if (os->attr->osdev.type == HWLOC_OBJ_OSDEV_OPENFABRICS) {
            Nic nic;
            nic.name = os->name;
            nic.loc = locate(t, pci);
            for (hwloc_obj_t sib = pci->io_first_child; sib; sib = sib->next_sibling)
                if (sib->type == HWLOC_OBJ_OS_DEVICE && sib->attr->osdev.type == HWLOC_OBJ_OSDEV_NETWORK && sib->name)
                    nic.netdev = sib->name;
            for (unsigned i = 0; i < os->infos_count; ++i) {
                // "Port<N>State" exactly (there are also Port<N>LID, Port<N>GID0, ...).
                std::string name = os->infos[i].name;
                if (name.size() <= 9 || name.rfind("Port", 0) != 0 || name.substr(name.size() - 5) != "State") continue;
                std::string digits = name.substr(4, name.size() - 9);
                if (digits.empty() || digits.find_first_not_of("0123456789") != std::string::npos) continue;
                nic.ports.push_back({std::stoi(digits), std::atoi(os->infos[i].value)});
            }
            if (nic.ports.empty()) nic.ports.push_back({1, 4});
            std::sort(nic.ports.begin(), nic.ports.end(), [](auto& a, auto& b) { return a.number < b.number; });
            topo.nics.push_back(nic);
        }
    }
    for (hwloc_obj_t os = nullptr; (os = hwloc_get_next_osdev(t, os));) {
        hwloc_obj_t pci = os->parent;
        if (!pci || pci->type != HWLOC_OBJ_PCI_DEVICE || !os->name || os->attr->osdev.type != HWLOC_OBJ_OSDEV_NETWORK)
            continue;
        bool rdma = std::any_of(topo.nics.begin(), topo.nics.end(), [&](auto& n) { return n.netdev == os->name; });
        if (!rdma) topo.interfaces.push_back({os->name, locate(t, pci)});
    }
    std::sort(topo.nics.begin(), topo.nics.end(),
              [](auto& a, auto& b) { return std::tie(a.loc.pci, a.name) < std::tie(b.loc.pci, b.name); });
}

Topology extract(hwloc_topology_t t, bool this_system, const std::string& source, Scope scope) {
    Topology topo;
    topo.source = source;
    extract_cpus(t, this_system, scope, topo);
    extract_gpus(t, this_system, topo);
    extract_nics(t, topo);
    return topo;
}

// hwloc dlopens every plugin at its first init, before components can be blacklisted; the GL one pulls in
// X11 and the OpenCL one its runtime, for nothing dlaunch uses, at every launch. The libxml2 one
// pulls in libxml2, ICU, liblzma and zlib (their loading and symbol lookups) where hwloc's built-in
// XML reader and writer handle its own exports; reading an export needs no PCI plugin either. Scoped,
// so that no HWLOC_ variable reaches the workers' or the application's environment.
class SkipUnusedPlugins {
public:
    explicit SkipUnusedPlugins(bool from_xml) : set_(!std::getenv("HWLOC_PLUGINS_BLACKLIST")) {
        if (set_)
            ::setenv("HWLOC_PLUGINS_BLACKLIST",
                     from_xml ? "hwloc_gl,hwloc_opencl,hwloc_xml_libxml,hwloc_pci"
                              : "hwloc_gl,hwloc_opencl,hwloc_xml_libxml",
                     0);
    }
    ~SkipUnusedPlugins() {
        if (set_) ::unsetenv("HWLOC_PLUGINS_BLACKLIST");
    }

private:
    bool set_;
};

// `whole_machine`: keep the CPUs and memory this process may not use (a cache's export is read later by
// processes of other cgroups: it must describe the machine, not this cgroup).
// A relocated dlaunch (tests/gpu/bundle.sh) carries hwloc's plugins (PCI discovery: the GPUs and NICs) in
// <prefix>/lib/hwloc beside its programs; hwloc looks only where it was built to unless HWLOC_PLUGINS_PATH
// says otherwise. True when it was set here (for hwloc's init only).
bool use_carried_hwloc_plugins() {
    if (std::getenv("HWLOC_PLUGINS_PATH")) return false;
    std::error_code ec;
    const auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
    if (ec) return false;
    for (const auto& prefix : {exe.parent_path().parent_path(), exe.parent_path().parent_path().parent_path()}) {
        const auto dir = prefix / "lib" / "hwloc";
        if (std::filesystem::exists(dir / "hwloc_pci.so", ec))
            return ::setenv("HWLOC_PLUGINS_PATH", dir.c_str(), 1) == 0;
    }
    return false;
}

Status open_topology(Handle& h, const std::string* xml, bool this_system, bool whole_machine = false) {
    SkipUnusedPlugins skip(xml != nullptr);
    const bool carried = use_carried_hwloc_plugins();
    const int init = hwloc_topology_init(&h.t);
    if (carried) ::unsetenv("HWLOC_PLUGINS_PATH");  // read by hwloc's init; the workers need none of it
    if (init != 0) return Error{"topology: hwloc: cannot initialise", "check that libhwloc is installed"};
    if (whole_machine) {
        hwloc_topology_set_flags(h.t, HWLOC_TOPOLOGY_FLAG_INCLUDE_DISALLOWED);
        // The cache's export is read at every start, and hwloc's import costs by the object: caches are a third
        // to half of a big node's objects and nothing here reads them.
        hwloc_topology_set_cache_types_filter(h.t, HWLOC_TYPE_FILTER_KEEP_NONE);
        hwloc_topology_set_icache_types_filter(h.t, HWLOC_TYPE_FILTER_KEEP_NONE);
        hwloc_topology_set_type_filter(h.t, HWLOC_OBJ_MEMCACHE, HWLOC_TYPE_FILTER_KEEP_NONE);
    }
    hwloc_topology_set_io_types_filter(h.t, HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
    // Not needed to find GPUs and NICs, and slow or intrusive at every launch: "gl" probes 20 X11
    // displays over TCP and sockets, "opencl" starts the OpenCL runtime.
    hwloc_topology_set_components(h.t, HWLOC_TOPOLOGY_COMPONENTS_FLAG_BLACKLIST, "gl");
    hwloc_topology_set_components(h.t, HWLOC_TOPOLOGY_COMPONENTS_FLAG_BLACKLIST, "opencl");
    if (xml) {
        struct stat st {};
        if (::stat(xml->c_str(), &st) != 0)
            return Error{"topology: " + *xml + ": " + std::strerror(errno), "give an hwloc XML file (lstopo --of xml)"};
        if (hwloc_topology_set_xml(h.t, xml->c_str()) != 0)
            return Error{"topology: " + *xml + ": not a valid hwloc XML topology (" + std::strerror(errno) + ")",
                         "give an hwloc XML file (lstopo --of xml)"};
        // A cache of this machine: binding works, and the cgroup's CPUs are read now, not from the file.
        if (this_system)
            hwloc_topology_set_flags(
                h.t, HWLOC_TOPOLOGY_FLAG_IS_THISSYSTEM | HWLOC_TOPOLOGY_FLAG_THISSYSTEM_ALLOWED_RESOURCES);
    }
    if (hwloc_topology_load(h.t) != 0)
        return Error{"topology: " + (xml ? *xml + ": not a valid hwloc XML topology"
                                         : std::string("cannot load this machine's topology")),
                     xml ? "give an hwloc XML file (lstopo --of xml)" : "run lstopo to see what hwloc reports"};
    return Ok{};
}

bool usable_cache_path(const std::string& path, bool directory) {
    struct stat st {};
    if (::lstat(path.c_str(), &st) != 0) return false;
    if (st.st_uid != ::geteuid()) return false;
    if (directory) return S_ISDIR(st.st_mode) && (st.st_mode & 022) == 0;
    return S_ISREG(st.st_mode);
}

std::string sanitize(const std::string& key) {
    std::string out;
    for (char c : key) out += (std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-') ? c : '_';
    return out.substr(0, 100);
}

}  // namespace

Result<Topology> discover(Scope scope) {
    Handle h;
    if (auto s = open_topology(h, nullptr, true); !s) return s.error();
    Topology topo = extract(h.t, true, "this machine", scope);
    topo.machine = h.keep();
    return topo;
}

Result<Topology> load_xml(const std::string& path) {
    Handle h;
    if (auto s = open_topology(h, &path, false); !s) return s.error();
    Topology topo = extract(h.t, false, path, Scope::Cgroup);
    if (topo.cores.empty())
        return Error{"topology: " + path + ": no usable cores in this topology", "give a complete hwloc XML export"};
    return topo;
}

Result<Topology> discover_cached(const std::string& cache_dir, const std::string& key, Scope scope) {
    ::mkdir(cache_dir.c_str(), 0700);
    if (!usable_cache_path(cache_dir, true)) return discover(scope);
    const std::string path = cache_dir + "/" + sanitize(key) + ".xml";
    auto load_export = [&](const std::string& described) -> std::optional<Topology> {
        if (!usable_cache_path(path, false)) return std::nullopt;
        Handle h;
        if (!open_topology(h, &path, true)) return std::nullopt;
        Topology topo = extract(h.t, true, described, scope);
        topo.machine = h.keep();  // an export read as this machine's (IS_THISSYSTEM): hwloc binds with it
        return topo;
    };
    const std::string cached_here = "this machine (cached in " + path + ")";
    // Readers need no lock: the export appears by rename, whole.
    if (auto cached = load_export(cached_here)) return *cached;
    // One discoverer per key: the others wait on the lock, then read its export.
    int lock = ::open((path + ".lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (lock >= 0) ::flock(lock, LOCK_EX);
    Result<Topology> result = Error{"", ""};
    if (auto cached = load_export(cached_here)) result = *cached;
    if (!result) {
        // The whole machine goes to the cache (the first discoverer may be a 1-CPU step); this process's
        // view of it is then read back from the export, as every later reader does.
        Handle h;
        if (open_topology(h, nullptr, true, true)) {
            std::string tmp = path + "." + std::to_string(::getpid());
            if (hwloc_topology_export_xml(h.t, tmp.c_str(), 0) == 0)
                ::rename(tmp.c_str(), path.c_str());
            else
                ::unlink(tmp.c_str());
        }
        auto cached = load_export("this machine");
        result = cached ? Result<Topology>(*cached) : discover(scope);
    }
    if (lock >= 0) ::close(lock);
    return result;
}

}  // namespace dlaunch::topology
