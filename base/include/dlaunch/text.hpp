// Small text helpers shared by the parsers (header-only: the topology module uses it too).
#pragma once

#include <algorithm>
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

namespace dlaunch {

// "a,b,,c" -> {"a", "b", "", "c"}; "" -> {""}.
inline std::vector<std::string> split(const std::string& text, char sep) {
    std::vector<std::string> parts;
    size_t start = 0;
    while (true) {
        auto pos = text.find(sep, start);
        parts.push_back(text.substr(start, pos == std::string::npos ? std::string::npos : pos - start));
        if (pos == std::string::npos) break;
        start = pos + 1;
    }
    return parts;
}

// Every byte of `bytes` as two lower-case hex digits: hex_of("\x01\xff") == "01ff".
inline std::string hex_of(std::string_view bytes) {
    static constexpr char kDigits[] = "0123456789abcdef";
    std::string out;
    out.reserve(2 * bytes.size());
    for (unsigned char b : bytes) out.append({kDigits[b >> 4], kDigits[b & 15]});
    return out;
}

// `value` with `decimals` digits after the point: fixed(2.345, 1) == "2.3".
inline std::string fixed(double value, int decimals) {
    char text[64];
    std::snprintf(text, sizeof text, "%.*f", decimals, value);
    return text;
}

// `arg` as one word of a POSIX shell command line, to copy and paste: as it is when plain; else in single
// quotes; with control characters (a newline) as bash's $'...' with \xHH escapes, so that the word stays
// on one line.
inline std::string shell_quote(const std::string& arg) {
    const char* plain = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-+=./:,@%";
    if (!arg.empty() && arg.find_first_not_of(plain) == std::string::npos) return arg;
    auto control = [](unsigned char c) { return c < 0x20 || c == 0x7f; };
    if (std::none_of(arg.begin(), arg.end(), control)) {
        std::string out = "'";
        for (char c : arg) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
        return out + "'";
    }
    std::string out = "$'";
    for (unsigned char c : arg) {
        char hex[8];
        std::snprintf(hex, sizeof hex, "\\x%02x", c);
        out +=
            control(c) ? std::string(hex) : (c == '\'' || c == '\\' ? "\\" : "") + std::string(1, static_cast<char>(c));
    }
    return out + "'";
}

}  // namespace dlaunch
