// PMIx client session: the only file that sees PMIx types.
//
// libpmix is loaded when a session is first asked for (a PMIx server is named in the environment), not
// linked: a process that never talks PMIx (dlaunch-mpi under a one-node mpirun, the agent, srun without
// --mpi=pmix) does not map it and the libevent it brings: linked, every process start would pay its loading
// (bench/README.md), and mpirun -np 16 pays it 16 times on a busy node.
#include <pmix.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <sstream>

#include "dlaunch/pmix/job_source.hpp"
#include "dlaunch/shared_library.hpp"

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

// The PMIx calls this file makes, resolved from DLAUNCH_LIBPMIX_SONAME (libpmix.so.2 on Debian 12).
struct Api {
    decltype(&PMIx_Init) Init = nullptr;
    decltype(&PMIx_Finalize) Finalize = nullptr;
    decltype(&PMIx_Get) Get = nullptr;
    decltype(&PMIx_Put) Put = nullptr;
    decltype(&PMIx_Commit) Commit = nullptr;
    decltype(&PMIx_Fence_nb) Fence_nb = nullptr;
    decltype(&PMIx_Error_string) Error_string = nullptr;
    decltype(&PMIx_Value_load) Value_load = nullptr;
    decltype(&PMIx_Value_destruct) Value_destruct = nullptr;
    decltype(&PMIx_Info_load) Info_load = nullptr;
    decltype(&PMIx_Get_version) Get_version = nullptr;
};

const Api* api_or_null(std::string* why) {
    static Api api;
    static SharedLibrary so(DLAUNCH_LIBPMIX_SONAME);
    static const bool loaded = [] {
        so.bind(api.Init, "PMIx_Init");
        so.bind(api.Finalize, "PMIx_Finalize");
        so.bind(api.Get, "PMIx_Get");
        so.bind(api.Put, "PMIx_Put");
        so.bind(api.Commit, "PMIx_Commit");
        so.bind(api.Fence_nb, "PMIx_Fence_nb");
        so.bind(api.Error_string, "PMIx_Error_string");
        so.bind(api.Value_load, "PMIx_Value_load");
        so.bind(api.Value_destruct, "PMIx_Value_destruct");
        so.bind(api.Info_load, "PMIx_Info_load");
        so.bind(api.Get_version, "PMIx_Get_version");
        return so.ok();
    }();
    if (!loaded && why) *why = so.error();
    return loaded ? &api : nullptr;
}

const Api& lib() {
    return *api_or_null(nullptr);
}  // only after connect_if_available() succeeded

void release(pmix_value_t* v) {
    lib().Value_destruct(v);
    std::free(v);  // PMIX_VALUE_RELEASE's pmix_free
}

// What PMIx 4's PMIX_PROC_LOAD macro does. PMIx 5's calls PMIx_Proc_load(), which a libpmix opened with
// dlopen() does not give the linker (and PMIx 4 does not export).
void load_proc(pmix_proc_t* proc, const char* nspace, pmix_rank_t rank) {
    std::memset(proc, 0, sizeof *proc);
    std::memcpy(proc->nspace, nspace, strnlen(nspace, PMIX_MAX_NSLEN));  // the rest stays '\0'
    proc->rank = rank;
}

std::string status_text(pmix_status_t rc) {
    return lib().Error_string(rc);
}

}  // namespace

struct Session::Impl {
    pmix_proc_t self{};
    bool connected = false;

    // A key of `rank` (PMIX_RANK_WILDCARD for job-level keys); nullptr when absent.
    pmix_value_t* fetch(pmix_rank_t rank, const char* key) const {
        pmix_proc_t proc;
        load_proc(&proc, self.nspace, rank);
        pmix_value_t* value = nullptr;
        if (lib().Get(&proc, key, nullptr, 0, &value) != PMIX_SUCCESS) return nullptr;
        return value;
    }
    std::optional<long long> integer(pmix_rank_t rank, const char* key) const {
        pmix_value_t* v = fetch(rank, key);
        auto n = to_integer(v);
        if (v) release(v);
        return n;
    }
    std::optional<std::string> text(pmix_rank_t rank, const char* key) const {
        pmix_value_t* v = fetch(rank, key);
        std::optional<std::string> s;
        if (v && v->type == PMIX_STRING && v->data.string) s = v->data.string;
        if (v) release(v);
        return s;
    }
};

Session::Session() : impl_(std::make_unique<Impl>()) {}

Session::~Session() {
    finalize();
}

Result<std::unique_ptr<Session>> Session::connect_if_available(const EnvMap& env) {
    if (!env.contains("PMIX_NAMESPACE") && !env.contains("PMIX_RANK")) return std::unique_ptr<Session>{};
    // Before the first PMIx_Init, and inherited by the application we exec: see the module's caveats.
    ::setenv("PMIX_MCA_gds", "hash", 0);
    std::string why;
    if (!api_or_null(&why))
        return Error{"pmix: a PMIx server is named in the environment (PMIX_NAMESPACE) but " DLAUNCH_LIBPMIX_SONAME
                     " cannot be loaded: " +
                         why,
                     "install Debian's libpmix2, or unset PMIX_NAMESPACE and PMIX_RANK to use Slurm's or Open MPI's "
                     "variables"};
    std::unique_ptr<Session> s(new Session());
    pmix_status_t rc = lib().Init(&s->impl_->self, nullptr, 0);
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
    // rank). Three lookups per rank, not one per rank of the job. PMIX_NODE_LIST is the list the client
    // library derives from the server's node map, which PMIx_Resolve_nodes() reads too; but PMIx 5's
    // resolve also queries the server, and PRRTE (Open MPI 5's mpirun) answers by printing "Query for
    // unrecognized attribute: pmix.qry.node" for every rank.
    auto first = p.text(0, PMIX_HOSTNAME);
    auto mine = p.text(p.self.rank, PMIX_HOSTNAME);
    auto list = p.text(PMIX_RANK_WILDCARD, PMIX_NODE_LIST);
    if (first && mine && list) {
        std::vector<std::string> hosts{*first};
        std::stringstream in(*list);
        for (std::string host; std::getline(in, host, ',');)
            if (!host.empty() && std::find(hosts.begin(), hosts.end(), host) == hosts.end()) hosts.push_back(host);
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
    lib().Value_load(&v, value.c_str(), PMIX_STRING);
    pmix_status_t rc = lib().Put(PMIX_GLOBAL, key.c_str(), &v);
    lib().Value_destruct(&v);
    if (rc == PMIX_SUCCESS) rc = lib().Commit();
    if (rc != PMIX_SUCCESS)
        return Error{"pmix: publishing " + key + ": " + status_text(rc), "check the launcher's PMIx"};
    return Ok{};
}

Status Session::fence(double timeout_seconds) {
    // PMIX_TIMEOUT is passed on, but Slurm 22.05's PMIx plugin ignores it (seen: srun --mpi=pmix with a task
    // that never fences blocked PMIx_Fence until the step was cancelled). So the wait is bounded here: the
    // non-blocking fence, a condition variable and our own deadline. The state is shared with the callback,
    // which may still come after we gave up.
    struct Pending {
        std::mutex mutex;
        std::condition_variable done;
        bool finished = false;
        pmix_status_t status = PMIX_ERROR;
        pmix_info_t info[2];
        pmix_proc_t all;
    };
    auto pending = std::make_shared<Pending>();
    bool collect = true;
    int timeout = std::max(1, static_cast<int>(timeout_seconds + 0.5));
    lib().Info_load(&pending->info[0], PMIX_COLLECT_DATA, &collect, PMIX_BOOL);
    lib().Info_load(&pending->info[1], PMIX_TIMEOUT, &timeout, PMIX_INT);
    load_proc(&pending->all, impl_->self.nspace, PMIX_RANK_WILDCARD);
    auto* keep = new std::shared_ptr<Pending>(pending);  // the callback's reference, released by it
    auto on_done = [](pmix_status_t status, void* data) {
        auto* ref = static_cast<std::shared_ptr<Pending>*>(data);
        {
            std::lock_guard lock((*ref)->mutex);
            (*ref)->status = status;
            (*ref)->finished = true;
        }
        (*ref)->done.notify_all();
        delete ref;
    };
    pmix_status_t rc = lib().Fence_nb(&pending->all, 1, pending->info, 2, on_done, keep);
    if (rc == PMIX_OPERATION_SUCCEEDED) {
        delete keep;
        rc = PMIX_SUCCESS;
    } else if (rc != PMIX_SUCCESS) {
        delete keep;
    } else {
        std::unique_lock lock(pending->mutex);
        if (pending->done.wait_for(lock, std::chrono::duration<double>(timeout_seconds),
                                   [&] { return pending->finished; }))
            rc = pending->status;
        else
            rc = PMIX_ERR_TIMEOUT;
    }
    auto size = impl_->integer(PMIX_RANK_WILDCARD, PMIX_JOB_SIZE);
    if (rc == PMIX_SUCCESS) {
        lib().Value_destruct(&pending->info[0].value);  // PMIX_INFO_DESTRUCT of a non-persistent info
        lib().Value_destruct(&pending->info[1].value);
        return Ok{};
    }
    // A fence still pending in the library: PMIx_Finalize would wait for it. Exit without it.
    impl_->connected = false;
    std::string tasks = size ? std::to_string(*size) + " tasks" : "all tasks";
    if (rc == PMIX_ERR_TIMEOUT)
        return Error{"pmix: rank " + std::to_string(impl_->self.rank) + ": fence: not every one of the " + tasks +
                         " arrived within " + std::to_string(timeout) + " s",
                     "every task must run dlaunch-mpi; check that none failed to start (raise --fence-timeout for "
                     "slow starts)"};
    return Error{
        "pmix: rank " + std::to_string(impl_->self.rank) + ": fence over " + tasks + " failed: " + status_text(rc),
        "check the launcher's PMIx setup"};
}

Result<std::string> Session::get(int rank, const std::string& key) const {
    auto s = impl_->text(static_cast<pmix_rank_t>(rank), key.c_str());
    if (!s)
        return Error{"pmix: rank " + std::to_string(rank) + " did not publish " + key,
                     "every task must run dlaunch-mpi"};
    return *s;
}

void Session::finalize() {
    if (!impl_ || !impl_->connected) return;
    lib().Finalize(nullptr, 0);
    impl_->connected = false;
}

Result<std::string> library_version() {
    std::string why;
    const Api* api = api_or_null(&why);
    if (!api) return Error{why, "install PMIx (Debian: libpmix2)"};
    return std::string(api->Get_version());
}

}  // namespace dlaunch::pmix
