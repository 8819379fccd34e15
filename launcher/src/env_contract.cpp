#include "dlaunch/env_contract.hpp"

namespace dlaunch {

EnvMap owned_rank_env(const RankFacts& f) {
    EnvMap env{
        {"RANK", std::to_string(f.rank)},
        {"LOCAL_RANK", std::to_string(f.local_rank)},
        {"GROUP_RANK", std::to_string(f.node_rank)},
        // One role per job: role ranks and sizes equal the global ones, as in torchrun.
        {"ROLE_RANK", std::to_string(f.rank)},
        {"ROLE_NAME", f.role},
        {"LOCAL_WORLD_SIZE", std::to_string(f.local_world_size)},
        {"WORLD_SIZE", std::to_string(f.world_size)},
        {"GROUP_WORLD_SIZE", std::to_string(f.nnodes)},
        {"ROLE_WORLD_SIZE", std::to_string(f.world_size)},
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
        // torchrun sets this for NCCL to turn hangs into errors.
        {"NCCL_ASYNC_ERROR_HANDLING", "1"},
    };
    EnvMap env;
    for (auto& [name, value] : defaults)
        if (!inherited.contains(name)) env.emplace(name, value);
    return env;
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
        if (it == inherited.end()) env[name] = value;
        else if (it->second != value)
            kept.push_back(name + "=" + it->second + " kept from your environment (dlaunch would set " + value + ")");
    }
    return env;
}

}  // namespace dlaunch
