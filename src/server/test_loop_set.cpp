// Several loops in one process (--loops): LoopSet running two real loops on
// two threads, each with its own Server on one TCP port (SO_REUSEPORT), a
// bus with a lane per loop, and one real mojo pool whose jobs carry the
// handoff of the loop their request came from.
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "bus/channel.hpp"
#include "mojo/mojo_pool.hpp"
#include "server/codec.hpp"
#include "server/loop_set.hpp"
#include "server/test_rig.hpp"

using namespace m0;
using namespace std::chrono_literals;
using m0::testing::SocketClient;

namespace {

// Holds every request on the channel its query names (?c=NAME).
struct HoldMount {
    static constexpr std::string_view name = "loops";
    explicit HoldMount(const mojo::MojoEnv&) {}
    http::Response serve(const http::Request& req) {
        http::Response r;
        r.headers.add("M0-Hold", "stream");
        r.headers.add("M0-Channel", req.query_param("c").value_or("a"));
        r.body = ": hold\n\n";
        return r;
    }
};

// Listening TCP sockets of this process on 127.0.0.1:port, from /proc/net/tcp
// matched by inode to /proc/self/fd (another process's on the same port,
// which SO_REUSEPORT allows, are not counted).
int listening_sockets(uint16_t port) {
    std::set<std::string> mine;  // inodes of this process's sockets
    for (const auto& e : std::filesystem::directory_iterator("/proc/self/fd")) {
        std::error_code ec;
        const std::string target = std::filesystem::read_symlink(e.path(), ec).string();
        if (!ec && target.starts_with("socket:[")) mine.insert(target.substr(8, target.size() - 9));
    }
    std::ifstream f("/proc/net/tcp");
    char want[32];
    std::snprintf(want, sizeof want, "0100007F:%04X", port);
    std::string line;
    int n = 0;
    while (std::getline(f, line)) {
        std::istringstream in(line);
        std::string slot, local, remote, state, queues, timer, retransmits, uid, timeout, inode;
        in >> slot >> local >> remote >> state >> queues >> timer >> retransmits >> uid >>
            timeout >> inode;
        if (local == want && state == "0A" && mine.count(inode)) ++n;  // TCP_LISTEN
    }
    return n;
}

// Two loops, a two-lane bus, a pool of two threads, every server listening.
struct Loops {
    static constexpr size_t kLoops = 2;
    bus::BusChannel hub{bus::BusOptions{.codec = server::codec()}, kLoops};
    Metrics metrics;
    server::LoopSet set{kLoops};
    mojo::HandlerFor<HoldMount> handler{mojo::MojoEnv{}};
    std::unique_ptr<mojo::MojoPool> pool;
    uint16_t port = 0;

    Loops() {
        server::ServerConfig cfg;
        cfg.reuse_port = true;
        for (size_t i = 0; i < kLoops; ++i) {
            auto& u = set[i];
            u.bus = &hub.lane(i);
            u.handoff.ring = &u.ring;
            u.handoff.bus = u.bus;
            u.handoff.metrics = &metrics;
        }
        pool = std::make_unique<mojo::MojoPool>(2, set[0].handoff);
        for (size_t i = 0; i < kLoops; ++i) {
            auto& u = set[i];
            u.server = std::make_unique<server::Server>(u.loop, cfg, u.ring, u.bus, metrics);
            const hold::Handoff* via = &u.handoff;
            u.server->add_mount("/", [this, via](SlotRef s, http::Request&& r) {
                return pool->submit(handler, s, std::move(r), via);
            });
        }
        std::string err;
        REQUIRE(set[0].server->listen("127.0.0.1", 0, false, err));
        port = set[0].server->bound_port(false);
        REQUIRE(set.join(err));
        REQUIRE(set[1].server->bound_port(false) == port);
        // A socket of each loop's own (SO_REUSEPORT): the kernel spreads the
        // connections, rather than the first loop to wake taking a burst.
        REQUIRE(listening_sockets(port) == int(kLoops));
    }
    ~Loops() { pool.reset(); }
};

std::unique_ptr<SocketClient> connect_to(uint16_t port) {
    int fd = m0::testing::connect_loopback(port);
    REQUIRE(fd >= 0);
    return std::make_unique<SocketClient>(fd);
}

// Polls `done` (the loops run on their own threads) for up to `t`.
bool eventually(const std::function<bool()>& done, std::chrono::milliseconds t = 5000ms) {
    auto deadline = std::chrono::steady_clock::now() + t;
    while (!done()) {
        if (std::chrono::steady_clock::now() > deadline) return false;
        std::this_thread::sleep_for(2ms);
    }
    return true;
}

// The ids of the events in an SSE byte stream, in order.
std::vector<uint64_t> ids_in(const std::string& s) {
    std::vector<uint64_t> ids;
    for (size_t p = s.find("\nid: "); p != std::string::npos; p = s.find("\nid: ", p + 1))
        ids.push_back(std::stoull(s.substr(p + 5)));
    return ids;
}

}  // namespace

TEST_CASE(
    "loop set: two loops on one port; holds on both hear every event once in one id order, "
    "a close reaches every loop, and shutdown ends both",
    "[server][loops]") {
    Loops loops;
    std::thread runner([&] { loops.set.run(); });

    // Enough connections that the kernel gives each loop some (the source
    // ports differ; a hash over 16 of them puts all on one socket 1 in 2^15).
    constexpr int kClients = 16;
    std::vector<std::unique_ptr<SocketClient>> clients;
    for (int i = 0; i < kClients; ++i) {
        clients.push_back(connect_to(loops.port));
        REQUIRE(clients.back()->send("GET /?c=a HTTP/1.1\r\nHost: x\r\n\r\n"));
    }
    auto all_held = [&] {
        for (auto& c : clients) {
            c->pump();
            if (c->in.find(": hold\n\n") == std::string::npos) return false;
        }
        return true;
    };
    REQUIRE(eventually(all_held));
    REQUIRE(loops.metrics.holds_total.load() == kClients);

    // Each loop's own server holds some of them: the connections were spread.
    std::atomic<size_t> held[2] = {0, 0};
    std::atomic<int> asked{0};
    for (size_t i = 0; i < 2; ++i) {
        server::Server* s = loops.set[i].server.get();
        std::atomic<size_t>* out = &held[i];
        REQUIRE(loops.set[i].inbox.post([s, out, &asked] {
            out->store(s->holds());
            asked.fetch_add(1);
        }));
    }
    REQUIRE(eventually([&] { return asked.load() == 2; }));
    CHECK(held[0].load() + held[1].load() == kClients);
    CHECK(held[0].load() > 0);
    CHECK(held[1].load() > 0);

    // Events published from any thread reach every hold once, in id order.
    std::vector<uint64_t> published;
    for (int e = 0; e < 20; ++e) published.push_back(loops.hub.publish("a", "e").id);
    (void)loops.hub.publish("b", "elsewhere");
    auto all_heard = [&] {
        for (auto& c : clients) {
            c->pump();
            if (ids_in(c->in).size() < published.size()) return false;
        }
        return true;
    };
    REQUIRE(eventually(all_heard));
    for (auto& c : clients) CHECK(ids_in(c->in) == published);

    // The admin's close (loop 0) closes every hold on the channel, on both loops.
    std::atomic<size_t> closed{SIZE_MAX};
    REQUIRE(loops.set[0].inbox.post(
        [&] { loops.set.close_channel("a", [&](size_t n) { closed.store(n); }); }));
    REQUIRE(eventually([&] { return closed.load() != SIZE_MAX; }));
    CHECK(closed.load() == kClients);
    for (auto& c : clients) {
        INFO("client " << c->fd);
        CHECK(eventually([&] {
            c->pump();
            return c->eof;
        }));
    }

    // SIGTERM's path: every loop shuts down, and run() returns once both ended.
    REQUIRE(loops.set[0].inbox.post(
        [&] { loops.set.on_every_loop([](server::Server& s) { s.shutdown(); }); }));
    runner.join();
    CHECK(loops.set[0].server->shutting_down());
    CHECK(loops.set[1].server->shutting_down());
}

TEST_CASE("loop set: --max-connections is one count across the loops", "[server][loops]") {
    bus::BusChannel hub{bus::BusOptions{.codec = server::codec()}, 2};
    Metrics metrics;
    server::LoopSet set{2};
    server::ServerConfig cfg;
    cfg.reuse_port = true;
    cfg.max_connections = 4;
    for (size_t i = 0; i < 2; ++i) {
        auto& u = set[i];
        u.server = std::make_unique<server::Server>(u.loop, cfg, u.ring, nullptr, metrics);
        u.server->add_mount("/", [](SlotRef, http::Request&&) { return Admission::queued; });
    }
    std::string err;
    REQUIRE(set[0].server->listen("127.0.0.1", 0, false, err));
    uint16_t port = set[0].server->bound_port(false);
    REQUIRE(set.join(err));
    std::thread runner([&] { set.run(); });
    std::vector<std::unique_ptr<SocketClient>> clients;
    for (int i = 0; i < 12; ++i) {
        clients.push_back(connect_to(port));
        // One at a time: each is counted before the next arrives.
        REQUIRE(eventually([&] {
            return metrics.connections_open.load() + metrics.connections_refused.load() ==
                   uint64_t(i + 1);
        }));
    }
    CHECK(metrics.connections_open.load() == 4);
    CHECK(metrics.connections_refused.load() == 8);
    REQUIRE(set[0].inbox.post([&] { set.on_every_loop([](server::Server& s) { s.shutdown(); }); }));
    clients.clear();
    runner.join();
}

TEST_CASE(
    "loop set: each loop's slots carry its tag, so a completion that reached the wrong loop "
    "names no connection there",
    "[server][loops]") {
    Loops loops;
    int a[2], b[2];
    REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, a) == 0);
    REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, b) == 0);
    SlotRef first = loops.set[0].server->adopt(a[0], "127.0.0.1", 1);
    SlotRef second = loops.set[1].server->adopt(b[0], "127.0.0.1", 2);
    CHECK(first.index == second.index);  // each loop numbers its own
    CHECK_FALSE(first.gen == second.gen);
    CHECK_FALSE(loops.set[1].server->alive(first));
    CHECK(loops.set[1].server->alive(second));
    // Loop 0's answer pushed onto loop 1's ring: dropped, loop 1's client hears nothing.
    Completion c;
    c.slot = first;
    c.response.body = "not yours\n";
    loops.set[1].ring.push(std::move(c));
    loops.set[1].server->on_completions_ready();
    CHECK(loops.metrics.completions_dropped.load() == 1);
    SocketClient peer(b[1]);
    loops.set[1].loop.run_once();
    peer.pump();
    CHECK(peer.in.empty());
    ::close(a[1]);
}
