// The hold loop's rig, shared by test_hold_loop and test_hold_pacing: the
// server rig with the bus, a manual mojo pool serving the builtin mount at
// /native, and one client. Test thread only (the pool has no thread).
#pragma once
#include <unistd.h>

#include <catch2/catch.hpp>
#include <fstream>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "mojo/builtin.hpp"
#include "mojo/mojo_pool.hpp"
#include "server/access_log.hpp"
#include "server/test_rig.hpp"

namespace m0::testing {

// An access log in a fresh temporary file; lines() reads what it holds.
struct TempAccessLog {
    std::string path;
    server::AccessLog log;
    TempAccessLog() {
        char tmpl[] = "/tmp/m0-access-XXXXXX";
        int fd = ::mkstemp(tmpl);
        REQUIRE(fd >= 0);
        ::close(fd);
        path = tmpl;
        std::string err;
        REQUIRE(log.open(path, err));
    }
    ~TempAccessLog() { ::unlink(path.c_str()); }
    std::vector<std::string> lines() const {
        std::ifstream f(path);
        std::vector<std::string> out;
        for (std::string l; std::getline(f, l);) out.push_back(l);
        return out;
    }
};

struct HoldRig : ServerRig {
    mojo::HandlerFor<mojo::BuiltinMount> handler{mojo::MojoEnv{}};
    std::unique_ptr<mojo::MojoPool> pool;
    std::unique_ptr<SocketClient> conn;
    int client = -1;
    SlotRef slot;
    // Called on the test's thread at each hand-off point of a job (the pool is manual).
    std::function<void(hold::Point, SlotRef)> on_point;

    static server::ServerConfig quiet(server::ServerConfig cfg) {
        if (cfg.heartbeat == server::ServerConfig{}.heartbeat) cfg.heartbeat = 3600;
        return cfg;
    }
    explicit HoldRig(server::ServerConfig cfg = {}, bus::BusOptions bus_options = {})
        : ServerRig(quiet(cfg), true, bus_options) {
        hold::Handoff h;
        h.ring = &ring;
        h.bus = &bus;
        h.metrics = &metrics;
        h.hook = [this](hold::Point p, SlotRef s) {
            if (on_point) on_point(p, s);
        };
        pool = std::make_unique<mojo::MojoPool>(0, h);
        server->add_mount("/native", [this](SlotRef s, http::Request&& r) {
            return pool->submit(handler, s, std::move(r));
        });
        conn = connect();
        REQUIRE(conn);
        client = conn->fd;
        slot = conn->slot;
    }
    ~HoldRig() override {
        server.reset();
        if (client < 0) conn->fd = -1;  // the test closed it
    }
    using ServerRig::read_until;
    void send(const std::string& s) { REQUIRE(conn->send(s)); }
    // `n` more clients, each held on channel c (their heads read).
    std::vector<std::unique_ptr<SocketClient>> open_holds(int n) {
        std::vector<std::unique_ptr<SocketClient>> out;
        for (int i = 0; i < n; ++i) {
            auto c = connect();
            REQUIRE(c);
            REQUIRE(c->send("GET /native/hold?channel=c HTTP/1.1\r\nHost: h\r\n\r\n"));
            REQUIRE(loop.run_until([&] { return pool->pool().queued() == 1; }));
            REQUIRE(pool->pool().run_next());
            REQUIRE(ServerRig::read_until(*c, ": mojo hold"));
            out.push_back(std::move(c));
        }
        return out;
    }
    // Steps the loop and reads what the client got, until `want` appears.
    std::string read_until(const std::string& want, std::string& got) {
        ServerRig::read_until(*conn, want);
        got = conn->in;
        return got;
    }
    void hold(const std::string& query, const std::string& last_event_id = "") {
        std::string req = "GET /native/hold?" + query + " HTTP/1.1\r\nHost: h\r\n";
        if (!last_event_id.empty()) req += "Last-Event-ID: " + last_event_id + "\r\n";
        send(req + "\r\n");
        REQUIRE(loop.run_until([&] { return pool->pool().queued() == 1; }));
        REQUIRE(pool->pool().run_next());
    }
};

}  // namespace m0::testing
