#include "dlaunch/pmi/wire.hpp"

#include <array>
#include <cctype>
#include <charconv>
#include <cstdio>

namespace dlaunch::pmi {
namespace {

bool plain(unsigned char c) {
    return std::isalnum(c) || c == '.' || c == '_' || c == ':' || c == ',' || c == '/' || c == '+' || c == '-';
}

Error garbled(std::string_view text, const std::string& why) {
    return Error{"pmi: garbled message '" + printable(text) + "': " + why,
                 "the PMI server is not one dlaunch-mpi knows (Hydra, Slurm's pmi2, Flux); report it with the "
                 "launcher's name and version"};
}

}  // namespace

std::string format(Version version, const std::string& cmd, const Fields& args) {
    const char sep = version == Version::One ? ' ' : ';';
    std::string body = "cmd=" + cmd;
    for (auto& [k, v] : args) body += sep + k + "=" + v;
    if (version == Version::One) return body + "\n";
    body += ';';
    char head[8];
    std::snprintf(head, sizeof head, "%6zu", body.size());
    return std::string(head, 6) + body;
}

Result<Fields> parse(Version version, std::string_view text) {
    const char sep = version == Version::One ? ' ' : ';';
    Fields out;
    size_t at = 0;
    while (at < text.size()) {
        size_t end = text.find(sep, at);
        if (end == std::string_view::npos) end = text.size();
        std::string_view token = text.substr(at, end - at);
        at = end + 1;
        if (token.empty()) continue;
        size_t eq = token.find('=');
        if (eq == std::string_view::npos || eq == 0) return garbled(text, "'" + std::string(token) + "' has no key");
        out.emplace_back(std::string(token.substr(0, eq)), std::string(token.substr(eq + 1)));
    }
    if (out.empty() || out.front().first != "cmd") return garbled(text, "it does not start with cmd=");
    return out;
}

std::optional<int> whole_number(std::string_view text) {
    int v = 0;
    auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (ec != std::errc{} || p != text.data() + text.size() || text.empty()) return std::nullopt;
    return v;
}

std::optional<int> number_field(const Fields& fields, std::string_view key) {
    auto text = field(fields, key);
    return text ? whole_number(*text) : std::nullopt;
}

std::optional<std::string> field(const Fields& fields, std::string_view key) {
    for (auto& [k, v] : fields)
        if (k == key) return v;
    return std::nullopt;
}

std::string encode_value(std::string_view value) {
    std::string out;
    for (unsigned char c : value) {
        if (plain(c)) {
            out += static_cast<char>(c);
            continue;
        }
        char hex[4];
        std::snprintf(hex, sizeof hex, "%%%02X", c);
        out += hex;
    }
    return out;
}

Result<std::string> decode_value(std::string_view text) {
    std::string out;
    for (size_t i = 0; i < text.size(); ++i) {
        if (text[i] != '%') {
            out += text[i];
            continue;
        }
        unsigned v = 0;
        if (i + 2 >= text.size()) return garbled(text, "a cut %-escape");
        auto [p, ec] = std::from_chars(text.data() + i + 1, text.data() + i + 3, v, 16);
        if (ec != std::errc{} || p != text.data() + i + 3) return garbled(text, "a bad %-escape");
        out += static_cast<char>(v);
        i += 2;
    }
    return out;
}

Result<std::vector<int>> decode_process_mapping(std::string_view text, int size) {
    auto bad = [&](const std::string& why) {
        return Error{"pmi: PMI_process_mapping '" + printable(text) + "': " + why,
                     "the launcher described its rank placement in a form dlaunch-mpi does not read; report it"};
    };
    std::string_view rest = text;
    auto eat = [&](std::string_view lit) {
        if (rest.substr(0, lit.size()) != lit) return false;
        rest.remove_prefix(lit.size());
        return true;
    };
    if (!eat("(vector")) return bad("not a vector");
    std::vector<std::array<int, 3>> blocks;
    while (eat(",(")) {
        std::array<int, 3> b{};
        for (int i = 0; i < 3; ++i) {
            size_t end = rest.find_first_of(i < 2 ? "," : ")");
            auto n = whole_number(rest.substr(0, end));
            if (!n || end == std::string_view::npos || *n < 0 || *n > kMaxRanks)
                return bad("a block is not three numbers up to " + std::to_string(kMaxRanks));
            b[static_cast<size_t>(i)] = *n;
            rest.remove_prefix(end + 1);
        }
        if (b[1] == 0 || b[2] == 0) return bad("a block has no nodes or no ranks");
        blocks.push_back(b);
    }
    if (!eat(")") || !rest.empty() || blocks.empty()) return bad("not a list of (START,NODES,PER_NODE) blocks");
    if (size < 1 || size > kMaxRanks) return bad("the job's size " + std::to_string(size) + " is out of range");
    std::vector<int> node_of;
    node_of.reserve(static_cast<size_t>(size));
    auto full = [&] { return static_cast<int>(node_of.size()) >= size; };
    while (!full())  // the vector repeats until every rank has its node
        for (auto& [start, nodes, per_node] : blocks)
            for (int n = 0; n < nodes && !full(); ++n)
                for (int r = 0; r < per_node && !full(); ++r) node_of.push_back(start + n);
    return node_of;
}

std::string printable(std::string_view text, size_t limit) {
    std::string out;
    for (unsigned char c : text.substr(0, limit)) {
        if (c >= 0x20 && c < 0x7f) {
            out += static_cast<char>(c);
            continue;
        }
        char hex[8];
        std::snprintf(hex, sizeof hex, "\\x%02X", c);
        out += hex;
    }
    return text.size() > limit ? out + "..." : out;
}

}  // namespace dlaunch::pmi
