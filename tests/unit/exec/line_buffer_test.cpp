#include "dlaunch/line_buffer.hpp"

#include <gtest/gtest.h>

namespace dlaunch {
namespace {

std::vector<std::string> feed_all(std::vector<std::string> chunks) {
    LineBuffer b;
    std::vector<std::string> lines;
    auto sink = [&](std::string_view l, Ending) { lines.emplace_back(l); };
    for (auto& c : chunks) b.feed(c, sink);
    b.finish(sink);
    return lines;
}

TEST(LineBuffer, JoinsLinesSplitAcrossChunks) {
    EXPECT_EQ(feed_all({"ab", "c\nde", "f\n", "\n"}), (std::vector<std::string>{"abc", "def", ""}));
}

TEST(LineBuffer, EmitsTheUnfinishedLastLineAtTheEnd) {
    EXPECT_EQ(feed_all({"x\ny"}), (std::vector<std::string>{"x", "y"}));
}

TEST(LineBuffer, CutsAnOverlongLineOnceAtTheLimitWhateverTheChunks) {
    const std::string line(LineBuffer::kMaxLine + 200000, 'a');
    const std::string stream = line + "\nshort\n";
    for (size_t chunk : {size_t{4096}, size_t{65536}, size_t{100000}, stream.size()}) {
        LineBuffer b;
        std::vector<std::pair<size_t, Ending>> got;
        auto sink = [&](std::string_view l, Ending end) { got.emplace_back(l.size(), end); };
        for (size_t at = 0; at < stream.size(); at += chunk) b.feed(std::string_view(stream).substr(at, chunk), sink);
        b.finish(sink);
        EXPECT_EQ(got, (std::vector<std::pair<size_t, Ending>>{{LineBuffer::kMaxLine, Ending::kTooLong},
                                                               {5, Ending::kNewline}}))
            << "chunks of " << chunk;
    }
}

TEST(LineBuffer, KeepsALineOfExactlyTheLimitWhole) {
    LineBuffer b;
    std::vector<std::pair<size_t, Ending>> got;
    b.feed(std::string(LineBuffer::kMaxLine, 'x') + "\n",
           [&](std::string_view l, Ending e) { got.emplace_back(l.size(), e); });
    EXPECT_EQ(got, (std::vector<std::pair<size_t, Ending>>{{LineBuffer::kMaxLine, Ending::kNewline}}));
}

TEST(LineBuffer, KeepsCarriageReturnsInLinesUnlessAskedToSplit) {
    EXPECT_EQ(feed_all({"a\rb\n"}), (std::vector<std::string>{"a\rb"}));
}

// Each piece as "text|ending" (n newline, r return, c cut, t too long, p partial).
std::vector<std::string> pieces(std::vector<std::string> chunks) {
    LineBuffer b(true);
    std::vector<std::string> out;
    auto sink = [&](std::string_view text, Ending end) {
        const char* endings = "nrctp";
        out.push_back(std::string(text) + "|" + endings[static_cast<int>(end)]);
    };
    for (auto& c : chunks) b.feed(c, sink);
    b.finish(sink);
    return out;
}

TEST(LineBuffer, GivesAProgressBarsStatesAsTheyCome) {
    // tqdm writes "\r" before each state and "\n" at the end; the state after a '\r' is shown at once.
    EXPECT_EQ(pieces({"\r 10%", "\r 20%", "\r100%\n"}),
              (std::vector<std::string>{"|r", " 10%|p", " 10%|r", " 20%|p", " 20%|r", "100%|n"}));
}

TEST(LineBuffer, GivesAStateSplitAcrossChunksWholeWhenItEnds) {
    // The rest of a state is not redrawn chunk by chunk (a line written byte by byte would be quadratic).
    EXPECT_EQ(pieces({"\r 1", "0%", "\n"}), (std::vector<std::string>{"|r", " 1|p", " 10%|n"}));
}

TEST(LineBuffer, HoldsAnUnfinishedLineThatFollowsNoCarriageReturn) {
    EXPECT_EQ(pieces({"loading", "... done\n"}), (std::vector<std::string>{"loading... done|n"}));
}

TEST(Tail, KeepsOnlyTheLastStateOfAProgressBar) {
    Tail t(5);
    t.add("start");
    t.add(" 10%", true);
    t.add(" 20%", true);
    t.add("100%");
    t.add("end");
    EXPECT_EQ(std::vector<std::string>(t.lines().begin(), t.lines().end()),
              (std::vector<std::string>{"start", "100%", "end"}));
}

TEST(Tail, KeepsABarsStateEndedByCarriageReturnNewline) {
    Tail t(5);
    t.add("abc", true);
    t.add("");
    t.add("next");
    EXPECT_EQ(std::vector<std::string>(t.lines().begin(), t.lines().end()), (std::vector<std::string>{"abc", "next"}));
}

TEST(Tail, KeepsTheLastLines) {
    Tail t(2);
    for (auto l : {"1", "2", "3"}) t.add(l);
    EXPECT_EQ(std::vector<std::string>(t.lines().begin(), t.lines().end()), (std::vector<std::string>{"2", "3"}));
}

}  // namespace
}  // namespace dlaunch
