// The job context of a process started by a parallel launcher through PMIx (mpirun, srun --mpi=pmix) or
// Open MPI's environment, and a small key-value exchange between its tasks (Exchange). Slurm's environment
// is read by slurm/. No PMIx type leaves this module.
//
// Caveats (see shared/docs/platform-facts.md):
// - PMIX_MCA_gds=hash is set before the first PMIx_Init: a process that execs into an application which
//   connects again as the same rank otherwise loses its per-process keys (Open MPI dies in MPI_Init).
// - Integer keys come typed differently per launcher (Slurm: int, Open MPI: uint32): all go through one
//   converter.
// - Always finalize() before exec: mpirun reports an unfinalized exit as an error.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "dlaunch/job_context.hpp"
#include "dlaunch/result.hpp"
#include "dlaunch/scheduler.hpp"

namespace dlaunch::pmix {

// A key-value exchange among the tasks of a job: what agreeing on MASTER_ADDR/PORT needs. A PMIx Session
// is the real one; tests use an in-memory one (no daemon).
class Exchange {
public:
    virtual ~Exchange() = default;
    // Publishes `value` under `key` for every task.
    virtual Status put(const std::string& key, const std::string& value) = 0;
    // Waits until every task arrived, exchanging what they put; an Error after `timeout_seconds`.
    virtual Status fence(double timeout_seconds) = 0;
    // `key` as published by task `rank`.
    virtual Result<std::string> get(int rank, const std::string& key) const = 0;
    // Ends the exchange (before exec: the application connects again itself); safe to call twice.
    virtual void finalize() {}
    // Asks the launcher to end every task of the job with `exit_code`, for a launcher that would otherwise
    // wait for the others (Hydra); the default does nothing: mpirun ends a job whose task failed, and srun
    // does so with --kill-on-bad-exit.
    virtual void abort(int exit_code) { (void)exit_code; }
};

// A PMIx client connection of this process.
class Session : public Exchange {
public:
    ~Session() override;
    Session(const Session&) = delete;
    Session& operator=(const Session&) = delete;

    // Connects when the environment names a PMIx server (PMIX_NAMESPACE/PMIX_RANK); nullopt when it does
    // not, an Error when it does but the server cannot be reached.
    static Result<std::unique_ptr<Session>> connect_if_available(const EnvMap& env);

    Result<SchedulerInfo> job() const;

    // Publishes `value` under `key` for every task (global scope), then commits.
    Status put(const std::string& key, const std::string& value) override;
    // Waits until every task of the job arrived, exchanging what they put. Fails after `timeout_seconds`
    // with the number of tasks and a hint that one never arrived.
    Status fence(double timeout_seconds) override;
    // `key` as published by task `rank`.
    Result<std::string> get(int rank, const std::string& key) const override;
    // Disconnects; safe to call twice.
    void finalize() override;

private:
    Session();
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

// The PMIx library's own version text ("OpenPMIx 4.2.2, ..."), loading it if needed (`dlaunch doctor`);
// an Error saying why it does not load.
Result<std::string> library_version();

// From Open MPI's environment (OMPI_COMM_WORLD_*). nullopt when absent.
std::optional<Result<SchedulerInfo>> from_openmpi_env(const EnvMap& env);

}  // namespace dlaunch::pmix
