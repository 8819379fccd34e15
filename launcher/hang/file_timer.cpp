#include "dlaunch/file_timer.hpp"

#include <algorithm>
#include <nlohmann/json.hpp>

namespace dlaunch::hang {

std::optional<TimerRequest> parse_timer_request(std::string_view line) {
    auto j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_discarded() || !j.is_object()) return std::nullopt;
    try {
        TimerRequest r;
        r.pid = j.at("pid").get<int>();
        r.scope_id = j.at("scope_id").get<std::string>();
        r.expiration_time = j.at("expiration_time").get<double>();
        r.signal = j.at("signal").get<int>();
        if (r.pid <= 0) return std::nullopt;
        return r;
    } catch (const nlohmann::json::exception&) {
        return std::nullopt;
    }
}

bool is_rank_or_descendant(int pid, const std::vector<int>& ranks, const std::function<int(int)>& parent_of) {
    for (int generation = 0; generation < 64 && pid > 1; ++generation) {
        if (std::find(ranks.begin(), ranks.end(), pid) != ranks.end()) return true;
        pid = parent_of(pid);
    }
    return false;
}

void TimerTable::apply(const TimerRequest& request) {
    const auto key = std::make_pair(request.pid, request.scope_id);
    if (request.expiration_time < 0)
        timers_.erase(key);
    else
        timers_[key] = request;
}

std::vector<Expiry> TimerTable::expire(double now) {
    std::map<int, std::vector<TimerRequest>> expired;
    for (auto& [key, t] : timers_)
        if (t.expiration_time <= now) expired[key.first].push_back(t);
    std::vector<Expiry> out;
    for (auto& [pid, timers] : expired) {
        std::stable_sort(timers.begin(), timers.end(),
                         [](auto& a, auto& b) { return a.expiration_time < b.expiration_time; });
        Expiry e{pid, "", 0, {}};
        for (auto& t : timers) {
            e.scopes.push_back(t.scope_id);
            if (e.signal == 0 && t.signal > 0) e.signal = t.signal, e.scope_id = t.scope_id;
        }
        forget(pid);
        out.push_back(std::move(e));
    }
    return out;
}

void TimerTable::forget(int pid) {
    std::erase_if(timers_, [pid](auto& entry) { return entry.first.first == pid; });
}

}  // namespace dlaunch::hang
