#include "http/body_length.hpp"

#include <charconv>

namespace m0::http {

std::optional<uint64_t> parse_content_length(std::string_view v) {
    // RFC 9110 §8.6: Content-Length = 1*DIGIT (from_chars alone would take a
    // leading '-' or stop at the first non-digit).
    if (v.empty() || v.find_first_not_of("0123456789") != std::string_view::npos)
        return std::nullopt;
    uint64_t n = 0;
    auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
    if (ec != std::errc() || p != v.data() + v.size()) return std::nullopt;
    return n;
}

}  // namespace m0::http
