#include "http/ws_events.hpp"

#include <array>

#include "http/websocket.hpp"

namespace m0::http::woh {

namespace {
constexpr std::array<std::string_view, 7> kTypes = {"OPEN", "TEXT",  "BINARY",    "PING",
                                                    "PONG", "CLOSE", "DISCONNECT"};
// A size past 8 hex digits is no event an answer may carry (the body's own
// bound, --max-body-size, is far below 4 GiB).
constexpr size_t kMaxSizeDigits = 8;

bool fail(std::string& err, size_t at, std::string what) {
    err = "bad WebSocket events at byte " + std::to_string(at) + ": " + std::move(what);
    return false;
}

int hex_value(char ch) {
    if (ch >= '0' && ch <= '9') return ch - '0';
    if (ch >= 'a' && ch <= 'f') return ch - 'a' + 10;
    if (ch >= 'A' && ch <= 'F') return ch - 'A' + 10;
    return -1;
}
}  // namespace

bool known_type(std::string_view type) {
    for (auto t : kTypes)
        if (t == type) return true;
    return false;
}

std::string encode_events(const std::vector<Event>& events) {
    static constexpr char kHex[] = "0123456789abcdef";
    std::string out;
    for (const Event& e : events) {
        out += e.type;
        if (e.content) {
            std::string size;
            for (size_t n = e.content->size(); size.empty() || n > 0; n >>= 4)
                size.insert(size.begin(), kHex[n & 0xF]);
            out += ' ';
            out += size;
            out += "\r\n";
            out += *e.content;
        }
        out += "\r\n";
    }
    return out;
}

bool decode_events(std::string_view body, std::vector<Event>& out, std::string& err) {
    out.clear();
    size_t at = 0;
    while (at < body.size()) {
        const size_t eol = body.find("\r\n", at);
        if (eol == std::string_view::npos) return fail(err, at, "a line without CRLF");
        std::string_view line = body.substr(at, eol - at);
        const size_t sp = line.find(' ');
        Event e;
        e.type = std::string(line.substr(0, sp));
        if (!known_type(e.type))
            return fail(err, at, "unknown event type '" + e.type.substr(0, 32) + "'");
        at = eol + 2;
        if (sp != std::string_view::npos) {
            std::string_view digits = line.substr(sp + 1);
            if (digits.empty() || digits.size() > kMaxSizeDigits)
                return fail(err, at, "the size of " + e.type + " is not 1 to 8 hex digits");
            uint64_t size = 0;
            for (char ch : digits) {
                const int v = hex_value(ch);
                if (v < 0) return fail(err, at, "the size of " + e.type + " is not hex");
                size = size * 16 + uint64_t(v);
            }
            if (size > body.size() - at || body.size() - at - size < 2)
                return fail(err, at,
                            e.type + " of " + std::to_string(size) + " bytes is cut short");
            if (body.substr(at + size, 2) != "\r\n")
                return fail(err, at + size,
                            "the content of " + e.type + " is not followed by CRLF");
            e.content = std::string(body.substr(at, size));
            at += size + 2;
        }
        out.push_back(std::move(e));
    }
    return true;
}

std::string close_content(uint16_t code, std::string_view reason) {
    std::string out;
    out += char(code >> 8);
    out += char(code & 0xFF);
    out += reason;
    return out;
}

std::optional<std::string> grip_prefix(const Headers& h) {
    // RFC 6455 §9.1: extension = token *( ";" param ), several comma-separated.
    for (const std::string& item : ws::list_items(h, "Sec-WebSocket-Extensions")) {
        std::string_view ext = item;
        size_t semi = ext.find(';');
        if (trim_ows(ext.substr(0, semi)) != "grip") continue;
        std::string prefix = "m:";
        while (semi != std::string_view::npos) {
            ext = ext.substr(semi + 1);
            semi = ext.find(';');
            std::string_view param = trim_ows(ext.substr(0, semi));
            const size_t eq = param.find('=');
            if (eq == std::string_view::npos || trim_ows(param.substr(0, eq)) != "message-prefix")
                continue;
            std::string_view v = trim_ows(param.substr(eq + 1));
            if (v.size() >= 2 && v.front() == '"' && v.back() == '"') v = v.substr(1, v.size() - 2);
            prefix = std::string(v);
        }
        return prefix;
    }
    return std::nullopt;
}

}  // namespace m0::http::woh
