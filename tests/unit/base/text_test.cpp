// The byte helpers of base/: hex_of and the nonces the rendezvous and the group channel share.
#include "dlaunch/text.hpp"

#include <gtest/gtest.h>

#include <set>
#include <string>

#include "dlaunch/nonce.hpp"

namespace dlaunch {
namespace {

TEST(HexOf, EveryByteAsTwoLowerCaseDigits) {
    EXPECT_EQ(hex_of(""), "");
    EXPECT_EQ(hex_of(std::string("\x00\x01\x7f\x80\xff", 5)), "00017f80ff");
    EXPECT_EQ(hex_of("trainer"), "747261696e6572");
}

TEST(FreshNonce, ThirtyTwoHexDigitsNeverTheSameTwice) {
    std::set<std::string> seen;
    for (int i = 0; i < 100; ++i) {
        const std::string n = fresh_nonce();
        EXPECT_EQ(n.size(), 32U);
        EXPECT_EQ(n.find_first_not_of("0123456789abcdef"), std::string::npos) << n;
        seen.insert(n);
    }
    EXPECT_EQ(seen.size(), 100U);
}

TEST(RandomBytes, AsManyAsAskedAndNeverTheSameTwice) {
    EXPECT_EQ(random_bytes(0), "");
    EXPECT_EQ(random_bytes(256).size(), 256U);
    EXPECT_NE(random_bytes(16), random_bytes(16));
}

}  // namespace
}  // namespace dlaunch
