#include <catch2/catch.hpp>

#include "http/json.hpp"
#include "http/ws_events.hpp"

using namespace m0::http;
using namespace m0::http::woh;

namespace {

std::vector<Event> decoded(std::string_view body) {
    std::vector<Event> out;
    std::string err;
    INFO(err);
    REQUIRE(decode_events(body, out, err));
    return out;
}

std::string refused(std::string_view body) {
    std::vector<Event> out;
    std::string err;
    CHECK_FALSE(decode_events(body, out, err));
    CHECK_FALSE(err.empty());
    return err;
}

std::string control_refused(std::string_view json) {
    Control c;
    std::string err;
    CHECK_FALSE(decode_ws_control(json, c, err));
    return err;
}

}  // namespace

TEST_CASE("ws events: encoded as Pushpin writes them, sizes in hex, no size without content") {
    const std::string body = encode_events({{"OPEN", std::nullopt},
                                            {"TEXT", std::string(26, 'x')},
                                            {"BINARY", std::string("\0\r\n", 3)},
                                            {"PING", std::string()},
                                            {"CLOSE", close_content(1000, "bye")},
                                            {"DISCONNECT", std::nullopt}});
    CHECK(body == "OPEN\r\nTEXT 1a\r\n" + std::string(26, 'x') + "\r\nBINARY 3\r\n" +
                      std::string("\0\r\n", 3) +
                      "\r\nPING 0\r\n\r\nCLOSE 5\r\n\x03\xe8"
                      "bye\r\nDISCONNECT\r\n");
}

TEST_CASE("ws events: what encode_events writes decodes back, content with CRLF inside too") {
    std::vector<Event> in = {{"OPEN", std::nullopt},
                             {"TEXT", std::string("a\r\nTEXT 1\r\nb")},
                             {"PONG", std::string()},
                             {"CLOSE", close_content(4000, "")}};
    auto out = decoded(encode_events(in));
    REQUIRE(out.size() == in.size());
    for (size_t i = 0; i < in.size(); ++i) {
        CHECK(out[i].type == in[i].type);
        CHECK(out[i].content == in[i].content);
    }
    CHECK(decoded("").empty());
    CHECK(decoded("TEXT A\r\n0123456789\r\n")[0].content == "0123456789");  // upper-case hex
}

TEST_CASE("ws events: a hostile answer body is refused with a reason, never read past its end") {
    CHECK(refused("OPEN").find("without CRLF") != std::string::npos);
    CHECK(refused("OPEN\n").find("without CRLF") != std::string::npos);
    CHECK(refused("HELLO\r\n").find("unknown event type 'HELLO'") != std::string::npos);
    CHECK(refused("open\r\n").find("unknown") != std::string::npos);
    CHECK(refused("TEXT\r\n\r\n").find("unknown event type ''") != std::string::npos);
    CHECK(refused("TEXT zz\r\nab\r\n").find("not hex") != std::string::npos);
    CHECK(refused("TEXT -1\r\nab\r\n").find("not hex") != std::string::npos);
    CHECK(refused("TEXT \r\n\r\n").find("1 to 8 hex digits") != std::string::npos);
    CHECK(refused("TEXT 123456789\r\n").find("1 to 8 hex digits") != std::string::npos);
    CHECK(refused("TEXT ffffffff\r\nab\r\n").find("cut short") != std::string::npos);
    CHECK(refused("TEXT 5\r\nab\r\n").find("cut short") != std::string::npos);
    CHECK(refused("TEXT 2\r\nab").find("cut short") != std::string::npos);
    CHECK(refused("TEXT 2\r\nabcd\r\n").find("not followed by CRLF") != std::string::npos);
    CHECK(refused("OPEN\r\nTEXT 1\r\na\r\nX").find("at byte 17") != std::string::npos);
}

TEST_CASE("ws events: the grip extension and its message prefix") {
    Headers h;
    CHECK_FALSE(grip_prefix(h));
    h.add("Sec-WebSocket-Extensions", "permessage-deflate");
    CHECK_FALSE(grip_prefix(h));
    h.add("Sec-WebSocket-Extensions", "grip");
    CHECK(grip_prefix(h) == "m:");
    Headers p;
    p.add("Sec-WebSocket-Extensions", "foo, grip; message-prefix=\"\"");
    CHECK(grip_prefix(p) == "");
    Headers q;
    q.add("Sec-WebSocket-Extensions", "grip ;x=1; message-prefix = msg:");
    CHECK(grip_prefix(q) == "msg:");
    Headers r;
    r.add("Sec-WebSocket-Extensions", "gripx");
    CHECK_FALSE(grip_prefix(r));
}

TEST_CASE(
    "ws control: subscribe, unsubscribe, detach, keep-alive and set-meta as Pushpin reads them") {
    Control c;
    std::string err;
    REQUIRE(decode_ws_control(R"({"type":"subscribe","channel":"room"})", c, err));
    CHECK(c.type == Control::Type::subscribe);
    CHECK(c.channel == "room");
    REQUIRE(decode_ws_control(R"({"type":"unsubscribe","channel":"room"})", c, err));
    CHECK(c.type == Control::Type::unsubscribe);
    REQUIRE(decode_ws_control(R"({"type":"detach"})", c, err));
    CHECK(c.type == Control::Type::detach);
    REQUIRE(decode_ws_control(R"({"type":"keep-alive","content":"ka","timeout":20})", c, err));
    CHECK(c.type == Control::Type::keep_alive);
    CHECK(c.content == "ka");
    CHECK(c.message_type == "text");
    CHECK(c.timeout == 20);
    CHECK_FALSE(c.interval);
    REQUIRE(decode_ws_control(
        R"({"type":"keep-alive","content-bin":"AAE=","timeout":5,"mode":"interval"})", c, err));
    CHECK(c.content == std::string("\0\1", 2));
    CHECK(c.message_type == "binary");
    CHECK(c.interval);
    REQUIRE(
        decode_ws_control(R"({"type":"keep-alive","content":"p","message-type":"ping"})", c, err));
    CHECK(c.message_type == "ping");
    REQUIRE(decode_ws_control(R"({"type":"set-meta","name":"User","value":"ann"})", c, err));
    CHECK(c.type == Control::Type::set_meta);
    CHECK(c.name == "User");
    CHECK(c.value == "ann");
}

TEST_CASE("ws control: a bad control message is refused with a reason") {
    CHECK(control_refused("[]").find("JSON object") != std::string::npos);
    CHECK(control_refused("{").find("bad JSON") != std::string::npos);
    CHECK(control_refused("{}").find("without 'type'") != std::string::npos);
    CHECK(control_refused(R"({"type":"session"})").find("unknown") != std::string::npos);
    CHECK(control_refused(R"({"type":7})").find("'type' must be a string") != std::string::npos);
    CHECK(control_refused(R"({"type":"subscribe"})").find("without a channel") !=
          std::string::npos);
    CHECK(control_refused(R"({"type":"subscribe","channel":1})").find("must be a string") !=
          std::string::npos);
    CHECK(control_refused(R"({"type":"keep-alive","message-type":"yell"})").find("message-type") !=
          std::string::npos);
    CHECK(control_refused(R"({"type":"keep-alive","mode":"often"})").find("mode") !=
          std::string::npos);
    CHECK(control_refused(R"({"type":"keep-alive","timeout":-1})").find("timeout") !=
          std::string::npos);
    CHECK(control_refused(R"({"type":"keep-alive","content":"a","content-bin":"YQ=="})")
              .find("give one of") != std::string::npos);
    CHECK(control_refused(R"({"type":"set-meta","name":"a b"})").find("token") !=
          std::string::npos);
}
