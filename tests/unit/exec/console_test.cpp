#include "dlaunch/console.hpp"

#include <gtest/gtest.h>

namespace dlaunch {
namespace {

TEST(Console, PrefixesEachLine) {
    Console c;
    ConsoleSource s;
    EXPECT_EQ(c.render(s, "[0]:", "hello", Ending::kNewline), "[0]:hello\n");
    EXPECT_EQ(c.render(s, "[0]:", "", Ending::kNewline), "[0]:\n");
}

TEST(Console, MarksALineCutAtTheLimit) {
    Console c;
    ConsoleSource s;
    EXPECT_EQ(c.render(s, "[0]:", "{\"a\": 1", Ending::kTooLong),
              "[0]:{\"a\": 1 [dlaunch: line cut at 1 MiB; the rest is not shown]\n");
}

TEST(Console, RedrawsAProgressBarWithItsPrefixOnEachUpdate) {
    Console c;
    ConsoleSource s;
    std::string out;
    // tqdm: "\r 10%" "\r 20%" "\r100%\n", as LineBuffer gives it.
    for (auto [text, end] : {std::pair{"", Ending::kReturn},
                             {" 10%", Ending::kPartial},
                             {" 10%", Ending::kReturn},
                             {" 20%", Ending::kPartial},
                             {" 20%", Ending::kReturn},
                             {"100%", Ending::kNewline}})
        out += c.render(s, "[0]:", text, end);
    EXPECT_EQ(out, "[0]: 10%\r[0]: 20%\r[0]:100%\n");
}

TEST(Console, EndsABarShownAlreadyWithANewlineOnly) {
    Console c;
    ConsoleSource s;
    EXPECT_EQ(c.render(s, "[0]:", "50%", Ending::kPartial), "[0]:50%\r");
    EXPECT_EQ(c.render(s, "[0]:", "50%", Ending::kNewline), "\n");
    EXPECT_EQ(c.render(s, "[0]:", "ab", Ending::kReturn), "[0]:ab\r");
    EXPECT_EQ(c.render(s, "[0]:", "", Ending::kNewline), "\n");  // "ab\r\n" is the line "ab"
}

TEST(Console, AnotherStreamsLineGoesBelowTheBarNotOverIt) {
    Console c;
    ConsoleSource bar, other;
    EXPECT_EQ(c.render(bar, "[0]:", " 10%", Ending::kPartial), "[0]: 10%\r");
    EXPECT_EQ(c.render(other, "[1]:", "hello", Ending::kNewline), "\n[1]:hello\n");
    // The state shown before the interruption is not drawn again; the next one is, on a line of its own.
    EXPECT_EQ(c.render(bar, "[0]:", " 10%", Ending::kReturn), "");
    EXPECT_EQ(c.render(bar, "[0]:", " 20%", Ending::kPartial), "[0]: 20%\r");
    EXPECT_EQ(c.render(other, "[1]:", " 5%", Ending::kPartial), "\n[1]: 5%\r");
}

TEST(Console, ClosesTheLineOfABarWhoseStreamEnded) {
    Console c;
    ConsoleSource bar, other;
    EXPECT_EQ(c.render(bar, "", "done 3/3", Ending::kReturn), "done 3/3\r");
    EXPECT_EQ(c.close(other), "");
    EXPECT_EQ(c.close(bar), "\n");
    EXPECT_EQ(c.close(bar), "");
}

}  // namespace
}  // namespace dlaunch
