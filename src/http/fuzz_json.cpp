// Fuzzer: the admin API's JSON (http::parse_flat_json) on arbitrary bytes.
// On success: every key and value is valid UTF-8 (RFC 3629: no overlong form,
// no surrogate, nothing past U+10FFFF), the object written back as JSON parses
// to the same map, and trailing whitespace changes nothing while any other
// trailing byte is refused. On failure: a reason is given.
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <string_view>

#include "http/json.hpp"

namespace {

#define FUZZ_CHECK(cond)                                                               \
    do {                                                                               \
        if (!(cond)) {                                                                 \
            std::fprintf(stderr, "fuzz_json: %s:%d: %s\n", __FILE__, __LINE__, #cond); \
            std::abort();                                                              \
        }                                                                              \
    } while (0)

// RFC 3629 §4, written out independently of the parser.
bool valid_utf8(std::string_view s) {
    size_t i = 0;
    while (i < s.size()) {
        unsigned c = static_cast<unsigned char>(s[i]);
        size_t n;
        unsigned lo = 0x80, hi = 0xBF;
        if (c < 0x80) {
            ++i;
            continue;
        } else if (c >= 0xC2 && c <= 0xDF) {
            n = 1;
        } else if (c == 0xE0) {
            n = 2, lo = 0xA0;
        } else if ((c >= 0xE1 && c <= 0xEC) || c == 0xEE || c == 0xEF) {
            n = 2;
        } else if (c == 0xED) {
            n = 2, hi = 0x9F;
        } else if (c == 0xF0) {
            n = 3, lo = 0x90;
        } else if (c >= 0xF1 && c <= 0xF3) {
            n = 3;
        } else if (c == 0xF4) {
            n = 3, hi = 0x8F;
        } else {
            return false;
        }
        if (s.size() - i - 1 < n) return false;
        unsigned second = static_cast<unsigned char>(s[i + 1]);
        if (second < lo || second > hi) return false;
        for (size_t k = 2; k <= n; ++k) {
            unsigned b = static_cast<unsigned char>(s[i + k]);
            if (b < 0x80 || b > 0xBF) return false;
        }
        i += n + 1;
    }
    return true;
}

std::string quote(std::string_view s) {
    std::string out = "\"";
    for (char ch : s) {
        auto c = static_cast<unsigned char>(ch);
        if (c == '"' || c == '\\') {
            out += '\\';
            out += ch;
        } else if (c < 0x20) {
            char buf[8];
            std::snprintf(buf, sizeof buf, "\\u%04x", c);
            out += buf;
        } else {
            out += ch;
        }
    }
    return out + "\"";
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* bytes, size_t size) {
    std::string_view text(reinterpret_cast<const char*>(bytes), size);
    std::map<std::string, std::string> out;
    std::string err;
    if (!m0::http::parse_flat_json(text, out, err)) {
        FUZZ_CHECK(!err.empty());
        return 0;
    }
    std::string again = "{";
    for (const auto& [k, v] : out) {
        FUZZ_CHECK(valid_utf8(k));
        FUZZ_CHECK(valid_utf8(v));
        if (again.size() > 1) again += ",";
        again += quote(k) + ":" + quote(v);
    }
    again += "}";
    std::map<std::string, std::string> out2;
    std::string err2;
    FUZZ_CHECK(m0::http::parse_flat_json(again, out2, err2));
    FUZZ_CHECK(out2 == out);

    std::map<std::string, std::string> out3;
    FUZZ_CHECK(m0::http::parse_flat_json(std::string(text) + " \t\r\n", out3, err2));
    FUZZ_CHECK(out3 == out);
    std::map<std::string, std::string> out4;
    FUZZ_CHECK(!m0::http::parse_flat_json(std::string(text) + "x", out4, err2));
    return 0;
}
