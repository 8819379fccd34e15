#include "dlaunch/console.hpp"

namespace dlaunch {

std::string Console::leave_others_bar(const ConsoleSource& source) {
    if (open_ == nullptr || open_ == &source) return {};
    open_ = nullptr;
    return "\n";
}

std::string Console::render(ConsoleSource& source, std::string_view prefix, std::string_view text, Ending end) {
    const bool already_shown = !source.shown.empty() && text == source.shown;
    if (end != Ending::kPartial) source.shown.clear();
    if (end == Ending::kPartial) source.shown = text;
    if (end == Ending::kPartial || end == Ending::kReturn) {
        if (text.empty() || already_shown) return {};
        std::string out = leave_others_bar(source);
        out.append(prefix).append(text).push_back('\r');
        open_ = &source;
        return out;
    }
    // A line: the bar's last state ends as it stands, or the line is written (over the bar, as the
    // program wrote it over its own bar).
    if (already_shown || (text.empty() && open_ == &source)) return close(source);  // also "\r\n"
    std::string out = leave_others_bar(source);
    out.append(prefix).append(text);
    if (end == Ending::kTooLong) out.append(kCutMark);
    out.push_back('\n');
    open_ = nullptr;
    return out;
}

std::string Console::end_open_line() {
    if (open_ == nullptr) return {};
    open_ = nullptr;
    return "\n";
}

std::string Console::close(const ConsoleSource& source) {
    if (open_ != &source) return {};
    open_ = nullptr;
    return "\n";
}

}  // namespace dlaunch
