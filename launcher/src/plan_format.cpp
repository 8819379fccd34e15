#include "dlaunch/plan_format.hpp"

#include <algorithm>
#include <array>
#include <sstream>

namespace dlaunch {

nlohmann::json plan_to_json(const LaunchPlan& plan) {
    nlohmann::json j{
        {"run_id", plan.run_id},
        {"hostname", plan.hostname},
        {"nnodes", plan.nnodes},
        {"node_rank", plan.node_rank},
        {"nproc_per_node", plan.nproc_per_node},
        {"world_size", plan.world_size},
        {"master_addr", plan.master_addr},
        {"master_port", plan.master_port},
        {"restart_count", plan.restart_count},
        {"max_restarts", plan.max_restarts},
        {"warnings", plan.warnings},
    };
    auto& ranks = j["ranks"] = nlohmann::json::array();
    for (auto& r : plan.ranks) {
        ranks.push_back({
            {"rank", r.rank},
            {"local_rank", r.local_rank},
            {"node_rank", r.node_rank},
            {"world_size", r.world_size},
            {"local_world_size", r.local_world_size},
            {"argv", r.argv},
            {"env", r.env},
            {"console", {{"stdout", r.console_stdout}, {"stderr", r.console_stderr}}},
        });
    }
    return j;
}

std::string plan_to_table(const LaunchPlan& plan) {
    std::ostringstream out;
    out << "run " << plan.run_id << " on " << plan.hostname << ": node " << plan.node_rank << " of " << plan.nnodes
        << ", " << plan.nproc_per_node << " worker(s) here, world size " << plan.world_size << "\n"
        << "master " << plan.master_addr << ":" << plan.master_port << ", restarts allowed here: " << plan.max_restarts
        << "\n";
    for (auto& w : plan.warnings) out << "warning: " << w << "\n";
    out << "\n";
    const char* header[] = {"RANK", "LOCAL", "NODE", "CONSOLE", "COMMAND"};
    std::vector<std::array<std::string, 5>> rows;
    for (auto& r : plan.ranks) {
        std::string console = r.console_stdout && r.console_stderr ? "out+err"
                            : r.console_stdout                     ? "out"
                            : r.console_stderr                     ? "err"
                                                                   : "-";
        std::string command;
        for (auto& a : r.argv) command += (command.empty() ? "" : " ") + a;
        rows.push_back({std::to_string(r.rank), std::to_string(r.local_rank), std::to_string(r.node_rank), console,
                        command});
    }
    size_t width[5];
    for (int c = 0; c < 5; ++c) {
        width[c] = std::string(header[c]).size();
        for (auto& row : rows) width[c] = std::max(width[c], row[c].size());
    }
    auto line = [&](auto get) {
        for (int c = 0; c < 5; ++c) {
            std::string cell = get(c);
            out << cell;
            if (c < 4) out << std::string(width[c] - cell.size() + 2, ' ');
        }
        out << "\n";
    };
    line([&](int c) { return std::string(header[c]); });
    for (auto& row : rows) line([&](int c) { return row[c]; });
    if (!plan.ranks.empty()) {
        out << "\nenvironment set for rank " << plan.ranks.front().rank << " (others differ in ranks and paths):\n";
        for (auto& [k, v] : plan.ranks.front().env) out << "  " << k << "=" << v << "\n";
    }
    return out.str();
}

}  // namespace dlaunch
