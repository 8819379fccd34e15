// The PMI client's protocol steps: initialising (PMI-1 and PMI-2), describing the job, the key-value exchange.
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <thread>

#include "dlaunch/pmi/client.hpp"

namespace dlaunch::pmi {
namespace {

// PMI's keyspace is shared by every rank: dlaunch's keys carry the rank that put them.
std::string ranked_key(const std::string& key, int rank) {
    return key + "-" + std::to_string(rank);
}

constexpr const char* kStartHint = "start dlaunch-mpi directly under mpiexec, srun --mpi=pmi2 or flux run";

}  // namespace

Status Client::open(const EnvMap& env) {
    return version_ == Version::One ? open_v1(env) : open_v2(env);
}

Status Client::open_v1(const EnvMap& env) {
    std::optional<int> rank = int_var(env, "PMI_RANK"), size = int_var(env, "PMI_SIZE");
    if (!env.contains("PMI_FD")) {  // PMI_PORT: the server tells who we are once we say our PMI_ID
        auto ack = call("initack", {{"pmiid", str_var(env, "PMI_ID")}}, "initack", reply_seconds_);
        if (!ack) return ack.error();
        for (int i = 0; i < 3; ++i) {
            auto set = receive("set", reply_seconds_);
            if (!set) return set.error();
            if (auto v = number_field(*set, "size")) size = v;
            if (auto v = number_field(*set, "rank")) {
                if (rank && *rank != *v)
                    return failure(
                        "the server says rank " + std::to_string(*v) + " but PMI_RANK is " + std::to_string(*rank),
                        "two launchers' variables are mixed; " + std::string(kStartHint));
                rank = v;
            }
        }
    }
    if (!rank || !size)
        return failure("PMI_RANK or PMI_SIZE is missing or not a number, and the server did not say", kStartHint);
    auto init = call("init", {{"pmi_version", "1"}, {"pmi_subversion", "1"}}, "response_to_init", reply_seconds_);
    if (!init) return init.error();
    auto kvs = call("get_my_kvsname", {}, "my_kvsname", reply_seconds_);
    if (!kvs) return kvs.error();
    kvsname_ = field(*kvs, "kvsname").value_or("");
    if (kvsname_.empty()) return failure("the server named no key-value space", kStartHint);
    job_.rank = *rank;
    job_.size = *size;
    auto mapping = call("get", {{"kvsname", kvsname_}, {"key", "PMI_process_mapping"}}, "get_result", reply_seconds_);
    if (!mapping) return mapping.error();
    return describe_job(env, field(*mapping, "value").value_or(""));
}

Status Client::open_v2(const EnvMap& env) {
    // A PMI-2 client asks for version 2 in PMI-1's words first; only then do both sides switch.
    version_ = Version::One;
    auto hello1 = call("init", {{"pmi_version", "2"}, {"pmi_subversion", "0"}}, "response_to_init", reply_seconds_);
    version_ = Version::Two;
    if (!hello1) return hello1.error();
    if (field(*hello1, "pmi_version") != "2")
        return failure("the server does not speak PMI-2 (it answered pmi_version=" +
                           printable(field(*hello1, "pmi_version").value_or("?"), 20) + ")",
                       "set DLAUNCH_PMI_VERSION=1 (SLURM_MPI_TYPE=pmi2 may be inherited from an srun around this "
                       "launcher)");
    // Slurm requires pmijobid; MPICH's newer Hydra refuses it empty: sent only when the launcher set one.
    Fields hello;
    if (env.contains("PMI_JOBID")) hello.emplace_back("pmijobid", str_var(env, "PMI_JOBID"));
    if (env.contains("PMI_FD"))
        hello.emplace_back("pmirank", str_var(env, "PMI_RANK"));
    else
        hello.emplace_back("pmiid", str_var(env, "PMI_ID"));
    hello.emplace_back("threaded", "FALSE");
    auto init = call("fullinit", hello, "fullinit-response", reply_seconds_);
    if (!init) return init.error();
    auto rank = number_field(*init, "rank"), size = number_field(*init, "size");
    if (!rank || !size) return failure("the server's fullinit-response names no rank and size", kStartHint);
    job_.rank = *rank;
    job_.size = *size;
    if (auto env_rank = int_var(env, "PMI_RANK"); env_rank && *env_rank != *rank)
        return failure(
            "the server says rank " + std::to_string(*rank) + " but PMI_RANK is " + std::to_string(*env_rank),
            "two launchers' variables are mixed; " + std::string(kStartHint));
    auto id = call("job-getid", {}, "job-getid-response", reply_seconds_);
    if (!id) return id.error();
    kvsname_ = field(*id, "jobid").value_or("");
    auto mapping =
        call("info-getjobattr", {{"key", "PMI_process_mapping"}}, "info-getjobattr-response", reply_seconds_);
    if (!mapping) return mapping.error();
    if (field(*mapping, "found") != "TRUE") return failure("the server has no PMI_process_mapping", kStartHint);
    return describe_job(env, field(*mapping, "value").value_or(""));
}

// The rest of the job from the placement: this node's ranks, every node's count. Where the launcher also
// set its own variables, they must say the same.
Status Client::describe_job(const EnvMap& env, const std::string& mapping) {
    SchedulerInfo& j = job_;
    j.source = source_name(version_);
    j.job_id = kvsname_;
    if (j.size < 1 || j.size > kMaxRanks || j.rank < 0 || j.rank >= j.size)
        return failure("rank " + std::to_string(j.rank) + " is not within the job's size " + std::to_string(j.size),
                       kStartHint);
    auto node_of = decode_process_mapping(mapping, j.size);
    if (!node_of)
        return Error{"job: " + source_name(version_) + ": " + node_of.error().what.substr(5), node_of.error().hint};
    const int mine = (*node_of)[static_cast<size_t>(j.rank)];
    std::vector<int> ids = *node_of;
    std::sort(ids.begin(), ids.end());
    ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
    j.nnodes = static_cast<int>(ids.size());
    j.node_rank = static_cast<int>(std::lower_bound(ids.begin(), ids.end(), mine) - ids.begin());
    j.tasks_per_node.assign(ids.size(), 0);
    for (int r = 0; r < j.size; ++r) {
        int node = (*node_of)[static_cast<size_t>(r)];
        ++j.tasks_per_node[static_cast<size_t>(std::lower_bound(ids.begin(), ids.end(), node) - ids.begin())];
        if (node == mine) j.local_peers.push_back(r);
    }
    j.local_size = static_cast<int>(j.local_peers.size());
    j.local_rank =
        static_cast<int>(std::find(j.local_peers.begin(), j.local_peers.end(), j.rank) - j.local_peers.begin());
    auto differs = [&](const char* name, int ours) {
        auto v = int_var(env, name);
        return v && *v != ours ? std::optional<int>(*v) : std::nullopt;
    };
    for (auto [name, ours] : {std::pair{"PMI_SIZE", j.size}, std::pair{"MPI_LOCALRANKID", j.local_rank},
                              std::pair{"MPI_LOCALNRANKS", j.local_size}})
        if (auto theirs = differs(name, ours))
            return failure(std::string(name) + " is " + std::to_string(*theirs) + " but the server's placement (" +
                               printable(mapping) + ") gives " + std::to_string(ours) + " for rank " +
                               std::to_string(j.rank),
                           "the launcher's variables and its PMI server disagree; " + std::string(kStartHint));
    return Ok{};
}

Status Client::put(const std::string& key, const std::string& value) {
    const std::string k = ranked_key(key, job_.rank), v = encode_value(value);
    auto r = version_ == Version::One
                 ? call("put", {{"kvsname", kvsname_}, {"key", k}, {"value", v}}, "put_result", reply_seconds_)
                 : call("kvs-put", {{"key", k}, {"value", v}}, "kvs-put-response", reply_seconds_);
    if (!r) return r.error();
    return Ok{};
}

Status Client::fence(double timeout_seconds) {
    auto r = version_ == Version::One ? call("barrier_in", {}, "barrier_out", timeout_seconds)
                                      : call("kvs-fence", {}, "kvs-fence-response", timeout_seconds);
    if (!r) return r.error();
    return Ok{};
}

Result<std::string> Client::get(int rank, const std::string& key) const {
    const std::string k = ranked_key(key, rank);
    auto r = version_ == Version::One
                 ? call("get", {{"kvsname", kvsname_}, {"key", k}}, "get_result", reply_seconds_)
                 : call("kvs-get", {{"srcid", std::to_string(rank)}, {"key", k}}, "kvs-get-response", reply_seconds_);
    if (!r) return r.error();
    if (version_ == Version::Two && field(*r, "found") != "TRUE")
        return failure("rank " + std::to_string(rank) + " put no '" + key + "'", "see that rank's error");
    auto value = decode_value(field(*r, "value").value_or(""));
    if (!value) return failure(value.error().what.substr(5), value.error().hint);
    return *value;
}

void Client::finalize() {
    if (fd_.get() < 0) return;
    // Best effort: an answer is not needed to go on, only a bounded wait for the server to take it.
    (void)(version_ == Version::One ? call("finalize", {}, "finalize_ack", reply_seconds_)
                                    : call("finalize", {}, "finalize-response", reply_seconds_));
    fd_.reset();
}

}  // namespace dlaunch::pmi

namespace dlaunch::pmi {

void Client::abort(int exit_code) {
    if (fd_.get() < 0) return;
    // The launcher kills every rank at once on abort, its proxy too, and may drop what this rank just wrote
    // to stderr, the reason it stops: a moment for the proxy to pass it on first.
    std::fflush(stderr);
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
    const std::string text =
        version_ == Version::One
            ? format(version_, "abort", {{"exitcode", std::to_string(exit_code)}})
            : format(version_, "abort", {{"isworld", "TRUE"}, {"msg", "dlaunch-mpi_stopped_this_rank"}});
    (void)!::send(fd_.get(), text.data(), text.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    fd_.reset();
}

}  // namespace dlaunch::pmi
