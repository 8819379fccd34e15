// What the installed torch does that dlaunch must match, read from torch's own files; torch is imported
// only to learn whether its store has libuv, once per torch install (that takes seconds), and only for a
// torch whose rendezvous asks for libuv at all.
#pragma once

#include <optional>
#include <string>

namespace dlaunch::host {

// What the installed torch's own launcher does, for `python`'s torch, read from its files:
struct TorchFacts {
    // The argument `python -m torch.distributed.launch` passes each worker: "--local-rank" (torch >= 2.0) or
    // "--local_rank" (torch < 2.0), from torch/distributed/run.py; "" when it says neither.
    std::string local_rank_arg;
    // The variable torchrun's agent sets to 1 for NCCL's async error handling: "TORCH_NCCL_ASYNC_ERROR_HANDLING"
    // (torch >= 2.2, which warns about the old name) or "NCCL_ASYNC_ERROR_HANDLING", from torch's
    // elastic/agent/server/local_elastic_agent.py; "" when it names neither.
    std::string async_error_var;
    // Whether env:// asks for the libuv TCPStore by default (torch >= 2.4 reads USE_LIBUV, default 1) in a
    // torch built without libuv (Debian 13's torch 2.6): then init_process_group fails in every rank
    // ("use_libuv was requested but PyTorch was build without libuv support") unless USE_LIBUV=0.
    bool store_without_libuv = false;
};

// torch's facts for `python`; nullopt when it has no torch. `python` is asked where torch is once, then the
// answer is cached in $TMPDIR/dlaunch-topology-<uid>/ until torch's run.py changes.
std::optional<TorchFacts> torch_facts(const std::string& python);

// The spelling written in a torch/distributed/run.py (exposed for tests).
std::optional<std::string> local_rank_arg_in_run_py(const std::string& source);

// The async error variable set in a torch/distributed/elastic/agent/server/local_elastic_agent.py.
std::optional<std::string> async_error_var_in_agent_py(const std::string& source);

}  // namespace dlaunch::host
