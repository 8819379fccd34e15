// Splits a worker's byte stream into whole lines, so console lines are never torn mid-line; optionally
// into carriage-return pieces too (progress bars), so those are shown as they come.
#pragma once

#include <deque>
#include <functional>
#include <string>
#include <string_view>

namespace dlaunch {

// How a piece of a stream ended.
enum class Ending {
    kNewline,  // '\n'
    kReturn,   // '\r': a progress bar's update, to be overwritten by the next
    kCut,      // no terminator: the stream ended
    kTooLong,  // the first kMaxLine bytes of a longer line; the rest of that line is not given
    kPartial,  // not ended yet, begun after a '\r' in this chunk: the bar's current state, shown now and
               // given again when ended
};

class LineBuffer {
public:
    // A line (a JSON record on one line, too) is given whole up to this many bytes; a longer one is given
    // as its first kMaxLine bytes (kTooLong) and the rest of it is dropped: a worker printing megabytes
    // without a newline must not grow the agent without bound.
    static constexpr size_t kMaxLine = 1024 * 1024;

    using Sink = std::function<void(std::string_view piece, Ending end)>;  // piece without its terminator

    explicit LineBuffer(bool split_at_returns = false) : split_at_returns_(split_at_returns) {}

    // Calls `sink` for every complete piece in `chunk`; keeps the unfinished rest (and, after a '\r',
    // gives it as kPartial too).
    void feed(std::string_view chunk, const Sink& sink);
    // Emits the unfinished rest, if any, as a last piece (end of stream).
    void finish(const Sink& sink);

private:
    void end_piece(std::string_view head, char terminator, const Sink& sink);
    bool split_at_returns_;
    bool after_return_ = false;  // the last terminator seen was '\r'
    bool dropping_ = false;      // the line under way was given as kTooLong: its rest is dropped
    std::string partial_;
};

// The last `capacity` lines of a stream, each cut to kMaxTailLine characters.
class Tail {
public:
    static constexpr size_t kMaxTailLine = 1000;
    explicit Tail(size_t capacity = 20) : capacity_(capacity) {}
    // A line marked `overwritable` (a progress bar's state) is replaced by the next line.
    void add(std::string_view line, bool overwritable = false);
    const std::deque<std::string>& lines() const { return lines_; }

private:
    size_t capacity_;
    bool last_overwritable_ = false;
    std::deque<std::string> lines_;
};

}  // namespace dlaunch
