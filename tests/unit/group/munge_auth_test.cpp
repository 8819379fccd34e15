// MUNGE credentials of the group channel against the real munged the test cluster starts
// (tests/slurm/cluster.sh): CTest runs this with the cluster's fixture, so a missing munged fails it.
#include "dlaunch/munge_auth.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

namespace dlaunch::group {
namespace {

TEST(MungeAuth, ACredentialNamesItsUserAndRunAndWorksOnce) {
    auto cred = munge_credential("812");
    ASSERT_TRUE(cred) << cred.error().message();
    auto sender = munge_verify(*cred);
    ASSERT_TRUE(sender) << sender.error().message();
    EXPECT_EQ(sender->uid, static_cast<uint32_t>(getuid()));
    EXPECT_EQ(sender->payload, "812");
    auto replay = munge_verify(*cred);
    ASSERT_FALSE(replay) << "a credential seen once must not admit a second connection";
    EXPECT_NE(replay.error().what.find("not valid"), std::string::npos) << replay.error().what;
}

TEST(MungeAuth, AForgedCredentialIsRefused) {
    auto forged = munge_verify("MUNGE:AwQFAAD+forged+credential+");
    ASSERT_FALSE(forged);
    EXPECT_EQ(forged.error().hint, "only the job's own agents may join its group");
}

}  // namespace
}  // namespace dlaunch::group
