// All-reduce over every rank with an NCCL communicator from dlaunch::nccl::init(); prints the bus bandwidth
// per message size (rank 0) and checks the sum. Runs under every dlaunch launch mode:
//   dlaunch --nproc-per-node 8 --no-python build/examples/nccl_allreduce
//   mpirun -np 16 dlaunch-mpi --no-python build/examples/nccl_allreduce
//   srun --dist-launch -N2 --ntasks-per-node=8 build/examples/nccl_allreduce
// Options: [MAX_BYTES [ITERATIONS]] (default 256 MiB, 20). Bus bandwidth as nccl-tests defines it:
// algorithm bandwidth (bytes / time) x 2 (n-1) / n.
#include <cuda_runtime_api.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "dlaunch/nccl.hpp"

namespace {

bool cuda_ok(cudaError_t rc, int rank, const char* step) {
    if (rc == cudaSuccess) return true;
    std::fprintf(stderr, "nccl_allreduce: rank %d: %s: %s\n", rank, step, cudaGetErrorString(rc));
    return false;
}

bool nccl_ok(ncclResult_t rc, int rank, const char* step) {
    if (rc == ncclSuccess) return true;
    std::fprintf(stderr, "nccl_allreduce: rank %d: %s: %s\n", rank, step, ncclGetErrorString(rc));
    return false;
}

}  // namespace

int main(int argc, char** argv) {
    size_t max_bytes = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : size_t{256} << 20;
    int iterations = argc > 2 ? std::atoi(argv[2]) : 20;
    if (max_bytes < 4 || iterations < 1) {
        std::fprintf(stderr, "usage: nccl_allreduce [MAX_BYTES (>= 4) [ITERATIONS (>= 1)]]\n");
        return 2;
    }

    auto comm = dlaunch::nccl::init();
    if (!comm) {
        std::fprintf(stderr, "%s\n", comm.error().message().c_str());
        return 1;
    }
    const int rank = comm->rank(), n = comm->size();
    if (rank == 0)
        std::printf(
            "# nccl_allreduce: %d ranks, %d bootstrap root(s), rank 0 on CUDA device %d\n"
            "# %12s %10s %10s %10s\n",
            n, comm->roots(), comm->device(), "bytes", "time(us)", "algbw GB/s", "busbw GB/s");

    const size_t count = max_bytes / sizeof(float);
    float* buf = nullptr;
    cudaStream_t stream;
    cudaEvent_t start, stop;
    if (!cuda_ok(cudaMalloc(&buf, count * sizeof(float)), rank, "cudaMalloc") ||
        !cuda_ok(cudaStreamCreate(&stream), rank, "cudaStreamCreate") ||
        !cuda_ok(cudaEventCreate(&start), rank, "cudaEventCreate") ||
        !cuda_ok(cudaEventCreate(&stop), rank, "cudaEventCreate"))
        return 1;

    for (size_t bytes = 1 << 20 < max_bytes ? size_t{1} << 20 : max_bytes; bytes <= max_bytes; bytes *= 2) {
        const size_t elems = bytes / sizeof(float);
        for (int i = 0; i < 5; ++i)  // warm-up
            if (!nccl_ok(ncclAllReduce(buf, buf, elems, ncclFloat, ncclSum, comm->get(), stream), rank,
                         "ncclAllReduce"))
                return 1;
        cudaEventRecord(start, stream);
        for (int i = 0; i < iterations; ++i)
            if (!nccl_ok(ncclAllReduce(buf, buf, elems, ncclFloat, ncclSum, comm->get(), stream), rank,
                         "ncclAllReduce"))
                return 1;
        cudaEventRecord(stop, stream);
        if (!cuda_ok(cudaEventSynchronize(stop), rank, "all-reduce")) return 1;
        float ms = 0;
        cudaEventElapsedTime(&ms, start, stop);
        double seconds = ms / 1e3 / iterations;
        double algbw = static_cast<double>(bytes) / seconds / 1e9;
        double busbw = algbw * 2.0 * (n - 1) / n;
        if (rank == 0) std::printf("  %12zu %10.1f %10.2f %10.2f\n", bytes, seconds * 1e6, algbw, busbw);
        if (bytes > max_bytes / 2) break;
    }

    // Correctness: every rank contributes rank+1; the sum is n(n+1)/2 everywhere.
    std::vector<float> host(count, static_cast<float>(rank + 1));
    if (!cuda_ok(cudaMemcpy(buf, host.data(), count * sizeof(float), cudaMemcpyHostToDevice), rank, "cudaMemcpy") ||
        !nccl_ok(ncclAllReduce(buf, buf, count, ncclFloat, ncclSum, comm->get(), stream), rank, "ncclAllReduce") ||
        !cuda_ok(cudaStreamSynchronize(stream), rank, "all-reduce") ||
        !cuda_ok(cudaMemcpy(host.data(), buf, count * sizeof(float), cudaMemcpyDeviceToHost), rank, "cudaMemcpy"))
        return 1;
    const float expected = static_cast<float>(n) * (n + 1) / 2;
    for (size_t i = 0; i < count; ++i)
        if (host[i] != expected) {
            std::fprintf(stderr, "nccl_allreduce: rank %d: FAILED: element %zu is %g, expected %g\n", rank, i,
                         static_cast<double>(host[i]), static_cast<double>(expected));
            return 1;
        }
    std::printf("[rank %d] OK sum=%g over %d ranks\n", rank, static_cast<double>(expected), n);
    cudaFree(buf);
    return 0;
}
