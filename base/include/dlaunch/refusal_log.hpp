// What a server says about the connections it turns away, without letting one client flood the log: the
// first refusal of an address is said at once, the next ones from there within `interval` are only counted,
// and their count is said once that interval is over ("refused 1290 more connection(s) from 10.0.0.7 in the
// last 10 s"). Pure: the caller gives the time. Used by the node rendezvous and the group channel.
#pragma once

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "dlaunch/fd.hpp"

namespace dlaunch {

class RefusalLog {
public:
    explicit RefusalLog(std::chrono::seconds interval = std::chrono::seconds(10)) : interval_(interval) {}

    // "refused a connection from ADDRESS: WHY" to say now, or nullopt when a refusal from there was said less than
    // `interval` ago.
    std::optional<std::string> refused(const std::string& address, const std::string& why, Clock::time_point now) {
        Entry& e = by_address_[address];
        if (e.said != Clock::time_point{} && now - e.said < interval_) {
            ++e.unsaid;
            return std::nullopt;
        }
        e.said = now;
        return "refused a connection from " + address + ": " + why;
    }

    // The counts whose interval is over (`all`: every count, as when the server stops), one line per address;
    // forgets those addresses.
    std::vector<std::string> unsaid(Clock::time_point now, bool all = false) {
        std::vector<std::string> out;
        for (auto it = by_address_.begin(); it != by_address_.end();) {
            const auto since = now - it->second.said;
            if (!all && since < interval_) {
                ++it;
                continue;
            }
            const auto seconds = std::chrono::ceil<std::chrono::seconds>(since).count();
            if (it->second.unsaid > 0)
                out.push_back("refused " + std::to_string(it->second.unsaid) + " more connection(s) from " + it->first +
                              " in the last " + std::to_string(seconds) + " s");
            it = by_address_.erase(it);
        }
        return out;
    }

private:
    struct Entry {
        Clock::time_point said;
        int unsaid = 0;
    };
    std::chrono::seconds interval_;
    std::map<std::string, Entry> by_address_;
};

}  // namespace dlaunch
