// The hold on the loop, step by step: a manual mojo pool, the real Server on a
// real Loop, a client on a socketpair. Deterministic forms of what the
// property test explores at random.
#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <fstream>

#include "server/access_log.hpp"
#include "server/test_hold_rig.hpp"

using namespace m0;

using Rig = testing::HoldRig;
using testing::TempAccessLog;

TEST_CASE("hold loop: ids at or below Last-Event-ID are muted, later ones delivered in order",
          "[hold][loop]") {
    Rig rig;
    REQUIRE(rig.bus.publish("c", "one").id == 1);  // the counter stands at 1
    rig.hold("channel=c", "3");
    for (int i = 2; i <= 5; ++i)
        REQUIRE(rig.bus.publish("c", "e" + std::to_string(i)).id == uint64_t(i));
    std::string got;
    rig.read_until("id: 5\n", got);
    CHECK(got.find("id: 1\n") == std::string::npos);
    CHECK(got.find("id: 2\n") == std::string::npos);
    CHECK(got.find("id: 3\n") == std::string::npos);  // equal to the cursor: muted
    size_t four = got.find("id: 4\ndata: e4\n\n");
    size_t five = got.find("id: 5\ndata: e5\n\n");
    REQUIRE(four != std::string::npos);
    CHECK(five > four);
    CHECK(rig.metrics.events_muted.load() == 2);
}

TEST_CASE(
    "hold loop: --hold-coalesce: events right after a flush wait for the window and leave "
    "together; after a quiet spell, or with 0, at the turn's end",
    "[hold][loop][coalesce]") {
    auto arrived_within = [](Rig& rig, const std::string& want, std::chrono::milliseconds t) {
        return rig.step_until(
            [&] {
                rig.conn->pump();
                return rig.conn->in.find(want) != std::string::npos;
            },
            t);
    };
    SECTION("a window of 0.5 s") {
        server::ServerConfig cfg;
        cfg.hold_coalesce = 0.5;
        Rig rig(cfg);
        rig.hold("channel=c");
        REQUIRE(rig.bus.publish("c", "one").ok());
        // Nothing was flushed before: the first event goes at its turn's end.
        CHECK(arrived_within(rig, "id: 1\n", std::chrono::milliseconds(400)));
        REQUIRE(rig.bus.publish("c", "two").ok());
        REQUIRE(rig.bus.publish("c", "three").ok());
        // Within the window after that flush: held back.
        CHECK_FALSE(arrived_within(rig, "id: 2\n", std::chrono::milliseconds(50)));
        REQUIRE(rig.bus.publish("c", "four").ok());
        CHECK(arrived_within(rig, "id: 2\n", std::chrono::milliseconds(3000)));
        // ...and then every event staged in the window is there at once: one sendmsg.
        CHECK(rig.conn->in.find("id: 4\ndata: four\n\n") != std::string::npos);
    }
    SECTION("0: every turn flushes") {
        Rig rig;
        rig.hold("channel=c");
        REQUIRE(rig.bus.publish("c", "one").ok());
        CHECK(arrived_within(rig, "id: 1\n", std::chrono::milliseconds(400)));
        REQUIRE(rig.bus.publish("c", "two").ok());
        CHECK(arrived_within(rig, "id: 2\n", std::chrono::milliseconds(400)));
    }
}

TEST_CASE("hold loop: the head goes out before any event, even when events were queued first",
          "[hold][loop]") {
    Rig rig;
    rig.hold("channel=c");
    // Frame and completion are queued; an event is published before the loop
    // has looked at either.
    REQUIRE(rig.bus.publish("c", "early").ok());
    rig.server->on_completions_ready();  // the completion first: it drains the bus itself
    std::string got;
    rig.read_until("data: early", got);
    size_t head_end = got.find("\r\n\r\n");
    REQUIRE(head_end != std::string::npos);
    CHECK(got.rfind("HTTP/1.1 200 OK\r\n", 0) == 0);
    CHECK(got.find(": mojo hold\n\n") == head_end + 4);
    size_t event = got.find("id: 1\ndata: early");
    REQUIRE(event != std::string::npos);
    CHECK(event > head_end);
    CHECK(rig.server->holding(rig.slot));
    // A hold parses nothing more: its parser, most of a connection's memory, is gone.
    CHECK_FALSE(rig.server->parsing(rig.slot));
}

TEST_CASE(
    "hold loop: a hold whose head is out goes lean (no bufferevent) and still gets its events, "
    "in order and whole, across partial writes",
    "[hold][loop]") {
    server::ServerConfig cfg;
    cfg.hold_buffer_limit = 64 * 1024 * 1024;  // a backlog, not a slow reader
    Rig rig(cfg);
    rig.hold("channel=c");
    std::string got;
    rig.read_until(": mojo hold", got);
    REQUIRE(rig.loop.run_until([&] { return rig.server->lean(rig.slot); }));
    // Events larger than the socket takes at once: the rest waits in the
    // lean output and goes out as the client reads, from where it stopped.
    std::string payload;
    for (int i = 0; payload.size() < 64 * 1024; ++i) payload += std::to_string(i) + ",";
    uint64_t last = 0;
    for (int i = 0; i < 40; ++i) {
        last = rig.bus.publish("c", payload).id;
        rig.server->on_bus_ready();
        rig.loop.run_once();
    }
    CHECK(rig.server->unsent(rig.slot) > 0);  // the client has not read yet
    rig.read_until("id: " + std::to_string(last) + "\n", got);
    const std::string body = got.substr(got.find(": mojo hold\n\n") + 13);
    std::string want;
    for (uint64_t id = last - 39; id <= last; ++id)
        want += "id: " + std::to_string(id) + "\ndata: " + payload + "\n\n";
    CHECK(body.substr(0, want.size()) == want);
    REQUIRE(rig.loop.run_until([&] { return rig.server->unsent(rig.slot) == 0; }));
    CHECK(rig.server->lean(rig.slot));
}

TEST_CASE("hold loop: with --cors-origin the hold head names an allowed Origin, and no other",
          "[hold][loop][cors]") {
    std::string err;
    server::ServerConfig cfg;
    auto cors = http::CorsPolicy::make({"http://127.0.0.2:8080"}, true, err);
    REQUIRE(cors);
    cfg.cors = *cors;
    Rig rig(cfg);
    std::string origin;
    bool allowed = false;
    SECTION("an allowed origin is echoed, with credentials") {
        origin = "Origin: http://127.0.0.2:8080\r\n";
        allowed = true;
    }
    SECTION("another origin gets no Access-Control field") {
        origin = "Origin: http://127.0.0.3:8080\r\n";
    }
    SECTION("no Origin, none either") {}
    rig.send("GET /native/hold?channel=c HTTP/1.1\r\nHost: h\r\n" + origin + "\r\n");
    REQUIRE(rig.loop.run_until([&] { return rig.pool->pool().queued() == 1; }));
    REQUIRE(rig.pool->pool().run_next());
    std::string got;
    rig.read_until(": mojo hold\n\n", got);
    std::string head = got.substr(0, got.find("\r\n\r\n") + 2);
    CHECK(head.find("Vary: Origin\r\n") != std::string::npos);
    if (allowed) {
        CHECK(head.find("Access-Control-Allow-Origin: http://127.0.0.2:8080\r\n") !=
              std::string::npos);
        CHECK(head.find("Access-Control-Allow-Credentials: true\r\n") != std::string::npos);
    } else {
        CHECK(head.find("Access-Control-") == std::string::npos);
    }
}

TEST_CASE("hold loop: a client that leaves is unsubscribed and its slot released", "[hold][loop]") {
    Rig rig;
    rig.hold("channel=c,d");
    std::string got;
    rig.read_until(": mojo hold", got);
    REQUIRE(rig.server->subscribed(rig.slot));
    ::close(rig.client);
    rig.client = -1;
    REQUIRE(rig.loop.run_until([&] { return !rig.server->alive(rig.slot); }));
    CHECK_FALSE(rig.server->subscribed(rig.slot));
    CHECK(rig.server->subscriptions().subscribers("c").empty());
    CHECK(rig.metrics.holds_open.load() == 0);
    uint64_t delivered = rig.metrics.events_delivered.load();
    REQUIRE(rig.bus.publish("c", "after").ok());
    rig.server->on_bus_ready();
    CHECK(rig.metrics.events_delivered.load() == delivered);
}

TEST_CASE("hold loop: a frame for a departed slot is dropped", "[hold][loop]") {
    Rig rig;
    rig.send("GET /native/hold?channel=c HTTP/1.1\r\nHost: h\r\n\r\n");
    REQUIRE(rig.loop.run_until([&] { return rig.pool->pool().queued() == 1; }));
    // The client leaves while its handler runs (a job not yet taken would be
    // skipped): the slot is released before the frame arrives.
    rig.on_point = [&](hold::Point p, SlotRef) {
        if (p != hold::Point::handler_start) return;
        ::close(rig.client);
        rig.client = -1;
        REQUIRE(rig.loop.run_until([&] { return !rig.server->alive(rig.slot); }));
    };
    REQUIRE(rig.pool->pool().run_next());
    CHECK(rig.metrics.frames_dropped.load() == 0);
    rig.server->on_bus_ready();
    rig.server->on_completions_ready();
    CHECK(rig.metrics.frames_dropped.load() == 1);
    CHECK_FALSE(rig.server->subscribed(rig.slot));
    CHECK(rig.metrics.holds_open.load() == 0);
}

TEST_CASE("hold loop: a slow reader over --hold-buffer-limit is closed and unsubscribed",
          "[hold][loop][limits]") {
    server::ServerConfig cfg;
    cfg.hold_buffer_limit = 64 * 1024;
    cfg.hold_drain_timeout = 0.2;
    Rig rig(cfg);
    rig.hold("channel=c");
    std::string got;
    rig.read_until(": mojo hold", got);
    // The client stops reading; events pile up in the socket, then in the
    // server's output buffer, until the limit closes the hold.
    const std::string payload(8 * 1024, 'x');
    for (int i = 0; i < 400 && rig.server->subscribed(rig.slot); ++i) {
        REQUIRE(rig.bus.publish("c", payload).ok());
        rig.server->on_bus_ready();
        rig.loop.run_once();
    }
    // Unsubscribed at once; the connection ends once its retry hint drains,
    // or after --hold-drain-timeout if it never does.
    CHECK_FALSE(rig.server->subscribed(rig.slot));
    CHECK(rig.metrics.slow_readers_closed.load() == 1);
    REQUIRE(rig.loop.run_until([&] { return !rig.server->alive(rig.slot); },
                               std::chrono::milliseconds(3000)));
    CHECK(rig.metrics.holds_open.load() == 0);
}

TEST_CASE(
    "hold loop: a slow reader gets a retry hint and is replayed what it missed when it "
    "comes back",
    "[hold][loop][limits][history]") {
    server::ServerConfig cfg;
    cfg.hold_buffer_limit = 64 * 1024;
    cfg.hold_drain_timeout = 0.2;
    Rig rig(cfg);
    rig.hold("channel=c");
    std::string got;
    rig.read_until(": mojo hold", got);
    const std::string payload(8 * 1024, 'x');
    uint64_t last = 0;
    for (int i = 0; i < 400 && rig.server->subscribed(rig.slot); ++i) {
        last = rig.bus.publish("c", payload).id;
        rig.server->on_bus_ready();
        rig.loop.run_once();
    }
    REQUIRE(rig.metrics.slow_readers_closed.load() == 1);
    // Published after the hold was dropped: these never reach it.
    for (int i = 0; i < 3; ++i) last = rig.bus.publish("c", "later").id;
    rig.server->on_bus_ready();
    // The client reads what reached it: whole events, then the hint.
    REQUIRE(rig.wait_eof(*rig.conn, std::chrono::milliseconds(5000)));
    const std::string& in = rig.conn->in;
    REQUIRE(in.ends_with("retry: 1000\n\n"));
    size_t at = in.rfind("id: ");
    REQUIRE(at != std::string::npos);
    uint64_t seen = std::stoull(in.substr(at + 4));
    REQUIRE(seen < last);
    // It comes back with the last id it saw: every later event, from history.
    auto again = rig.connect();
    REQUIRE(again->send("GET /native/hold?channel=c HTTP/1.1\r\nHost: h\r\nLast-Event-ID: " +
                        std::to_string(seen) + "\r\n\r\n"));
    REQUIRE(rig.loop.run_until([&] { return rig.pool->pool().queued() == 1; }));
    REQUIRE(rig.pool->pool().run_next());
    REQUIRE(rig.read_until(*again, "id: " + std::to_string(last) + "\n"));
    for (uint64_t id = seen + 1; id <= last; ++id)
        CHECK(again->in.find("id: " + std::to_string(id) + "\n") != std::string::npos);
    CHECK(again->in.find("id: " + std::to_string(seen) + "\n") == std::string::npos);
    CHECK(again->in.find("m0-reset") == std::string::npos);
}

TEST_CASE("hold loop: heartbeats are written while a hold is idle", "[hold][loop]") {
    server::ServerConfig cfg;
    cfg.heartbeat = 0.05;
    Rig rig(cfg);
    rig.hold("channel=c");
    std::string got;
    rig.read_until(": mojo hold\n\n:\n\n:\n\n", got);
    CHECK(got.find(": mojo hold\n\n:\n\n:\n\n") != std::string::npos);
}

TEST_CASE("server: output that does not drain within --write-timeout is cut",
          "[http][loop][limits]") {
    server::ServerConfig cfg;
    cfg.write_timeout = 0.2;
    cfg.hold_buffer_limit = 64 * 1024 * 1024;  // the write timeout acts first
    Rig rig(cfg);
    rig.hold("channel=c");
    std::string got;
    rig.read_until(": mojo hold", got);
    const std::string payload(255 * 1024, 'x');  // under the default --max-event-size
    for (int i = 0; i < 16; ++i) REQUIRE(rig.bus.publish("c", payload).ok());
    rig.server->on_bus_ready();
    // The client reads nothing: the socket fills, writing stalls, the timeout fires.
    CHECK(rig.loop.run_until([&] { return !rig.server->alive(rig.slot); },
                             std::chrono::milliseconds(3000)));
    CHECK(rig.metrics.slow_readers_closed.load() == 0);
}

TEST_CASE("hold loop: closing a channel sends each hold a retry hint, then EOF", "[hold][loop]") {
    Rig rig;
    rig.hold("channel=c");
    std::string got;
    rig.read_until(": mojo hold", got);
    CHECK(rig.server->close_channel("other") == 0);
    CHECK(rig.server->close_channel("c") == 1);
    rig.read_until("retry: ", got);
    // The server stops sending (EOF for the client), then lingers until the
    // client closes its end.
    REQUIRE(rig.wait_eof(*rig.conn));
    got = rig.conn->in;
    CHECK_FALSE(rig.server->subscribed(rig.slot));
    ::close(rig.client);
    rig.client = -1;
    REQUIRE(rig.loop.run_until([&] { return !rig.server->alive(rig.slot); }));
    size_t at = got.find("retry: ");
    REQUIRE(at != std::string::npos);
    uint64_t ms = std::stoull(got.substr(at + 7));
    CHECK(ms >= 1000);
    CHECK(ms <= 6000);
    CHECK(rig.metrics.holds_open.load() == 0);
}

TEST_CASE("hold loop: a HEAD answered with a hold gets the head alone, no body and no hold",
          "[hold][loop]") {
    Rig rig;
    rig.send("HEAD /native/hold?channel=c HTTP/1.1\r\nHost: h\r\n\r\n");
    REQUIRE(rig.loop.run_until([&] { return rig.pool->pool().queued() == 1; }));
    REQUIRE(rig.pool->pool().run_next());
    // RFC 9110 §9.3.2: the head, then the end of the connection.
    REQUIRE(rig.wait_eof(*rig.conn));
    std::string got = rig.conn->in;
    CHECK(got.rfind("HTTP/1.1 200 OK\r\n", 0) == 0);
    CHECK(got.find("text/event-stream") != std::string::npos);
    REQUIRE(got.size() >= 4);
    CHECK(got.substr(got.size() - 4) == "\r\n\r\n");  // nothing after the head
    CHECK_FALSE(rig.server->subscribed(rig.slot));
    CHECK_FALSE(rig.server->holding(rig.slot));
    CHECK(rig.metrics.holds_open.load() == 0);
    CHECK(rig.metrics.holds_total.load() == 0);
}

TEST_CASE("hold loop: events larger together than the limit do not close a reader that reads",
          "[hold][loop][limits]") {
    server::ServerConfig cfg;
    cfg.hold_buffer_limit = 64 * 1024;
    Rig rig(cfg);
    rig.hold("channel=c");
    std::string got;
    rig.read_until(": mojo hold", got);
    // Two events of 60 KiB in one loop turn put the backlog over the limit for
    // a moment; the reader takes them at once, so it is not slow.
    const std::string payload(60 * 1024, 'x');
    uint64_t last = 0;
    for (int i = 0; i < 10; ++i) {
        REQUIRE(rig.bus.publish("c", payload).ok());
        last = rig.bus.publish("c", payload).id;
        REQUIRE(last != 0);
        rig.server->on_bus_ready();
        REQUIRE(rig.server->alive(rig.slot));
        rig.read_until("id: " + std::to_string(last) + "\n", got);
        REQUIRE(rig.loop.run_until([&] {
            rig.conn->pump();
            return rig.server->unsent(rig.slot) == 0;
        }));
    }
    CHECK(rig.server->alive(rig.slot));
    CHECK(rig.metrics.slow_readers_closed.load() == 0);
    CHECK(rig.metrics.events_delivered.load() == 20);
}

TEST_CASE("hold loop: a reader whose backlog stays over the limit past the drain timeout is closed",
          "[hold][loop][limits]") {
    server::ServerConfig cfg;
    cfg.hold_buffer_limit = 64 * 1024;
    cfg.hold_drain_timeout = 0.3;
    cfg.heartbeat = 0.05;
    Rig rig(cfg);
    rig.hold("channel=c");
    std::string got;
    rig.read_until(": mojo hold", got);
    // The client stops reading: publish until the backlog is over the limit
    // (but under twice it), then nothing more.
    const std::string payload(8 * 1024, 'x');
    for (int i = 0; i < 400 && rig.server->unsent(rig.slot) <= cfg.hold_buffer_limit; ++i) {
        REQUIRE(rig.bus.publish("c", payload).ok());
        rig.server->on_bus_ready();
        rig.loop.run_once();
    }
    REQUIRE(rig.server->unsent(rig.slot) > cfg.hold_buffer_limit);
    CHECK(rig.server->alive(rig.slot));  // over the limit for a moment is not slowness
    CHECK(rig.metrics.slow_readers_closed.load() == 0);
    // The backlog stays: the heartbeat's check closes the hold after the timeout.
    REQUIRE(rig.loop.run_until([&] { return !rig.server->alive(rig.slot); },
                               std::chrono::milliseconds(3000)));
    CHECK(rig.metrics.slow_readers_closed.load() == 1);
    CHECK_FALSE(rig.server->subscribed(rig.slot));
    CHECK(rig.metrics.holds_open.load() == 0);
}

// ---- history and replay ------------------------------------------------------------

TEST_CASE(
    "hold loop: a cursor is replayed what history keeps after it, then goes live, no "
    "duplicate at the boundary",
    "[hold][loop][history]") {
    Rig rig;
    for (int i = 1; i <= 3; ++i) REQUIRE(rig.bus.publish("c", "e" + std::to_string(i)).ok());
    REQUIRE(rig.bus.publish("d", "elsewhere").ok());  // id 4, another channel
    rig.hold("channel=c,d", "1");
    REQUIRE(rig.bus.publish("c", "e5").ok());
    std::string got;
    rig.read_until("id: 5\n", got);
    size_t body = got.find(": mojo hold\n\n");
    REQUIRE(body != std::string::npos);
    CHECK(got.substr(body + 13) ==
          "id: 2\ndata: e2\n\nid: 3\ndata: e3\n\nid: 4\ndata: elsewhere\n\nid: 5\ndata: e5\n\n");
    CHECK(rig.metrics.events_replayed.load() == 3);
    CHECK(rig.metrics.resets_sent.load() == 0);
}

TEST_CASE(
    "hold loop: a cursor older than the history says m0-reset, without an id, then "
    "replays what is kept",
    "[hold][loop][history]") {
    Rig rig({}, bus::BusOptions{.history = {.per_channel = 2}});
    for (int i = 1; i <= 5; ++i) REQUIRE(rig.bus.publish("c", "e" + std::to_string(i)).ok());
    rig.hold("channel=c", "1");
    std::string got;
    rig.read_until("id: 5\n", got);
    REQUIRE(rig.bus.publish("c", "e6").ok());
    rig.read_until("id: 6\n", got);
    size_t body = got.find(": mojo hold\n\n");
    REQUIRE(body != std::string::npos);
    CHECK(got.substr(body + 13) ==
          "event: m0-reset\ndata: {\"oldest\": 4}\n\n"
          "id: 4\ndata: e4\n\nid: 5\ndata: e5\n\nid: 6\ndata: e6\n\n");
    CHECK(rig.metrics.resets_sent.load() == 1);
}

TEST_CASE("hold loop: an event published while the handler ran is replayed (the snapshot gap)",
          "[hold][loop][history]") {
    Rig rig;
    rig.send("GET /native/hold?channel=c HTTP/1.1\r\nHost: h\r\n\r\n");
    REQUIRE(rig.loop.run_until([&] { return rig.pool->pool().queued() == 1; }));
    uint64_t during = 0;
    rig.on_point = [&](hold::Point p, SlotRef) {
        // After the position was read, before the frame: the handler renders.
        if (p == hold::Point::handler_start) during = rig.bus.publish("c", "during").id;
    };
    REQUIRE(rig.pool->pool().run_next());
    REQUIRE(during != 0);
    std::string got;
    rig.read_until("data: during", got);
    CHECK(got.find("id: " + std::to_string(during) + "\ndata: during\n\n") != std::string::npos);
    CHECK(rig.metrics.events_replayed.load() == 1);
}

TEST_CASE("hold loop: a cursor in the lastEventID query parameter counts; the header wins",
          "[hold][loop][history]") {
    Rig rig;
    for (int i = 1; i <= 3; ++i) REQUIRE(rig.bus.publish("c", "e" + std::to_string(i)).ok());
    SECTION("the query parameter") {
        rig.hold("channel=c&lastEventID=2");
        std::string got;
        rig.read_until("id: 3\n", got);
        CHECK(got.find("id: 2\n") == std::string::npos);
    }
    SECTION("the header over the query parameter") {
        rig.hold("channel=c&lastEventID=1", "2");
        std::string got;
        rig.read_until("id: 3\n", got);
        CHECK(got.find("id: 1\n") == std::string::npos);
        CHECK(got.find("id: 2\n") == std::string::npos);
    }
}

namespace {

bool has(const std::string& line, const std::string& part) {
    return line.find(part) != std::string::npos;
}

}  // namespace

TEST_CASE("access log: a hold's line is written when it ends: its head, duration and events",
          "[hold][loop][access]") {
    TempAccessLog log;
    Rig rig;
    rig.server->set_access_log(&log.log);
    rig.hold("channel=c");
    std::string got;
    rig.read_until(": mojo hold", got);
    CHECK(log.lines().empty());  // held: not over yet
    for (int i = 0; i < 3; ++i) REQUIRE(rig.bus.publish("c", "e" + std::to_string(i)).ok());
    rig.server->on_bus_ready();
    rig.read_until("data: e2", got);
    ::close(rig.client);
    rig.client = -1;
    REQUIRE(rig.loop.run_until([&] { return !rig.server->alive(rig.slot); }));
    auto lines = log.lines();
    REQUIRE(lines.size() == 1);
    CHECK(lines[0].starts_with("127.0.0.1 - - ["));
    CHECK(has(lines[0], "] \"GET /native/hold?channel=c HTTP/1.1\" 200 "));
    CHECK(has(lines[0], " hold="));
    CHECK(lines[0].ends_with(" events=3"));
    // The bytes are the head and the three events the client read.
    size_t at = lines[0].find("\" 200 ") + 6;
    CHECK(std::stoul(lines[0].substr(at)) == got.size());
}

TEST_CASE("access log: whole answers, a redacted grant, and a request that never parsed",
          "[server][access]") {
    TempAccessLog log;
    testing::ServerRig rig;
    rig.server->set_access_log(&log.log);
    rig.server->add_mount("/", [&rig](SlotRef s, http::Request&&) {
        http::Response r;
        r.status = 201;
        r.body = "made";
        rig.post(s, std::move(r));
        return Admission::queued;
    });
    auto c = rig.connect();
    REQUIRE(c);
    REQUIRE(
        c->send("GET /a?grant=SECRET.TOKEN&page=2 HTTP/1.1\r\nHost: h\r\n"
                "Referer: http://r/\r\nUser-Agent: t/1\r\n\r\n"));
    REQUIRE(rig.read_until(*c, "made"));
    rig.server->on_completions_ready();
    REQUIRE(rig.step_until([&] { return log.lines().size() == 1; }));
    std::string line = log.lines()[0];
    CHECK(has(line, "\"GET /a?grant=[redacted]&page=2 HTTP/1.1\" 201 "));
    CHECK_FALSE(has(line, "SECRET"));
    CHECK(has(line, " \"http://r/\" \"t/1\" rt="));
    CHECK_FALSE(has(line, "hold="));
    size_t at = line.find("\" 201 ") + 6;
    CHECK(std::stoul(line.substr(at)) == c->in.size());

    REQUIRE(c->send("NOT A REQUEST\r\n\r\n"));
    REQUIRE(rig.wait_eof(*c));
    REQUIRE(rig.step_until([&] { return log.lines().size() == 2; }));
    CHECK(has(log.lines()[1], "] \"-\" 400 "));
}

TEST_CASE(
    "hold loop: events flushed in the turn their hold's head went into its output: the head is "
    "written at once and the hold goes lean, so what the socket does not take waits as shared "
    "references, not in the bufferevent",
    "[hold][loop][fanout]") {
    server::ServerConfig cfg;
    cfg.hold_buffer_limit = 64 * 1024 * 1024;  // a backlog, not a slow reader
    Rig rig(cfg);
    rig.hold("channel=c");
    // Published before the loop has looked at the frame or the completion:
    // they are flushed in the turn the head goes into the output, more than
    // the socket takes while the client does not read.
    const std::string payload(16 * 1024, 'x');
    std::vector<uint64_t> ids;
    for (int i = 0; i < 64; ++i) ids.push_back(rig.bus.publish("c", payload).id);
    bool flushed = false, lean_at_flush = false;
    rig.server->on_flush_slice = [&](size_t) {
        flushed = true;
        lean_at_flush = rig.server->lean(rig.slot);
    };
    rig.server->on_completions_ready();
    REQUIRE(rig.loop.run_until([&] { return flushed; }));
    CHECK(rig.server->unsent(rig.slot) > 0);
    // Lean as the flush ends, though the client has read nothing: the rest
    // waits in the lean output (a reference each, 16 bytes), where behind
    // the head in the bufferevent each would take an evbuffer chain.
    CHECK(lean_at_flush);
    CHECK(rig.server->lean(rig.slot));
    CHECK(server::Server::output_references() > 0);
    std::string got;
    rig.read_until("id: " + std::to_string(ids.back()) + "\ndata: ", got);
    REQUIRE(rig.loop.run_until([&] {
        rig.conn->pump();
        return rig.server->unsent(rig.slot) == 0;
    }));
    got = rig.conn->in;
    const size_t head_end = got.find("\r\n\r\n");
    REQUIRE(head_end != std::string::npos);
    std::string want;
    for (uint64_t id : ids) want += "id: " + std::to_string(id) + "\ndata: " + payload + "\n\n";
    CHECK(got.find(want) != std::string::npos);
    CHECK(got.find(want) > head_end);
    REQUIRE(rig.loop.run_until([&] { return server::Server::output_references() == 0; }));
}

TEST_CASE(
    "hold loop: events for a hold whose head its socket cannot take yet (a pipelined answer "
    "filled it) wait behind the head in the output by reference, let go once written",
    "[hold][loop][fanout]") {
    server::ServerConfig cfg;
    cfg.hold_buffer_limit = 64 * 1024 * 1024;  // a backlog, not a slow reader
    Rig rig(cfg);
    const int small = 4096;
    REQUIRE(::setsockopt(rig.conn->server_fd, SOL_SOCKET, SO_SNDBUF, &small, sizeof small) == 0);
    // An answer larger than the socket takes, not read: the hold asked
    // behind it has its head behind the rest of it in the output.
    // (A whole answer leaves at once for what the socket takes, about 8 KB
    // here; this one is 64 KB.)
    const std::string sent(64 * 1024, 'q');
    rig.send("POST /native/echo HTTP/1.1\r\nHost: h\r\nContent-Length: " +
             std::to_string(sent.size()) + "\r\n\r\n" + sent);
    REQUIRE(rig.loop.run_until([&] { return rig.pool->pool().queued() == 1; }));
    REQUIRE(rig.pool->pool().run_next());
    rig.server->on_completions_ready();
    REQUIRE(rig.loop.run_until([&] { return rig.server->unsent(rig.slot) > 0; }));
    rig.hold("channel=c");
    // Published before the loop has looked at the frame or the completion:
    // flushed in the turn the head goes in, which the socket cannot take.
    const std::string payload(16 * 1024, 'x');
    const uint64_t id = rig.bus.publish("c", payload).id;
    size_t referenced = 0;  // by the outputs, right after the flush
    rig.server->on_flush_slice = [&](size_t) {
        referenced = std::max(referenced, server::Server::output_references());
    };
    rig.server->on_completions_ready();
    REQUIRE(rig.loop.run_until([&] { return referenced > 0; }));
    CHECK_FALSE(rig.server->lean(rig.slot));
    std::string got;
    rig.read_until("id: " + std::to_string(id) + "\ndata: " + payload + "\n\n", got);
    // In order: the echo's answer, the hold's head, the event.
    const size_t echo = got.find("qqqq");
    const size_t head = got.find(": mojo hold\n\n");
    CHECK(echo < head);
    CHECK(head < got.find("id: " + std::to_string(id)));
    REQUIRE(rig.loop.run_until([&] { return server::Server::output_references() == 0; }));
}

TEST_CASE(
    "hold loop: what the sockets do not take is kept by reference, let go once written or "
    "closed",
    "[hold][loop][fanout]") {
    Rig rig;
    // Three holds besides the rig's own connection.
    auto clients = rig.open_holds(3);
    // The clients stop reading: events fill their sockets, then wait in the
    // outputs, which keep references to the shared bytes (no copies).
    const std::string payload(16 * 1024, 'x');
    auto all_waiting = [&] {
        for (auto& c : clients)
            if (rig.server->unsent(c->slot) == 0) return false;
        return true;
    };
    for (int i = 0; i < 200 && !all_waiting(); ++i) {
        REQUIRE(rig.bus.publish("c", payload).ok());
        rig.server->on_bus_ready();
        rig.loop.run_once();
    }
    REQUIRE(all_waiting());
    uint64_t last = rig.bus.publish("c", payload).id;
    rig.server->on_bus_ready();
    rig.loop.run_once();
    CHECK(server::Server::output_references() >= clients.size());

    SECTION("the readers read: every reference is let go") {
        for (auto& c : clients)
            REQUIRE(rig.ServerRig::read_until(*c, "id: " + std::to_string(last)));
        REQUIRE(rig.loop.run_until([&] {
            for (auto& c : clients) c->pump();
            return server::Server::output_references() == 0;
        }));
        for (auto& c : clients) CHECK(rig.server->unsent(c->slot) == 0);
    }
    SECTION("the connections close: every reference is let go") {
        for (auto& c : clients) c->close();
        REQUIRE(rig.loop.run_until([&] {
            for (auto& c : clients)
                if (rig.server->alive(c->slot)) return false;
            return server::Server::output_references() == 0;
        }));
    }
}

TEST_CASE(
    "hold loop: a fan-out is flushed 64 connections at a time, the loop polling its "
    "sockets between the slices",
    "[hold][loop][fanout]") {
    Rig rig;
    constexpr int kHolds = 150;
    auto clients = rig.open_holds(kHolds);
    uint64_t id = rig.bus.publish("c", "fan").id;
    const std::string want = "id: " + std::to_string(id) + "\ndata: fan\n\n";
    auto heard = [&] {
        int n = 0;
        for (auto& c : clients) {
            c->pump();
            n += c->in.find(want) != std::string::npos;
        }
        return n;
    };
    // A request that arrives once the first slice is out is read, and
    // dispatched, before the next slice.
    std::vector<size_t> slices;
    rig.server->on_flush_slice = [&](size_t flushed) {
        slices.push_back(flushed);
        if (flushed == 64) rig.send("GET /probe HTTP/1.1\r\nHost: h\r\n\r\n");
    };
    int heard_at_dispatch = -1;
    rig.server->add_mount("/probe", [&](SlotRef, http::Request&&) {
        heard_at_dispatch = heard();
        return Admission::queued;
    });
    rig.server->on_bus_ready();  // staged on all 150
    REQUIRE(rig.loop.run_until([&] { return heard() == kHolds && heard_at_dispatch >= 0; }));
    CHECK(slices == std::vector<size_t>{64, 128, 150});
    CHECK(heard_at_dispatch == 64);
    rig.server->on_flush_slice = nullptr;
}

TEST_CASE(
    "hold loop: a hold staged again while a flush runs waits for the next flush and the "
    "coalescing window; one not yet sent takes the new event along",
    "[hold][loop][fanout][coalesce]") {
    server::ServerConfig cfg;
    cfg.hold_coalesce = 0.5;
    Rig rig(cfg);
    constexpr int kHolds = 150;
    auto clients = rig.open_holds(kHolds);
    uint64_t one = rig.bus.publish("c", "one").id;
    uint64_t two = 0;
    rig.server->on_flush_slice = [&](size_t flushed) {
        if (flushed != 64 || two) return;
        two = rig.bus.publish("c", "two").id;  // during the flush of "one"
        rig.server->on_bus_ready();
    };
    auto has = [](testing::SocketClient& c, uint64_t id) {
        c.pump();
        return c.in.find("id: " + std::to_string(id) + "\n") != std::string::npos;
    };
    rig.server->on_bus_ready();
    REQUIRE(rig.loop.run_until([&] {
        for (auto& c : clients)
            if (!has(*c, one)) return false;
        return true;
    }));
    REQUIRE(two != 0);
    // The 86 not yet sent when "two" came took it along; the 64 sent wait.
    int with_two = 0;
    for (auto& c : clients) with_two += has(*c, two);
    CHECK(with_two == kHolds - 64);
    for (int i = 0; i < 64; ++i) CHECK_FALSE(has(*clients[size_t(i)], two));
    REQUIRE(rig.loop.run_until(
        [&] {
            for (auto& c : clients)
                if (!has(*c, two)) return false;
            return true;
        },
        std::chrono::milliseconds(3000)));
    rig.server->on_flush_slice = nullptr;
}
