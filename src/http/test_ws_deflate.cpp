#include <catch2/catch.hpp>

#include "http/websocket.hpp"
#include "http/ws_deflate.hpp"

using namespace m0::http;
using namespace m0::http::ws;

namespace {

std::string offer(const std::string& value) {
    Headers h;
    h.add("Sec-WebSocket-Extensions", value);
    return negotiate_deflate(h);
}

constexpr const char* kAccept = "permessage-deflate; server_no_context_takeover";

}  // namespace

TEST_CASE("deflate: an offer is answered with server_no_context_takeover, or declined") {
    CHECK(offer("permessage-deflate") == kAccept);
    CHECK(offer("permessage-deflate; client_max_window_bits") == kAccept);  // python3-websockets'
    CHECK(offer("permessage-deflate; client_max_window_bits=10; client_no_context_takeover") ==
          kAccept);
    CHECK(offer("permessage-deflate; server_no_context_takeover") == kAccept);
    CHECK(offer("permessage-deflate; server_max_window_bits=15") == kAccept);
    CHECK(offer("permessage-deflate; client_max_window_bits=\"12\"") == kAccept);
    // Declined (RFC 7692 §7.1): an unknown or repeated parameter, a bad value;
    // and here, a limit on the server's window (the shared bytes use 15).
    CHECK(offer("permessage-deflate; x=1").empty());
    CHECK(offer("permessage-deflate; client_no_context_takeover; client_no_context_takeover")
              .empty());
    CHECK(offer("permessage-deflate; client_max_window_bits=16").empty());
    CHECK(offer("permessage-deflate; client_max_window_bits=7").empty());
    CHECK(offer("permessage-deflate; client_max_window_bits=09").empty());
    CHECK(offer("permessage-deflate; server_no_context_takeover=1").empty());
    CHECK(offer("permessage-deflate; server_max_window_bits").empty());
    CHECK(offer("permessage-deflate; server_max_window_bits=10").empty());
    CHECK(offer("x-webkit-deflate-frame").empty());
    CHECK(Headers{}.get("Sec-WebSocket-Extensions") == std::nullopt);
    CHECK(negotiate_deflate(Headers{}).empty());
    // The first acceptable of several offers.
    CHECK(offer("permessage-deflate; server_max_window_bits=10, permessage-deflate") == kAccept);
}

TEST_CASE("deflate: a message compressed as RFC 7692's example, and inflated back") {
    // §7.2.3.1: "Hello" is f2 48 cd c9 c9 07 00.
    CHECK(deflate_message("Hello") == std::string("\xf2\x48\xcd\xc9\xc9\x07\x00", 7));
    CHECK(deflate_message("") == std::string("\x00", 1));  // §7.2.3.6
    Inflater in;
    std::string out;
    const std::string big(100000, 'a');
    for (const std::string& m : {std::string("Hello"), std::string(), big}) {
        REQUIRE(in.inflate(deflate_message(m), 1 << 20, out) == Inflater::Result::ok);
        CHECK(out == m);
    }
    // §7.2.3.2: a client that keeps its context: the second "Hello" refers
    // back to the first.
    Inflater kept;
    REQUIRE(kept.inflate(std::string("\xf2\x48\xcd\xc9\xc9\x07\x00", 7), 100, out) ==
            Inflater::Result::ok);
    REQUIRE(kept.inflate(std::string("\xf2\x00\x11\x00\x00", 5), 100, out) == Inflater::Result::ok);
    CHECK(out == "Hello");
}

TEST_CASE("deflate: a bomb stops at the limit, garbage is refused") {
    Inflater in;
    std::string out;
    CHECK(in.inflate(deflate_message(std::string(1 << 20, '\0')), 1000, out) ==
          Inflater::Result::too_big);
    CHECK(out.size() <= 1000);
    Inflater bad;
    CHECK(bad.inflate("\xff\xff\xff\xff", 1000, out) == Inflater::Result::bad);
}

TEST_CASE("deflate: a frame's payload compressed with RSV1 set; a control frame untouched") {
    const std::string text = server_frame(Opcode::text, std::string(300, 'x'));
    const std::string d = deflate_frame(text);
    CHECK(uint8_t(d[0]) == (0x80 | 0x40 | 0x1));
    CHECK(d.size() < 40);
    Inflater in;
    std::string out;
    REQUIRE(in.inflate(std::string_view(d).substr(2), 1000, out) == Inflater::Result::ok);
    CHECK(out == std::string(300, 'x'));
    const std::string ping = server_frame(Opcode::ping, "p");
    CHECK(deflate_frame(ping) == ping);
    CHECK(uint8_t(deflate_frame(server_frame(Opcode::binary, ""))[0]) == (0x80 | 0x40 | 0x2));
}
