// CpuSet: a set of OS indices (PUs or NUMA nodes), printed and parsed in list form ("0-3,8-11"),
// the form taskset, numactl and Slurm use.
#pragma once

#include <initializer_list>
#include <optional>
#include <set>
#include <string>

namespace dlaunch::topology {

class CpuSet {
public:
    CpuSet() = default;
    CpuSet(std::initializer_list<int> ids) : ids_(ids) {}
    explicit CpuSet(std::set<int> ids) : ids_(std::move(ids)) {}

    // "0-3,8,10-11" -> {0,1,2,3,8,10,11}; nullopt for malformed text. "" is the empty set.
    static std::optional<CpuSet> parse(const std::string& list);
    // The list form; "" for the empty set.
    std::string to_list() const;

    void insert(int id) { ids_.insert(id); }
    void insert(const CpuSet& other) { ids_.insert(other.ids_.begin(), other.ids_.end()); }
    bool contains(int id) const { return ids_.contains(id); }
    bool contains(const CpuSet& other) const;
    bool intersects(const CpuSet& other) const;
    CpuSet intersect(const CpuSet& other) const;
    CpuSet minus(const CpuSet& other) const;
    bool empty() const { return ids_.empty(); }
    size_t size() const { return ids_.size(); }
    const std::set<int>& ids() const { return ids_; }
    auto begin() const { return ids_.begin(); }
    auto end() const { return ids_.end(); }
    bool operator==(const CpuSet&) const = default;

private:
    std::set<int> ids_;
};

}  // namespace dlaunch::topology
