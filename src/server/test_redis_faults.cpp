// The Redis bus's failure paths, on the server: a real Server on a real Loop
// whose RedisBus reaches a real redis-server through the fault proxy
// (test_redis_proxy.hpp), which stalls, delays, cuts or drops the links on
// command. Another bus, straight on the same Redis, publishes as another
// m0serve process would.
#include <catch2/catch.hpp>

#include "bus/redis_bus.hpp"
#include "bus/test_redis_proxy.hpp"
#include "bus/test_redis_server.hpp"
#include "mojo/builtin.hpp"
#include "mojo/mojo_pool.hpp"
#include "server/test_rig.hpp"

using namespace m0;
using namespace m0::testing;

namespace {

// The server on a RedisBus behind the proxy, with a manual mojo pool serving
// the builtin mount at /native. Test thread only (the proxy has its own).
struct FaultRig {
    RedisServer redis;
    RedisFaultProxy proxy{redis.port()};
    Loop loop, other_loop;
    CompletionRing ring;
    Metrics metrics;
    std::unique_ptr<bus::RedisBus> bus;    // through the proxy
    std::unique_ptr<bus::RedisBus> other;  // straight to Redis: another process
    std::unique_ptr<server::Server> server;
    mojo::HandlerFor<mojo::BuiltinMount> handler{mojo::MojoEnv{}};
    std::unique_ptr<mojo::MojoPool> pool;

    explicit FaultRig(server::ServerConfig cfg = {}, size_t capacity = 65536) {
        std::signal(SIGPIPE, SIG_IGN);
        bus::RedisBusOptions o = bus_options(redis);
        std::string err;
        o.url = *bus::parse_redis_url(proxy.url(), err);
        o.capacity = capacity;
        bus = std::make_unique<bus::RedisBus>(loop, o);
        other = std::make_unique<bus::RedisBus>(other_loop, bus_options(redis));
        if (cfg.heartbeat == server::ServerConfig{}.heartbeat) cfg.heartbeat = 3600;
        server = std::make_unique<server::Server>(loop, std::move(cfg), ring, bus.get(), metrics);
        REQUIRE(bus->start(5));
        REQUIRE(other->start(5));
        hold::Handoff h;
        h.ring = &ring;
        h.bus = bus.get();
        h.metrics = &metrics;
        pool = std::make_unique<mojo::MojoPool>(0, h);
        server->add_mount("/native", [this](SlotRef s, http::Request&& r) {
            return pool->submit(handler, s, std::move(r));
        });
    }
    ~FaultRig() {
        pool.reset();
        server.reset();
    }
    std::unique_ptr<SocketClient> connect(bool admin = false) {
        int sv[2];
        REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0);
        auto c = std::make_unique<SocketClient>(sv[1]);
        c->server_fd = sv[0];
        c->slot = server->adopt(sv[0], "127.0.0.1", 1, admin);
        return c;
    }
    bool read_until(SocketClient& c, std::string_view want,
                    std::chrono::milliseconds t = std::chrono::milliseconds(5000)) {
        return loop.run_until(
            [&] {
                c.pump();
                return c.in.find(want) != std::string::npos;
            },
            t);
    }
    // A client held on `channel`, its head read and its start replayed.
    std::unique_ptr<SocketClient> hold(const std::string& channel) {
        auto c = connect();
        REQUIRE(c->send("GET /native/hold?channel=" + channel + " HTTP/1.1\r\nHost: h\r\n\r\n"));
        REQUIRE(loop.run_until([&] { return pool->pool().queued() == 1; }));
        REQUIRE(pool->pool().run_next());
        REQUIRE(read_until(*c, ": mojo hold"));
        // Subscribed and live: an event published now comes.
        const uint64_t id = publish(channel, "first");
        REQUIRE(read_until(*c, "id: " + std::to_string(id) + "\n"));
        return c;
    }
    uint64_t publish(const std::string& channel, const std::string& data) {
        bus::PublishResult r = other->publish(channel, data);
        REQUIRE(r.ok());
        return r.id;
    }
};

std::string admin_publish(const std::string& channel, const std::string& data) {
    const std::string body = "{\"channel\": \"" + channel + "\", \"data\": \"" + data + "\"}";
    return "POST /publish HTTP/1.1\r\nHost: h\r\nContent-Type: application/json\r\n"
           "Content-Length: " +
           std::to_string(body.size()) + "\r\n\r\n" + body;
}

}  // namespace

TEST_CASE(
    "redis faults: after the local queue of events from Redis overflows, holds are replayed "
    "what it dropped, then go on live",
    "[redis][faults]") {
    // Eight frames fit the local queue; the stalled subscriber link then
    // delivers forty events in one read.
    FaultRig rig({}, 8);
    auto c = rig.hold("c");
    const uint64_t before = ids_in(c->in).back();
    rig.proxy.stall(kSubscriberLink);
    std::vector<uint64_t> burst;
    for (int i = 0; i < 40; ++i) burst.push_back(rig.publish("c", "burst " + std::to_string(i)));
    REQUIRE(rig.loop.run_until([&] { return rig.proxy.held_contains("burst 39"); }));
    rig.proxy.release();
    REQUIRE(rig.read_until(*c, "id: " + std::to_string(burst.back()) + "\n"));
    // Every event once, in id order: those the queue took live, the rest
    // replayed from Redis's history by the resync.
    std::vector<uint64_t> want{before};
    want.insert(want.end(), burst.begin(), burst.end());
    CHECK(ids_in(c->in) == want);
    CHECK(rig.metrics.events_replayed.load() > 0);
    // Live again: a later event comes as it is published.
    const uint64_t after = rig.publish("c", "after");
    REQUIRE(rig.read_until(*c, "id: " + std::to_string(after) + "\n"));
    want.push_back(after);
    CHECK(ids_in(c->in) == want);
}

TEST_CASE(
    "redis faults: an admin publish whose Redis never answers ends with 504 past "
    "--request-timeout; the late answer is dropped and the next publish is answered",
    "[redis][faults][admin]") {
    server::ServerConfig cfg;
    cfg.request_timeout = 0.3;
    cfg.admin_open = true;
    FaultRig rig(cfg);
    rig.proxy.stall(kCommandLink);
    auto admin = rig.connect(true);
    const double t0 = monotonic_seconds();
    REQUIRE(admin->send(admin_publish("c", "never answered")));
    REQUIRE(rig.read_until(*admin, "\r\n\r\n", std::chrono::milliseconds(3000)));
    const double waited = monotonic_seconds() - t0;
    CHECK(admin->in.starts_with("HTTP/1.1 504 "));
    CHECK(waited >= 0.3);
    CHECK(waited < 2.5);
    CHECK(rig.metrics.requests_timed_out.load() == 1);
    REQUIRE(rig.loop.run_until([&] {
        admin->pump();
        return admin->eof;
    }));
    // Redis answers at last: nobody waits for it any more.
    const uint64_t dropped = rig.metrics.completions_dropped.load();
    rig.proxy.release();
    REQUIRE(rig.loop.run_until([&] { return rig.metrics.completions_dropped.load() > dropped; }));
    auto again = rig.connect(true);
    REQUIRE(again->send(admin_publish("c", "answered")));
    REQUIRE(rig.read_until(*again, "}\n"));
    CHECK(again->in.starts_with("HTTP/1.1 200 "));
    CHECK(again->in.find("{\"id\": ") != std::string::npos);
}

TEST_CASE(
    "redis faults: a hold whose replay read is on its way when the local queue overflows is "
    "replayed by the resync's read, not left with the older answer",
    "[redis][faults]") {
    FaultRig rig({}, 8);
    // The replay read of the hold's start is sent, and Redis's answer held.
    rig.proxy.stall(kCommandLink);
    auto c = rig.connect();
    REQUIRE(c->send("GET /native/hold?channel=c HTTP/1.1\r\nHost: h\r\n\r\n"));
    REQUIRE(rig.loop.run_until([&] { return rig.pool->pool().queued() == 1; }));
    REQUIRE(rig.pool->pool().run_next());
    REQUIRE(rig.read_until(*c, ": mojo hold"));
    // MULTI ... EXEC: each command QUEUED, then the transaction's array.
    const std::string read_answered = "QUEUED\r\n*";
    REQUIRE(rig.loop.run_until([&] { return rig.proxy.held_count(read_answered) == 1; }));
    // Then events that the subscriber link brings in one burst, past the queue.
    rig.proxy.stall(kSubscriberLink);
    std::vector<uint64_t> burst;
    for (int i = 0; i < 40; ++i) burst.push_back(rig.publish("c", "burst " + std::to_string(i)));
    REQUIRE(rig.loop.run_until([&] { return rig.proxy.held_contains("burst 39"); }));
    rig.proxy.release(kSubscriberLink);
    // The resync (within a second) asks again: a second read, answered too.
    REQUIRE(rig.loop.run_until([&] { return rig.proxy.held_count(read_answered) == 2; }));
    rig.proxy.release();
    REQUIRE(rig.read_until(*c, "id: " + std::to_string(burst.back()) + "\n"));
    CHECK(ids_in(c->in) == burst);
}
