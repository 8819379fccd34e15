#include "dlaunch/ledger_report.hpp"

#include <algorithm>
#include <sstream>

#include "dlaunch/run_report.hpp"

namespace dlaunch {
namespace {

// What the attempt's end meant for the job.
std::string what_followed(const AttemptRecord& r) {
    switch (r.end) {
        case AttemptEnd::Failed:
            return "failed: " + r.detail +
                   (r.final       ? "; the job ended here"
                    : r.restarted ? "; the group restarted inside the allocation"
                                  : "; requeued");
        case AttemptEnd::Checkpointed: return "checkpointed: " + r.detail + "; requeued";
        case AttemptEnd::Stopped: return "stopped: " + r.detail + "; the job ended";
    }
    return r.detail;
}

// A stop (scancel, the time limit, a signal from elsewhere) and a final failure end the job; nothing else
// recorded does.
bool ends_the_job(const AttemptRecord& r) {
    return r.end == AttemptEnd::Stopped || (r.end == AttemptEnd::Failed && r.final);
}

// The record that speaks for an attempt several nodes recorded: a final failure, else a failure, else the first.
const AttemptRecord* speaker(const std::vector<const AttemptRecord*>& records) {
    for (const AttemptRecord* r : records)
        if (r->end == AttemptEnd::Failed && r->final) return r;
    for (const AttemptRecord* r : records)
        if (r->end == AttemptEnd::Failed) return r;
    return records.front();
}

}  // namespace

std::string ledger_report_text(const std::string& job_dir, const std::vector<AttemptRecord>& ledger) {
    std::vector<int> order;  // attempts in the order they were first recorded
    for (const AttemptRecord& r : ledger)
        if (std::find(order.begin(), order.end(), r.attempt) == order.end()) order.push_back(r.attempt);
    std::ostringstream out;
    if (order.empty()) return "job " + job_dir + ": no attempt has ended yet (attempts.jsonl holds no record)\n";
    out << "job " << job_dir << ": " << order.size() << " attempt(s) on record (attempts.jsonl)\n";
    std::vector<std::string> failures;
    bool ended = false;
    for (int attempt : order) {
        std::vector<const AttemptRecord*> records;
        for (const AttemptRecord& r : ledger)
            if (r.attempt == attempt) records.push_back(&r);
        const AttemptRecord& r = *speaker(records);
        ended = ends_the_job(r);  // the last attempt's says
        out << "  attempt " << attempt << "  ended " << format_utc(r.time) << "  (run " << r.slurm_restart
            << " of the batch job, " << r.nnodes << " node(s), world size " << r.world_size << ")  " << what_followed(r)
            << "\n";
        for (const AttemptRecord* each : records)
            for (const FailureRecord& f : each->failures) failures.push_back(report_failure_line(f));
    }
    if (!ended)
        out << "after the last record: the job succeeded or still runs (a success is not recorded; sacct -j "
               "JOB says)\n";
    if (!failures.empty()) out << "failures:\n";
    for (const std::string& f : failures) out << "  " << f << "\n";
    return out.str();
}

}  // namespace dlaunch
