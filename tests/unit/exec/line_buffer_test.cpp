#include "dlaunch/line_buffer.hpp"

#include <gtest/gtest.h>

namespace dlaunch {
namespace {

std::vector<std::string> feed_all(std::vector<std::string> chunks) {
    LineBuffer b;
    std::vector<std::string> lines;
    auto sink = [&](std::string_view l) { lines.emplace_back(l); };
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

TEST(LineBuffer, CutsOverlongLines) {
    auto lines = feed_all({std::string(LineBuffer::kMaxLine + 10, 'a')});
    ASSERT_EQ(lines.size(), 2u);
    EXPECT_EQ(lines[0].size(), LineBuffer::kMaxLine);
    EXPECT_EQ(lines[1].size(), 10u);
}

TEST(Tail, KeepsTheLastLines) {
    Tail t(2);
    for (auto l : {"1", "2", "3"}) t.add(l);
    EXPECT_EQ(std::vector<std::string>(t.lines().begin(), t.lines().end()), (std::vector<std::string>{"2", "3"}));
}

}  // namespace
}  // namespace dlaunch
