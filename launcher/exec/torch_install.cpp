#include "dlaunch/torch_install.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <functional>
#include <sstream>
#include <vector>

#include "dlaunch/host.hpp"
#include "dlaunch/proc_files.hpp"
#include "dlaunch/run_output.hpp"

namespace dlaunch::host {
namespace {

constexpr const char* kFindTorch =
    "import importlib.util as u\n"
    "s = u.find_spec('torch')\n"
    "print(s.submodule_search_locations[0] if s and s.submodule_search_locations else '')\n";

// `python -c kFindTorch`'s first line of output ("" when it fails or takes more than 10 s).
std::string torch_directory(const std::string& python) {
    const std::string text = run_output({python, "-c", kFindTorch}, 10000).text;
    return text.substr(0, text.find('\n'));
}

// Whether torch's store refuses libuv; asked of `python` only for a torch that reads USE_LIBUV.
constexpr const char* kProbeLibuv =
    "import torch.distributed as d\n"
    "try:\n"
    "    d.TCPStore('127.0.0.1', 0, 1, True, use_libuv=True)\n"
    "except Exception as e:\n"
    "    print('without libuv' if 'without libuv' in str(e) else 'other')\n";

bool store_without_libuv(const std::string& python, const std::string& torch) {
    if (read_file_from(torch + "/distributed/rendezvous.py").find("USE_LIBUV") == std::string::npos) return false;
    return run_output({python, "-c", kProbeLibuv}, 30000).text.starts_with("without libuv");
}

long long mtime_ns(const std::string& path) {
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) return -1;
    return static_cast<long long>(st.st_mtim.tv_sec) * 1000000000LL + st.st_mtim.tv_nsec;
}

std::string cache_file(const std::string& python) {
    return topology_cache_dir() + "/torch-facts-" + std::to_string(std::hash<std::string>{}(python));
}

}  // namespace

std::optional<std::string> local_rank_arg_in_run_py(const std::string& source) {
    if (source.find("\"--local-rank={") != std::string::npos) return "--local-rank";
    if (source.find("\"--local_rank={") != std::string::npos) return "--local_rank";
    return std::nullopt;
}

std::optional<std::string> async_error_var_in_agent_py(const std::string& source) {
    for (const char* name : {"TORCH_NCCL_ASYNC_ERROR_HANDLING", "NCCL_ASYNC_ERROR_HANDLING"})
        if (source.find(std::string("\"") + name + "\"") != std::string::npos) return name;
    return std::nullopt;
}

std::optional<TorchFacts> torch_facts(const std::string& python) {
    if (python.empty()) return std::nullopt;
    // Cached: run.py's path, its mtime, then one fact per line.
    std::ifstream cached(cache_file(python));
    std::string run_py, mtime, libuv;
    TorchFacts facts;
    if (std::getline(cached, run_py) && std::getline(cached, mtime) && std::getline(cached, facts.local_rank_arg) &&
        std::getline(cached, facts.async_error_var) && std::getline(cached, libuv) &&
        mtime == std::to_string(mtime_ns(run_py))) {
        facts.store_without_libuv = libuv == "store without libuv";
        return facts;
    }
    const std::string torch = torch_directory(python);
    if (torch.empty()) return std::nullopt;
    run_py = torch + "/distributed/run.py";
    facts.local_rank_arg = local_rank_arg_in_run_py(read_file_from(run_py)).value_or("");
    facts.async_error_var =
        async_error_var_in_agent_py(read_file_from(torch + "/distributed/elastic/agent/server/local_elastic_agent.py"))
            .value_or("");
    facts.store_without_libuv = store_without_libuv(python, torch);
    ::mkdir(topology_cache_dir().c_str(), 0700);
    std::ofstream(cache_file(python)) << run_py << "\n"
                                      << mtime_ns(run_py) << "\n"
                                      << facts.local_rank_arg << "\n"
                                      << facts.async_error_var << "\n"
                                      << (facts.store_without_libuv ? "store without libuv"
                                                                    : "store as torch builds it")
                                      << "\n";
    return facts;
}

}  // namespace dlaunch::host
