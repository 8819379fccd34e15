#include "dlaunch/attempt_io.hpp"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include "dlaunch/clock.hpp"
#include "dlaunch/failure_policy.hpp"
#include "dlaunch/slurm/client.hpp"
#include "dlaunch/torch_error_file.hpp"

namespace dlaunch {
namespace fs = std::filesystem;

Result<RequeueJob> prepare_requeue(const LaunchRequest& req, const EnvMap& env) {
    const std::string hint =
        "submit the job with sbatch and start dlaunch with srun in the batch script "
        "(examples/sbatch/requeue.sbatch)";
    auto job_it = env.find("SLURM_JOB_ID");
    if (job_it == env.end() || job_it->second.empty())
        return Error{"requeue: --requeue needs a Slurm batch job, and SLURM_JOB_ID is not set", hint};
    RequeueJob job;
    job.job_id = job_it->second;
    if (auto it = env.find("SLURM_RESTART_COUNT"); it != env.end()) {
        const std::string& v = it->second;
        auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), job.slurm_restart);
        if (ec != std::errc{} || p != v.data() + v.size() || job.slurm_restart < 0)
            return Error{"requeue: SLURM_RESTART_COUNT='" + v + "' is not a count", "do not set it by hand"};
    }
    std::string base;
    if (req.log_dir)
        base = *req.log_dir;
    else if (auto it = env.find("SLURM_SUBMIT_DIR"); it != env.end() && !it->second.empty())
        base = it->second + "/dlaunch-logs";
    else
        return Error{"requeue: no directory for the job's logs and attempt ledger (no --log-dir, no SLURM_SUBMIT_DIR)",
                     "give --log-dir DIR on a file system every node of the job sees"};
    job.job_dir = (fs::absolute(base) / job.job_id).string();
    std::error_code ec;
    fs::create_directories(job.job_dir, ec);
    if (ec && !fs::is_directory(job.job_dir))
        return Error{"requeue: cannot create " + job.job_dir + ": " + ec.message(),
                     "give --log-dir DIR on a writable file system every node of the job sees"};
    job.ledger = job.job_dir + "/attempts.jsonl";
    job.attempt = first_attempt_of_run(job.slurm_restart, read_ledger(job));
    return job;
}

std::vector<AttemptRecord> read_ledger(const RequeueJob& job) {
    std::ifstream in(job.ledger);
    if (!in) return {};
    std::stringstream text;
    text << in.rdbuf();
    int skipped = 0;
    auto records = parse_ledger(text.str(), &skipped);
    if (skipped > 0) spdlog::warn("requeue: {}: {} line(s) are not attempt records; skipped", job.ledger, skipped);
    return records;
}

Status create_ledger(const RequeueJob& job) {
    if (std::ofstream(job.ledger, std::ios::app)) return Ok{};
    return Error{"--dist-launch=requeue: cannot write " + job.ledger, "submit from a directory every node can write"};
}

Status append_ledger(const RequeueJob& job, const AttemptRecord& record) {
    const std::string line = attempt_to_json(record).dump() + "\n";
    int fd = ::open(job.ledger.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0)
        return Error{"requeue: cannot open " + job.ledger + ": " + std::strerror(errno),
                     "give --log-dir DIR on a writable file system every node of the job sees"};
    ssize_t n = ::write(fd, line.data(), line.size());
    int e = errno;
    ::fsync(fd);
    ::close(fd);
    if (n != static_cast<ssize_t>(line.size()))
        return Error{"requeue: cannot write " + job.ledger + ": " + std::strerror(n < 0 ? e : ENOSPC),
                     "free space on that file system"};
    return Ok{};
}

namespace {

// Writes `text` to `fd` in full and syncs it; false with errno set when it cannot.
bool write_and_sync(int fd, std::string_view text) {
    while (!text.empty()) {
        const ssize_t n = ::write(fd, text.data(), text.size());
        if (n < 0 && errno == EINTR) continue;
        if (n == 0) errno = ENOSPC;
        if (n <= 0) return false;
        text.remove_prefix(static_cast<size_t>(n));
    }
    return ::fsync(fd) == 0;
}

// Atomically: a temporary file beside `path` (made 0600, then given `mode`), synced, then renamed over it, so
// that a full disk leaves the previous complete file (or none), never a cut one.
Result<std::string> write_text(const std::string& path, const std::string& text, mode_t mode,
                               std::optional<Owner> owner) {
    const auto slash = path.rfind('/');
    const std::string dir = slash == std::string::npos ? "." : path.substr(0, slash);
    std::string temp = path + ".XXXXXX";
    const int fd = ::mkostemp(temp.data(), O_CLOEXEC);
    bool written = fd >= 0 && ::fchmod(fd, mode) == 0 && write_and_sync(fd, text);
    int e = errno;
    if (fd >= 0 && ::close(fd) != 0 && written) written = false, e = errno;
    if (written && owner && ::fchownat(AT_FDCWD, temp.c_str(), owner->uid, owner->gid, AT_SYMLINK_NOFOLLOW) != 0) {
        e = errno;
        ::unlink(temp.c_str());
        return Error{"requeue: cannot give " + path + " to the job's user: " + std::strerror(e), ""};
    }
    if (written && ::rename(temp.c_str(), path.c_str()) != 0) written = false, e = errno;
    if (!written) {
        if (fd >= 0) ::unlink(temp.c_str());
        return Error{"logs: cannot write " + path + ": " + std::strerror(e),
                     "check the space and permissions of " + dir};
    }
    return path;
}

// Readable as the ofstream's files were.
Result<std::string> write_json(const std::string& path, const nlohmann::json& j, std::optional<Owner> owner) {
    return write_text(path, j.dump(2) + "\n", 0644, owner);
}

// The launcher's TORCHELASTIC_ERROR_FILE, when it has one: `text` there, private to the user; a file that
// cannot be written is said, and changes nothing else.
void write_launcher_error_file(const EnvMap& env, const std::string& text) {
    auto it = env.find(kTorchErrorFileVariable);
    if (it == env.end() || it->second.empty()) return;
    if (auto written = write_text(it->second, text, 0600, std::nullopt); !written)
        spdlog::warn("{} (dlaunch's own {})", written.error().describe(), kTorchErrorFileVariable);
}

}  // namespace

void record_worker_failure_for_launcher(const EnvMap& env, const RunOutcome& outcome) {
    const FailureRecord* root = error_file_root_cause(outcome);
    if (!root) return;
    std::ifstream in(root->error_file, std::ios::binary);
    std::ostringstream content;
    content << in.rdbuf();
    if (!in || content.str().empty()) return;
    write_launcher_error_file(env, launcher_record_of_worker(content.str(), root->failure.exit.status));
}

void record_launcher_error(const EnvMap& env, const std::string& message) {
    write_launcher_error_file(env, launcher_record_of_error(message, now_epoch()));
}

Result<std::string> write_failure_json(const std::string& dir, const RunOutcome& outcome, std::optional<Owner> owner) {
    return write_json(dir + "/failure.json", failure_summary_json(outcome), owner);
}

Result<std::string> write_run_json(const std::string& dir, const RunOutcome& outcome) {
    return write_json(dir + "/run.json", run_record_json(outcome, dir), std::nullopt);
}

namespace {

// The agent is done and must finish what it does (and exit with its own code) although Slurm's SIGTERM,
// which the requeue or the end of the step brings at once, would kill it: it blocks the stop signals.
void block_stop_signals() {
    sigset_t stops;
    sigemptyset(&stops);
    for (int s : stop_signals()) sigaddset(&stops, s);
    ::sigprocmask(SIG_BLOCK, &stops, nullptr);
}

// Said before the requeue, which ends the step (and srun's reading of what this node says) at once.
bool requeue_job(const RequeueJob& job, const AttemptDecision& d, int attempt, AttemptReport& report) {
    if (!d.exclude.empty()) block_stop_signals();  // the exclusion comes after the requeue (SIGTERM)
    std::string hosts;
    for (const std::string& h : d.exclude) hosts += (hosts.empty() ? "" : ",") + h;
    report.log({LogLine::Level::Warn, "requeue: job " + job.job_id + " goes back to Slurm's queue (" + *d.requeue +
                                          ")" + (hosts.empty() ? "" : ", excluding " + hosts + " (ExcNodeList)") +
                                          "; attempt " + std::to_string(attempt + 1) + " comes next"});
    slurm::let_output_reach_srun();
    auto r = slurm::requeue_slurm_job(job.job_id);
    if (!r) {
        report.log({LogLine::Level::Error, r.error().describe()});
        return false;
    }
    if (*r == slurm::RequeueResult::AlreadyRequeued)
        report.log({LogLine::Level::Info, "requeue: job " + job.job_id + " is already being requeued"});
    if (d.exclude.empty()) return true;
    // Only a pending job's excluded nodes can change: after the requeue, before Slurm starts it again.
    if (auto s = slurm::exclude_nodes(job.job_id, d.exclude); !s)
        report.log({LogLine::Level::Error, s.error().describe()});
    return true;
}

void end_step_on_every_node(const AttemptPlace& place, AttemptReport& report) {
    report.log({LogLine::Level::Warn,
                "stop: ending Slurm step " + place.step_job_id + "." + place.step_id + " on every node"});
    block_stop_signals();
    slurm::let_output_reach_srun();  // the summary above
    if (auto s = slurm::signal_slurm_step(place.step_job_id, place.step_id, SIGTERM); !s)
        report.log({LogLine::Level::Error, s.error().describe()});
}

}  // namespace

int carry_out(const AttemptDecision& d, const AttemptFacts& facts, const AttemptPlace& place, AttemptReport& report) {
    if (d.record && place.job)
        if (auto s = append_ledger(*place.job, *d.record); !s)
            report.log({LogLine::Level::Error, s.error().describe()});
    if (d.show_node_summary && facts.outcome) report.node_summary(*facts.outcome);
    for (auto& line : d.log) report.log(line);
    if (d.requeue && place.job && requeue_job(*place.job, d, facts.attempt, report)) return d.exit_code;
    if (d.final_summary) {
        auto path = write_failure_json(place.records_dir, *d.final_summary, place.owner);
        if (!path) report.log({LogLine::Level::Error, path.error().describe()});
        const std::string json = path ? *path : "";  // never a file that was not written
        if (d.summary_on_console)
            report.final_summary(*d.final_summary, json, place.job.has_value());
        else
            report.log({LogLine::Level::Info, "this node's failures: " + (path ? json : "not written (said above)") +
                                                  " (the group's leader sums up the job)"});
        if (d.end_step && !place.step_id.empty()) end_step_on_every_node(place, report);
    }
    return d.requeue ? d.exit_code_if_not_requeued.value_or(d.exit_code) : d.exit_code;
}

}  // namespace dlaunch
