// Test program for dlaunch's bootstrap exchange: every rank runs two exchanges (roots per
// DLAUNCH_NCCL_RANKS_PER_ROOT) and prints what it received, for tests/integration/test_bootstrap.py.
#include <iostream>
#include <sstream>

#include "dlaunch/bootstrap.hpp"
#include "dlaunch/host.hpp"

int main() {
    using namespace dlaunch;
    auto peer = bootstrap::this_rank();
    if (!peer) {
        std::cerr << peer.error().message() << "\n";
        return 1;
    }
    auto per_root = bootstrap::ranks_per_root(host::environment());
    if (!per_root) {
        std::cerr << per_root.error().message() << "\n";
        return 1;
    }
    auto timeout = bootstrap::timeout_seconds(host::environment());
    if (!timeout) {
        std::cerr << timeout.error().message() << "\n";
        return 1;
    }
    auto roots = bootstrap::roots(peer->size, *per_root);
    for (int round = 0; round < 2; ++round) {
        std::string mine = "round" + std::to_string(round) + "-from-" + std::to_string(peer->rank);
        auto blobs = bootstrap::exchange(*peer, roots, mine, *timeout);
        if (!blobs) {
            std::cerr << blobs.error().message() << "\n";
            return 1;
        }
        std::ostringstream line;
        line << "rank " << peer->rank << "/" << peer->size << " via " << bootstrap::to_string(peer->via) << " round "
             << round << ":";
        for (auto& b : *blobs) line << " " << b;
        std::cout << line.str() << std::endl;
    }
    return 0;
}
