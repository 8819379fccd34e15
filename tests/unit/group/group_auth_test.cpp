// The run's secret as the group's credential (nodes started by hand): a hello signed with the secret is
// admitted; a wrong secret, no secret, or a hello changed after signing (another member, host, attempt, or
// the welcome of another connection) is not.
#include "dlaunch/group_auth.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

namespace dlaunch {
namespace {

const std::string kSecret = "0123456789abcdef0123";

group::Hello signed_hello(const GroupAuth& auth, int member = 1) {
    group::Hello hello{"byhand", member, "10.77.0.12", "", 0, "n0nce-of-the-welcome"};
    auto credential = auth.sign(hello);
    EXPECT_TRUE(credential);
    hello.credential = *credential;
    return hello;
}

TEST(GroupAuth, TheRunsSecretAdmitsItsOwnAgents) {
    const GroupAuth auth = secret_group_auth(kSecret);
    auto sender = auth.verify(signed_hello(auth));
    ASSERT_TRUE(sender) << sender.error().message();
    EXPECT_EQ(sender->uid, static_cast<uint32_t>(::getuid()));
    EXPECT_EQ(sender->payload, "byhand");
}

TEST(GroupAuth, AnotherSecretOrNoneIsRefusedWithTheFix) {
    const GroupAuth ours = secret_group_auth(kSecret);
    auto theirs = ours.verify(signed_hello(secret_group_auth("fedcba9876543210fedc")));
    ASSERT_FALSE(theirs);
    EXPECT_EQ(theirs.error().what, "group: wrong secret: DLAUNCH_RDZV_SECRET differs between the nodes");
    auto none = ours.verify(signed_hello(secret_group_auth("")));
    ASSERT_FALSE(none);
    EXPECT_NE(none.error().what.find("the other side has no secret"), std::string::npos) << none.error().what;
}

TEST(GroupAuth, AHelloChangedAfterSigningIsRefused) {
    const GroupAuth auth = secret_group_auth(kSecret);
    group::Hello as_other = signed_hello(auth, 1);
    as_other.member = 2;  // member 1's credential, replayed as member 2
    EXPECT_FALSE(auth.verify(as_other));
    group::Hello moved = signed_hello(auth, 1);
    moved.host = "10.77.0.99";
    EXPECT_FALSE(auth.verify(moved));
    group::Hello later = signed_hello(auth, 1);
    later.attempt = 3;
    EXPECT_FALSE(auth.verify(later));
    group::Hello replayed = signed_hello(auth, 1);
    replayed.nonce = "the-welcome-of-another-connection";  // proved for one welcome, shown to another
    EXPECT_FALSE(auth.verify(replayed));
}

TEST(GroupAuth, WithoutASecretAnyAgentJoinsAsTheRendezvousWarned) {
    const GroupAuth auth = secret_group_auth("");
    EXPECT_TRUE(auth.verify(signed_hello(auth)));
}

}  // namespace
}  // namespace dlaunch
