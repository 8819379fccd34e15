// The libslurm calls dlaunch makes: host lists, node addresses, job state, requeue, signalling a step.
// libslurm is opened on the first of those calls (dlaunch/shared_library.hpp says why), by the SONAME the
// build read off the library.
#include "dlaunch/slurm/client.hpp"

#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <mutex>
#include <thread>

#include "dlaunch/shared_library.hpp"
#include "slurm_compat.hpp"

namespace dlaunch::slurm {
namespace {

// The libslurm calls this file makes.
struct SlurmApi {
    decltype(&slurm_init) init = nullptr;
    decltype(&slurm_hostlist_create) hostlist_create = nullptr;
    decltype(&slurm_hostlist_shift) hostlist_shift = nullptr;
    decltype(&slurm_hostlist_destroy) hostlist_destroy = nullptr;
    decltype(&slurm_load_node_single) load_node_single = nullptr;
    decltype(&slurm_free_node_info_msg) free_node_info_msg = nullptr;
    decltype(&slurm_signal_job_step) signal_job_step = nullptr;
    decltype(&slurm_strerror) strerror = nullptr;
    decltype(&slurm_requeue) requeue = nullptr;
    decltype(&slurm_load_job) load_job = nullptr;
    decltype(&slurm_free_job_info_msg) free_job_info_msg = nullptr;
    decltype(&slurm_load_ctl_conf) load_ctl_conf = nullptr;
    compat::FreeConf free_conf = nullptr;
    decltype(&slurm_init_job_desc_msg) init_job_desc_msg = nullptr;
    decltype(&slurm_update_job) update_job = nullptr;
};

Result<const SlurmApi*> slurm() {
    static SlurmApi api;
    static SharedLibrary so(DLAUNCH_LIBSLURM_SONAME);
    static const bool loaded = [] {
        so.bind(api.init, "slurm_init");
        so.bind(api.hostlist_create, "slurm_hostlist_create");
        so.bind(api.hostlist_shift, "slurm_hostlist_shift");
        so.bind(api.hostlist_destroy, "slurm_hostlist_destroy");
        so.bind(api.load_node_single, "slurm_load_node_single");
        so.bind(api.free_node_info_msg, "slurm_free_node_info_msg");
        so.bind(api.signal_job_step, "slurm_signal_job_step");
        so.bind(api.strerror, "slurm_strerror");
        so.bind(api.requeue, "slurm_requeue");
        so.bind(api.load_job, "slurm_load_job");
        so.bind(api.free_job_info_msg, "slurm_free_job_info_msg");
        so.bind(api.load_ctl_conf, "slurm_load_ctl_conf");
        so.bind(api.free_conf, compat::kFreeConfSymbol);
        so.bind(api.init_job_desc_msg, "slurm_init_job_desc_msg");
        so.bind(api.update_job, "slurm_update_job");
        return so.ok();
    }();
    if (!loaded)
        return Error{"slurm: cannot load " DLAUNCH_LIBSLURM_SONAME ": " + so.error(),
                     "install the libslurm of Slurm " DLAUNCH_SLURM_RELEASE
                     ", the release dlaunch was built against, or build dlaunch against this node's Slurm "
                     "(README.md: \"Build against your site's Slurm\")"};
    return &api;
}

// slurm() after slurm_init(), once: for the calls that talk to slurmctld, as Slurm's own commands do. They
// need the configuration and, from 23.02 on, the plugins it loads (24.11 without it: "fatal: No hash plugins
// loaded", and the process exits). Host lists need neither, and slurm_init() exits the process where no
// configuration can be found, so they do without it.
Result<const SlurmApi*> slurmctld_api() {
    auto api = slurm();
    if (!api) return api;
    static std::once_flag once;
    std::call_once(once, [&] { (*api)->init(nullptr); });
    return api;
}

}  // namespace

Result<std::vector<std::string>> expand_hostlist(const std::string& hostlist) {
    auto api = slurm();
    if (!api) return api.error();
    std::vector<std::string> hosts;
    compat::HostList hl = (*api)->hostlist_create(hostlist.c_str());
    if (hl) {
        while (char* host = (*api)->hostlist_shift(hl)) {
            hosts.emplace_back(host);
            std::free(host);
        }
        (*api)->hostlist_destroy(hl);
    }
    if (hosts.empty())
        return Error{"slurm: the node list '" + hostlist + "' names no nodes",
                     "start dlaunch directly under srun (not from a script that changes SLURM_* variables)"};
    return hosts;
}

std::optional<std::string> slurm_node_address(const std::string& node) {
    auto api = slurmctld_api();
    if (!api) return std::nullopt;
    node_info_msg_t* msg = nullptr;
    std::string name = node;
    if ((*api)->load_node_single(&msg, name.data(), SHOW_ALL) != SLURM_SUCCESS || !msg) return std::nullopt;
    std::optional<std::string> addr;
    if (msg->record_count > 0 && msg->node_array[0].node_addr) addr = msg->node_array[0].node_addr;
    (*api)->free_node_info_msg(msg);
    return addr;
}

Result<uint32_t> job_number(const std::string& job_id) {
    char* end = nullptr;
    unsigned long job = std::strtoul(job_id.c_str(), &end, 10);
    if (job_id.empty() || *end || job == 0 || job > UINT32_MAX)
        return Error{"slurm: job id '" + job_id + "' is not a number", "run dlaunch --requeue inside an sbatch job"};
    return static_cast<uint32_t>(job);
}

Result<RequeueResult> requeue_slurm_job(const std::string& job_id) {
    auto api = slurmctld_api();
    if (!api) return api.error();
    auto job = job_number(job_id);
    if (!job) return job.error();
    // Slurm 22.05 returns the error code itself (2024 when the job is pending already), not -1 + errno.
    int rc = (*api)->requeue(compat::job_ref(*job), 0);
    if (rc == SLURM_SUCCESS) return RequeueResult::Requeued;
    int e = rc == SLURM_ERROR ? compat::last_error() : rc;
    // Another node's agent was first (the job is pending again or on its way there).
    if (e == ESLURM_JOB_PENDING || e == ESLURM_TRANSITION_STATE_NO_UPDATE) return RequeueResult::AlreadyRequeued;
    std::string hint = "check `scontrol show job " + job_id + "`";
    if (e == ESLURM_DISABLED || e == ESLURM_BATCH_ONLY)
        hint =
            "submit the job with sbatch --requeue (or JobRequeue=1 in slurm.conf); srun/salloc jobs cannot be requeued";
    return Error{"slurm: cannot requeue job " + job_id + ": " + (*api)->strerror(e), hint};
}

Status exclude_nodes(const std::string& job_id, const std::vector<std::string>& hosts) {
    auto api = slurmctld_api();
    if (!api) return api.error();
    auto job = job_number(job_id);
    if (!job) return job.error();
    std::string list;
    job_info_msg_t* msg = nullptr;
    // The job's own ExcNodeList (sbatch --exclude, earlier exclusions) is kept: unread, it is not replaced.
    if ((*api)->load_job(&msg, compat::job_ref(*job), SHOW_ALL) != SLURM_SUCCESS || !msg || msg->record_count == 0) {
        const std::string why = (*api)->strerror(compat::last_error());
        if (msg) (*api)->free_job_info_msg(msg);
        return Error{
            "slurm: cannot read job " + job_id + " to add to its excluded nodes: " + why,
            "Slurm may give the job those nodes again; `scontrol update jobid=" + job_id + " ExcNodeList=...`"};
    }
    if (msg->job_array[0].exc_nodes) list = msg->job_array[0].exc_nodes;
    (*api)->free_job_info_msg(msg);
    for (const std::string& h : hosts) list += (list.empty() ? "" : ",") + h;
    job_desc_msg_t desc;
    (*api)->init_job_desc_msg(&desc);
    compat::set_job_id(desc, *job);
    desc.exc_nodes = list.data();
    int rc = (*api)->update_job(&desc);
    if (rc == SLURM_SUCCESS) return Ok{};
    int e = rc == SLURM_ERROR ? compat::last_error() : rc;
    return Error{"slurm: cannot exclude " + list + " from job " + job_id + ": " + (*api)->strerror(e),
                 "Slurm may give the job those nodes again; `scontrol update jobid=" + job_id + " ExcNodeList=" + list +
                     "` while it is pending"};
}

std::optional<double> slurm_job_seconds_left(const std::string& job_id) {
    auto api = slurmctld_api();
    if (!api) return std::nullopt;
    auto job = job_number(job_id);
    if (!job) return std::nullopt;
    job_info_msg_t* msg = nullptr;
    if ((*api)->load_job(&msg, compat::job_ref(*job), SHOW_ALL) != SLURM_SUCCESS || !msg) return std::nullopt;
    std::optional<double> left;
    if (msg->record_count > 0 && msg->job_array[0].end_time > 0)
        left = std::difftime(msg->job_array[0].end_time, std::time(nullptr));
    (*api)->free_job_info_msg(msg);
    return left;
}

JobEnding job_ending_from_state(uint32_t job_state, bool preempting) {
    if (job_state & (JOB_REQUEUE | JOB_REQUEUE_HOLD | JOB_REQUEUE_FED)) return JobEnding::Requeueing;
    switch (job_state & JOB_STATE_BASE) {
        case JOB_PENDING: return JobEnding::Requeueing;  // requeued (scontrol requeue: PENDING|COMPLETING)
        case JOB_RUNNING:
        case JOB_SUSPENDED: return preempting ? JobEnding::Preempted : JobEnding::Running;
        case JOB_PREEMPTED: return JobEnding::Preempted;
        case JOB_NODE_FAIL:
        case JOB_BOOT_FAIL: return JobEnding::NodeFailed;
        case JOB_TIMEOUT:
        case JOB_DEADLINE: return JobEnding::TimedOut;
        case JOB_CANCELLED: return JobEnding::Cancelled;
        default: return JobEnding::Unknown;  // COMPLETE, FAILED, OOM: the job ended by itself
    }
}

JobEnding slurm_job_ending(const std::string& job_id) {
    auto api = slurmctld_api();
    if (!api) return JobEnding::Unknown;
    auto job = job_number(job_id);
    if (!job) return JobEnding::Unknown;
    job_info_msg_t* msg = nullptr;
    if ((*api)->load_job(&msg, compat::job_ref(*job), SHOW_ALL) != SLURM_SUCCESS || !msg) return JobEnding::Unknown;
    JobEnding e = msg->record_count > 0
                      ? job_ending_from_state(msg->job_array[0].job_state, msg->job_array[0].preempt_time != 0)
                      : JobEnding::Unknown;
    (*api)->free_job_info_msg(msg);
    return e;
}

Result<bool> slurm_job_is_batch(const std::string& job_id) {
    auto api = slurmctld_api();
    if (!api) return api.error();
    auto job = job_number(job_id);
    if (!job) return job.error();
    job_info_msg_t* msg = nullptr;
    if ((*api)->load_job(&msg, compat::job_ref(*job), SHOW_ALL) != SLURM_SUCCESS || !msg) {
        const std::string why = (*api)->strerror(compat::last_error());
        return Error{"slurm: cannot load job " + job_id + ": " + why,
                     "check that slurmctld answers (`scontrol show job " + job_id + "`)"};
    }
    bool batch = msg->record_count > 0 && msg->job_array[0].batch_flag != 0;
    (*api)->free_job_info_msg(msg);
    return batch;
}

std::optional<double> slurm_kill_wait() {
    auto api = slurmctld_api();
    if (!api) return std::nullopt;
    slurm_conf_t* conf = nullptr;
    if ((*api)->load_ctl_conf(0, &conf) != SLURM_SUCCESS || !conf) return std::nullopt;
    double kill_wait = conf->kill_wait;
    (*api)->free_conf(conf);
    return kill_wait;
}

Status signal_slurm_step(const std::string& job_id, const std::string& step_id, int signo) {
    char* end = nullptr;
    unsigned long job = std::strtoul(job_id.c_str(), &end, 10);
    unsigned long step = std::strtoul(step_id.c_str(), nullptr, 10);
    if (job_id.empty() || *end) return Error{"slurm: job id '" + job_id + "' is not a number", ""};
    auto api = slurmctld_api();
    if (!api) return api.error();
    // A signal, not a cancel: a cancelled step may drop the output still on its way to srun, such as the
    // failure summary the failing node just printed.
    if (compat::signal_step((*api)->signal_job_step, static_cast<uint32_t>(job), static_cast<uint32_t>(step),
                            static_cast<uint32_t>(signo)) != SLURM_SUCCESS) {
        const std::string why = (*api)->strerror(compat::last_error());
        return Error{"slurm: cannot signal step " + job_id + "." + step_id + ": " + why, "scancel it by hand"};
    }
    return Ok{};
}

void let_output_reach_srun() {
    std::fflush(nullptr);
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
}

}  // namespace dlaunch::slurm
