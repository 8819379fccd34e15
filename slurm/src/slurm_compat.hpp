// The one place that knows how libslurm's public API differs between the Slurm releases dlaunch builds
// against (22.05 ... 26.05; tests/slurm/compile-matrix.sh checks every one). Everything else in slurm/
// uses these names and is the same for all releases.
//
// Checked release by release (slurm/slurm.h of SchedMD's tags slurm-22-05-11-1 ... slurm-26-05-3-1): the
// fields dlaunch reads (node_info_t::node_addr; slurm_job_info_t::exc_nodes, end_time, job_state,
// preempt_time, batch_flag; slurm_conf_t::kill_wait; job_desc_msg_t::job_id, exc_nodes) keep their names,
// types and meaning in all of them, as do the job states and flags job_ending_from_state() reads. Their
// offsets may change between releases, which is why dlaunch is compiled against the site's own headers.
#pragma once

#include <slurm/slurm.h>

#include <cerrno>
#include <cstdint>

#if !defined(SLURM_VERSION_NUMBER) || SLURM_VERSION_NUMBER < SLURM_VERSION_NUM(22, 5, 0)
#error "dlaunch needs Slurm 22.05 or newer: point CMake at a newer Slurm with -DSlurm_ROOT=<prefix>"
#endif

namespace dlaunch::slurm::compat {

// 23.11 made hostlist_t the struct itself (it was a pointer to it); the calls take and return pointers.
#if SLURM_VERSION_NUMBER >= SLURM_VERSION_NUM(23, 11, 0)
using HostList = hostlist_t*;
#else
using HostList = hostlist_t;
#endif

// 26.05 renamed slurm_free_ctl_conf() to slurm_free_conf().
#if SLURM_VERSION_NUMBER >= SLURM_VERSION_NUM(26, 5, 0)
using FreeConf = decltype(&slurm_free_conf);
inline constexpr const char* kFreeConfSymbol = "slurm_free_conf";
#else
using FreeConf = decltype(&slurm_free_ctl_conf);
inline constexpr const char* kFreeConfSymbol = "slurm_free_ctl_conf";
#endif

// How a call names a job or a step. 25.11 made slurm_signal_job_step() take a slurm_step_id_t and moved
// job_desc_msg_t's job_id into its step_id; 26.05 made slurm_load_job() and slurm_requeue() take one too.
#if SLURM_VERSION_NUMBER >= SLURM_VERSION_NUM(25, 11, 0)
// The values of SLURM_STEP_ID_INITIALIZER (a C compound literal) with the job and step filled in.
inline slurm_step_id_t step_ref(uint32_t job, uint32_t step) {
    slurm_step_id_t id{};
    id.job_id = job;
    id.step_het_comp = NO_VAL;
    id.step_id = step;
    return id;
}
inline int signal_step(decltype(&slurm_signal_job_step) signal, uint32_t job, uint32_t step, uint32_t signo) {
    slurm_step_id_t id = step_ref(job, step);
    return signal(&id, signo);
}
inline void set_job_id(job_desc_msg_t& desc, uint32_t job) {
    desc.step_id.job_id = job;
}
#else
inline int signal_step(decltype(&slurm_signal_job_step) signal, uint32_t job, uint32_t step, uint32_t signo) {
    return signal(job, step, signo);
}
inline void set_job_id(job_desc_msg_t& desc, uint32_t job) {
    desc.job_id = job;
}
#endif
#if SLURM_VERSION_NUMBER >= SLURM_VERSION_NUM(26, 5, 0)
inline slurm_step_id_t job_ref(uint32_t job) {
    return step_ref(job, NO_VAL);
}
#else
inline uint32_t job_ref(uint32_t job) {
    return job;
}
#endif

// A failed call's error code. Up to 24.05 slurm_get_errno() only returned errno, and 24.11 removed it: the
// library sets errno itself, so reading errno right after the call is right for every release.
inline int last_error() {
    return errno;
}

}  // namespace dlaunch::slurm::compat
