// The Redis bus through Redis Sentinel (--bus redis+sentinel://...), on the
// server: a real Server on a real Loop whose RedisBus finds its master by
// asking three real redis-sentinel processes, which watch a real master and
// its replica (test_redis_sentinel.hpp; free loopback ports, stopped by PID).
// The master is killed; the sentinels promote the replica; the bus follows.
#include "bus/test_redis_sentinel.hpp"

#include <catch2/catch.hpp>
#include <chrono>
#include <cstdio>

#include "bus/redis_bus.hpp"
#include "mojo/builtin.hpp"
#include "mojo/mojo_pool.hpp"
#include "server/codec.hpp"
#include "server/test_rig.hpp"

using namespace m0;
using namespace m0::testing;

namespace {

constexpr char kPassword[] = "sentinel-test-pw";

// The server on a RedisBus at `url`, with a manual mojo pool serving the
// builtin mount at /native. Test thread only.
struct SentinelServer {
    Loop loop;
    CompletionRing ring;
    Metrics metrics;
    std::unique_ptr<bus::RedisBus> bus;
    std::unique_ptr<server::Server> server;
    mojo::HandlerFor<mojo::BuiltinMount> handler{mojo::MojoEnv{}};
    std::unique_ptr<mojo::MojoPool> pool;

    explicit SentinelServer(const std::string& url) {
        std::signal(SIGPIPE, SIG_IGN);
        std::string err;
        bus::RedisBusOptions o;
        auto u = bus::parse_redis_url(url, err);
        REQUIRE(u);
        o.url = *u;
        o.codec = server::codec();  // as the binary's bus (serve.cpp)
        bus = std::make_unique<bus::RedisBus>(loop, o);
        server::ServerConfig cfg;
        cfg.heartbeat = 3600;
        server = std::make_unique<server::Server>(loop, cfg, ring, bus.get(), metrics);
        hold::Handoff h;
        h.ring = &ring;
        h.bus = bus.get();
        h.metrics = &metrics;
        pool = std::make_unique<mojo::MojoPool>(0, h);
        server->add_mount("/native", [this](SlotRef s, http::Request&& r) {
            return pool->submit(handler, s, std::move(r));
        });
    }
    ~SentinelServer() {
        pool.reset();
        server.reset();
    }
    bool read_until(SocketClient& c, std::string_view want, double seconds = 5) {
        return loop.run_until(
            [&] {
                c.pump();
                return c.in.find(want) != std::string::npos;
            },
            std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000)));
    }
    std::unique_ptr<SocketClient> hold(const std::string& channel) {
        int sv[2];
        REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0);
        auto c = std::make_unique<SocketClient>(sv[1]);
        c->server_fd = sv[0];
        c->slot = server->adopt(sv[0], "127.0.0.1", 1, false);
        REQUIRE(c->send("GET /native/hold?channel=" + channel + " HTTP/1.1\r\nHost: h\r\n\r\n"));
        REQUIRE(loop.run_until([&] { return pool->pool().queued() == 1; }));
        REQUIRE(pool->pool().run_next());
        REQUIRE(read_until(*c, ": mojo hold"));
        return c;
    }
};

double since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

TEST_CASE(
    "redis sentinel: the bus finds the master through the sentinels (the first one down) and "
    "follows a failover: holds stay open, publishes resume on the new master, every "
    "acknowledged event arrives once, in order",
    "[redis][sentinel]") {
    const auto t_start = std::chrono::steady_clock::now();
    SentinelRig rig(kPassword);
    const uint16_t dead = RedisServer::free_port();  // nothing listens there
    SentinelServer s(rig.url("127.0.0.1:" + std::to_string(dead)));
    REQUIRE(s.bus->start(10));
    CHECK(s.bus->master().port == rig.master->port());
    auto a = s.hold("sa");
    auto b = s.hold("sb");
    // Acknowledged before the failover: by the master, and (WAIT) by its
    // replica, so that asynchronous replication cannot lose them here.
    std::vector<uint64_t> acked_a, acked_b;
    for (int i = 0; i < 10; ++i) {
        auto r = s.bus->publish(i % 2 ? "sb" : "sa", "before " + std::to_string(i));
        REQUIRE(r.ok());
        (i % 2 ? acked_b : acked_a).push_back(r.id);
    }
    REQUIRE(s.read_until(*b, "id: " + std::to_string(acked_b.back()) + "\n"));
    REQUIRE(redis_say(rig.master->port(), kPassword, {"WAIT", "1", "2000"}) == "1");

    rig.master->crash();
    const auto t_kill = std::chrono::steady_clock::now();
    // Publishes fail loudly until the bus is on the new master; then they resume.
    int refused = 0;
    double promoted = 0;  // when a sentinel first named the replica
    std::optional<bus::PublishResult> first;
    while (!first && since(t_kill) < 20) {
        s.loop.run_until([] { return false; }, std::chrono::milliseconds(100));
        if (promoted == 0 &&
            rig.sentinels[0]->master_port(SentinelRig::kMaster) == rig.replica->port())
            promoted = since(t_kill);
        auto r = s.bus->publish("sa", "after the kill");
        if (r.ok())
            first = r;
        else
            ++refused;
    }
    REQUIRE(first);
    const double failover = since(t_kill);
    acked_a.push_back(first->id);
    for (int i = 0; i < 6; ++i) {
        auto r = s.bus->publish(i % 2 ? "sb" : "sa", "after " + std::to_string(i));
        REQUIRE(r.ok());
        (i % 2 ? acked_b : acked_a).push_back(r.id);
    }
    CHECK(s.bus->master().port == rig.replica->port());
    CHECK(redis_say(rig.replica->port(), kPassword, {"ROLE"}) == "master");
    // The holds stayed open and the resync brought what the gap kept from them.
    REQUIRE(s.read_until(*a, "id: " + std::to_string(acked_a.back()) + "\n", 10));
    REQUIRE(s.read_until(*b, "id: " + std::to_string(acked_b.back()) + "\n", 10));
    for (auto* c : {a.get(), b.get()}) {
        c->pump();
        CHECK_FALSE(c->eof);
        CHECK(c->in.find("m0-reset") == std::string::npos);
    }
    CHECK(ids_in(a->in) == acked_a);
    CHECK(ids_in(b->in) == acked_b);
    CHECK(s.bus->link_stats().reconnects >= 1);
    std::fprintf(stderr,
                 "redis sentinel: the sentinels named the new master %.2f s after the master "
                 "was killed, the first publish was accepted after %.2f s (%d refused "
                 "meanwhile); the test took %.1f s\n",
                 promoted, failover, refused, since(t_start));
}

TEST_CASE(
    "redis sentinel: a Redis a sentinel names is used only when ROLE says master; a master no "
    "sentinel knows is no connection",
    "[redis][sentinel]") {
    RedisServer master(false, {"--requirepass", kPassword});
    RedisServer replica(false, {"--requirepass", kPassword, "--masterauth", kPassword,
                                "--replicaof", "127.0.0.1", std::to_string(master.port())});
    // One sentinel that watches the replica as if it were a master.
    SentinelProcess sentinel({{"notmaster", replica.port()}}, kPassword);
    const std::string at = std::string("redis+sentinel://:") + kPassword +
                           "@127.0.0.1:" + std::to_string(sentinel.port()) + "/";
    {
        SentinelServer s(at + "notmaster/0");
        CHECK_FALSE(s.bus->start(1.5));
        CHECK(s.bus->master().port == replica.port());  // named, then refused by ROLE
        CHECK(s.bus->refusal().empty());                // not a start-up error: it may change
        CHECK_FALSE(s.bus->publish("c", "x").ok());
    }
    {
        SentinelServer s(at + "nosuchmaster/0");
        CHECK_FALSE(s.bus->start(1));
        CHECK(s.bus->master().port == 0);
    }
}

TEST_CASE(
    "redis sentinel: a master that turns replica under the bus (READONLY) sends it back to the "
    "sentinels, from the publish link and from the admin API's publish alike",
    "[redis][sentinel]") {
    RedisServer master(false, {"--requirepass", kPassword, "--masterauth", kPassword});
    RedisServer elsewhere(false, {"--requirepass", kPassword});
    // One sentinel with a quorum of 2: it names the master and never fails it over.
    SentinelProcess sentinel({{"m0m", master.port()}}, kPassword);
    SentinelServer s(std::string("redis+sentinel://:") + kPassword +
                     "@127.0.0.1:" + std::to_string(sentinel.port()) + "/m0m/0");
    REQUIRE(s.bus->start(5));
    REQUIRE(s.bus->publish("c", "before").ok());
    const std::string mport = std::to_string(master.port());
    auto demote = [&] {
        // The links stay connected: only a write says the master is gone.
        REQUIRE(redis_say(master.port(), kPassword,
                          {"REPLICAOF", "127.0.0.1", std::to_string(elsewhere.port())}) == "OK");
        REQUIRE(redis_say(master.port(), kPassword, {"ROLE"}) == "slave");
    };
    auto promote_back = [&] {
        REQUIRE(redis_say(master.port(), kPassword, {"REPLICAOF", "NO", "ONE"}) == "OK");
        REQUIRE(s.loop.run_until([&] { return s.bus->up(); }, std::chrono::seconds(8)));
    };
    // The publish link (a pool thread's m0.publish): refused, and the loop's
    // next sweep lets the links go and asks the sentinel again.
    demote();
    auto r = s.bus->publish("c", "to a replica");
    CHECK_FALSE(r.ok());
    CHECK(r.detail.find("READONLY") != std::string::npos);
    CHECK(s.loop.run_until([&] { return !s.bus->up(); }, std::chrono::seconds(3)));
    promote_back();
    REQUIRE(s.bus->publish("c", "on the master again").ok());
    // The admin API's publish, on the command link: the same at once.
    demote();
    std::optional<bus::PublishResult> later;
    s.bus->publish_later("c", "to a replica", "", false, [&](bus::PublishResult p) { later = p; });
    REQUIRE(s.loop.run_until([&] { return later.has_value(); }, std::chrono::seconds(3)));
    CHECK(later->detail.find("READONLY") != std::string::npos);
    CHECK_FALSE(s.bus->up());
    promote_back();
    REQUIRE(s.bus->publish("c", "on the master once more").ok());
}
