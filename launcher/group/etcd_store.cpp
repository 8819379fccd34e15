#include "dlaunch/etcd_store.hpp"

namespace dlaunch {
namespace {

class EtcdStore : public GroupStore {
public:
    explicit EtcdStore(std::unique_ptr<EtcdMeeting> meeting) : meeting_(std::move(meeting)) {}

    int waiting(bool fresh) override { return meeting_->waiting(fresh); }
    bool leader_gone() override { return meeting_->leader_gone(); }
    bool replaces_leader() const override { return true; }
    Result<Place> meet_again(const LaunchRequest& req, int attempt, int restarts_used,
                             const std::vector<int>& left_behind) override {
        auto place = meeting_->meet_again(req, attempt, restarts_used, left_behind);
        if (!place) return place.error();
        return Place{place->assignment, place->attempt, place->restarts_used};
    }
    void leave() override { meeting_->leave(); }

private:
    std::unique_ptr<EtcdMeeting> meeting_;
};

}  // namespace

std::unique_ptr<GroupStore> etcd_store(std::unique_ptr<EtcdMeeting> meeting) {
    return std::make_unique<EtcdStore>(std::move(meeting));
}

}  // namespace dlaunch
