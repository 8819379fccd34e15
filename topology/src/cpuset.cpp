#include "dlaunch/topology/cpuset.hpp"

#include <algorithm>
#include <charconv>

namespace dlaunch::topology {
namespace {

std::optional<int> parse_id(std::string_view s) {
    int v = 0;
    auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (s.empty() || ec != std::errc{} || p != s.data() + s.size() || v < 0 || v > (1 << 20)) return std::nullopt;
    return v;
}

}  // namespace

std::optional<CpuSet> CpuSet::parse(const std::string& list) {
    CpuSet set;
    std::string_view rest = list;
    while (!rest.empty()) {
        auto comma = rest.find(',');
        std::string_view item = rest.substr(0, comma);
        rest = comma == std::string_view::npos ? std::string_view{} : rest.substr(comma + 1);
        auto dash = item.find('-');
        auto lo = parse_id(item.substr(0, dash));
        auto hi = dash == std::string_view::npos ? lo : parse_id(item.substr(dash + 1));
        if (!lo || !hi || *hi < *lo) return std::nullopt;
        for (int i = *lo; i <= *hi; ++i) set.insert(i);
        if (comma != std::string_view::npos && rest.empty()) return std::nullopt;  // trailing comma
    }
    return set;
}

std::string CpuSet::to_list() const {
    std::string out;
    for (auto it = ids_.begin(); it != ids_.end();) {
        int lo = *it, hi = *it;
        for (++it; it != ids_.end() && *it == hi + 1; ++it) hi = *it;
        if (!out.empty()) out += ',';
        out += std::to_string(lo);
        if (hi != lo) out += '-' + std::to_string(hi);
    }
    return out;
}

bool CpuSet::contains(const CpuSet& other) const {
    return std::includes(ids_.begin(), ids_.end(), other.ids_.begin(), other.ids_.end());
}

bool CpuSet::intersects(const CpuSet& other) const {
    for (int id : other.ids_)
        if (ids_.contains(id)) return true;
    return false;
}

CpuSet CpuSet::intersect(const CpuSet& other) const {
    CpuSet out;
    std::set_intersection(ids_.begin(), ids_.end(), other.ids_.begin(), other.ids_.end(),
                          std::inserter(out.ids_, out.ids_.end()));
    return out;
}

CpuSet CpuSet::minus(const CpuSet& other) const {
    CpuSet out;
    std::set_difference(ids_.begin(), ids_.end(), other.ids_.begin(), other.ids_.end(),
                        std::inserter(out.ids_, out.ids_.end()));
    return out;
}

}  // namespace dlaunch::topology
