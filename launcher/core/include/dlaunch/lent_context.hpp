// LentContext: one attempt's copy of an agent's job context whose lists with an entry per node of the job are
// lent to it rather than copied.
#pragma once

#include <cstddef>

#include "dlaunch/job_context.hpp"

namespace dlaunch {

// One attempt's copy of the agent's context, for an attempt on every node in order. Its node lists (addresses,
// names, shares) are not copied but lent: moved into it, and back into the agent's context when it ends (at
// 1,024 agents the copy was ~70 KB of fresh memory per member and restart, about half of the member's page
// faults at a restart, 34 of them then and 18 now: bench/scale/c10d_agents.py's member_restart_faults). What
// the copy would not keep stays with the agent: a list without an entry per node (`nodes`), and the shares
// of nodes alike (`alike`: the plan then needs none, even_span). The agent's lists are empty while it lives;
// nothing may change the copy's lists.
class LentContext {
public:
    LentContext(JobContext& own, size_t nodes, bool alike);
    LentContext(const LentContext&) = delete;
    LentContext& operator=(const LentContext&) = delete;
    ~LentContext();
    JobContext& get() { return copy_; }

private:
    JobContext& own_;
    JobContext held_;  // what is not lent to the copy: the agent's lists wait here
    JobContext copy_;
};

}  // namespace dlaunch
