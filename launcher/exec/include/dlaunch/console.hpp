// What the workers' output looks like on dlaunch's console: each piece of a stream (line_buffer.hpp)
// with the rank's prefix. Whole lines are never torn; a progress bar's carriage-return updates are shown
// as they come (a line past LineBuffer::kMaxLine is cut there, and marked), each redrawn with the prefix ("[0]:
// 40%|####  |\r"), so a terminal keeps the prefix visible and a log file of the console keeps every state. A bar's line
// is ended ("\n") before another stream's output, so the other stream's line is not written over the bar, nor the bar
// over it.
//
// Pure: it returns the bytes to write; the executor writes them.
#pragma once

#include <string>
#include <string_view>

#include "dlaunch/line_buffer.hpp"

namespace dlaunch {

// Ends a line cut at LineBuffer::kMaxLine (Ending::kTooLong) on the console; the log files keep it whole.
inline constexpr std::string_view kCutMark = " [dlaunch: line cut at 1 MiB; the rest is not shown]";
static_assert(LineBuffer::kMaxLine == 1024 * 1024, "kCutMark names the limit");

// One worker stream's state on the console.
struct ConsoleSource {
    std::string shown;  // the unfinished piece as shown last (kPartial), empty when none
};

class Console {
public:
    // The bytes for one piece of `source`'s stream.
    std::string render(ConsoleSource& source, std::string_view prefix, std::string_view text, Ending end);
    // The stream is over: ends its bar's line if the cursor still stands on it.
    std::string close(const ConsoleSource& source);
    // Before a line of dlaunch's own: ends any bar's line the cursor stands on.
    std::string end_open_line();

private:
    std::string leave_others_bar(const ConsoleSource& source);
    const ConsoleSource* open_ = nullptr;  // the stream whose bar the cursor stands on (after its '\r')
};

}  // namespace dlaunch
