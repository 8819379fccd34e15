// LaunchRequest: what the user asked for, after parsing and syntax checks, before any fact about the
// machine or the scheduler is known. Filled by cli.cpp (the dlaunch front-end) and, later, by the SPANK
// option parser and dlaunch-mpi; consumed by make_plan().
#pragma once

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "dlaunch/failure_policy.hpp"
#include "dlaunch/scheduler.hpp"
#include "dlaunch/topology/binding.hpp"

namespace dlaunch {

struct NodeRange {
    int min = 1;
    int max = 1;
    bool operator==(const NodeRange&) const = default;
};

// --nproc-per-node: a number, or "gpu" / "cpu" / "auto" resolved against the topology by make_plan();
// GpuOrOne is paddle.distributed.launch's default (one per visible GPU, else one).
struct NprocSpec {
    enum class Kind { Count, Gpu, Cpu, Auto, GpuOrOne };
    Kind kind = Kind::Count;
    int count = 1;  // only for Kind::Count
    bool operator==(const NprocSpec&) const = default;
};

// torchrun's Std flags for --redirects / --tee: which of a worker's streams they apply to.
enum Std : unsigned { kStdNone = 0, kStdOut = 1, kStdErr = 2, kStdAll = 3 };

// A per-local-rank Std selection: one value for all ranks, or "0:1,3:2" (unlisted ranks: none).
struct StdSelection {
    unsigned all = kStdNone;
    std::map<int, unsigned> per_rank;
    unsigned for_rank(int local_rank) const {
        if (per_rank.empty()) return all;
        auto it = per_rank.find(local_rank);
        return it == per_rank.end() ? kStdNone : it->second;
    }
    bool any() const { return all != kStdNone || !per_rank.empty(); }
    bool operator==(const StdSelection&) const = default;
};

// How the worker command is formed from SCRIPT.
enum class EntryKind {
    PythonScript,  // python -u SCRIPT ARGS
    PythonModule,  // python -u -m SCRIPT ARGS      (-m/--module)
    RunPath,       // python -u -c <runpy.run_path> SCRIPT ARGS   (--run-path)
    Command,       // SCRIPT ARGS                   (--no-python)
};

// Who starts the workers: the dlaunch agent (one per node, it spawns them), or the job's own launcher
// with dlaunch-mpi (one process per rank: it sets itself up and execs).
enum class Launcher { Agent, PerRank };

// Which launcher's worker-environment contract a rank gets (docs/env-contract.md): torchrun's (the
// default), paddle.distributed.launch's, or both. `dlaunch-paddle` uses All.
enum class EnvContract { Torch, Paddle, All };

// Whether a rank gets paddle.distributed.launch's variables (--env paddle or all), and torchrun's (torch or all).
inline bool gives_paddle_env(EnvContract contract) {
    return contract != EnvContract::Torch;
}
inline bool gives_torch_env(EnvContract contract) {
    return contract != EnvContract::Paddle;
}

// Whether the contract's environment names every node (Paddle's endpoint lists): then every node must know every
// node's address. torchrun's names only the master.
inline bool names_every_node(EnvContract contract) {
    return gives_paddle_env(contract);
}

// A parameter-server job's process kinds, per node (Paddle's --server_num/--trainer_num/--heter_worker_num)
// or as endpoint lists for the whole job (--servers/--trainers/--heter_workers: ip:port,...).
struct PsRequest {
    int server_num = 0;
    int trainer_num = 0;
    int heter_worker_num = 0;
    std::vector<std::string> servers;
    std::vector<std::string> trainers;
    std::vector<std::string> heter_workers;
    int gloo_port = 6767;
    bool with_gloo = true;
    bool operator==(const PsRequest&) const = default;
};

// paddle.distributed.launch's settings that torchrun has no word for (dlaunch-paddle's command line).
struct PaddleRequest {
    bool layout = false;             // started as dlaunch-paddle: workerlog.N files, ABORT line
    std::string job_id = "default";  // --job_id: PADDLE_JOB_ID and TORCHELASTIC_RUN_ID
    std::vector<std::string> ips;    // --ips: every node's address; this node's rank is its position
    int start_port = 6070;           // --start_port: endpoint ports with --ips (Paddle's default)
    bool log_overwrite = false;      // --log_overwrite: truncate workerlog.N instead of appending
    std::optional<PsRequest> ps;     // parameter-server mode (--run_mode ps, or any PS option)
    std::string etcd_given;          // how etcd was named: "--master etcd://H:P", "--elastic_server H:P", ...
    std::string nnodes_given;        // the node count as given: "--nnodes 2:4", "--np 2:4", "PADDLE_NNODES=2:4"
    bool operator==(const PaddleRequest&) const = default;
};

// dlaunch --requeue: the Slurm batch job's attempts are the restarts (requeue.hpp has the rules).
struct RequeueRequest {
    bool enabled = false;
    int warning_signal = 10;        // SIGUSR1: what `#SBATCH --signal=USR1@SECONDS` sends
    int checkpoint_signal = 10;     // --checkpoint-signal: what the workers get (default: the same)
    double checkpoint_grace = 120;  // --checkpoint-grace: seconds the workers get to checkpoint and exit
    bool operator==(const RequeueRequest&) const = default;
};

// The --rdzv-conf keys dlaunch's c10d rendezvous applies, in seconds: torchrun's join window. Every other
// key, and every key of the static rendezvous but the one below, has no effect and earns a warning (plan.cpp).
inline constexpr const char* kC10dJoinTimeout = "join_timeout";
inline constexpr const char* kC10dLastCallTimeout = "last_call_timeout";
// The static rendezvous's --rdzv-conf key that dlaunch applies across nodes: how long node 0 waits for the
// others at the master (torch's static_tcp_rendezvous: `timeout`, default 600 s).
inline constexpr const char* kStaticTimeout = "timeout";

// torchrun's etcd backends across nodes (--rdzv-backend etcd or etcd-v2): the agents meet through etcd at
// --rdzv-endpoint (docs/etcd.md). How to reach it comes from --rdzv-conf, with each backend's spelling of
// the keys (etcd: protocol, cacert, cert, key; etcd-v2: protocol, ca_cert, ssl_cert, ssl_cert_key).
struct EtcdTerms {
    std::string endpoint;           // "http://HOST:PORT" or "https://HOST:PORT"
    std::string cacert, cert, key;  // https: the CA to trust; this agent's certificate and key ("": none)
    double request_seconds = 60;    // the longest one request to etcd may take (etcd-v2's read_timeout)
    bool operator==(const EtcdTerms&) const = default;
};

// The hang monitor samples progress at most every 0.1 s; a hang timeout shorter than ten samples can
// only misfire, so none is accepted.
inline constexpr double kFastestHangSampleSeconds = 0.1;
inline constexpr double kMinHangTimeoutSeconds = 10 * kFastestHangSampleSeconds;

struct LaunchRequest {
    Launcher launcher = Launcher::Agent;

    // torchrun's options
    NodeRange nnodes;
    NprocSpec nproc_per_node;
    std::optional<int> node_rank;
    std::optional<std::string> master_addr;
    std::optional<int> master_port;
    std::string rdzv_backend = "static";
    std::string rdzv_endpoint;
    std::string rdzv_id = "none";
    std::map<std::string, std::string> rdzv_conf;  // what a key does: kC10dConfKeys, rdzv_conf_warnings()
    bool standalone = false;
    int max_restarts = 0;
    // Accepted for compatibility, without effect (-v says so when given): supervision is event-driven and
    // workers are always fork+exec. nullopt: not given.
    std::optional<double> monitor_interval;
    std::optional<std::string> start_method;
    std::string role = "default";
    EntryKind entry = EntryKind::PythonScript;
    std::optional<std::string> log_dir;
    bool ignore_log_errors = false;  // --ignore-log-errors: a cut worker log does not make the run exit 74
    StdSelection redirects;
    StdSelection tee;
    std::optional<std::set<int>> local_ranks_filter;
    std::optional<std::string> local_addr;

    // dlaunch's own options
    std::optional<std::vector<int>> devices;   // accelerator indices among those usable
    std::string devices_option = "--devices";  // how the user spelled it, for messages (--gpus, devices=)
    // --bind closest|numa|socket|none (or --numa-binding); unset: closest when there are GPUs or --cpus-per-rank
    std::optional<topology::BindMode> bind;
    bool virtual_local_rank = false;             // --virtual-local-rank: LOCAL_RANK=0, each rank sees only its own GPU
    std::optional<int> cpus_per_rank;            // --cpus-per-rank: whole cores per rank
    std::optional<std::string> topology_xml;     // --topology-xml / DLAUNCH_TOPOLOGY_XML
    PortRange port_range;                        // --port-range: MASTER_PORT without PMIx under Slurm
    double fence_timeout_seconds = 60;           // --fence-timeout: wait for every task to publish/agree
    double heartbeat_timeout_seconds = 10;       // --heartbeat-timeout: a silent node of the group is lost
    std::optional<double> hang_timeout_seconds;  // --hang-timeout / DLAUNCH_HANG_TIMEOUT: a silent rank is hung
    bool health_builtin = true;                  // the health gate's own checks (--no-health-check: off)
    std::string health_check;                    // --health-check CMD: the site's check before every attempt
    double grace_seconds = 30.0;
    RestartBackoff restart_backoff;    // --restart-backoff: the wait before each restart
    std::vector<int> forward_signals;  // signal numbers
    int verbosity = 0;                 // -v: +1, -q: -1

    // torch.distributed.launch's legacy contract: each worker also gets "<form>=<local rank>" before
    // ARGS. "" (torchrun's contract, the default) appends nothing. Set by --local-rank-arg, implied by
    // the dlaunch-launch alias; --use-env turns it off again, as it does for torch.distributed.launch.
    std::string local_rank_arg;
    // dlaunch-launch without --local-rank-arg/--use-env: the spelling the installed torch.distributed.launch
    // passes replaces local_rank_arg's "--local-rank" (the front-end reads it from torch: torch_install.hpp).
    bool local_rank_arg_from_torch = false;

    EnvContract env_contract = EnvContract::Torch;  // --env torch|paddle|all
    PaddleRequest paddle;
    RequeueRequest requeue;
    // --master HOST:PORT: join (or, on the node that holds HOST, host) dlaunch's node rendezvous, which
    // assigns node ranks and shares the nodes' addresses. Without it, `--nnodes N` (N > 1) with no master
    // address hosts one on this node and prints the command for the other nodes.
    std::optional<std::string> rendezvous_master;
    double rendezvous_timeout_seconds = 300;  // how long the node rendezvous waits for the other nodes
    // torchrun's c10d form across nodes (--rdzv-backend c10d, --nnodes > 1): the node rendezvous runs at
    // --rdzv-endpoint's HOST:PORT (port 29400 when not given), served by the agent on that host.
    std::optional<std::string> c10d_endpoint;
    // Once MIN of `--nnodes MIN:MAX` nodes are there, how much longer the host waits for more (c10d's
    // last_call_timeout); without it the host waits for MAX until the timeout.
    std::optional<double> rendezvous_last_call_seconds;
    std::optional<EtcdTerms> etcd;  // --rdzv-backend etcd / etcd-v2 across nodes: the nodes meet through etcd
    std::string rendezvous_secret;  // DLAUNCH_RDZV_SECRET: what every node must prove (rdzv_auth.hpp)

    std::string script;
    std::vector<std::string> script_args;
};

// Default for --signals: the signals a batch system or a user sends to stop or notify a job.
std::vector<int> default_forward_signals();

}  // namespace dlaunch
