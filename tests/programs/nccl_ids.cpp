// Test program for dlaunch::nccl's bootstrap with the real ncclGetUniqueId (no GPU needed): prints the ids
// every rank would pass to NCCL, for tests/integration/test_nccl.py.
#include <cstdio>
#include <iostream>
#include <string>

#include "dlaunch/nccl.hpp"

int main() {
    auto peer = dlaunch::bootstrap::this_rank();
    if (!peer) {
        std::cerr << peer.error().message() << "\n";
        return 1;
    }
    auto ids = dlaunch::nccl::unique_ids(*peer);
    if (!ids) {
        std::cerr << ids.error().message() << "\n";
        return 1;
    }
    std::string hex;
    char byte[3];
    for (auto& id : *ids)
        for (unsigned char c : id.internal) {
            std::snprintf(byte, sizeof byte, "%02x", c);
            hex += byte;
        }
    std::cout << "rank " << peer->rank << "/" << peer->size << " via " << dlaunch::bootstrap::to_string(peer->via)
              << " ids " << ids->size() << " " << hex << std::endl;
    return 0;
}
