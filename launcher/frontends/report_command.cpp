#include "dlaunch/report_command.hpp"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>

#include "dlaunch/exit_codes.hpp"
#include "dlaunch/run_report.hpp"

namespace dlaunch {
namespace {

namespace fs = std::filesystem;

// PATH's own run.json, else those of its subdirectories (a --log-dir), in name order.
std::vector<fs::path> records_at(const fs::path& path) {
    if (fs::exists(path / "run.json")) return {path / "run.json"};
    std::vector<fs::path> out;
    std::error_code ec;
    for (const auto& item : fs::directory_iterator(path, ec))
        if (fs::exists(item.path() / "run.json")) out.push_back(item.path() / "run.json");
    std::sort(out.begin(), out.end());
    return out;
}

Result<RunReport> read_report(const fs::path& file) {
    std::ifstream in(file);
    auto j = nlohmann::json::parse(in, nullptr, false);
    if (j.is_discarded()) return Error{"report: " + file.string() + " is not JSON", "was the run's end cut short?"};
    auto report = run_report_from_json(j);
    if (!report) return Error{report.error().what + " (" + file.string() + ")", report.error().hint};
    return report;
}

int refuse(const Error& e) {
    std::cerr << e.message() << "\n";
    return exit_code::kUsage;
}

}  // namespace

int run_report_command(const Command& cmd) {
    if (!fs::is_directory(cmd.report_path))
        return refuse({"report: " + cmd.report_path + " is not a directory",
                       "give a run directory (<log-dir>/<run_id>_XXXXXX) or the --log-dir of a run"});
    const std::vector<fs::path> files = records_at(cmd.report_path);
    if (files.empty())
        return refuse({"report: no run record (run.json) in " + cmd.report_path + " nor in its subdirectories",
                       "give a run directory (<log-dir>/<run_id>_XXXXXX) or the --log-dir of a run"});
    if (cmd.plan_format == "svg" && files.size() > 1)
        return refuse({"report: " + cmd.report_path + " holds " + std::to_string(files.size()) + " runs",
                       "--format svg draws one: give one of its run directories"});
    for (const fs::path& file : files) {
        auto report = read_report(file);
        if (!report) return refuse(report.error());
        std::cout << (cmd.plan_format == "svg" ? run_report_svg(*report) : run_report_text(*report));
    }
    return exit_code::kSuccess;
}

}  // namespace dlaunch
