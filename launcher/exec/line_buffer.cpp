#include "dlaunch/line_buffer.hpp"

namespace dlaunch {

void LineBuffer::end_piece(std::string_view head, char terminator, const Sink& sink) {
    const Ending end = terminator == '\r' ? Ending::kReturn : Ending::kNewline;
    if (partial_.empty()) {
        sink(head, end);
    } else {
        partial_.append(head);
        sink(partial_, end);
        partial_.clear();
    }
    after_return_ = terminator == '\r';
}

void LineBuffer::feed(std::string_view chunk, const Sink& sink) {
    const char* terminators = split_at_returns_ ? "\n\r" : "\n";
    bool returned = false;  // a '\r' in this chunk: a new state of a bar began in it
    while (!chunk.empty()) {
        const auto at = chunk.find_first_of(terminators);
        const std::string_view head = chunk.substr(0, at);
        if (!dropping_ && partial_.size() + head.size() > kMaxLine) {
            partial_.append(head.substr(0, kMaxLine - partial_.size()));
            sink(partial_, Ending::kTooLong);
            partial_.clear();
            dropping_ = true;
        }
        if (at == std::string_view::npos) {
            if (!dropping_) partial_.append(head);
            break;
        }
        returned = returned || chunk[at] == '\r';
        if (dropping_) {
            dropping_ = false;
            after_return_ = chunk[at] == '\r';
        } else {
            end_piece(head, chunk[at], sink);
        }
        chunk.remove_prefix(at + 1);
    }
    // Shown once per chunk that began it: a program writing a long line byte by byte after a '\r' must not
    // redraw it at every byte. (The rest comes with the piece's end.)
    if (returned && after_return_ && !partial_.empty()) sink(partial_, Ending::kPartial);
}

void LineBuffer::finish(const Sink& sink) {
    if (!partial_.empty()) sink(partial_, Ending::kCut);
    partial_.clear();
    after_return_ = false;
    dropping_ = false;
}

void Tail::add(std::string_view line, bool overwritable) {
    if (capacity_ == 0) return;
    if (last_overwritable_ && line.empty() && !overwritable) {  // "\r\n": the bar's state is the line
        last_overwritable_ = false;
        return;
    }
    if (last_overwritable_ && !lines_.empty()) lines_.pop_back();
    last_overwritable_ = overwritable;
    if (lines_.size() == capacity_) lines_.pop_front();
    lines_.emplace_back(line.substr(0, kMaxTailLine));
}

}  // namespace dlaunch
