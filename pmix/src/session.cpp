// PMIx client session: the only file that sees PMIx types.
#include <pmix.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <sstream>

#include "dlaunch/pmix/job_source.hpp"

namespace dlaunch::pmix {
namespace {

// Every integer PMIx hands us, whatever type the launcher chose for it.
std::optional<long long> to_integer(const pmix_value_t* v) {
    if (!v) return std::nullopt;
    switch (v->type) {
    case PMIX_INT: return v->data.integer;
    case PMIX_INT8: return v->data.int8;
    case PMIX_INT16: return v->data.int16;
    case PMIX_INT32: return v->data.int32;
    case PMIX_INT64: return v->data.int64;
    case PMIX_UINT: return v->data.uint;
    case PMIX_UINT8: return v->data.uint8;
    case PMIX_UINT16: return v->data.uint16;
    case PMIX_UINT32: return v->data.uint32;
    case PMIX_UINT64: return static_cast<long long>(v->data.uint64);
    case PMIX_SIZE: return static_cast<long long>(v->data.size);
    case PMIX_PROC_RANK: return v->data.rank;
    case PMIX_STRING:
        if (v->data.string) {
            char* end = nullptr;
            long long n = std::strtoll(v->data.string, &end, 10);
            if (end && *end == '\0' && end != v->data.string) return n;
        }
        return std::nullopt;
    default: return std::nullopt;
    }
}

std::string status_text(pmix_status_t rc) { return PMIx_Error_string(rc); }

}  // namespace

struct Session::Impl {
    pmix_proc_t self{};
    bool connected = false;

    // A key of `rank` (PMIX_RANK_WILDCARD for job-level keys); nullptr when absent.
    pmix_value_t* fetch(pmix_rank_t rank, const char* key) const {
        pmix_proc_t proc;
        PMIX_PROC_LOAD(&proc, self.nspace, rank);
        pmix_value_t* value = nullptr;
        if (PMIx_Get(&proc, key, nullptr, 0, &value) != PMIX_SUCCESS) return nullptr;
        return value;
    }
    std::optional<long long> integer(pmix_rank_t rank, const char* key) const {
        pmix_value_t* v = fetch(rank, key);
        auto n = to_integer(v);
        if (v) PMIX_VALUE_RELEASE(v);
        return n;
    }
    std::optional<std::string> text(pmix_rank_t rank, const char* key) const {
        pmix_value_t* v = fetch(rank, key);
        std::optional<std::string> s;
        if (v && v->type == PMIX_STRING && v->data.string) s = v->data.string;
        if (v) PMIX_VALUE_RELEASE(v);
        return s;
    }
};

Session::Session() : impl_(std::make_unique<Impl>()) {}

Session::~Session() { finalize(); }

Result<std::unique_ptr<Session>> Session::connect_if_available(const EnvMap& env) {
    if (!env.contains("PMIX_NAMESPACE") && !env.contains("PMIX_RANK")) return std::unique_ptr<Session>{};
    // Before the first PMIx_Init, and inherited by the application we exec: see the module's caveats.
    ::setenv("PMIX_MCA_gds", "hash", 0);
    std::unique_ptr<Session> s(new Session());
    pmix_status_t rc = PMIx_Init(&s->impl_->self, nullptr, 0);
    if (rc != PMIX_SUCCESS)
        return Error{"pmix: cannot connect to the PMIx server named in the environment: " + status_text(rc),
                     "start under mpirun or srun --mpi=pmix, or unset PMIX_NAMESPACE to use Slurm's variables"};
    s->impl_->connected = true;
    return s;
}

Result<SchedulerInfo> Session::job() const {
    const Impl& p = *impl_;
    SchedulerInfo info;
    info.source = "pmix";
    info.job_id = p.self.nspace;
    info.rank = static_cast<int>(p.self.rank);
    auto size = p.integer(PMIX_RANK_WILDCARD, PMIX_JOB_SIZE);
    auto local_rank = p.integer(p.self.rank, PMIX_LOCAL_RANK);
    auto local_size = p.integer(PMIX_RANK_WILDCARD, PMIX_LOCAL_SIZE);
    if (!size || !local_rank || !local_size)
        return Error{"pmix: the PMIx server did not give the job size, local rank or local size",
                     "start under mpirun or srun --mpi=pmix"};
    info.size = static_cast<int>(*size);
    info.local_rank = static_cast<int>(*local_rank);
    info.local_size = static_cast<int>(*local_size);
    info.nnodes = static_cast<int>(p.integer(PMIX_RANK_WILDCARD, PMIX_NUM_NODES).value_or(1));
    if (auto peers = p.text(PMIX_RANK_WILDCARD, PMIX_LOCAL_PEERS)) {
        std::stringstream in(*peers);
        for (std::string item; std::getline(in, item, ',');) info.local_peers.push_back(std::atoi(item.c_str()));
    }
    // Node order: rank 0's node first, then the others as PMIx lists them (the same list for every
    // rank). Two lookups and one resolve per rank, not one lookup per rank of the job.
    auto first = p.text(0, PMIX_HOSTNAME);
    auto mine = p.text(p.self.rank, PMIX_HOSTNAME);
    char* list = nullptr;
    if (first && mine && PMIx_Resolve_nodes(p.self.nspace, &list) == PMIX_SUCCESS && list) {
        std::vector<std::string> hosts{*first};
        std::stringstream in(list);
        for (std::string host; std::getline(in, host, ',');)
            if (!host.empty() && std::find(hosts.begin(), hosts.end(), host) == hosts.end()) hosts.push_back(host);
        std::free(list);
        info.nodes = hosts;
        info.nnodes = static_cast<int>(hosts.size());
        for (size_t i = 0; i < hosts.size(); ++i)
            if (hosts[i] == *mine) info.node_rank = static_cast<int>(i);
    }
    if (const char* step = std::getenv("SLURM_STEP_ID")) info.step_id = step;
    if (const char* job = std::getenv("SLURM_JOB_ID")) info.job_id = job;
    return info;
}

Status Session::put(const std::string& key, const std::string& value) {
    pmix_value_t v;
    PMIx_Value_load(&v, value.c_str(), PMIX_STRING);
    pmix_status_t rc = PMIx_Put(PMIX_GLOBAL, key.c_str(), &v);
    PMIx_Value_destruct(&v);
    if (rc == PMIX_SUCCESS) rc = PMIx_Commit();
    if (rc != PMIX_SUCCESS) return Error{"pmix: publishing " + key + ": " + status_text(rc), "check the launcher's PMIx"};
    return Ok{};
}

Status Session::fence(double timeout_seconds) {
    pmix_info_t info[2];
    bool collect = true;
    int timeout = std::max(1, static_cast<int>(timeout_seconds + 0.5));
    PMIx_Info_load(&info[0], PMIX_COLLECT_DATA, &collect, PMIX_BOOL);
    PMIx_Info_load(&info[1], PMIX_TIMEOUT, &timeout, PMIX_INT);
    pmix_proc_t all;
    PMIX_PROC_LOAD(&all, impl_->self.nspace, PMIX_RANK_WILDCARD);
    pmix_status_t rc = PMIx_Fence(&all, 1, info, 2);
    PMIX_INFO_DESTRUCT(&info[0]);
    PMIX_INFO_DESTRUCT(&info[1]);
    if (rc == PMIX_SUCCESS) return Ok{};
    auto size = impl_->integer(PMIX_RANK_WILDCARD, PMIX_JOB_SIZE);
    std::string tasks = size ? std::to_string(*size) + " tasks" : "all tasks";
    if (rc == PMIX_ERR_TIMEOUT)
        return Error{"pmix: rank " + std::to_string(impl_->self.rank) + ": fence: not every one of the " + tasks +
                         " arrived within " + std::to_string(timeout) + " s",
                     "every task must run dlaunch-mpi; check that none failed to start (raise --fence-timeout for "
                     "slow starts)"};
    return Error{"pmix: rank " + std::to_string(impl_->self.rank) + ": fence over " + tasks + " failed: " + status_text(rc),
                 "check the launcher's PMIx setup"};
}

Result<std::string> Session::get(int rank, const std::string& key) const {
    auto s = impl_->text(static_cast<pmix_rank_t>(rank), key.c_str());
    if (!s) return Error{"pmix: rank " + std::to_string(rank) + " did not publish " + key, "every task must run dlaunch-mpi"};
    return *s;
}

void Session::finalize() {
    if (!impl_ || !impl_->connected) return;
    PMIx_Finalize(nullptr, 0);
    impl_->connected = false;
}

}  // namespace dlaunch::pmix
