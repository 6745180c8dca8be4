#include "bus/redis_message.hpp"

#include <charconv>
#include <cstdint>

namespace m0::bus::redis {

namespace {

// One decimal number of `p` from `at`, then the byte `end`; advances `at`
// past it. False when there is no number there or `end` does not follow.
bool number(std::string_view p, size_t& at, char end, uint64_t& v) {
    const char* first = p.data() + at;
    const char* last = p.data() + p.size();
    auto [next, ec] = std::from_chars(first, last, v);
    if (ec != std::errc() || next == first || next == last || *next != end) return false;
    at = static_cast<size_t>(next - p.data()) + 1;
    return true;
}

bool parse_single(std::string_view p, const std::string& channel, std::vector<PublishFrame>& out) {
    size_t a = p.find('\n');
    size_t b = a == std::string_view::npos ? a : p.find('\n', a + 1);
    size_t c = b == std::string_view::npos ? b : p.find('\n', b + 1);
    if (c == std::string_view::npos) return false;
    uint64_t id = 0;
    std::from_chars(p.data(), p.data() + a, id);
    out.push_back(PublishFrame{id, channel, std::string(p.substr(a + 1, b - a - 1)),
                               std::string(p.substr(c + 1)), p.substr(b + 1, c - b - 1) == "1"});
    return true;
}

bool parse_batched(std::string_view p, const std::string& channel, std::vector<PublishFrame>& out) {
    const size_t before = out.size();
    size_t at = 3;  // past "*1\n"
    while (at < p.size()) {
        uint64_t id = 0, elen = 0, dlen = 0, raw = 0;
        if (!number(p, at, ' ', id) || !number(p, at, ' ', elen) || !number(p, at, ' ', dlen) ||
            !number(p, at, '\n', raw) || raw > 1 || elen > p.size() - at ||
            dlen > p.size() - at - elen) {
            out.resize(before);
            return false;
        }
        out.push_back(PublishFrame{id, channel, std::string(p.substr(at, elen)),
                                   std::string(p.substr(at + elen, dlen)), raw == 1});
        at += elen + dlen;
    }
    // Two events at least: one goes in the single form.
    if (out.size() - before < 2) {
        out.resize(before);
        return false;
    }
    return true;
}

}  // namespace

bool parse_message(std::string_view payload, const std::string& channel,
                   std::vector<PublishFrame>& out) {
    if (payload.starts_with('*')) {
        return payload.starts_with("*1\n") && parse_batched(payload, channel, out);
    }
    return parse_single(payload, channel, out);
}

}  // namespace m0::bus::redis
