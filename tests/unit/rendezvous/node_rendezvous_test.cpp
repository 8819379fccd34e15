// Pure rules of the node rendezvous.
#include "dlaunch/node_rendezvous.hpp"

#include <gtest/gtest.h>

#include "dlaunch/group_protocol.hpp"

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

}  // namespace
}  // namespace dlaunch
