// The facts `dlaunch doctor` and the health gate judge (doctor.hpp), read off this node: NVML for the GPUs,
// libibverbs for the RDMA ports, Slurm's plugstack.conf, the PMIx and NCCL libraries, the ports, the log
// directory, the Python. Each probe only reads; none changes the node.
#pragma once

#include <string>

#include "dlaunch/doctor.hpp"
#include "dlaunch/env_map.hpp"
#include "dlaunch/result.hpp"
#include "dlaunch/scheduler.hpp"
#include "dlaunch/topology/topology.hpp"

namespace dlaunch::doctor {

TopologyFacts topology_facts(const Result<topology::Topology>& topo);
CpusetFacts probe_cpuset(const EnvMap& env);
GpuFacts probe_gpus(const topology::Topology* topo);
PortFacts probe_ib_ports(const topology::Topology* topo);
PluginFacts probe_plugin(const EnvMap& env);
HelperFacts probe_helpers();
// Under a Slurm job: the ports its steps derive (every step slot's master and group port); otherwise
// `master_port` (several nodes by hand) and its group port.
PortRangeFacts probe_ports(const EnvMap& env, const PortRange& range, int master_port);
LogDirFacts probe_log_dir(const std::string& dir);
PythonFacts probe_python(const EnvMap& env);
LibraryFacts probe_pmix();
LibraryFacts probe_nccl();
// Not run without a Slurm configuration (srun would wait a minute for one).
SrunFacts probe_srun(bool slurm_configured);
// Each launcher of MpiLauncherFacts found on PATH, asked for its --version (bounded).
MpiLauncherFacts probe_mpi_launchers(const EnvMap& env);

}  // namespace dlaunch::doctor
