// The client side's HTTP/1.1 response reader, shared by test_server and
// test_hostile: takes one response off the bytes a test client received.
// Catch2 asserts that the head is well formed (a status line, field lines
// whose names are tokens) and that each chunk ends with CRLF.
#pragma once
#include <catch2/catch.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "http/message.hpp"
#include "http/parser.hpp"

namespace m0::testing {

struct Reply {
    int status = 0;
    std::string status_line;
    http::Headers headers;
    std::string body;      // decoded
    std::string raw_body;  // as framed on the wire
};

// Takes one response off the front of `buf`; nullopt while it is incomplete.
// `head_only`: the answer to a HEAD. `eof`: the peer closed, so an unframed
// body ends here.
inline std::optional<Reply> take_reply(std::string& buf, bool head_only, bool eof) {
    size_t end = buf.find("\r\n\r\n");
    if (end == std::string::npos) return std::nullopt;
    Reply r;
    std::string head = buf.substr(0, end);
    size_t pos = head.find("\r\n");
    r.status_line = head.substr(0, pos);
    INFO("status line: " << r.status_line);
    REQUIRE(r.status_line.size() >= 12);
    REQUIRE(r.status_line.starts_with("HTTP/1.1 "));
    r.status = std::stoi(r.status_line.substr(9, 3));
    while (pos != std::string::npos) {
        size_t next = head.find("\r\n", pos + 2);
        std::string field =
            head.substr(pos + 2, next == std::string::npos ? std::string::npos : next - pos - 2);
        size_t colon = field.find(':');
        INFO("field line: " << field);
        REQUIRE(colon != std::string::npos);
        REQUIRE(http::is_token(field.substr(0, colon)));
        size_t v = colon + 1;
        while (v < field.size() && field[v] == ' ') ++v;
        r.headers.add(field.substr(0, colon), field.substr(v));
        pos = next;
    }
    size_t p = end + 4;
    const bool bodiless = head_only || r.status / 100 == 1 || r.status == 204 || r.status == 304;
    if (bodiless) {
        // nothing
    } else if (auto cl = r.headers.get("Content-Length")) {
        size_t n = std::stoul(std::string(*cl));
        if (buf.size() < p + n) return std::nullopt;
        r.body = r.raw_body = buf.substr(p, n);
        p += n;
    } else if (r.headers.get("Transfer-Encoding") == std::optional<std::string_view>("chunked")) {
        size_t start = p;
        for (;;) {
            size_t crlf = buf.find("\r\n", p);
            if (crlf == std::string::npos) return std::nullopt;
            size_t size = std::stoul(buf.substr(p, crlf - p), nullptr, 16);
            p = crlf + 2;
            if (buf.size() < p + size + 2) return std::nullopt;
            r.body.append(buf, p, size);
            REQUIRE(buf.compare(p + size, 2, "\r\n") == 0);
            p += size + 2;
            if (size == 0) break;
        }
        r.raw_body = buf.substr(start, p - start);
    } else {
        if (!eof) return std::nullopt;  // close-delimited
        r.body = r.raw_body = buf.substr(p);
        p = buf.size();
    }
    buf.erase(0, p);
    return r;
}

}  // namespace m0::testing
