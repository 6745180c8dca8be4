#include <catch2/catch.hpp>

#include "http/websocket.hpp"

using namespace m0::http;
using namespace m0::http::ws;

namespace {

Request upgrade(std::vector<std::pair<std::string, std::string>> extra = {}) {
    Request r;
    r.method = "GET";
    r.target = r.path = "/native/ws";
    r.headers.add("Host", "example.com:8000");
    r.headers.add("Upgrade", "websocket");
    r.headers.add("Connection", "keep-alive, Upgrade");
    r.headers.add("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ==");
    r.headers.add("Sec-WebSocket-Version", "13");
    for (auto& [k, v] : extra) {
        r.headers.remove(k);
        if (!v.empty()) r.headers.add(k, v);
    }
    return r;
}

OriginCheck origins(std::vector<std::string> list) {
    std::string err;
    auto c = OriginCheck::make(list, err);
    REQUIRE(c);
    return *c;
}

}  // namespace

TEST_CASE("websocket: the accept key is RFC 6455's own example", "[websocket]") {
    // RFC 6455 §1.3.
    CHECK(accept_key("dGhlIHNhbXBsZSBub25jZQ==") == "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=");
}

TEST_CASE("websocket: a valid handshake is accepted with its offered protocols", "[websocket]") {
    auto u = check_upgrade(upgrade({{"Sec-WebSocket-Protocol", "chat, superchat"}}), {});
    CHECK(u.asked);
    CHECK(u.status == 0);
    CHECK(u.accept == "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=");
    CHECK(u.protocols == std::vector<std::string>{"chat", "superchat"});
}

TEST_CASE("websocket: a request without Upgrade: websocket is not a handshake", "[websocket]") {
    const std::pair<std::string, std::string> no_key{"Sec-WebSocket-Key", ""};
    CHECK_FALSE(check_upgrade(upgrade({{"Upgrade", ""}, no_key}), {}).asked);
    CHECK_FALSE(check_upgrade(upgrade({{"Upgrade", "h2c"}, no_key}), {}).asked);
    CHECK(check_upgrade(upgrade({{"Upgrade", "WebSocket"}}), {}).asked);
}

TEST_CASE("websocket: a Sec-WebSocket-Key whose Upgrade did not arrive is refused 400, saying so",
          "[websocket]") {
    // What a proxy that passes no hop-by-hop field on sends: the client's
    // handshake without Upgrade and Connection.
    for (const char* upgrade_value : {"", "h2c"}) {
        auto u =
            check_upgrade(upgrade({{"Upgrade", upgrade_value}, {"Connection", "keep-alive"}}), {});
        CHECK(u.asked);
        CHECK(u.status == 400);
        CHECK_THAT(u.reason,
                   Catch::Contains("needs Upgrade: websocket") && Catch::Contains("proxy"));
        CHECK(u.accept.empty());
    }
    // Pushpin's WebSocket-over-HTTP requests are POSTs to the view that carry
    // the client's handshake fields (Upgrade and Connection taken out): no
    // handshake, the view answers them.
    Request woh = upgrade({{"Upgrade", ""}, {"Connection", ""}});
    woh.method = "POST";
    woh.headers.add("Content-Type", "application/websocket-events");
    CHECK_FALSE(check_upgrade(woh, {}).asked);
}

TEST_CASE("websocket: bad handshakes are refused with a status and a reason", "[websocket]") {
    struct Case {
        const char* what;
        Request req;
        int status;
    };
    Request post = upgrade();
    post.method = "POST";
    Request http10 = upgrade();
    http10.version_minor = 0;
    std::vector<Case> cases = {
        {"POST", post, 400},
        {"HTTP/1.0", http10, 400},
        {"no Host", upgrade({{"Host", ""}}), 400},
        {"no Connection: Upgrade", upgrade({{"Connection", "keep-alive"}}), 400},
        {"version 8", upgrade({{"Sec-WebSocket-Version", "8"}}), 426},
        {"no version", upgrade({{"Sec-WebSocket-Version", ""}}), 426},
        {"no key", upgrade({{"Sec-WebSocket-Key", ""}}), 400},
        {"a key of 15 bytes", upgrade({{"Sec-WebSocket-Key", "AAAAAAAAAAAAAAAAAAAA"}}), 400},
        {"a key not base64", upgrade({{"Sec-WebSocket-Key", "!!!!!!!!!!!!!!!!!!!!!!=="}}), 400},
    };
    for (auto& c : cases) {
        INFO(c.what);
        auto u = check_upgrade(c.req, {});
        CHECK(u.status == c.status);
        CHECK_FALSE(u.reason.empty());
    }
    auto r = refusal(check_upgrade(upgrade({{"Sec-WebSocket-Version", "8"}}), {}));
    CHECK(r.status == 426);
    CHECK(r.headers.get("Sec-WebSocket-Version") == std::optional<std::string_view>("13"));
}

TEST_CASE("websocket: Origin is checked against the list, its own host, or none", "[websocket]") {
    auto listed = origins({"https://app.example"});
    CHECK(check_upgrade(upgrade({{"Origin", "https://app.example"}}), listed).status == 0);
    CHECK(check_upgrade(upgrade({{"Origin", "https://evil.example"}}), listed).status == 403);
    // No Origin: not a browser.
    CHECK(check_upgrade(upgrade(), listed).status == 0);
    // The server's own origin (Host: example.com:8000), with or without a list.
    CHECK(check_upgrade(upgrade({{"Origin", "http://example.com:8000"}}), {}).status == 0);
    CHECK(check_upgrade(upgrade({{"Origin", "http://example.com"}}), {}).status == 403);
    CHECK(check_upgrade(upgrade({{"Origin", "null"}}), {}).status == 403);
    CHECK(check_upgrade(upgrade({{"Origin", "https://any.example"}}), origins({"*"})).status == 0);
}

TEST_CASE("websocket: server frames carry the length in 7, 16 or 64 bits", "[websocket]") {
    CHECK(server_frame(Opcode::text, "hi") == std::string("\x81\x02hi", 4));
    std::string f = server_frame(Opcode::binary, std::string(300, 'x'));
    CHECK(f.substr(0, 4) == std::string("\x82\x7e\x01\x2c", 4));
    CHECK(f.size() == 304);
    f = server_frame(Opcode::text, std::string(70000, 'x'));
    CHECK(f.substr(0, 10) == std::string("\x81\x7f\x00\x00\x00\x00\x00\x01\x11\x70", 10));
    CHECK(close_frame(1001, "bye") == std::string("\x88\x05\x03\xe9"
                                                  "bye",
                                                  7));
    CHECK(close_frame(1000, std::string(200, 'r')).size() == 2 + 125);
}

TEST_CASE("websocket: an event message is JSON with its id as a string", "[websocket]") {
    CHECK(event_message(1796226919347001, "", "hello") ==
          R"({"id":"1796226919347001","data":"hello"})");
    CHECK(event_message(7, "tick", "a\"b") == R"({"id":"7","event":"tick","data":"a\"b"})");
    CHECK(event_message(0, "m0-reset", "{}") == R"({"event":"m0-reset","data":"{}"})");
    // Not UTF-8: replaced, so the text frame stays valid.
    CHECK(event_message(1, "", "\xff") == "{\"id\":\"1\",\"data\":\"\xef\xbf\xbd\"}");
}

TEST_CASE("websocket: an event's frame size is counted as the frame is built", "[websocket]") {
    // Every byte value, alone and in runs that cross the 7-, 16- and 64-bit
    // length forms; names too; ids 0 (no "id"), small and the widest.
    std::vector<std::string> texts = {"", "x", "a\"b\\c/", "caf\xc3\xa9", "\xff\xfe", "\x7f"};
    for (int c = 0; c < 256; ++c) texts.push_back(std::string(1, static_cast<char>(c)));
    for (size_t n : {100, 120, 125, 126, 127, 65535 - 20, 65535, 65536, 70000})
        for (char c : {'a', '"', '\x01', '\n'}) texts.push_back(std::string(n, c));
    for (uint64_t id : {uint64_t{0}, uint64_t{7}, UINT64_MAX})
        for (const char* event : {"", "tick", "a\"b", "\x01"})
            for (const auto& data : texts) {
                INFO("id " << id << ", event " << event << ", data of " << data.size());
                CHECK(event_frame_size(id, event, data) ==
                      server_frame(Opcode::text, event_message(id, event, data)).size());
            }
}

TEST_CASE("websocket: UTF-8 is validated in pieces", "[websocket]") {
    auto whole = [](std::string_view s) {
        Utf8Validator v;
        return v.feed(s) && v.complete();
    };
    CHECK(whole("plain ascii"));
    CHECK(whole("\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80"));  // é € 😀
    CHECK_FALSE(whole("\xff"));
    CHECK_FALSE(whole("\xc0\xaf"));          // overlong
    CHECK_FALSE(whole("\xe0\x80\xaf"));      // overlong
    CHECK_FALSE(whole("\xed\xa0\x80"));      // a surrogate
    CHECK_FALSE(whole("\xf4\x90\x80\x80"));  // past U+10FFFF
    CHECK_FALSE(whole("\xe2\x82"));          // cut
    CHECK_FALSE(whole("\x80"));              // a lone tail
    // Fed byte by byte, the same answers.
    for (std::string_view s : {"\xe2\x82\xac", "\xf0\x9f\x98\x80"}) {
        Utf8Validator v;
        for (char ch : s) CHECK(v.feed(std::string_view(&ch, 1)));
        CHECK(v.complete());
    }
    Utf8Validator v;
    CHECK(v.feed("\xe2\x82"));
    CHECK_FALSE(v.complete());
    CHECK_FALSE(v.feed("a"));
}
