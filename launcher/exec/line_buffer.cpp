#include "dlaunch/line_buffer.hpp"

namespace dlaunch {

void LineBuffer::feed(std::string_view chunk, const Sink& sink) {
    while (!chunk.empty()) {
        auto nl = chunk.find('\n');
        if (nl == std::string_view::npos) {
            partial_.append(chunk);
            while (partial_.size() >= kMaxLine) {
                sink(std::string_view(partial_).substr(0, kMaxLine));
                partial_.erase(0, kMaxLine);
            }
            return;
        }
        if (partial_.empty()) {
            sink(chunk.substr(0, nl));
        } else {
            partial_.append(chunk.substr(0, nl));
            sink(partial_);
            partial_.clear();
        }
        chunk.remove_prefix(nl + 1);
    }
}

void LineBuffer::finish(const Sink& sink) {
    if (!partial_.empty()) sink(partial_);
    partial_.clear();
}

void Tail::add(std::string_view line) {
    if (capacity_ == 0) return;
    if (lines_.size() == capacity_) lines_.pop_front();
    lines_.emplace_back(line.substr(0, kMaxTailLine));
}

}  // namespace dlaunch
