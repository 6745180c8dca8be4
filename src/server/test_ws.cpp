// WebSockets on the real Server and Loop (clients on socketpairs, the loop
// stepped by the test, the builtin mount on a manual mojo pool): the 101
// after the subscription, events as shared JSON text frames, replay from
// ?lastEventID=, pings both ways, the close handshake, and a hostile-frame
// matrix: every MUST of RFC 6455 a client can break, each fed whole, one
// byte at a time and split at random, closed with its code, and a good
// subscriber on another connection served right after.
#include <catch2/catch.hpp>
#include <ctime>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "grant/grant.hpp"
#include "http/ws_deflate.hpp"
#include "mojo/mojo.hpp"
#include "server/codec.hpp"
#include "server/test_hold_rig.hpp"
#include "server/test_ws_frames.hpp"

using namespace m0;
using m0::testing::SocketClient;
using namespace m0::testing::wsf;

namespace {

server::ServerConfig ws_config() {
    server::ServerConfig cfg;
    cfg.ws.max_message = 1000;
    cfg.ws.close_timeout = 0.5;
    return cfg;
}

struct WsRig : testing::HoldRig {
    using HoldRig::HoldRig;
    std::string path = "/native/ws";  // what open() upgrades

    // Opens a WebSocket on `c` to /native/ws?`query`; the 101 is taken from
    // c.in, and returned.
    // `completion_first`: the loop handles the hold's completion before it
    // looks at its bus lane (as when the ring's eventfd is seen first).
    std::string open(SocketClient& c, const std::string& query = "channel=c",
                     bool completion_first = false, const std::string& extra = "") {
        REQUIRE(c.send("GET " + path + "?" + query +
                       " HTTP/1.1\r\nHost: h\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                       "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
                       "Sec-WebSocket-Version: 13\r\n" +
                       extra + "\r\n"));
        REQUIRE(loop.run_until([&] { return pool->pool().queued() == 1; }));
        REQUIRE(pool->pool().run_next());
        if (completion_first) server->on_completions_ready();
        REQUIRE(ServerRig::read_until(c, "\r\n\r\n"));
        const size_t end = c.in.find("\r\n\r\n") + 4;
        std::string head = c.in.substr(0, end);
        c.in.erase(0, end);
        REQUIRE(head.starts_with("HTTP/1.1 101 Switching Protocols\r\n"));
        return head;
    }
    // Steps until `c` holds `n` whole frames.
    std::vector<Frame> frames(SocketClient& c, size_t n) {
        step_until([&] {
            c.pump();
            return parse(c.in).size() >= n;
        });
        return parse(c.in);
    }
    // Steps until the server closed `c`; its frames.
    std::vector<Frame> closed(SocketClient& c) {
        CHECK(wait_eof(c));
        return parse(c.in);
    }
};

}  // namespace

TEST_CASE("ws: the 101 is written after the subscription, and events follow as JSON", "[ws]") {
    WsRig rig(ws_config());
    std::string head = rig.open(*rig.conn);
    CHECK(head.find("Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n") != std::string::npos);
    CHECK(rig.metrics.websockets.load() == 1);
    CHECK(head.find("Connection: Upgrade\r\n") != std::string::npos);
    CHECK(head.find("Content-Length") == std::string::npos);
    CHECK(rig.server->subscribed(rig.slot));
    REQUIRE(rig.bus.publish("c", "one").ok());
    REQUIRE(rig.bus.publish("c", "two", "tick").ok());
    auto f = rig.frames(*rig.conn, 2);
    REQUIRE(f.size() == 2);
    CHECK(f[0].op == 0x1);
    CHECK(f[0].payload == R"({"id":"1","data":"one"})");
    CHECK(f[1].payload == R"({"id":"2","event":"tick","data":"two"})");
}

TEST_CASE("ws: an event published between the h frame and the 101 follows the 101", "[ws]") {
    WsRig rig(ws_config());
    // On the pool thread, after the h frame, before the completion: the
    // subscription is queued ahead of this event, and the 101 ahead of both.
    rig.on_point = [&](hold::Point p, SlotRef) {
        if (p == hold::Point::frame_sent) REQUIRE(rig.bus.publish("c", "early").ok());
    };
    rig.open(*rig.conn, "channel=c", true);
    CHECK(rig.server->subscribed(rig.slot));
    auto f = rig.frames(*rig.conn, 1);
    REQUIRE(f.size() == 1);
    CHECK(f[0].payload == R"({"id":"1","data":"early"})");
}

TEST_CASE("ws: an event's frame is made once and shared by every subscriber", "[ws]") {
    WsRig rig(ws_config());
    rig.open(*rig.conn);
    auto other = rig.connect();
    rig.open(*other);
    // Sockets that take little: each subscriber's output keeps a reference to
    // what the socket did not take.
    int small = 4096;
    for (int fd : {rig.conn->server_fd, other->server_fd})
        ::setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &small, sizeof small);
    REQUIRE(rig.bus.publish("c", std::string(100000, 'x')).ok());
    REQUIRE(rig.step_until(
        [&] { return rig.server->unsent(rig.slot) > 0 && rig.server->unsent(other->slot) > 0; }));
    // The bus made the frame where it numbered the event; the history keeps
    // it, and both outputs hold that very buffer: the history's reference,
    // this replay's copy of it, and one for each subscriber.
    auto replay = rig.bus.replay({"c"}, 0, rig.bus.position());
    REQUIRE(replay.events.size() == 1);
    const auto& ws = server::form(replay.events[0], server::Form::ws);
    REQUIRE(ws);
    CHECK(ws.use_count() == 4);
}

TEST_CASE("ws: a reconnect with ?lastEventID= is replayed what it missed, then live", "[ws]") {
    WsRig rig(ws_config());
    for (int i = 1; i <= 3; ++i) REQUIRE(rig.bus.publish("c", "e" + std::to_string(i)).ok());
    rig.open(*rig.conn, "channel=c&lastEventID=1");
    REQUIRE(rig.bus.publish("c", "e4").ok());
    auto f = rig.frames(*rig.conn, 3);
    REQUIRE(f.size() == 3);
    CHECK(f[0].payload == R"({"id":"2","data":"e2"})");
    CHECK(f[1].payload == R"({"id":"3","data":"e3"})");
    CHECK(f[2].payload == R"({"id":"4","data":"e4"})");
}

TEST_CASE("ws: pings are answered, a clean close is answered and the slot released", "[ws]") {
    WsRig rig(ws_config());
    rig.open(*rig.conn);
    REQUIRE(rig.conn->send(frame(0x9, "hb")));
    auto f = rig.frames(*rig.conn, 1);
    REQUIRE(f.size() == 1);
    CHECK(f[0].op == 0xA);
    CHECK(f[0].payload == "hb");
    rig.conn->in.clear();
    // A message from the client is dropped in this slice; the connection stays.
    REQUIRE(rig.conn->send(frame(0x1, "hello")));
    REQUIRE(rig.conn->send(frame(0x8, code(1000) + "bye")));
    f = rig.closed(*rig.conn);
    CHECK(close_code(f) == 1000);
    // The client keeps its socket open: --ws-close-timeout releases the slot.
    CHECK(rig.step_until([&] { return !rig.server->alive(rig.slot); }));
    CHECK_FALSE(rig.server->subscribed(rig.slot));
}

TEST_CASE(
    "ws: a silent client is pinged, and closed when it does not answer; the ping leaves no frame "
    "reader behind",
    "[ws]") {
    auto cfg = ws_config();
    cfg.ws.ping_interval = 0.1;
    cfg.ws.pong_timeout = 0.2;
    WsRig rig(cfg);
    rig.open(*rig.conn);
    auto f = rig.frames(*rig.conn, 1);
    REQUIRE(f.size() == 1);
    CHECK(f[0].op == 0x9);
    CHECK(rig.server->ws_readers() == 0);
    // Answered, one byte a read: still open after the timeout.
    for (char b : frame(0xA, f[0].payload)) {
        REQUIRE(rig.conn->send(std::string(1, b)));
        for (int k = 0; k < 3; ++k) rig.loop.run_once();
    }
    CHECK(rig.server->ws_readers() == 0);
    rig.step_until([] { return false; }, std::chrono::milliseconds(250));
    CHECK(rig.server->alive(rig.slot));
    // Not answered: closed.
    CHECK(rig.wait_eof(*rig.conn, std::chrono::milliseconds(2000)));
    CHECK_FALSE(rig.server->alive(rig.slot));
}

TEST_CASE("ws: shutdown ends a WebSocket with 1001 and a slow reader with 1013", "[ws]") {
    SECTION("shutdown") {
        WsRig rig(ws_config());
        rig.open(*rig.conn);
        rig.server->shutdown();
        CHECK(close_code(rig.closed(*rig.conn)) == 1001);
    }
    SECTION("slow reader") {
        auto cfg = ws_config();
        cfg.hold_buffer_limit = 4096;
        cfg.hold_drain_timeout = 0.1;
        WsRig rig(cfg);
        rig.open(*rig.conn);
        int small = 4096;
        ::setsockopt(rig.conn->server_fd, SOL_SOCKET, SO_SNDBUF, &small, sizeof small);
        for (int i = 0; i < 200; ++i) REQUIRE(rig.bus.publish("c", std::string(1000, 'x')).ok());
        rig.step_until([&] { return !rig.server->subscribed(rig.slot); });
        CHECK_FALSE(rig.server->subscribed(rig.slot));
        CHECK(close_code(rig.closed(*rig.conn)) == 1013);
    }
}

TEST_CASE("ws: hostile frames close with their code, and others are served", "[ws][hostile]") {
    struct Case {
        const char* what;
        std::string bytes;
        uint16_t code;
    };
    std::string len64 = "\x81\xff";
    len64 += std::string("\x80\x00\x00\x00\x00\x00\x00\x00", 8) + "abcd";
    const std::vector<Case> cases = {
        {"an unmasked frame (§5.1)", frame(0x1, "hi", true, 0, false), 1002},
        {"a reserved bit (§5.2)", frame(0x1, "hi", true, 4), 1002},
        {"a reserved data opcode (§5.2)", frame(0x3, "hi"), 1002},
        {"a reserved control opcode (§5.2)", frame(0xB, "hi"), 1002},
        {"a ping of 126 bytes (§5.5)", frame(0x9, std::string(126, 'p')), 1002},
        {"a fragmented ping (§5.5)", frame(0x9, "p", false), 1002},
        {"a continuation first (§5.4)", frame(0x0, "x"), 1002},
        {"a text frame inside a fragmented message (§5.4)",
         frame(0x1, "a", false) + frame(0x1, "b"), 1002},
        {"a 64-bit length with its top bit set (§5.2)", len64, 1002},
        {"invalid UTF-8 (§8.1)", frame(0x1, "\xff"), 1007},
        {"invalid UTF-8 across fragments (§8.1)", frame(0x1, "\xe2\x82", false) + frame(0x0, "a"),
         1007},
        {"a text message cut inside a character", frame(0x1, "\xe2\x82"), 1007},
        {"close code 1005 (§7.4.1)", frame(0x8, code(1005)), 1002},
        {"close code 1006 (§7.4.1)", frame(0x8, code(1006)), 1002},
        {"close code 1015 (§7.4.1)", frame(0x8, code(1015)), 1002},
        {"close code 999 (§7.4.2)", frame(0x8, code(999)), 1002},
        {"close code 5000 (§7.4.2)", frame(0x8, code(5000)), 1002},
        {"a close frame of one byte (§5.5.1)", frame(0x8, "\x03"), 1002},
        {"a close reason not UTF-8 (§5.5.1)", frame(0x8, code(1000) + "\xff"), 1007},
        {"a message over --ws-max-message", frame(0x2, std::string(1001, 'x')), 1009},
        {"a message over it in fragments",
         frame(0x2, std::string(600, 'x'), false) + frame(0x0, std::string(600, 'x')), 1009},
    };
    enum class Feed { whole, bytewise, random };
    std::mt19937 rng(26);
    for (Feed how : {Feed::whole, Feed::bytewise, Feed::random}) {
        for (const auto& c : cases) {
            INFO(c.what << (how == Feed::whole      ? " (whole)"
                            : how == Feed::bytewise ? " (bytewise)"
                                                    : " (random splits)"));
            WsRig rig(ws_config());
            rig.open(*rig.conn);
            if (how == Feed::whole) {
                REQUIRE(rig.conn->send(c.bytes));
            } else {
                size_t i = 0;
                while (i < c.bytes.size()) {
                    size_t n = how == Feed::bytewise
                                   ? 1
                                   : std::uniform_int_distribution<size_t>(1, 7)(rng);
                    n = std::min(n, c.bytes.size() - i);
                    if (!rig.conn->send(std::string_view(c.bytes).substr(i, n))) break;  // closed
                    i += n;
                    for (int k = 0; k < 3; ++k) rig.loop.run_once();
                }
            }
            CHECK(close_code(rig.closed(*rig.conn)) == c.code);
            rig.conn->close();  // as a client does once the close came
            CHECK(rig.step_until([&] { return !rig.server->alive(rig.slot); }));
            // The server serves the next subscriber.
            auto next = rig.connect();
            rig.open(*next);
            REQUIRE(next->send(frame(0x9, "ok")));
            REQUIRE(rig.bus.publish("c", "after").ok());
            auto f = rig.frames(*next, 2);
            REQUIRE(f.size() == 2);
            CHECK(f[0].op == 0xA);
            CHECK(f[1].payload.find("\"data\":\"after\"") != std::string::npos);
        }
    }
}

TEST_CASE("ws: a bad handshake is refused before any pool sees it", "[ws]") {
    WsRig rig(ws_config());
    REQUIRE(
        rig.conn->send("GET /native/ws?channel=c HTTP/1.1\r\nHost: h\r\nUpgrade: websocket\r\n"
                       "Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
                       "Sec-WebSocket-Version: 8\r\n\r\n"));
    REQUIRE(rig.read_until(*rig.conn, "\r\n\r\n"));
    CHECK(rig.conn->in.starts_with("HTTP/1.1 426 "));
    CHECK(rig.conn->in.find("Sec-WebSocket-Version: 13\r\n") != std::string::npos);
    CHECK(rig.pool->pool().queued() == 0);
    auto o = rig.connect();
    REQUIRE(
        o->send("GET /native/ws?channel=c HTTP/1.1\r\nHost: h\r\nUpgrade: websocket\r\n"
                "Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
                "Sec-WebSocket-Version: 13\r\nOrigin: https://evil.example\r\n\r\n"));
    REQUIRE(rig.read_until(*o, "\r\n\r\n"));
    CHECK(o->in.starts_with("HTTP/1.1 403 "));
    CHECK(rig.pool->pool().queued() == 0);
}

namespace {
// A mount whose handler chooses a subprotocol.
struct ProtocolHandler : mojo::Handler {
    std::string choose;
    http::Response serve(const http::Request&) override {
        http::Response r;
        r.headers.add("M0-Hold", "websocket");
        r.headers.add("M0-Channel", "c");
        r.headers.add("Sec-WebSocket-Protocol", choose);
        return r;
    }
};
}  // namespace

TEST_CASE("ws: the handler's subprotocol is echoed only when the client offered it", "[ws]") {
    for (const char* choose : {"chat", "other"}) {
        INFO(choose);
        WsRig rig(ws_config());
        ProtocolHandler handler;
        handler.choose = choose;
        rig.server->add_mount("/proto", [&](SlotRef s, http::Request&& r) {
            return rig.pool->submit(handler, s, std::move(r));
        });
        REQUIRE(rig.conn->send(
            "GET /proto HTTP/1.1\r\nHost: h\r\nUpgrade: websocket\r\n"
            "Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
            "Sec-WebSocket-Version: 13\r\nSec-WebSocket-Protocol: mqtt, chat\r\n\r\n"));
        REQUIRE(rig.loop.run_until([&] { return rig.pool->pool().queued() == 1; }));
        REQUIRE(rig.pool->pool().run_next());
        REQUIRE(rig.ServerRig::read_until(*rig.conn, "\r\n\r\n"));
        CHECK(rig.conn->in.starts_with("HTTP/1.1 101 "));
        const bool echoed =
            rig.conn->in.find("Sec-WebSocket-Protocol: chat\r\n") != std::string::npos;
        CHECK(echoed == (std::string(choose) == "chat"));
        CHECK(rig.conn->in.find("Sec-WebSocket-Protocol: other") == std::string::npos);
    }
}

TEST_CASE(
    "ws: permessage-deflate: negotiated in the 101, events compressed, a client's compressed "
    "message inflated within --ws-max-message (a bomb closes 1009, bad UTF-8 1007)",
    "[ws]") {
    WsRig rig(ws_config());
    std::string head = rig.open(*rig.conn, "channel=c", false,
                                "Sec-WebSocket-Extensions: permessage-deflate; "
                                "client_max_window_bits\r\n");
    CHECK(head.find("Sec-WebSocket-Extensions: permessage-deflate; "
                    "server_no_context_takeover\r\n") != std::string::npos);
    REQUIRE(rig.bus.publish("c", std::string(500, 'q')).ok());
    auto f = rig.frames(*rig.conn, 1);
    REQUIRE(f.size() == 1);
    CHECK(uint8_t(rig.conn->in[0]) == (0x80 | 0x40 | 0x1));
    http::ws::Inflater in;
    std::string plain;
    REQUIRE(in.inflate(f[0].payload, 10000, plain) == http::ws::Inflater::Result::ok);
    CHECK(plain == R"({"id":"1","data":")" + std::string(500, 'q') + "\"}");
    // A compressed ping is a protocol error; a compressed text that inflates
    // past --ws-max-message (1000) is 1009.
    rig.conn->in.clear();
    REQUIRE(rig.conn->send(frame(0x1, http::ws::deflate_message(std::string(5000, 'a')), true, 4)));
    CHECK(close_code(rig.closed(*rig.conn)) == 1009);
    auto other = rig.connect();
    rig.open(*other, "channel=c", false, "Sec-WebSocket-Extensions: permessage-deflate\r\n");
    REQUIRE(other->send(frame(0x1, http::ws::deflate_message("\xc3("), true, 4)));
    CHECK(close_code(rig.closed(*other)) == 1007);
    // Without the offer, RSV1 stays a protocol error.
    auto plain_client = rig.connect();
    rig.open(*plain_client);
    REQUIRE(plain_client->send(frame(0x1, http::ws::deflate_message("hi"), true, 4)));
    CHECK(close_code(rig.closed(*plain_client)) == 1002);
}

TEST_CASE(
    "ws: a native handler (/native/ws-echo) runs on the mojo pool for each batch of events "
    "only, and its connection hears its channel",
    "[ws]") {
    auto cfg = ws_config();
    cfg.ws.over_http = {"/native/ws-echo"};  // what the binary adds for the mount's ws_paths
    WsRig rig(cfg);
    rig.path = "/native/ws-echo";
    std::string head = rig.open(*rig.conn, "channel=c");  // OPEN: one job, run
    CHECK(head.find("Sec-WebSocket-Extensions") == std::string::npos);
    CHECK(rig.pool->pool().queued() == 0);  // no thread is kept for the connection
    CHECK(rig.server->subscribed(rig.slot));
    REQUIRE(rig.bus.publish("c", "ev").ok());
    auto f = rig.frames(*rig.conn, 1);
    REQUIRE(f.size() == 1);
    CHECK(f[0].payload == R"({"id":"1","data":"ev"})");
    rig.conn->in.clear();
    REQUIRE(rig.conn->send(frame(0x1, "hi") + frame(0x2, std::string("\0\1", 2))));
    // One job a batch: the two messages come as one or two.
    REQUIRE(rig.step_until([&] {
        if (rig.pool->pool().queued() == 1) REQUIRE(rig.pool->pool().run_next());
        rig.conn->pump();
        return parse(rig.conn->in).size() >= 2;
    }));
    f = rig.frames(*rig.conn, 2);
    REQUIRE(f.size() == 2);
    CHECK((f[0].op == 0x1 && f[0].payload == "echo: hi"));
    CHECK((f[1].op == 0x2 && f[1].payload == std::string("\0\1", 2)));
    CHECK(rig.pool->pool().queued() == 0);
}

TEST_CASE(
    "ws: /live-ws subscribes a good grant's channels (replaying from ?lastEventID=) and refuses "
    "a missing, forged or expired grant 403 before any 101",
    "[ws][grant]") {
    WsRig rig(ws_config());
    std::string err;
    auto keys = grant::KeyRing::from_text("k1 " + std::string(64, 'a') + "\n", err);
    REQUIRE(keys);
    grant::SharedKeyRing ring(*keys);
    mojo::HandlerFor<mojo::BuiltinMount> granted{mojo::MojoEnv{&ring}};
    rig.server->add_mount("/g", [&](SlotRef s, http::Request&& r) {
        return rig.pool->submit(granted, s, std::move(r));
    });
    rig.path = "/g/live-ws";
    const auto now = static_cast<int64_t>(std::time(nullptr));
    const grant::Key& key = *keys->find("k1");
    const std::string good = grant::sign(key, {"doc_1", "doc_2"}, now + 60);
    for (int i = 1; i <= 3; ++i) REQUIRE(rig.bus.publish("doc_1", "e" + std::to_string(i)).ok());
    REQUIRE(rig.bus.publish("other", "not granted").ok());

    SECTION("a good grant: its channels' events, replayed after the cursor, then live") {
        rig.open(*rig.conn, "grant=" + good + "&lastEventID=2&channel=other");
        CHECK(rig.server->subscribed(rig.slot));
        REQUIRE(rig.bus.publish("other", "still not granted").ok());
        REQUIRE(rig.bus.publish("doc_2", "two").ok());
        auto f = rig.frames(*rig.conn, 2);
        REQUIRE(f.size() == 2);
        CHECK(f[0].payload == R"({"id":"3","data":"e3"})");
        CHECK(f[1].payload == R"({"id":"6","data":"two"})");
    }
    SECTION("a bad grant is answered 403 with the reason, and nothing is subscribed") {
        std::string forged = good;
        const size_t at = forged.find('.') + 5;  // a whole sextet of the MAC: still canonical
        forged[at] = forged[at] == 'A' ? 'B' : 'A';
        const std::string other_key =
            grant::sign(grant::Key{"k1", std::string(32, 'b')}, {"doc_1"}, now + 60);
        for (const auto& [query, reason] : std::vector<std::pair<std::string, std::string>>{
                 {"channel=doc_1", "missing grant"},
                 {"grant=" + forged + "&channel=doc_1", "bad grant signature"},
                 {"grant=" + other_key, "bad grant signature"},
                 {"grant=" + grant::sign(key, {"doc_1"}, now - 1), "grant expired"},
                 {"grant=" + good.substr(0, 20), "malformed grant"}}) {
            INFO(query);
            auto c = rig.connect();
            REQUIRE(c->send("GET /g/live-ws?" + query +
                            " HTTP/1.1\r\nHost: h\r\nUpgrade: websocket\r\n"
                            "Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
                            "Sec-WebSocket-Version: 13\r\n\r\n"));
            REQUIRE(rig.loop.run_until([&] { return rig.pool->pool().queued() == 1; }));
            REQUIRE(rig.pool->pool().run_next());
            REQUIRE(rig.ServerRig::read_until(*c, reason));
            CHECK(c->in.starts_with("HTTP/1.1 403 "));
            CHECK(c->in.find("Sec-WebSocket-Accept") == std::string::npos);
            CHECK_FALSE(rig.server->subscribed(c->slot));
        }
    }
}

TEST_CASE(
    "ws: a WebSocket keeps a frame reader only while something it sent is half read, and a "
    "message split across any reads arrives whole",
    "[ws]") {
    auto cfg = ws_config();
    cfg.ws.over_http = {"/native/ws-echo"};
    WsRig rig(cfg);
    rig.path = "/native/ws-echo";
    rig.open(*rig.conn, "channel=c");
    const auto settle = [&] {
        for (int k = 0; k < 5; ++k) rig.loop.run_once();
    };
    settle();
    CHECK(rig.server->ws_readers() == 0);  // a subscriber that sends nothing has none

    // A ping's header, then the rest: the reader keeps the half-read frame.
    const std::string ping = frame(0x9, "hb");
    REQUIRE(rig.conn->send(ping.substr(0, 3)));
    settle();
    CHECK(rig.server->ws_readers() == 1);
    REQUIRE(rig.conn->send(ping.substr(3)));
    auto f = rig.frames(*rig.conn, 1);
    REQUIRE(f.size() == 1);
    CHECK(f[0].op == 0xA);
    CHECK(rig.server->ws_readers() == 0);
    rig.conn->in.clear();

    // A fragmented message, a ping between its fragments, each byte its own
    // read: kept to its last fragment, then echoed whole.
    const std::string msg =
        frame(0x1, "he", false) + frame(0x9, "p") + frame(0x0, "ll", false) + frame(0x0, "o");
    const size_t first_end = frame(0x1, "he", false).size();
    for (size_t i = 0; i < msg.size(); ++i) {
        REQUIRE(rig.conn->send(msg.substr(i, 1)));
        settle();
        if (i + 1 == first_end) CHECK(rig.server->ws_readers() == 1);  // inside the message
    }
    REQUIRE(rig.step_until([&] {
        if (rig.pool->pool().queued() == 1) REQUIRE(rig.pool->pool().run_next());
        rig.conn->pump();
        return parse(rig.conn->in).size() >= 2;
    }));
    f = parse(rig.conn->in);
    REQUIRE(f.size() == 2);
    CHECK((f[0].op == 0xA && f[0].payload == "p"));
    CHECK((f[1].op == 0x1 && f[1].payload == "echo: hello"));
    CHECK(rig.server->ws_readers() == 0);
    CHECK(rig.server->alive(rig.slot));
}
