// The worker environment contract: the one place that names the variables every dlaunch front-end
// (agent, dlaunch-mpi, SPANK plugin) gives a rank, and their values. Identical in names and values to
// torchrun's (torch.distributed.elastic LocalElasticAgent) for the same layout; docs/env-contract.md
// lists them with their meaning.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "dlaunch/job_context.hpp"

namespace dlaunch {

struct RankFacts {
    int rank = 0;
    int local_rank = 0;
    int node_rank = 0;
    int world_size = 1;
    int local_world_size = 1;
    int nnodes = 1;
    std::string role = "default";
    int role_rank = 0;  // the rank among the workers of `role` (ROLE_RANK)
    int role_world_size = 1;
    std::string master_addr;
    int master_port = 0;
    int restart_count = 0;
    int max_restarts = 0;
    std::string run_id;
    std::string error_file;  // "" leaves TORCHELASTIC_ERROR_FILE unset
    int omp_threads = 1;     // used only when the user has not exported OMP_NUM_THREADS
    // The variable that turns on NCCL's async error handling, as the installed torch's torchrun names it
    // (TORCH_NCCL_ASYNC_ERROR_HANDLING since torch 2.2, which warns about the old name).
    std::string async_error_var = "NCCL_ASYNC_ERROR_HANDLING";
    // The installed torch asks for a libuv store it was built without: USE_LIBUV=0 (unless the user set it).
    bool store_without_libuv = false;
};

// Per-rank device and network facts from the binding plan ("" / nullopt: leave the variable alone).
struct BindingFacts {
    std::string visible_var = "CUDA_VISIBLE_DEVICES";  // or HIP_VISIBLE_DEVICES for AMD GPUs
    std::optional<std::string> cuda_visible_devices;   // owned: computed within the incoming value
    bool cuda_pci_order = false;     // CUDA_DEVICE_ORDER=PCI_BUS_ID (the order dlaunch numbers GPUs in)
    std::string ucx_net_devices;     // "mlx5_0:1": the rank's closest NIC port
    std::string nccl_ib_hca;         // "=mlx5_0:1,mlx5_1:1": the node's usable ports, same on all ranks
    std::string nccl_socket_ifname;  // "=ib0": the interface that carries MASTER_ADDR
};

// Variables the launcher owns: always set, whatever the inherited environment says.
EnvMap owned_rank_env(const RankFacts& facts);

// Variables that default only when the inherited environment lacks them (user values win).
EnvMap default_rank_env(const RankFacts& facts, const EnvMap& inherited);

// The defaults that depend on the worker's torch build alone (part of default_rank_env): USE_LIBUV=0 for a
// torch whose store asks for libuv it was built without. Also applied by dlaunch-python, the SPANK
// plugin's helper, which is the first to know the task's torch (the plugin plans in slurmstepd, as root,
// and never runs the user's interpreter).
EnvMap torch_build_env(bool store_without_libuv);

// Both of the above: the variables to set on top of `inherited`.
EnvMap rank_env(const RankFacts& facts, const EnvMap& inherited);

// The binding's variables to set on top of `inherited`. Defaults the user exported are kept, and each
// kept one is described in `kept` ("NCCL_IB_HCA=... kept (dlaunch would set ...)").
EnvMap binding_env(const BindingFacts& facts, const EnvMap& inherited, std::vector<std::string>& kept);

// dlaunch's supervision of a rank (docs/hangs.md): where its Python stacks go and on which signal, the
// sitecustomize.py that registers that signal, and torchrun's watchdog FIFO.
struct SupervisionFacts {
    std::string stacks_file;  // "" leaves DLAUNCH_STACKS_FILE unset
    int stack_signal = 0;
    std::string python_hook_dir;  // "" leaves PYTHONPATH alone; else prepended to the inherited one
    std::string timer_file;       // "" leaves TORCHELASTIC_TIMER_FILE alone
    std::string heartbeat_file;   // "" leaves DLAUNCH_HEARTBEAT_FILE unset
};
EnvMap supervision_env(const SupervisionFacts& facts, const EnvMap& inherited);

// Whether `env` asks for torchrun's watchdog (TORCHELASTIC_ENABLE_FILE_TIMER=1), and the FIFO the user
// named for it (TORCHELASTIC_TIMER_FILE; "" when unnamed).
bool watchdog_asked(const EnvMap& env);
std::string watchdog_file_named(const EnvMap& env);

// paddle.distributed.launch's collective-mode variables for one rank (Paddle 2.4-2.6,
// launch/controllers/collective.py; docs/paddle.md says which are set and why).
struct PaddleFacts {
    int rank = 0;
    int local_rank = 0;
    int world_size = 1;
    int local_world_size = 1;
    int nnodes = 1;
    std::string master;                  // "addr:port": PADDLE_MASTER ("" leaves it unset, as Paddle with --ips)
    std::vector<std::string> endpoints;  // every rank's "ip:port"; index = global rank
    std::string job_id = "default";
    std::optional<int> selected_gpu;  // the rank's GPU as numbered inside CUDA_VISIBLE_DEVICES
};
EnvMap paddle_collective_env(const PaddleFacts& facts);

// Parameter-server mode: one process of a role, with the job's endpoint lists.
enum class PsRole { Server, Trainer, HeterWorker };
struct PsFacts {
    PsRole role = PsRole::Trainer;
    int index = 0;       // the process's position in its role's endpoint list (PADDLE_TRAINER_ID for trainers)
    std::string pod_ip;  // this node's address
    int port = 0;        // its own endpoint's port
    std::vector<std::string> servers, trainers, heter_workers;
    int nnodes = 1;
    bool with_gloo = true;
    std::string gloo_endpoint;  // "ip:port" of the Gloo HTTP store
    std::string job_id = "default";
};
EnvMap paddle_ps_env(const PsFacts& facts);

// "PSERVER", "TRAINER", "HETER_TRAINER": TRAINING_ROLE's values.
std::string training_role(PsRole role);

}  // namespace dlaunch
