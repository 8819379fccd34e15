// The guardian: a small process forked by the agent before its first worker (one per agent, kept across a group's
// attempts: ExecutorOptions::guardian), which outlives the agent
// only to kill what the agent would have killed. Workers die with the agent (PR_SET_PDEATHSIG) but their
// own children do not; when the agent is SIGKILLed (or crashes), the guardian sees its pipe from the agent
// close and SIGKILLs every worker process group the agent still held.
//
// Protocol: the agent writes one int32 per event into a pipe (atomic): +pgid when a worker's process group
// starts, -pgid when the agent has killed and reaped it. End of file with groups still held means the
// agent is gone without cleaning up. The guardian wakes for the end of file only (and for a kick, SIGURG, when the
// pipe is full), then reads what came meanwhile: a worker's start or stop costs the agent a write, not a wake-up
// of its guardian.
//
// A fork shares every page of the agent with the guardian until the agent writes to it (copy on write): the
// agent forks one ahead, while it is small (fork_ahead()), so that what it allocates later (the topology, the
// group's state) is its own and a restart does not pay a page fault for each page it touches.
//
// Out of reach: processes that left the worker's process group (setsid, setpgid), as with torchrun; a
// Slurm step's cgroup catches those under srun.
#pragma once

#include <sys/types.h>

namespace dlaunch {

class Guardian {
public:
    Guardian() = default;
    ~Guardian();
    Guardian(const Guardian&) = delete;
    Guardian& operator=(const Guardian&) = delete;

    // Forks a guardian now, for this process's first start() to take (the agent: before its rendezvous).
    static void fork_ahead();
    // Takes the guardian forked ahead, or forks one. False (errno set) when it cannot: the run goes on without one.
    bool start();
    void hold(pid_t pgid);     // a worker's process group to kill should the agent die
    void release(pid_t pgid);  // killed and reaped by the agent: nothing to do for it
    pid_t pid() const { return pid_; }
    void forget();  // it was reaped (it ended, killed by someone): nothing more to tell it
    // The last word: no more events. The guardian kills what is still held (nothing, once the agent has ended
    // its workers) and ends by itself while the agent goes on with its own end; reap() (or the destructor)
    // waits for it after, so that no run waits for the guardian's exit on its way out.
    void hang_up();
    void reap();  // hangs up, if not yet, and waits for the guardian to end
    // True when it ended unseen and is now reaped and forgotten (start() forks another): a group's agent keeps
    // one guardian across attempts, and one that dies between them is no executor's to reap.
    bool ended_unseen();

private:
    void send(int value);
    int pipe_ = -1;
    pid_t pid_ = -1;
};

}  // namespace dlaunch
