// Fuzzer: the admin API's request decoding (http::decode_publish,
// decode_close, decode_pushpin, over nlohmann::json) on arbitrary bytes.
// Input: the first byte picks the decoder (0 publish, 1 close, 2 Pushpin),
// the rest is the body.
// On success: every string a JSON text gave is valid UTF-8 (RFC 3629: no
// overlong form, no surrogate, nothing past U+10FFFF); what was decoded,
// written back as JSON by a writer independent of nlohmann, decodes the
// same (content through content-bin, so any bytes); trailing whitespace
// changes nothing while any other trailing byte is refused. On failure: a
// reason is given. Nothing may throw (an escaped exception aborts).
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

#include "grant/base64.hpp"
#include "http/fuzz_check.hpp"
#include "http/json.hpp"

namespace {

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

using m0::http::PushpinItem;

// Decodes `text` with decoder `mode`; the decoded values as one comparable
// list of strings, or false.
bool decode(int mode, std::string_view text, std::vector<std::string>& values, std::string& err) {
    values.clear();
    if (mode == 0) {
        m0::http::AdminEvent ev;
        if (!m0::http::decode_publish(text, ev, err)) return false;
        values = {ev.channel, ev.data, ev.event};
    } else if (mode == 1) {
        std::string channel;
        if (!m0::http::decode_close(text, channel, err)) return false;
        values = {channel};
    } else {
        std::vector<PushpinItem> items;
        size_t skipped = 0;
        if (!m0::http::decode_pushpin(text, items, skipped, err)) return false;
        values.push_back(std::to_string(skipped));
        for (const auto& it : items) {
            values.push_back(it.channel);
            values.push_back(it.action == PushpinItem::Action::close ? "close" : "send");
            values.push_back(it.content);
        }
    }
    return true;
}

// `values` (as decode() gave them) written back as a body for decoder `mode`.
std::string encode(int mode, const std::vector<std::string>& v) {
    if (mode == 0)
        return "{\"channel\":" + quote(v[0]) + ",\"data\":" + quote(v[1]) +
               ",\"event\":" + quote(v[2]) + "}";
    if (mode == 1) return "{\"channel\":" + quote(v[0]) + "}";
    std::string out = "{\"items\":[";
    // A skipped item: a format the server does not serve (ws-message and
    // http-response are served).
    size_t skipped = std::stoul(v[0]);
    for (size_t i = 0; i < skipped; ++i)
        out += std::string(i ? "," : "") + R"({"channel":"s","formats":{"x-unserved":{}}})";
    for (size_t i = 1; i + 2 < v.size(); i += 3) {
        if (skipped || i > 1) out += ",";
        out += "{\"channel\":" + quote(v[i]) + ",\"formats\":{\"http-stream\":";
        out += v[i + 1] == "close"
                   ? R"({"action":"close"})"
                   : "{\"content-bin\":\"" + m0::grant::base64_encode(v[i + 2]) + "\"}";
        out += "}}";
    }
    return out + "]}";
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* bytes, size_t size) {
    if (size == 0) return 0;
    const int mode = bytes[0] % 3;
    std::string_view text(reinterpret_cast<const char*>(bytes) + 1, size - 1);
    std::vector<std::string> values;
    std::string err;
    if (!decode(mode, text, values, err)) {
        FUZZ_CHECK(!err.empty());
        return 0;
    }
    // Strings from JSON text are UTF-8; content (any bytes via content-bin) is not checked.
    for (size_t i = 0; i < values.size(); ++i)
        if (mode != 2 || i % 3 == 1) FUZZ_CHECK(valid_utf8(values[i]));

    std::vector<std::string> again;
    std::string err2;
    FUZZ_CHECK(decode(mode, encode(mode, values), again, err2));
    FUZZ_CHECK(again == values);
    FUZZ_CHECK(decode(mode, std::string(text) + " \t\r\n", again, err2));
    FUZZ_CHECK(again == values);
    FUZZ_CHECK(!decode(mode, std::string(text) + "x", again, err2));
    return 0;
}
