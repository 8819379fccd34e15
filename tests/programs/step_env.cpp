// Test program: the environment and program the SPANK plugin gives each task of one node of a step,
// from the same functions the plugin calls (plan_step_node, step_task_setup), without Slurm.
//   step_env FACTS.json   prints {"tasks": [{"env": {...}, "exec": "..."}, ...]} or an error (exit 1)
// FACTS.json: {"opts": "<--dist-launch OPTS>", "job_id", "step_id", "nnodes", "node_id", "total_tasks",
//              "local_global_ids": [...], "argv0", "hostname", "pyexec", "env": {...}}
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>

#include "dlaunch/dist_launch.hpp"
#include "dlaunch/step_setup.hpp"

int main(int argc, char** argv) {
    using namespace dlaunch;
    if (argc != 2) {
        std::cerr << "usage: step_env FACTS.json\n";
        return 2;
    }
    auto in = nlohmann::json::parse(std::ifstream(argv[1]));
    StepFacts facts;
    facts.job_id = in.at("job_id");
    facts.step_id = in.at("step_id");
    facts.nnodes = in.at("nnodes");
    facts.node_id = in.at("node_id");
    facts.total_tasks = in.at("total_tasks");
    facts.local_global_ids = in.at("local_global_ids").get<std::vector<int>>();
    facts.argv0 = in.at("argv0");
    facts.hostname = in.at("hostname");
    facts.env = in.at("env").get<EnvMap>();
    auto settings = parse_dist_launch_opts(in.at("opts"), DistLaunchSettings{});
    if (!settings) {
        std::cerr << settings.error().message() << "\n";
        return 1;
    }
    auto node = plan_step_node(facts, *settings);
    if (!node) {
        std::cerr << node.error().message() << "\n";
        return 1;
    }
    nlohmann::json out{{"tasks", nlohmann::json::array()}};
    for (size_t i = 0; i < node->plan.ranks.size(); ++i) {
        const std::string pyexec = in.at("pyexec");
        auto setup = step_task_setup(*node, i, facts.argv0, {pyexec, watch_helper_next_to(pyexec)});
        out["tasks"].push_back({{"env", setup.env}, {"exec", setup.exec_argv0}});
    }
    std::cout << out.dump(2) << "\n";
    return 0;
}
