// Slurm's facts about a task (from its environment, or from SPANK items in slurmstepd) as a SchedulerInfo:
// the one place that reads Slurm's variables into a job context.
#include "dlaunch/slurm/task_facts.hpp"

#include <algorithm>
#include <cstdlib>

#include "dlaunch/env_map.hpp"
#include "dlaunch/slurm/client.hpp"

namespace dlaunch::slurm {
std::vector<int> parse_tasks_per_node(const std::string& text) {
    std::vector<int> per_node;
    size_t start = 0;
    while (start < text.size()) {
        size_t comma = text.find(',', start);
        std::string item = text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
        int count = std::atoi(item.c_str()), repeat = 1;
        if (auto x = item.find("(x"); x != std::string::npos) repeat = std::atoi(item.c_str() + x + 2);
        for (int i = 0; i < repeat; ++i) per_node.push_back(count);
        if (comma == std::string::npos) break;
        start = comma + 1;
    }
    return per_node;
}

std::optional<std::string> step_nodelist(const EnvMap& env) {
    for (const char* name : {"SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST"})
        if (auto it = env.find(name); it != env.end()) return it->second;
    return std::nullopt;
}

bool started_from_batch_script(const EnvMap& env) {
    auto it = env.find("ENVIRONMENT");
    return it != env.end() && it->second == "BATCH";
}

bool batch_job_known_without_asking(const EnvMap& env, int node_id) {
    return node_id != 0 && started_from_batch_script(env);
}

Result<SchedulerInfo> scheduler_info(const TaskFacts& f) {
    SchedulerInfo info;
    info.source = "slurm";
    info.job_id = f.job_id;
    info.step_id = f.step_id;
    info.rank = f.rank;
    info.size = f.size;
    info.local_rank = f.local_rank;
    info.node_rank = f.node_rank;
    if (f.nodelist) {
        auto nodes = expand_hostlist(*f.nodelist);
        if (!nodes) return nodes.error();
        info.nodes = std::move(*nodes);
    }
    info.nnodes = f.nnodes.value_or(static_cast<int>(std::max<size_t>(1, info.nodes.size())));
    std::vector<int> per_node;
    if (!f.tasks_per_node.empty()) per_node = parse_tasks_per_node(f.tasks_per_node);
    info.local_size = 1;
    if (!f.local_global_ids.empty()) {
        info.local_size = static_cast<int>(f.local_global_ids.size());
        info.local_peers = f.local_global_ids;
        // Without Slurm's per-node counts, every node has as many tasks as this one when they divide evenly.
        if (f.tasks_per_node.empty() && f.size == info.nnodes * info.local_size)
            per_node.assign(static_cast<size_t>(info.nnodes), info.local_size);
    } else if (info.node_rank < static_cast<int>(per_node.size())) {
        info.local_size = per_node[static_cast<size_t>(info.node_rank)];
    }
    if (static_cast<int>(per_node.size()) == info.nnodes) info.tasks_per_node = per_node;
    return info;
}

std::optional<Result<SchedulerInfo>> from_slurm_env(const EnvMap& env) {
    if (!env.contains("SLURM_PROCID")) return std::nullopt;
    const char* required[] = {"SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "SLURM_NODEID"};
    for (const char* name : required)
        if (!int_var(env, name)) return Result<SchedulerInfo>(bad_var("slurm", name, env));
    TaskFacts f;
    f.rank = *int_var(env, "SLURM_PROCID");
    f.size = int_var(env, "SLURM_STEP_NUM_TASKS").value_or(*int_var(env, "SLURM_NTASKS"));
    f.local_rank = *int_var(env, "SLURM_LOCALID");
    f.node_rank = *int_var(env, "SLURM_NODEID");
    if (auto it = env.find("SLURM_JOB_ID"); it != env.end()) f.job_id = it->second;
    if (auto it = env.find("SLURM_STEP_ID"); it != env.end()) f.step_id = it->second;
    f.nodelist = step_nodelist(env);
    f.nnodes = int_var(env, "SLURM_STEP_NUM_NODES");
    if (!f.nnodes) f.nnodes = int_var(env, "SLURM_NNODES");
    if (auto it = env.find("SLURM_STEP_TASKS_PER_NODE"); it != env.end()) f.tasks_per_node = it->second;
    return std::optional<Result<SchedulerInfo>>(scheduler_info(f));
}

}  // namespace dlaunch::slurm
