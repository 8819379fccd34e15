// A PMI-1 or PMI-2 client connection of this process (wire.hpp), for ranks started by MPICH's or Intel
// MPI's Hydra (mpiexec), srun --mpi=pmi2, or Flux: the job's facts (rank, size, which ranks share this node)
// and the key-value exchange that agreeing on MASTER_ADDR/PORT needs.
//
// Caveats:
// - Every reply is waited for with a bound, and every message read is bounded (kMaxMessage): the other end
//   is a socket whose peer dlaunch-mpi does not control.
// - finalize() before exec: Hydra counts a rank that initialised and exits without finalizing as failed,
//   and closes the connection once it is finalized, so the application cannot use it after dlaunch-mpi.
//   Destroying a Client only closes the connection, unfinalized: a rank that ends on an exception is then
//   a failed rank to the launcher, which ends the job, and never a rank that finished.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "dlaunch/env_map.hpp"
#include "dlaunch/fd.hpp"
#include "dlaunch/pmi/wire.hpp"
#include "dlaunch/pmix/job_source.hpp"
#include "dlaunch/scheduler.hpp"

namespace dlaunch::pmi {

// Whether the launcher gave this process a PMI server: PMI_FD, or PMI_PORT (with PMI_ID).
bool offered(const EnvMap& env);

// The protocol to speak: DLAUNCH_PMI_VERSION (1 or 2) when set, else PMI-2 under srun --mpi=pmi2
// (SLURM_MPI_TYPE=pmi2), else PMI-1 (Hydra's and Flux's default); an Error for another DLAUNCH_PMI_VERSION.
Result<Version> version_for(const EnvMap& env);

// "pmi-1" or "pmi-2": the source name messages and SchedulerInfo carry.
std::string source_name(Version version);

class Client : public pmix::Exchange {
public:
    ~Client() override;
    Client(const Client&) = delete;
    Client& operator=(const Client&) = delete;

    // Connects and initialises when offered(); nullptr when not. An Error when the server cannot be reached,
    // does not answer within `reply_seconds`, or what it says disagrees with the launcher's variables
    // (PMI_RANK, PMI_SIZE, MPI_LOCALRANKID, MPI_LOCALNRANKS).
    static Result<std::unique_ptr<Client>> connect_if_available(const EnvMap& env, double reply_seconds = 30);

    // The job as the server described it (nodes: unknown, since PMI names none).
    const SchedulerInfo& job() const { return job_; }

    Status put(const std::string& key, const std::string& value) override;
    Status fence(double timeout_seconds) override;
    Result<std::string> get(int rank, const std::string& key) const override;
    void finalize() override;
    // PMI's abort: the server ends every rank (Hydra would otherwise wait for the others). No reply is read.
    void abort(int exit_code) override;

private:
    Client(Fd fd, Version version, double reply_seconds);
    Status open(const EnvMap& env);
    Status open_v1(const EnvMap& env);
    Status open_v2(const EnvMap& env);
    Status describe_job(const EnvMap& env, const std::string& mapping);
    Result<Fields> call(const std::string& cmd, const Fields& args, const std::string& reply, double seconds) const;
    Result<Fields> receive(const std::string& reply, double seconds) const;
    Error failure(const std::string& what, const std::string& hint) const;

    mutable Fd fd_;
    Version version_;
    double reply_seconds_;
    mutable std::string pending_;  // bytes read past the last message
    std::string kvsname_;
    SchedulerInfo job_;
};

}  // namespace dlaunch::pmi
