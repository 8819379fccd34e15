#include "dlaunch/job_setup.hpp"

#include <netdb.h>
#include <netinet/in.h>

#include <charconv>

#include "dlaunch/host.hpp"
#include "dlaunch/ipv4.hpp"
#include "dlaunch/launcher_env.hpp"
#include "dlaunch/pmi/client.hpp"
#include "dlaunch/slurm/client.hpp"
#include "dlaunch/slurm/task_facts.hpp"

namespace dlaunch {
namespace {

constexpr const char* kMasterKey = "dlaunch.master";
constexpr const char* kWhereKey = "dlaunch.where";  // "HOST LOCAL_RANK", from every rank

bool resolves(const std::string& name) {
    addrinfo hints{};
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* found = nullptr;
    int rc = ::getaddrinfo(name.c_str(), nullptr, &hints, &found);
    if (found) ::freeaddrinfo(found);
    return rc == 0;
}

Result<ScheduledJob> from_env_source(std::optional<Result<SchedulerInfo>> source) {
    if (!source->ok()) return source->error();
    return ScheduledJob{source->value(), nullptr};
}

}  // namespace

namespace {

Error no_launcher() {
    return Error{
        "job: no parallel launcher started this process (no PMIx or PMI server, no OMPI_COMM_WORLD_RANK, "
        "PALS_RANKID, MV2_COMM_WORLD_RANK, no srun step)",
        "start it as `mpirun -np N dlaunch-mpi SCRIPT` (Open MPI), `mpiexec -n N dlaunch-mpi SCRIPT` (MPICH, "
        "Intel MPI), `srun --mpi=pmix -n N dlaunch-mpi SCRIPT` or `srun -n N dlaunch-mpi SCRIPT`; to start workers "
        "yourself use `dlaunch --nproc-per-node N SCRIPT`"};
}

bool numeric(const std::string& text) {
    return !text.empty() && text.find_first_not_of("0123456789") == std::string::npos;
}

// SLURM_* describe this process only in a task of an srun step; a batch script (no SLURM_STEP_ID) hands its
// own SLURM_PROCID=0 to everything it starts.
Result<ScheduledJob> from_srun_task(const EnvMap& env) {
    if (!numeric(str_var(env, "SLURM_STEP_ID")))
        return Error{"job: slurm: SLURM_PROCID=" + str_var(env, "SLURM_PROCID") +
                         " is inherited, not this rank's: no srun step started this process (no SLURM_STEP_ID; "
                         "a batch script's variables), and no MPI launcher did",
                     "start every rank with srun (srun -n N dlaunch-mpi SCRIPT) or an MPI launcher (mpiexec -n N "
                     "dlaunch-mpi SCRIPT); every rank started this way stops"};
    return from_env_source(slurm::from_slurm_env(env));
}

// The job from PMIx when the environment names a server; nullopt when it does not.
Result<std::optional<ScheduledJob>> from_pmix(const EnvMap& env) {
    auto session = pmix::Session::connect_if_available(env);
    if (!session) return session.error();
    if (!*session) return std::optional<ScheduledJob>{};
    auto info = (*session)->job();
    if (!info) return info.error();
    return std::optional<ScheduledJob>(ScheduledJob{*info, std::move(*session)});
}

Result<ScheduledJob> every_launcher(const EnvMap& env) {
    if (auto ompi = pmix::from_openmpi_env(env);
        ompi && ompi->ok() && ompi->value().local_size == ompi->value().size && !ompi->value().job_id.empty()) {
        ScheduledJob job{ompi->value(), nullptr, true};
        job.info.nodes = {host::hostname()};
        job.info.nnodes = 1;
        return job;
    }
    auto pmix = from_pmix(env);
    if (!pmix) return pmix.error();
    if (*pmix) return std::move(**pmix);
    auto pmi = pmi::Client::connect_if_available(env);
    if (!pmi) return pmi.error();
    if (*pmi) {
        SchedulerInfo info = (*pmi)->job();
        return ScheduledJob{std::move(info), std::move(*pmi)};
    }
    if (auto ompi = pmix::from_openmpi_env(env)) return from_env_source(std::move(ompi));
    if (auto pals = from_pals_env(env)) return from_env_source(std::move(pals));
    if (auto mv2 = from_mvapich_env(env)) {  // one node only: its ranks agree through the node-local fence
        auto job = from_env_source(std::move(mv2));
        if (!job) return job;
        job->node_local = true;
        job->info.nodes = {host::hostname()};
        return job;
    }
    if (env.contains("SLURM_PROCID")) return from_srun_task(env);
    return no_launcher();
}

}  // namespace

Result<ScheduledJob> detect_job_for_rank(const EnvMap& env, RankSources sources) {
    if (sources == RankSources::EveryLauncher) return every_launcher(env);
    auto pmix = from_pmix(env);
    if (!pmix) return pmix.error();
    if (*pmix) return std::move(**pmix);
    if (auto slurm = slurm::from_slurm_env(env)) return from_env_source(std::move(slurm));
    if (auto ompi = pmix::from_openmpi_env(env)) return from_env_source(std::move(ompi));
    return no_launcher();
}

Result<std::optional<ScheduledJob>> detect_job_for_agent(const EnvMap& env) {
    const bool pmix_server = env.contains("PMIX_NAMESPACE") || env.contains("PMIX_RANK");
    // An srun step has SLURM_STEP_ID; the batch script of an sbatch job does not run as a task of one.
    const bool srun_step = env.contains("SLURM_PROCID") && env.contains("SLURM_STEP_ID") &&
                           env.at("SLURM_STEP_ID").find_first_not_of("0123456789") == std::string::npos;
    if (!pmix_server && !srun_step) return std::optional<ScheduledJob>{};
    auto job = detect_job_for_rank(env);
    if (!job) return job.error();
    return std::optional<ScheduledJob>(std::move(*job));
}

Result<AgreedMaster> master_on_this_host(const LaunchRequest& req) {
    AgreedMaster master;
    master.addr = req.master_addr.value_or(host::hostname());
    if (req.master_port) {
        master.port = *req.master_port;
        return master;
    }
    auto port = host::reserve_free_port();
    if (!port) return port.error();
    master.port = *port;
    return master;
}

namespace {

// "WORD NUMBER" as put by a rank: a non-empty word, one space, a whole number; nullopt otherwise.
std::optional<std::pair<std::string, int>> word_and_number(const std::string& text) {
    auto space = text.find(' ');
    if (space == 0 || space == std::string::npos || text.size() > 1024) return std::nullopt;
    int n = 0;
    const char* end = text.data() + text.size();
    auto [p, ec] = std::from_chars(text.data() + space + 1, end, n);
    if (ec != std::errc{} || p != end) return std::nullopt;
    return std::pair{text.substr(0, space), n};
}

Error garbled(const SchedulerInfo& info, int rank, const char* key, const std::string& text) {
    return Error{"job: " + info.source + ": rank " + std::to_string(rank) + " put a garbled " + key + " '" +
                     pmi::printable(text, 80) + "'",
                 "something other than dlaunch-mpi uses the launcher's key-value space under dlaunch's keys"};
}

// Rank 0 publishes the master; every rank publishes where it runs; one fence; then the master is read
// and this node's ranks checked.
Result<AgreedMaster> agree_through_exchange(pmix::Exchange& exchange, const SchedulerInfo& info,
                                            const LaunchRequest& req) {
    AgreedMaster master;
    if (info.rank == 0) {
        auto mine = master_on_this_host(req);
        if (!mine) return mine.error();
        master = *mine;
        if (auto s = exchange.put(kMasterKey, master.addr + " " + std::to_string(master.port)); !s) return s.error();
    }
    const std::string host = host::hostname();
    if (auto s = exchange.put(kWhereKey, host + " " + std::to_string(info.local_rank)); !s) return s.error();
    if (auto s = exchange.fence(req.fence_timeout_seconds); !s) return s.error();
    if (info.rank != 0) {
        auto text = exchange.get(0, kMasterKey);
        if (!text) return text.error();
        auto addr_port = word_and_number(*text);
        if (!addr_port || addr_port->second < 1 || addr_port->second > 65535)
            return garbled(info, 0, kMasterKey, *text);
        master.addr = addr_port->first;
        master.port = addr_port->second;
    }
    std::vector<PeerClaim> claims;
    for (int peer : info.local_peers) {
        auto text = exchange.get(peer, kWhereKey);
        if (!text) return text.error();
        auto where = word_and_number(*text);
        if (!where || where->second < 0) return garbled(info, peer, kWhereKey, *text);
        claims.push_back({peer, where->first, where->second});
    }
    if (auto s = check_node_peers(info, host, claims); !s) return s.error();
    return master;
}

}  // namespace

Status check_node_peers(const SchedulerInfo& info, const std::string& host, const std::vector<PeerClaim>& claims) {
    for (size_t i = 0; i < claims.size(); ++i) {
        const PeerClaim& c = claims[i];
        if (c.host == host && c.local_rank == static_cast<int>(i)) continue;
        return Error{"job: " + info.source + ": not one world: rank " + std::to_string(c.rank) +
                         (c.host != host ? " runs on " + c.host + ", not on " + host + " where "
                                         : " has local rank " + std::to_string(c.local_rank) + " where ") +
                         info.source + " placed it as local rank " + std::to_string(i),
                     "the launcher's placement and its ranks' own variables disagree; start dlaunch-mpi "
                     "directly under the launcher, and report the launcher and its version"};
    }
    return Ok{};
}

Result<AgreedMaster> agree_master(ScheduledJob& job, const LaunchRequest& req) {
    const SchedulerInfo& info = job.info;
    if (job.node_local) return agree_on_this_node(info, req);
    AgreedMaster master;
    if (job.session) {
        // Two ranks the launcher placed on different nodes can still run on one host: their local ranks meet.
        if (req.launcher == Launcher::PerRank)
            if (auto s = claim_on_this_node(info, Claim::LocalRank, true); !s) return s.error();
        return agree_through_exchange(*job.session, info, req);
    }
    if (!job.whole_node)
        if (auto s = count_this_nodes_ranks(info, req); !s) return s.error();
    if (req.master_addr)
        master.addr = *req.master_addr;
    else {
        if (info.nodes.empty())
            return Error{"job: " + info.source + ": no node list to find the first node in",
                         "give --master-addr HOST (the node of rank 0), or start under PMIx"};
        const std::string& first = info.nodes.front();
        if (resolves(first))
            master.addr = first;
        else if (auto addr = slurm::slurm_node_address(first))
            master.addr = *addr;
        else
            return Error{
                "job: first node '" + first + "' has no address (it does not resolve and Slurm does not know it)",
                "give --master-addr with rank 0's address"};
    }
    master.port = req.master_port.value_or(deterministic_port(info.job_id, info.step_id, req.port_range));
    return master;
}

std::vector<std::string> scheduled_node_addresses(const SchedulerInfo& info) {
    std::vector<std::string> out;
    if (static_cast<int>(info.nodes.size()) != info.nnodes) return out;
    for (auto& node : info.nodes) {
        auto addr = resolve_ipv4(node);
        out.push_back(addr ? *addr : slurm::slurm_node_address(node).value_or(node));
    }
    return out;
}

std::string scheduled_run_id(const SchedulerInfo& info, const LaunchRequest& req) {
    if (req.rdzv_id != "none") return req.rdzv_id;
    if (info.job_id.empty()) return "none";
    return info.step_id.empty() ? info.job_id : info.job_id + "." + info.step_id;
}

}  // namespace dlaunch
