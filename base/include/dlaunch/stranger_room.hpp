// How a server keeps room for connections that have not proved themselves yet (the node rendezvous and the
// group channel): at most `per_address` from one address and `total` in all; a new one closes the oldest (by
// its hello deadline) rather than being turned away, so that strangers cannot hold the port and a real
// peer, whose hello follows its connection within a round trip, still gets in.
#pragma once

#include <string>

namespace dlaunch {

// The connection in [first, last) to close so that a new one from `address` fits, or `last` when none
// need go. Elements have `.address` and `.hello_by`; `is_stranger(element)` says which ones count.
template <class It, class IsStranger>
It stranger_to_close(It first, It last, const std::string& address, int per_address, int total,
                     IsStranger is_stranger) {
    It oldest_all = last, oldest_theirs = last;
    int all = 0, theirs = 0;
    for (It it = first; it != last; ++it) {
        if (!is_stranger(*it)) continue;
        ++all;
        if (oldest_all == last || it->hello_by < oldest_all->hello_by) oldest_all = it;
        if (it->address != address) continue;
        ++theirs;
        if (oldest_theirs == last || it->hello_by < oldest_theirs->hello_by) oldest_theirs = it;
    }
    return theirs >= per_address ? oldest_theirs : all >= total ? oldest_all : last;
}

}  // namespace dlaunch
