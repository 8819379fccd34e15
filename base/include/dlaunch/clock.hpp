// The wall clock as dlaunch records it (header-only): seconds since the epoch, for ledgers, failure records
// and "last progress" times. Durations are measured with steady clocks, never with this; seconds_ms()
// turns a duration in seconds into their milliseconds.
#pragma once

#include <chrono>

namespace dlaunch {

inline double now_epoch() {
    return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// A duration given in seconds (an option's value, a bound), as the milliseconds deadlines and polls use.
inline std::chrono::milliseconds seconds_ms(double seconds) {
    return std::chrono::milliseconds(static_cast<long long>(seconds * 1000));
}

}  // namespace dlaunch
