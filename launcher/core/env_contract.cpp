#include "dlaunch/env_contract.hpp"

namespace dlaunch {

EnvMap owned_rank_env(const RankFacts& f) {
    EnvMap env{
        {"RANK", std::to_string(f.rank)},
        {"LOCAL_RANK", std::to_string(f.local_rank)},
        {"GROUP_RANK", std::to_string(f.node_rank)},
        {"ROLE_RANK", std::to_string(f.role_rank)},
        {"ROLE_NAME", f.role},
        {"LOCAL_WORLD_SIZE", std::to_string(f.local_world_size)},
        {"WORLD_SIZE", std::to_string(f.world_size)},
        {"GROUP_WORLD_SIZE", std::to_string(f.nnodes)},
        {"ROLE_WORLD_SIZE", std::to_string(f.role_world_size)},
        {"MASTER_ADDR", f.master_addr},
        {"MASTER_PORT", std::to_string(f.master_port)},
        {"TORCHELASTIC_RESTART_COUNT", std::to_string(f.restart_count)},
        {"TORCHELASTIC_MAX_RESTARTS", std::to_string(f.max_restarts)},
        {"TORCHELASTIC_RUN_ID", f.run_id},
        // Workers create their own store on MASTER_ADDR:MASTER_PORT; dlaunch hosts none.
        {"TORCHELASTIC_USE_AGENT_STORE", "False"},
        {"DLAUNCH_RESTART_COUNT", std::to_string(f.restart_count)},
    };
    if (!f.error_file.empty()) env["TORCHELASTIC_ERROR_FILE"] = f.error_file;
    return env;
}

EnvMap default_rank_env(const RankFacts& f, const EnvMap& inherited) {
    EnvMap defaults{
        {"OMP_NUM_THREADS", std::to_string(f.omp_threads < 1 ? 1 : f.omp_threads)},
        // torchrun sets this for NCCL to turn hangs into errors, under the name its torch reads.
        {f.async_error_var, "1"},
    };
    defaults.merge(torch_build_env(f.store_without_libuv));
    EnvMap env;
    for (auto& [name, value] : defaults)
        if (!inherited.contains(name)) env.emplace(name, value);
    return env;
}

EnvMap torch_build_env(bool store_without_libuv) {
    // Debian 13's torch 2.6: env:// would ask for libuv, which that build lacks, and fail in every rank.
    if (store_without_libuv) return {{"USE_LIBUV", "0"}};
    return {};
}

EnvMap rank_env(const RankFacts& facts, const EnvMap& inherited) {
    EnvMap env = default_rank_env(facts, inherited);
    env.merge(owned_rank_env(facts));
    return env;
}

EnvMap binding_env(const BindingFacts& f, const EnvMap& inherited, std::vector<std::string>& kept) {
    EnvMap env;
    if (f.cuda_visible_devices) env[f.visible_var] = *f.cuda_visible_devices;
    EnvMap defaults;
    if (f.cuda_pci_order && f.visible_var == "CUDA_VISIBLE_DEVICES") defaults["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID";
    if (!f.ucx_net_devices.empty()) defaults["UCX_NET_DEVICES"] = f.ucx_net_devices;
    if (!f.nccl_ib_hca.empty()) defaults["NCCL_IB_HCA"] = f.nccl_ib_hca;
    if (!f.nccl_socket_ifname.empty()) defaults["NCCL_SOCKET_IFNAME"] = f.nccl_socket_ifname;
    for (auto& [name, value] : defaults) {
        auto it = inherited.find(name);
        if (it == inherited.end())
            env[name] = value;
        else if (it->second != value)
            kept.push_back(name + "=" + it->second + " kept from your environment (dlaunch would set " + value + ")");
    }
    return env;
}

bool watchdog_asked(const EnvMap& env) {
    return str_var(env, "TORCHELASTIC_ENABLE_FILE_TIMER") == "1";
}

std::string watchdog_file_named(const EnvMap& env) {
    return str_var(env, "TORCHELASTIC_TIMER_FILE");
}

EnvMap supervision_env(const SupervisionFacts& f, const EnvMap& inherited) {
    EnvMap env;
    if (!f.stacks_file.empty()) {
        env["DLAUNCH_STACKS_FILE"] = f.stacks_file;
        env["DLAUNCH_STACK_SIGNAL"] = std::to_string(f.stack_signal);
    }
    if (!f.python_hook_dir.empty()) {
        auto it = inherited.find("PYTHONPATH");
        env["PYTHONPATH"] = f.python_hook_dir + (it != inherited.end() && !it->second.empty() ? ":" + it->second : "");
    }
    // torchrun's agent sets it for every worker (the path it serves, or the one the user gave it).
    if (!f.timer_file.empty()) env["TORCHELASTIC_TIMER_FILE"] = f.timer_file;
    if (!f.heartbeat_file.empty()) env["DLAUNCH_HEARTBEAT_FILE"] = f.heartbeat_file;
    return env;
}

namespace {
std::string join(const std::vector<std::string>& items) {
    std::string out;
    for (auto& i : items) out += (out.empty() ? "" : ",") + i;
    return out;
}
}  // namespace

EnvMap paddle_collective_env(const PaddleFacts& f) {
    EnvMap env{
        {"PADDLE_TRAINER_ID", std::to_string(f.rank)},
        {"PADDLE_GLOBAL_RANK", std::to_string(f.rank)},
        {"PADDLE_TRAINERS_NUM", std::to_string(f.world_size)},
        {"PADDLE_GLOBAL_SIZE", std::to_string(f.world_size)},
        {"PADDLE_RANK_IN_NODE", std::to_string(f.local_rank)},
        {"PADDLE_LOCAL_RANK", std::to_string(f.local_rank)},
        {"PADDLE_LOCAL_SIZE", std::to_string(f.local_world_size)},
        {"PADDLE_NNODES", std::to_string(f.nnodes)},
        {"PADDLE_TRAINER_ENDPOINTS", join(f.endpoints)},
        // Paddle never sets it (it only reads it as --job_id); set so a script can tell its job apart.
        {"PADDLE_JOB_ID", f.job_id},
    };
    if (f.rank >= 0 && static_cast<size_t>(f.rank) < f.endpoints.size())
        env["PADDLE_CURRENT_ENDPOINT"] = f.endpoints[static_cast<size_t>(f.rank)];
    if (!f.master.empty()) env["PADDLE_MASTER"] = f.master;
    // Paddle 2.4+: the GPU as numbered within CUDA_VISIBLE_DEVICES, else the Gloo backend on CPUs.
    if (f.selected_gpu)
        env["FLAGS_selected_gpus"] = std::to_string(*f.selected_gpu);
    else
        env["PADDLE_DISTRI_BACKEND"] = "gloo";
    return env;
}

std::string training_role(PsRole role) {
    switch (role) {
        case PsRole::Server: return "PSERVER";
        case PsRole::Trainer: return "TRAINER";
        case PsRole::HeterWorker: return "HETER_TRAINER";
    }
    return "TRAINER";
}

EnvMap paddle_ps_env(const PsFacts& f) {
    EnvMap env{
        {"TRAINING_ROLE", training_role(f.role)},
        {"PADDLE_ROLE", training_role(f.role)},
        {"PADDLE_PSERVERS_IP_PORT_LIST", join(f.servers)},
        {"PADDLE_TRAINER_ENDPOINTS", join(f.trainers)},
        {"PADDLE_TRAINERS_NUM", std::to_string(f.trainers.size())},
        {"PADDLE_PORT", std::to_string(f.port)},
        {"POD_IP", f.pod_ip},
        {"PADDLE_NNODES", std::to_string(f.nnodes)},
        {"PADDLE_JOB_ID", f.job_id},
        {"PADDLE_WITH_GLOO", f.with_gloo ? "1" : "0"},
    };
    if (f.role == PsRole::Trainer) env["PADDLE_TRAINER_ID"] = std::to_string(f.index);
    if (!f.heter_workers.empty()) env["PADDLE_HETER_TRAINER_IP_PORT_LIST"] = join(f.heter_workers);
    if (f.with_gloo) {
        env["PADDLE_GLOO_RENDEZVOUS"] = "3";  // Gloo over the HTTP store
        env["PADDLE_GLOO_HTTP_ENDPOINT"] = f.gloo_endpoint;
    }
    return env;
}

}  // namespace dlaunch
