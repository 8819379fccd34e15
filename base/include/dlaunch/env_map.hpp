// An environment as a map, and reading the integer variables parallel launchers set (Slurm's, Open MPI's).
#pragma once

#include <charconv>
#include <map>
#include <optional>
#include <string>

#include "dlaunch/result.hpp"

namespace dlaunch {

using EnvMap = std::map<std::string, std::string>;

// The variable's value; "" when absent.
inline std::string str_var(const EnvMap& env, const std::string& name) {
    auto it = env.find(name);
    return it == env.end() ? "" : it->second;
}

// The variable as a whole decimal number; nullopt when absent or not one.
inline std::optional<int> int_var(const EnvMap& env, const char* name) {
    auto it = env.find(name);
    if (it == env.end()) return std::nullopt;
    int v = 0;
    auto [p, ec] = std::from_chars(it->second.data(), it->second.data() + it->second.size(), v);
    if (ec != std::errc{} || p != it->second.data() + it->second.size()) return std::nullopt;
    return v;
}

// The error for a launcher variable that int_var() refused: missing, or not a number.
inline Error bad_var(const std::string& source, const char* name, const EnvMap& env) {
    auto it = env.find(name);
    return Error{
        "job: " + source + ": " + name + (it == env.end() ? " is missing" : "='" + it->second + "' is not a number"),
        "start dlaunch-mpi directly under " + source + " (not from a script that changes its variables)"};
}

}  // namespace dlaunch
