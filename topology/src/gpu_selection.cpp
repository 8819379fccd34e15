#include "dlaunch/topology/gpu_selection.hpp"

#include <algorithm>
#include <charconv>

#include "dlaunch/text.hpp"

namespace dlaunch::topology {
namespace {

std::optional<int> to_int(const std::string& s) {
    int v = 0;
    auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (s.empty() || ec != std::errc{} || p != s.data() + s.size() || v < 0) return std::nullopt;
    return v;
}

std::string join(const std::vector<int>& v) {
    std::string out;
    for (int i : v) out += (out.empty() ? "" : ",") + std::to_string(i);
    return out;
}

}  // namespace

namespace {

// The GPUs of the node's main vendor this process may open (the device cgroup hides the others).
std::vector<int> vendor_gpus(const Topology& topo, GpuSelection& sel) {
    size_t nvidia = 0, amd = 0;
    for (auto& g : topo.gpus) (g.vendor == "amd" ? amd : nvidia)++;
    const std::string vendor = amd > nvidia ? "amd" : "nvidia";
    if (vendor == "amd") sel.visible_var = "HIP_VISIBLE_DEVICES";
    if (nvidia > 0 && amd > 0)
        sel.warnings.push_back("gpu: this node has " + std::to_string(nvidia) + " NVIDIA and " + std::to_string(amd) +
                               " AMD GPU(s); using the " + (vendor == "amd" ? "AMD" : "NVIDIA") + " ones only");
    std::vector<int> usable;
    for (auto& g : topo.gpus) {
        if (g.vendor != vendor || g.accessible == false) continue;
        sel.cuda_visible_base.push_back(g.index);
        usable.push_back(g.index);
    }
    const size_t of_vendor = vendor == "amd" ? amd : nvidia;
    if (sel.cuda_visible_base.size() < of_vendor)
        sel.warnings.push_back("gpu: " + std::to_string(of_vendor - sel.cuda_visible_base.size()) + " of " +
                               std::to_string(of_vendor) +
                               " GPU(s) are hidden from this process by its device cgroup; using the others");
    return usable;
}

// CUDA_VISIBLE_DEVICES (HIP_VISIBLE_DEVICES) as set by the user or a scheduler narrows `usable`; false
// when it names devices dlaunch cannot place (UUIDs, MIG ids): then selection is left to CUDA.
bool apply_visible_devices(const std::string& value, GpuSelection& sel, std::vector<int>& usable) {
    std::vector<int> chosen;
    for (auto& item : split(value, ',')) {
        if (item.empty() && value.empty()) break;
        auto idx = to_int(item);
        if (!idx) {
            sel.cuda_visible_unmappable = true;
            sel.warnings.push_back("gpu: " + sel.visible_var + "=" + value +
                                   " names devices by UUID or MIG id, which dlaunch cannot place on the PCI tree; "
                                   "GPU selection, GPU binding and CUDA_VISIBLE_DEVICES are left as they are");
            sel.usable.clear();
            return false;
        }
        if (*idx >= static_cast<int>(sel.cuda_visible_base.size())) {
            sel.warnings.push_back("gpu: " + sel.visible_var + "=" + value + " names device " + item +
                                   ", which does not exist here; CUDA ignores it and the devices after it");
            break;
        }
        chosen.push_back(sel.cuda_visible_base[*idx]);
    }
    std::vector<int> kept;
    for (int g : usable)
        if (std::find(chosen.begin(), chosen.end(), g) != chosen.end()) kept.push_back(g);
    if (kept.size() < usable.size())
        sel.warnings.push_back("gpu: " + sel.visible_var + "=" + value + " leaves " + std::to_string(kept.size()) +
                               " of " + std::to_string(usable.size()) + " GPU(s)");
    usable = kept;
    return true;
}

// Slurm's GPU allocation (SLURM_STEP_GPUS, else SLURM_JOB_GPUS, by minor number) narrows `usable`.
void apply_slurm_gpus(const Topology& topo, const std::string& allocation, std::vector<int>& usable) {
    std::vector<int> allocated;
    for (auto& item : split(allocation, ','))
        if (auto v = to_int(item)) allocated.push_back(*v);
    std::vector<int> kept;
    for (int g : usable) {
        const Gpu& gpu = topo.gpus[static_cast<size_t>(g)];
        int id = gpu.minor.value_or(gpu.index);
        if (std::find(allocated.begin(), allocated.end(), id) != allocated.end()) kept.push_back(g);
    }
    usable = kept;
}

// --devices picks among the usable GPUs by position.
Result<std::vector<int>> pick_devices(const std::vector<int>& devices, const std::vector<int>& usable,
                                      const std::string& option) {
    std::vector<int> picked;
    for (int d : devices) {
        if (d < 0 || d >= static_cast<int>(usable.size()))
            return Error{"plan: " + option + ": device " + std::to_string(d) + " does not exist",
                         usable.empty() ? "this node has no usable GPU; drop " + option
                                        : "this node has " + std::to_string(usable.size()) +
                                              " usable GPU(s), numbered 0-" + std::to_string(usable.size() - 1)};
        if (std::find(picked.begin(), picked.end(), usable[static_cast<size_t>(d)]) != picked.end())
            return Error{"plan: " + option + ": device " + std::to_string(d) + " listed twice",
                         "list each device once"};
        picked.push_back(usable[static_cast<size_t>(d)]);
    }
    std::sort(picked.begin(), picked.end());
    return picked;
}

}  // namespace

Result<GpuSelection> select_gpus(const Topology& topo, const std::map<std::string, std::string>& env,
                                 const std::optional<std::vector<int>>& devices, const std::string& option) {
    GpuSelection sel;
    std::vector<int> usable = vendor_gpus(topo, sel);
    if (auto it = env.find(sel.visible_var); it != env.end())
        if (!apply_visible_devices(it->second, sel, usable)) return sel;
    for (const char* var : {"SLURM_STEP_GPUS", "SLURM_JOB_GPUS"})
        if (auto it = env.find(var); it != env.end()) {
            apply_slurm_gpus(topo, it->second, usable);
            break;
        }
    if (devices) {
        auto picked = pick_devices(*devices, usable, option);
        if (!picked) return picked.error();
        usable = *picked;
    }
    sel.usable = usable;
    return sel;
}

std::string cuda_visible_devices(const std::vector<int>& order, const std::vector<int>& base) {
    std::vector<int> cuda;
    for (int g : order) {
        auto it = std::find(base.begin(), base.end(), g);
        if (it != base.end()) cuda.push_back(static_cast<int>(it - base.begin()));
    }
    return join(cuda);
}

}  // namespace dlaunch::topology
