// What one node may say about itself to the others, wherever they meet (dlaunch's rendezvous, etcd): a
// larger figure is not a dlaunch agent's and is refused where it is read.
#pragma once

namespace dlaunch {

inline constexpr int kMaxNodeProcs = 65536;  // the most workers one node may say it runs
inline constexpr int kMaxNodes = 65536;      // the most nodes a rendezvous may say its run has

}  // namespace dlaunch
