// Facts about the host gathered by front-ends (side effects kept out of the planner): ports, run
// directories, the interpreter, script checks.
#pragma once

#include <sys/resource.h>
#include <sys/stat.h>

#include <optional>
#include <string>
#include <vector>

#include "dlaunch/job_context.hpp"
#include "dlaunch/request.hpp"
#include "dlaunch/result.hpp"

namespace dlaunch::host {

// A port reserved for this launch: free when chosen, and locked (flock on a file under
// $TMPDIR/dlaunch-ports-<euid>, a private directory, held until the process exits) so two dlaunch runs of
// one user started at the same moment on one host never choose the same one.
Result<int> reserve_free_port();

// Removes the lock file of the reserved port (if any) while still holding its lock, so lock files do not
// pile up: call when the port is no longer ours to guard (the run ended, or just before exec). A process
// that opened the old file fails to lock it and picks another port; a later one creates a new file.
void release_reserved_port();

// Fails when `port` cannot be bound on this host right now (something listens on it).
Status check_port_free(int port);

// A port free on this host now, not locked (reserve_free_port() holds the one lock a process has): for a
// second port the caller binds at once, and whose bind failing says so.
Result<int> pick_free_port();

// The IPv4 address this host sends from towards `host` (a name or an address), as its routes choose:
// how a machine reached through that network reaches this one.
Result<std::string> address_towards(const std::string& host);

// $PYTHON_EXEC if set, else the first python3 on PATH; "" when neither exists.
std::string find_python(const EnvMap& env);

// Checks SCRIPT for the entry kind: a readable file for Python scripts, an executable (path or PATH
// lookup) for --no-python. Modules are checked by Python itself.
Status check_script(const LaunchRequest& request, const EnvMap& env);

// The run directory's name before mkdtemp() fills in its XXXXXX (what `dlaunch plan` shows).
std::string run_dir_template(const std::optional<std::string>& log_dir, const std::string& run_id);

// Creates the run directory: LOG_DIR/<run_id>_XXXXXX with --log-dir, else $TMPDIR/dlaunch_<run_id>_XXXXXX.
Result<std::string> make_run_dir(const std::optional<std::string>& log_dir, const std::string& run_id);

// What keeps `path` from being run: "does not exist", "not a regular file", "not executable" (or the
// error stat gave); "" when it can be.
std::string executable_problem(const std::string& path);
// What keeps `path` from being a directory: "does not exist", "not a directory" (or the error stat gave);
// "" when it is one.
std::string directory_problem(const std::string& path);

// Checks that `log_dir` exists or can be created, and is writable.
Status check_log_dir(const std::string& log_dir);

// Checks that this process may open `needed` files (its soft limit, after raise_descriptor_limit()); an
// Error saying `what` needs them and how to raise the limit when not. Past the limit, connections would
// be refused in the middle of a rendezvous instead.
Status check_descriptor_limit(long needed, const std::string& what);

// Checks that $TMPDIR, when set, is a directory this user can write to: runs keep their port locks, FIFOs
// and (without --log-dir) run directories there. An Error naming TMPDIR when not.
Status check_tmpdir();

// Removes a directory tree (for temporary run directories after a successful run).
void remove_tree(const std::string& path);

std::string hostname();
// This node's name: Slurm's (SLURMD_NODENAME in `env`) under slurmd, else the host name.
std::string node_name(const EnvMap& env);

// The local network interface that traffic to `address` (name or IP) leaves through: the interface
// holding it when it is local ("lo" for 127.0.0.1), else the route's. nullopt when it cannot be resolved.
std::optional<std::string> interface_for(const std::string& address);

// This boot's id (/proc/sys/kernel/random/boot_id), nullopt when unreadable.
std::optional<std::string> boot_id();

// Where a node keeps its topology cache: $TMPDIR/dlaunch-topology-<uid>.
std::string topology_cache_dir();

// A random id for --standalone runs (uuid4 text form).
std::string random_run_id();

// Raises this process's soft limit on open descriptors to the hard limit (strangers' connections must not
// starve the agent: group_channel.hpp bounds them), remembering the inherited one for the workers.
void raise_descriptor_limit();
// The soft limit this process inherited, when raise_descriptor_limit() changed it (null otherwise): the
// workers get it back, so that a program closing every descriptor up to its limit does not slow down.
const rlimit* inherited_descriptor_limit();

// This host's IPv4 addresses (interfaces that are up), non-loopback ones first.
std::vector<std::string> local_addresses();

// Where a server that others reach at `addr` (an IPv4 address or a name) listens: that address when it is
// this host's (a loopback address stays loopback), else every interface ("0.0.0.0": `addr` names this host
// from outside, through a name or an address it does not hold).
std::string listen_address(const std::string& addr);

// $TMPDIR, else /tmp: where runs without --log-dir keep their run directories.
std::string tmpdir();

// Where this program's helpers are (python/, dlaunch-python, dlaunch-watch): beside it when that holds
// python/sitecustomize.py (a build tree), else ../libexec/dlaunch (an installation); "" when
// /proc/self/exe cannot be read.
std::string helper_dir();

// The directory of dlaunch's sitecustomize.py (docs/hangs.md): `python/` next to this program (a build
// tree) or ../libexec/dlaunch/python (an installation); "" when neither holds it.
std::string python_hook_dir();

// What is wrong with a directory dlaunch keeps private, from its lstat(): "" when it is a directory (not a
// symbolic link) owned by `euid` with mode 0700, else the problem ("is owned by uid 1000"). Pure.
std::string private_dir_problem(const struct stat& st, uid_t euid);

// Creates a fresh private directory $TMPDIR/<prefix>-XXXXXX (mkdtemp: an unpredictable name, mode 0700)
// and checks it (private_dir_problem). Fails with what to do when $TMPDIR is not writable.
Result<std::string> make_private_dir(const std::string& prefix);

// This process's private directory, $TMPDIR/dlaunch-private-<pid>-XXXXXX, made on the first call: it holds
// the FIFOs (torchrun's watchdog, the heartbeats) and a watcher's stacks files, so that no other user can
// plant or read them. Removed with what it holds at exit and when remove_temporary_files() is called.
Result<std::string> own_private_dir();

// What `dlaunch plan` shows for the private directory of the agent with this pid (one not started yet).
std::string private_dir_template(const std::string& pid);

// Where the agent serves torchrun's watchdog when the user names no file, and reads the heartbeats:
// the FIFOs `watchdog` and `heartbeat` in its private directory `dir`.
std::string watchdog_fifo_in(const std::string& dir);
std::string heartbeat_fifo_in(const std::string& dir);

// Removes what this process made in $TMPDIR (its reserved port's lock, its private directory and the
// files dlaunch puts there). Async-signal-safe: a stop signal's handler calls it.
void remove_temporary_files();

// Until the executor takes the stop signals over: SIGTERM, SIGINT and SIGHUP say that the process stopped,
// remove its temporary files (remove_temporary_files) and end it by that signal. `program`: "dlaunch".
void stop_cleanly_on_signals(const char* program);

// $TMPDIR/<name> ($TMPDIR, else /tmp).
std::string temp_path(const std::string& name);

// The process environment as a map.
EnvMap environment();

}  // namespace dlaunch::host
