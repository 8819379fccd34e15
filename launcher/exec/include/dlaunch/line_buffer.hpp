// Splits a worker's byte stream into whole lines, so console lines are never torn mid-line.
#pragma once

#include <deque>
#include <functional>
#include <string>
#include <string_view>

namespace dlaunch {

class LineBuffer {
public:
    // Lines longer than this are emitted in pieces (a worker printing megabytes without a newline
    // must not grow the agent without bound).
    static constexpr size_t kMaxLine = 64 * 1024;

    using Sink = std::function<void(std::string_view line)>;  // line without its '\n'

    // Calls `sink` for every complete line in `chunk`; keeps the unfinished rest.
    void feed(std::string_view chunk, const Sink& sink);
    // Emits the unfinished rest, if any, as a last line (end of stream).
    void finish(const Sink& sink);

private:
    std::string partial_;
};

// The last `capacity` lines of a stream, each cut to kMaxTailLine characters.
class Tail {
public:
    static constexpr size_t kMaxTailLine = 1000;
    explicit Tail(size_t capacity = 20) : capacity_(capacity) {}
    void add(std::string_view line);
    const std::deque<std::string>& lines() const { return lines_; }

private:
    size_t capacity_;
    std::deque<std::string> lines_;
};

}  // namespace dlaunch
