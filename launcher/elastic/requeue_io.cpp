#include "dlaunch/requeue_io.hpp"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

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
        auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), job.attempt);
        if (ec != std::errc{} || p != v.data() + v.size() || job.attempt < 0)
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

}  // namespace dlaunch
