// Applying a rank's binding to the process about to exec it: CPU binding and memory policy via hwloc.
// Both survive exec. The sets are built before fork; apply() runs in the forked child.
//
// Caveats:
// - apply() may allocate (hwloc's Linux backend does); that is safe after fork only because the agent
//   is single-threaded.
// - The binder always uses this machine's topology, even when the plan came from an XML file, so
//   binding is never silently skipped: hwloc ignores binding on an XML topology unless it was loaded as this
//   system's, as discover_cached() loads its exports (tests/unit/topology: MachineLoad).
#pragma once

#include <memory>
#include <string>

#include "dlaunch/result.hpp"
#include "dlaunch/topology/cpuset.hpp"
#include "dlaunch/topology/topology.hpp"

namespace dlaunch::topology {

class Binder {
public:
    // Binds with the hwloc load `planned` was read from when it is this machine's (discover(),
    // discover_cached()); loads this machine otherwise (a plan from another machine's XML file), and fails
    // when hwloc cannot.
    static Result<Binder> for_this_machine(const Topology& planned);
    ~Binder();
    Binder(Binder&&) noexcept;
    Binder& operator=(Binder&&) noexcept;

    class Prepared;
    // Builds the hwloc sets for cpus (PU OS indices) and mems (NUMA OS indices); either may be empty.
    std::shared_ptr<const Prepared> prepare(const CpuSet& cpus, const CpuSet& mems) const;

    // Binds the calling process. Returns "" or what failed ("cpu binding to 0-3: Invalid argument").
    // Writes the message into `buf` (no allocation on failure paths that matter after fork).
    const char* apply(const Prepared& prepared, char* buf, size_t size) const;

private:
    struct Impl;
    explicit Binder(std::unique_ptr<Impl> impl);
    std::unique_ptr<Impl> impl_;
};

}  // namespace dlaunch::topology
