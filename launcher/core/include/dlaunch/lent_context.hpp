// LentContext: one attempt's copy of an agent's job context whose lists with an entry per node of the job are
// lent to it rather than copied.
#pragma once

#include <array>
#include <cstddef>

#include "dlaunch/job_context.hpp"

namespace dlaunch {

// One attempt's copy of the agent's context, for an attempt on every node in order. Its node lists (addresses,
// names, shares) are not copied but lent: moved into it, and back into the agent's context when it ends (at
// 1,024 agents the copy was ~70 KB of fresh memory per member and restart, about half of the member's page
// faults at a restart, 34 of them then and 18 now: bench/scale/c10d_agents.py's member_restart_faults). The
// copy gets no list without an entry per node (`nodes`), and no shares of nodes alike (`alike`: the plan then
// needs none, even_span): those wait here with the lent ones, and all go back. While the copy lives the
// agent's lists are empty; what the copy does to a lent list, the agent gets back.
class LentContext {
public:
    LentContext(JobContext& own, size_t nodes, bool alike);
    LentContext(const LentContext&) = delete;
    LentContext& operator=(const LentContext&) = delete;
    ~LentContext();
    JobContext& get() { return copy_; }

private:
    JobContext& own_;
    JobContext held_;  // the agent's lists wait here while the copy lives
    JobContext copy_;
    std::array<bool, 5> lent_{};  // which of them the copy has (in each_node_list's order)
};

}  // namespace dlaunch
