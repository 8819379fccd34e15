#include "dlaunch/nccl.hpp"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstring>
#include <utility>

#include "dlaunch/host.hpp"

namespace dlaunch::nccl {
namespace {

std::string where(int rank, const std::string& step) {
    return "nccl: rank " + std::to_string(rank) + ": " + step;
}

Error nccl_error(int rank, const std::string& step, ncclResult_t rc) {
    std::string detail = ncclGetErrorString(rc);
    if (const char* last = ncclGetLastError(nullptr); last && *last) detail += " (" + std::string(last) + ")";
    return Error{where(rank, step) + ": " + detail, "run again with NCCL_DEBUG=INFO for NCCL's own account"};
}

Result<int> choose_device(const bootstrap::Peer& peer, const Options& options) {
    int count = 0;
    cudaError_t rc = cudaGetDeviceCount(&count);
    if (rc != cudaSuccess || count == 0) {
        const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
        return Error{where(peer.rank, "no CUDA device: ") +
                         (rc != cudaSuccess ? cudaGetErrorString(rc) : std::string("none visible")) +
                         " (CUDA_VISIBLE_DEVICES=" + (visible ? visible : "unset") + ")",
                     "run on a node with an NVIDIA GPU and its driver; dlaunch plan shows the GPU each rank gets"};
    }
    int device = options.device >= 0 ? options.device : peer.local_rank % count;
    if (device >= count)
        return Error{where(peer.rank, "CUDA device " + std::to_string(device) + " requested, " + std::to_string(count) +
                                          " visible"),
                     "pass a device below the visible count, or -1 for dlaunch's choice"};
    if (rc = cudaSetDevice(device); rc != cudaSuccess)
        return Error{where(peer.rank, "cudaSetDevice(" + std::to_string(device) + "): ") + cudaGetErrorString(rc),
                     "check the GPU with nvidia-smi"};
    return device;
}

}  // namespace

Communicator::~Communicator() {
    if (comm_) ncclCommDestroy(comm_);
}

Communicator::Communicator(Communicator&& o) noexcept
    : comm_(std::exchange(o.comm_, nullptr)), rank_(o.rank_), size_(o.size_), device_(o.device_), roots_(o.roots_) {}

Result<std::vector<ncclUniqueId>> unique_ids(const bootstrap::Peer& peer, const Options& options) {
    int per_root = options.ranks_per_root;
    if (per_root <= 0) {
        auto fromenv = bootstrap::ranks_per_root(host::environment());
        if (!fromenv) return fromenv.error();
        per_root = *fromenv;
    }
#if NCCL_VERSION_CODE < NCCL_VERSION(2, 23, 0)
    per_root = std::max(per_root, peer.size);  // no ncclCommInitRankScalable before NCCL 2.23
#endif
    double timeout = options.timeout_seconds;
    if (timeout <= 0) {
        auto fromenv = bootstrap::timeout_seconds(host::environment());
        if (!fromenv) return fromenv.error();
        timeout = *fromenv;
    }
    auto roots = bootstrap::roots(peer.size, per_root);
    std::string mine;
    if (std::find(roots.begin(), roots.end(), peer.rank) != roots.end()) {
        ncclUniqueId id;
        if (ncclResult_t rc = ncclGetUniqueId(&id); rc != ncclSuccess)
            return nccl_error(peer.rank, "ncclGetUniqueId", rc);
        mine.assign(id.internal, sizeof id.internal);
    }
    auto blobs = bootstrap::exchange(peer, roots, mine, timeout);
    if (!blobs) return Error{"nccl: " + blobs.error().what, blobs.error().hint};
    std::vector<ncclUniqueId> ids(blobs->size());
    for (size_t i = 0; i < ids.size(); ++i) {
        if ((*blobs)[i].size() != sizeof ids[i].internal)
            return Error{where(peer.rank, "unique id of root rank " + std::to_string(roots[i]) + " has " +
                                              std::to_string((*blobs)[i].size()) + " bytes, not " +
                                              std::to_string(sizeof ids[i].internal)),
                         "every rank must use the same NCCL version"};
        std::memcpy(ids[i].internal, (*blobs)[i].data(), sizeof ids[i].internal);
    }
    return ids;
}

Result<Communicator> init(const Options& options) {
    auto peer = bootstrap::this_rank();
    if (!peer) return Error{"nccl: " + peer.error().what, peer.error().hint};
    auto device = choose_device(*peer, options);
    if (!device) return device.error();
    auto ids = unique_ids(*peer, options);
    if (!ids) return ids.error();
    ncclComm_t comm = nullptr;
    ncclResult_t rc;
    if (ids->size() == 1) {
        rc = ncclCommInitRank(&comm, peer->size, ids->front(), peer->rank);
        if (rc != ncclSuccess) return nccl_error(peer->rank, "ncclCommInitRank", rc);
    } else {
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 23, 0)
        ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
        rc = ncclCommInitRankScalable(&comm, peer->size, peer->rank, static_cast<int>(ids->size()), ids->data(),
                                      &config);
        if (rc != ncclSuccess)
            return nccl_error(peer->rank, "ncclCommInitRankScalable with " + std::to_string(ids->size()) + " roots",
                              rc);
#endif
    }
    return Communicator(comm, peer->rank, peer->size, *device, static_cast<int>(ids->size()));
}

}  // namespace dlaunch::nccl
