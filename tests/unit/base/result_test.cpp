// Error: one message shape, and a phase that can be told again without anyone cutting the text.
#include "dlaunch/result.hpp"

#include <gtest/gtest.h>

namespace dlaunch {
namespace {

TEST(Error, MadeInAPhaseReadsAsThatPhasesMessage) {
    const Error e = Error::in("etcd", "endpoint 'x' is not HOST[:PORT]", "give etcd's client address");
    EXPECT_EQ(e.what, "etcd: endpoint 'x' is not HOST[:PORT]");
    EXPECT_EQ(e.problem(), "endpoint 'x' is not HOST[:PORT]");
    EXPECT_EQ(e.message(), "dlaunch: etcd: endpoint 'x' is not HOST[:PORT]; give etcd's client address");
    EXPECT_EQ(e.kind, ErrorKind::Failed);
}

TEST(Error, ToldAsAnotherPhaseKeepsItsProblemHintAndKind) {
    const Error e = Error::in("cli", "hang-timeout: 0.1 s is too short", "give at least 2 s", ErrorKind::PeerGone);
    const Error told = e.told_as("--dist-launch");
    EXPECT_EQ(told.what, "--dist-launch: hang-timeout: 0.1 s is too short");
    EXPECT_EQ(told.hint, "give at least 2 s");
    EXPECT_EQ(told.kind, ErrorKind::PeerGone);
    EXPECT_EQ(told.told_as("plugstack.conf").what, "plugstack.conf: hang-timeout: 0.1 s is too short");
}

TEST(Error, OneMadeWithoutAPhaseIsToldWhole) {
    const Error e{"cannot load libnettle.so.8: no such file", ""};
    EXPECT_EQ(e.problem(), e.what) << "nothing is cut from a text whose phase was not given";
    EXPECT_EQ(e.told_as("rdzv").what, "rdzv: cannot load libnettle.so.8: no such file");
    EXPECT_EQ(e.describe(), e.what);
}

}  // namespace
}  // namespace dlaunch
