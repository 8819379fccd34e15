#include "dlaunch/report_command.hpp"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include "dlaunch/exit_codes.hpp"
#include "dlaunch/ledger_report.hpp"
#include "dlaunch/run_report.hpp"

namespace dlaunch {
namespace {

namespace fs = std::filesystem;

// A directory's record: run.json (a run), else attempts.jsonl (a job run with --requeue); "" when none.
fs::path record_in(const fs::path& dir) {
    for (const char* name : {"run.json", "attempts.jsonl"})
        if (fs::exists(dir / name)) return dir / name;
    return {};
}

// PATH's own record, else those of its subdirectories (a --log-dir), in name order.
std::vector<fs::path> records_at(const fs::path& path) {
    if (fs::path own = record_in(path); !own.empty()) return {own};
    std::vector<fs::path> out;
    std::error_code ec;
    for (const auto& item : fs::directory_iterator(path, ec))
        if (fs::path record = record_in(item.path()); !record.empty()) out.push_back(record);
    std::sort(out.begin(), out.end());
    return out;
}

// A requeued job's ledger, as text (it has no start times to draw).
Result<std::string> ledger_text(const fs::path& file, const std::string& format) {
    if (format == "svg")
        return Error{"report: " + file.parent_path().string() + " is a job run with --requeue: its ledger (" +
                         file.filename().string() + ") keeps when attempts ended, not when they began",
                     "leave out --format svg: the text lists every attempt's end and failure"};
    std::ifstream in(file);
    std::stringstream text;
    text << in.rdbuf();
    int skipped = 0;
    const std::vector<AttemptRecord> ledger = parse_ledger(text.str(), &skipped);
    std::string out = ledger_report_text(file.parent_path().string(), ledger);  // empty: a job in its first attempt
    if (skipped > 0) out += "  (" + std::to_string(skipped) + " line(s) of it are not attempt records)\n";
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
        return refuse({"report: no run record (run.json, or a requeued job's attempts.jsonl) in " + cmd.report_path +
                           " nor in its subdirectories",
                       "give a run directory (<log-dir>/<run_id>_XXXXXX) or the --log-dir of a run"});
    if (cmd.plan_format == "svg" && files.size() > 1)
        return refuse({"report: " + cmd.report_path + " holds " + std::to_string(files.size()) + " runs",
                       "--format svg draws one: give one of its run directories"});
    for (const fs::path& file : files) {
        if (file.filename() == "attempts.jsonl") {
            auto text = ledger_text(file, cmd.plan_format);
            if (!text) return refuse(text.error());
            std::cout << *text;
            continue;
        }
        auto report = read_report(file);
        if (!report) return refuse(report.error());
        std::cout << (cmd.plan_format == "svg" ? run_report_svg(*report) : run_report_text(*report));
    }
    return exit_code::kSuccess;
}

}  // namespace dlaunch
