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

// PATH's own record, else those of its subdirectories (a --log-dir), in name order (then listed by start).
std::vector<fs::path> records_at(const fs::path& path) {
    if (fs::path own = record_in(path); !own.empty()) return {own};
    std::vector<fs::path> out;
    std::error_code ec;
    for (const auto& item : fs::directory_iterator(path, ec))
        if (fs::path record = record_in(item.path()); !record.empty()) out.push_back(record);
    std::sort(out.begin(), out.end());
    return out;
}

// A run's record as shown: its text (or picture), and when the run began (0: unknown), the order in which
// a --log-dir's runs are listed.
struct Shown {
    double began = 0;
    std::string text;
};

// A requeued job's ledger, as text (it has no start times to draw; it begins with its first record).
Result<Shown> show_ledger(const fs::path& file, const std::string& format) {
    if (format == "svg")
        return Error{"report: " + file.parent_path().string() + " is a job run with --requeue: its ledger (" +
                         file.filename().string() + ") keeps when attempts ended, not when they began",
                     "leave out --format svg: the text lists every attempt's end and failure"};
    std::ifstream in(file);
    std::stringstream text;
    text << in.rdbuf();
    int skipped = 0;
    const std::vector<AttemptRecord> ledger = parse_ledger(text.str(), &skipped);
    Shown shown;
    shown.text = ledger_report_text(file.parent_path().string(), ledger);  // empty: a job in its first attempt
    if (skipped > 0) shown.text += "  (" + std::to_string(skipped) + " line(s) of it are not attempt records)\n";
    if (!ledger.empty()) shown.began = ledger.front().time;
    return shown;
}

// A run's run.json, placed where its directory is now (the record names where it was written).
Result<RunReport> read_run(const fs::path& file) {
    std::ifstream in(file);
    auto j = nlohmann::json::parse(in, nullptr, false);
    if (j.is_discarded()) return Error{"report: " + file.string() + " is not JSON", "was the run's end cut short?"};
    auto report = run_report_from_json(j);
    if (!report) return Error{report.error().what + " (" + file.string() + ")", report.error().hint};
    report->run_dir = fs::absolute(file.parent_path()).lexically_normal().string();
    return report;
}

Result<Shown> show_run(const fs::path& file, const std::string& format) {
    auto report = read_run(file);
    if (!report) return report.error();
    Shown shown;
    shown.text = format == "svg" ? run_report_svg(*report) : run_report_text(*report);
    if (!report->attempts.empty()) shown.began = report->attempts.front().start;
    return shown;
}

int refuse(const Error& e) {
    std::cerr << e.message() << "\n";
    return exit_code::kUsage;
}

// --exit-code: the run's (or the group job's) exit code on stdout.
int print_exit_code(const std::vector<fs::path>& files, const std::string& where) {
    std::vector<RunReport> runs;
    for (const fs::path& file : files) {
        if (file.filename() != "run.json")
            return refuse({"report: " + file.parent_path().string() +
                               " is a job run with --requeue: --exit-code "
                               "reads runs' run.json, not a job's ledger",
                           "the job's own exit code is Slurm's (sacct -j JOBID -o ExitCode)"});
        auto run = read_run(file);
        if (!run) return refuse(run.error());
        runs.push_back(std::move(*run));
    }
    auto code = run_exit_code(runs, where);
    if (!code) return refuse(code.error());
    std::cout << *code << "\n";
    return exit_code::kSuccess;
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
    if (cmd.report_exit_code) return print_exit_code(files, cmd.report_path);
    if (cmd.plan_format == "svg" && files.size() > 1)
        return refuse({"report: " + cmd.report_path + " holds " + std::to_string(files.size()) + " runs",
                       "--format svg draws one: give one of its run directories"});
    std::vector<Shown> runs;
    for (const fs::path& file : files) {
        auto shown =
            file.filename() == "attempts.jsonl" ? show_ledger(file, cmd.plan_format) : show_run(file, cmd.plan_format);
        if (!shown) return refuse(shown.error());
        runs.push_back(std::move(*shown));
    }
    std::stable_sort(runs.begin(), runs.end(), [](const Shown& a, const Shown& b) { return a.began < b.began; });
    for (const Shown& run : runs) std::cout << run.text;
    return exit_code::kSuccess;
}

}  // namespace dlaunch
