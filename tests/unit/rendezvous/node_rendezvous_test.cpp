// Pure rules of the node rendezvous.
#include "dlaunch/node_rendezvous.hpp"

#include <gtest/gtest.h>

#include "dlaunch/group_protocol.hpp"
#include "dlaunch/plan.hpp"

namespace dlaunch {
namespace {

TEST(NodeRendezvous, AnEndpointNamingThisMachineByItsHostnameIsHostedHere) {
    // `--rdzv-endpoint $(hostname):29400` on Debian: the hostname resolves to 127.0.1.1 on its own machine.
    EXPECT_TRUE(names_this_machine("node1", "127.0.1.1"));
    EXPECT_TRUE(names_this_machine("node1.cluster", "127.0.0.1"));
    EXPECT_FALSE(names_this_machine("node1", "10.0.0.1")) << "a real address: the interfaces decide";
    EXPECT_FALSE(names_this_machine("127.0.0.1", "127.0.0.1")) << "an address is meant as given: this machine only";
    EXPECT_FALSE(names_this_machine("localhost", "127.0.0.1"));
}

TEST(NodeRendezvous, ANodeLateForTheRendezvousIsToldTheNodesMet) {
    // After the rendezvous the group's leader listens on its port and welcomes every connection.
    auto late = decode_challenge(group::encode(group::Welcome{"0123abcd"}));
    ASSERT_FALSE(late);
    EXPECT_EQ(late.error().what, "rdzv: the rendezvous is over: its nodes have started and run as a group");
    EXPECT_NE(late.error().hint.find("start every node again"), std::string::npos);
}

TEST(NodeRendezvous, NodeZeroKeepsItsRendezvousOpenForLateNodesOnlyWithARangeOfNodes) {
    LaunchRequest req;
    req.rdzv_backend = "c10d";
    req.c10d_endpoint = "10.0.0.1:29400";
    req.nnodes = NodeRange{2, 3};
    EXPECT_TRUE(keeps_door_open(req)) << "torchrun's c10d scale-up";
    req.max_restarts = 0;
    EXPECT_TRUE(keeps_door_open(req)) << "a range runs as a group without restarts: taking a node uses none";
    req.nnodes = NodeRange{3, 3};
    req.max_restarts = 3;
    EXPECT_FALSE(keeps_door_open(req)) << "a fixed size takes nobody: a late node is told the nodes met";
    req.nnodes = NodeRange{2, 3};
    req.launcher = Launcher::PerRank;
    EXPECT_FALSE(keeps_door_open(req)) << "dlaunch-mpi's ranks do not meet by hand";
}

TEST(NodeRendezvous, NodeZeroHandsItsSocketToTheGroupLeaderOnlyWithAFixedSizeAndRestarts) {
    LaunchRequest req;
    req.rdzv_backend = "c10d";
    req.c10d_endpoint = "10.0.0.1:29400";
    req.nnodes = NodeRange{4, 4};
    req.max_restarts = 3;
    EXPECT_TRUE(hands_socket_to_leader(req)) << "the members wait in its backlog";
    req.max_restarts = 0;
    EXPECT_FALSE(hands_socket_to_leader(req)) << "no group: a late node is told the run started";
    req.max_restarts = 3;
    req.nnodes = NodeRange{2, 4};
    EXPECT_FALSE(hands_socket_to_leader(req)) << "a range keeps the door open; the leader listens on its own port";
    req.nnodes = NodeRange{4, 4};
    req.rdzv_backend = "static";
    req.c10d_endpoint.reset();
    req.master_addr = "10.0.0.1";
    ASSERT_TRUE(static_form_across_nodes(req));
    EXPECT_FALSE(hands_socket_to_leader(req)) << "the static form: the workers' store binds the port";
}

}  // namespace
}  // namespace dlaunch
