// The wall clock as dlaunch records it (header-only): seconds since the epoch, for ledgers, failure records
// and "last progress" times. Durations are measured with steady clocks, never with this.
#pragma once

#include <chrono>

namespace dlaunch {

inline double now_epoch() {
    return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace dlaunch
