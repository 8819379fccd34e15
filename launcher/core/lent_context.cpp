#include "dlaunch/lent_context.hpp"

#include <type_traits>
#include <utility>
#include <vector>

namespace dlaunch {
namespace {

// Calls f(list of a, same list of b) for each list with an entry per node of the job, in two contexts alike.
template <typename F>
void each_node_list(JobContext& a, JobContext& b, F&& f) {
    f(a.node_addrs, b.node_addrs);
    f(a.node_shares, b.node_shares);
    if (a.scheduler && b.scheduler) f(a.scheduler->nodes, b.scheduler->nodes);
    if (a.assignment && b.assignment) {
        f(a.assignment->node_addrs, b.assignment->node_addrs);
        f(a.assignment->shares, b.assignment->shares);
    }
}

void swap_all(JobContext& a, JobContext& b) {
    each_node_list(a, b, [](auto& x, auto& y) { std::swap(x, y); });
}

}  // namespace

LentContext::LentContext(JobContext& own, size_t nodes, bool alike) : own_(own) {
    if (own.scheduler) held_.scheduler.emplace();
    if (own.assignment) held_.assignment.emplace();
    swap_all(own_, held_);
    try {
        copy_ = own_;  // without its lists
    } catch (...) {
        swap_all(own_, held_);
        throw;
    }
    size_t i = 0;
    each_node_list(copy_, held_, [&](auto& c, auto& h) {
        constexpr bool shares = std::is_same_v<std::decay_t<decltype(h)>, std::vector<NodeShare>>;
        lent_[i] = h.size() == nodes && !(shares && alike);
        if (lent_[i++]) std::swap(c, h);
    });
}

LentContext::~LentContext() {
    size_t i = 0;
    each_node_list(copy_, held_, [&](auto& c, auto& h) {
        if (lent_[i++]) std::swap(c, h);
    });
    swap_all(own_, held_);
}

}  // namespace dlaunch
