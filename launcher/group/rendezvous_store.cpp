#include "dlaunch/rendezvous_store.hpp"

#include <algorithm>

#include "dlaunch/clock.hpp"
#include "dlaunch/rendezvous_door.hpp"

namespace dlaunch {
namespace {

class RendezvousStore : public GroupStore {
public:
    RendezvousStore(const LaunchRequest& req, const MeetingTerms& terms, const Met& met)
        : terms_(terms), met_(met), own_(own_share(met)) {
        // Members connect again at once; node 0 waits for them as the group's members are waited for
        // (group_setup's join window), they a little longer.
        window_ = seconds_ms(store_join_seconds(req));
    }
    ~RendezvousStore() override { leave(); }

    int waiting(bool fresh) override { return met_.door ? met_.door->waiting(fresh) : 0; }
    bool leader_gone() override { return false; }
    bool replaces_leader() const override { return false; }

    Result<Place> meet_again(const LaunchRequest& req, int attempt, int restarts_used,
                             const std::vector<int>& left_behind) override {
        auto met = met_.door ? met_.door->meet_again(left_behind, attempt, restarts_used, Clock::now() + window_)
                             : rejoin_rendezvous(req, terms_, met_.assignment, met_.attempt, own_, met_.door_ip,
                                                 met_.door_port, Clock::now() + window_ + std::chrono::seconds(10));
        if (!met) return met.error();
        met_.assignment = met->assignment;
        met_.attempt = met->attempt;
        return Place{met->assignment, met->attempt, met->restarts_used};
    }
    void leave() override {
        if (met_.door) met_.door->close("the run ended");
    }

private:
    MeetingTerms terms_;
    Met met_;
    NodeShare own_;  // this node's workers and role, as it told them when the nodes first met
    std::chrono::milliseconds window_{};
};

}  // namespace

std::unique_ptr<GroupStore> rendezvous_store(const LaunchRequest& req, const MeetingTerms& terms, const Met& met) {
    return std::make_unique<RendezvousStore>(req, terms, met);
}

}  // namespace dlaunch
