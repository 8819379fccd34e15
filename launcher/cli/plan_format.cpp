#include "dlaunch/plan_format.hpp"

#include <algorithm>
#include <array>
#include <sstream>

#include "dlaunch/text.hpp"

namespace dlaunch {
namespace {

std::string format_seconds(double s) {
    std::ostringstream out;
    out << s << " s";
    return out.str();
}

}  // namespace

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
        {"master_port_free_pick", plan.master_port_free_pick},
        {"restart_count", plan.restart_count},
        {"max_restarts", plan.max_restarts},
        {"group_restarts", plan.group_restarts},
        {"spare_nodes", plan.spare_nodes},
        {"spare", plan.spare},
        {"bind", topology::bind_mode_name(plan.bind_mode)},
        {"topology", plan.topology_source},
        {"warnings", plan.warnings},
        {"notes", plan.notes},
        {"attempt_dir", plan.attempt_dir},
        {"log_files", plan.log_files},
        {"supervision",
         {{"hang_timeout", plan.hang_timeout ? nlohmann::json(*plan.hang_timeout) : nlohmann::json(nullptr)},
          {"timer_file", plan.timer_file},
          {"heartbeat_file", plan.heartbeat_file},
          {"heartbeat_record", plan.heartbeat_record},
          {"stacks_files", plan.stacks_files}}},
    };
    auto& ranks = j["ranks"] = nlohmann::json::array();
    for (auto& r : plan.ranks) {
        auto nics = nlohmann::json::array();
        for (auto& n : r.nics)
            nics.push_back(
                {{"name", n.name}, {"port", n.port}, {"netdev", n.netdev}, {"pci", n.pci}, {"affinity", n.affinity}});
        ranks.push_back({
            {"rank", r.rank},
            {"local_rank", r.local_rank},
            {"node_rank", r.node_rank},
            {"world_size", r.world_size},
            {"local_world_size", r.local_world_size},
            {"argv", r.argv},
            {"gpu", r.gpu ? nlohmann::json{{"index", r.gpu->index}, {"pci", r.gpu->pci}} : nlohmann::json(nullptr)},
            {"nics", nics},
            {"cpuset", r.cpuset.to_list()},
            {"mems", r.mems.to_list()},
            {"bind_memory", r.bind_memory},
            {"env", r.env},
            {"console", {{"stdout", r.console_stdout}, {"stderr", r.console_stderr}}},
            {"logs",
             {{"error_file", r.error_file},
              {"stdout", r.stdout_log},
              {"stderr", r.stderr_log},
              {"stacks", r.stacks_file},
              {"native_stacks", r.native_stacks_file}}},
        });
    }
    return j;
}

std::string plan_to_table(const LaunchPlan& plan) {
    std::ostringstream out;
    out << "run " << plan.run_id << " on " << plan.hostname << ": node " << plan.node_rank << " of " << plan.nnodes
        << ", " << plan.nproc_per_node << " worker(s) here, world size " << plan.world_size << "\n"
        << "master " << plan.master_addr << ":" << plan.master_port
        << (plan.master_port_free_pick ? " (a free port; a run picks its own when it starts)" : "")
        << ", restarts allowed " << (plan.group_restarts ? "as a group of all nodes" : "here") << ": "
        << plan.max_restarts << "\n";
    if (plan.spare_nodes > 0)
        out << "hot spares: " << plan.spare_nodes << " node(s) past --nnodes MAX wait idle and replace a lost node"
            << (plan.spare ? "; this node is one (shown in node " + std::to_string(plan.node_rank) + "'s place)" : "")
            << "\n";
    out << "topology: " << plan.topology_source << ", binding: " << topology::bind_mode_name(plan.bind_mode) << "\n";
    if (!plan.attempt_dir.empty())
        out << "logs: " << plan.attempt_dir
            << (plan.log_files ? " (per-rank stdout/stderr and error files)" : " (error files)") << "\n";
    out << "hangs: "
        << (plan.hang_timeout ? "a rank silent for " + format_seconds(*plan.hang_timeout) + " is hung"
                              : std::string("not watched (--hang-timeout)"))
        << (plan.stacks_files.empty() ? "" : "; stacks go to " + plan.stacks_files)
        << (plan.timer_file.empty() ? "" : "; torchrun's watchdog served at " + plan.timer_file) << "\n";
    for (auto& w : plan.warnings) out << "warning: " << w << "\n";
    for (auto& n : plan.notes) out << "note: " << n << "\n";
    out << "\n";
    constexpr int kColumns = 9;
    const char* header[kColumns] = {"RANK", "LOCAL", "NODE", "GPU", "NIC", "CPUS", "MEMS", "CONSOLE", "COMMAND"};
    std::vector<std::array<std::string, kColumns>> rows;
    for (auto& r : plan.ranks) {
        std::string console = r.console_stdout && r.console_stderr ? "out+err"
                              : r.console_stdout                   ? "out"
                              : r.console_stderr                   ? "err"
                                                                   : "-";
        std::string command;
        for (auto& a : r.argv) command += (command.empty() ? "" : " ") + shell_quote(a);  // one line, pasteable
        std::string gpu = r.gpu ? std::to_string(r.gpu->index) + " (" + r.gpu->pci + ")" : "-";
        std::string nic = r.nics.empty() ? "-"
                                         : r.nics.front().name + ":" + std::to_string(r.nics.front().port) +
                                               (r.nics.front().affinity.empty() ? "" : " " + r.nics.front().affinity);
        auto or_dash = [](std::string s) { return s.empty() ? std::string("-") : s; };
        rows.push_back({std::to_string(r.rank), std::to_string(r.local_rank), std::to_string(r.node_rank), gpu, nic,
                        or_dash(r.cpuset.to_list()), or_dash(r.mems.to_list()), console, command});
    }
    size_t width[kColumns];
    for (int c = 0; c < kColumns; ++c) {
        width[c] = std::string(header[c]).size();
        for (auto& row : rows) width[c] = std::max(width[c], row[c].size());
    }
    auto line = [&](auto get) {
        for (int c = 0; c < kColumns; ++c) {
            std::string cell = get(c);
            out << cell;
            if (c < kColumns - 1) out << std::string(width[c] - cell.size() + 2, ' ');
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
