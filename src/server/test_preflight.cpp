// CORS preflights of holds (--cors-origin): a mojo mount's preflight of a GET
// is answered on the loop, over HTTP/1.1 and HTTP/2, before any handler sees
// it; a preflight of another method, and a WSGI app's, go to the mount; the
// builtin mount's hold routes are read with GET only.
#include <catch2/catch.hpp>

#include "server/test_h2_client.hpp"
#include "server/test_hold_rig.hpp"

using namespace m0;
using Rig = testing::HoldRig;

namespace {

constexpr const char* kAllowed = "http://127.0.0.2:8080";

server::ServerConfig with_cors() {
    std::string err;
    server::ServerConfig cfg;
    auto cors = http::CorsPolicy::make({kAllowed}, false, err);
    REQUIRE(cors);
    cfg.cors = *cors;
    return cfg;
}

// The builtin mount again under /pf, added as the binary adds a mojo mount
// (its preflights the server's); HoldRig's own /native is added as a WSGI
// app's would be.
void add_mojo_mount(Rig& rig) {
    rig.server->add_mount(
        "/pf",
        [&rig](SlotRef s, http::Request&& r) {
            return rig.pool->submit(rig.handler, s, std::move(r));
        },
        true);
}

std::string preflight(const std::string& path, const std::string& origin,
                      const std::string& method) {
    return "OPTIONS " + path + " HTTP/1.1\r\nHost: h\r\nOrigin: " + origin +
           "\r\nAccess-Control-Request-Method: " + method +
           "\r\nAccess-Control-Request-Headers: last-event-id, authorization\r\n\r\n";
}

// A view that holds whatever the method, as many a WSGI view does (no
// require_GET): mounted as a WSGI app's mount is, without preflights.
struct AnyMethodHold {
    static constexpr std::string_view name = "any-method-hold";
    explicit AnyMethodHold(const mojo::MojoEnv&) {}
    http::Response serve(const http::Request&) {
        http::Response r;
        r.headers.add("M0-Hold", "stream");
        r.headers.add("M0-Channel", "c");
        r.body = ": held\n\n";
        return r;
    }
};

}  // namespace

TEST_CASE("preflight: an app's hold head answering a preflight becomes the preflight's answer",
          "[cors][loop]") {
    Rig rig(with_cors());
    mojo::HandlerFor<AnyMethodHold> view{mojo::MojoEnv{}};
    rig.server->add_mount("/app", [&](SlotRef s, http::Request&& r) {
        return rig.pool->submit(view, s, std::move(r));
    });
    std::string got;
    SECTION("an allowed origin: 204 with the policy's fields, and no hold") {
        rig.send(preflight("/app/stream", kAllowed, "GET"));
        REQUIRE(rig.loop.run_until([&] { return rig.pool->pool().queued() == 1; }));
        REQUIRE(rig.pool->pool().run_next());
        rig.read_until("\r\n\r\n", got);
        CHECK(got.starts_with("HTTP/1.1 204 No Content\r\n"));
        CHECK(got.find("Access-Control-Allow-Headers: last-event-id, authorization\r\n") !=
              std::string::npos);
        CHECK(got.find(": held") == std::string::npos);
        CHECK_FALSE(rig.server->subscribed(rig.slot));
        CHECK_FALSE(rig.server->holding(rig.slot));
        CHECK(rig.metrics.holds_open.load() == 0);
    }
    SECTION("another origin: 403, and no hold") {
        rig.send(preflight("/app/stream", "http://127.0.0.3:8080", "GET"));
        REQUIRE(rig.loop.run_until([&] { return rig.pool->pool().queued() == 1; }));
        REQUIRE(rig.pool->pool().run_next());
        rig.read_until("(--cors-origin)\n", got);
        CHECK(got.starts_with("HTTP/1.1 403 Forbidden\r\n"));
        CHECK_FALSE(rig.server->subscribed(rig.slot));
    }
    SECTION("over HTTP/2") {
        auto c = rig.connect();
        testing::H2Client h(*c);
        const int32_t id =
            h.request("OPTIONS", "/app/stream",
                      {{"origin", kAllowed}, {"access-control-request-method", "GET"}});
        REQUIRE(h.until(rig, [&] { return rig.pool->pool().queued() == 1; }));
        REQUIRE(rig.pool->pool().run_next());
        REQUIRE(h.until(rig, [&] { return h.streams[id].closed; }));
        CHECK(h.streams[id].header(":status") == "204");
        CHECK(h.streams[id].header("access-control-allow-origin") == kAllowed);
        CHECK(h.streams[id].data.empty());
        CHECK(rig.server->alive(c->slot));
    }
    SECTION("the same view's GET is held, with the policy's fields") {
        rig.send("GET /app/stream HTTP/1.1\r\nHost: h\r\nOrigin: http://127.0.0.2:8080\r\n\r\n");
        REQUIRE(rig.loop.run_until([&] { return rig.pool->pool().queued() == 1; }));
        REQUIRE(rig.pool->pool().run_next());
        rig.read_until(": held\n\n", got);
        CHECK(got.find("Access-Control-Allow-Origin: http://127.0.0.2:8080\r\n") !=
              std::string::npos);
        CHECK(rig.server->subscribed(rig.slot));
    }
}

TEST_CASE("preflight: a mojo mount's preflight of a GET is the loop's answer", "[cors][loop]") {
    Rig rig(with_cors());
    add_mojo_mount(rig);
    std::string got;
    SECTION("answered on the loop, and the connection goes on to the GET, which is held") {
        rig.send(preflight("/pf/hold?channel=c", kAllowed, "GET"));
        rig.read_until("\r\n\r\n", got);
        CHECK(got.starts_with("HTTP/1.1 204 No Content\r\n"));
        CHECK(got.find("Access-Control-Allow-Origin: http://127.0.0.2:8080\r\n") !=
              std::string::npos);
        CHECK(got.find("Access-Control-Allow-Headers: last-event-id, authorization\r\n") !=
              std::string::npos);
        CHECK(got.find("Access-Control-Allow-Methods: GET, HEAD\r\n") != std::string::npos);
        CHECK(got.find("Content-Length") == std::string::npos);
        CHECK(rig.pool->pool().queued() == 0);  // no handler saw it
        rig.send(
            "GET /pf/hold?channel=c HTTP/1.1\r\nHost: h\r\nOrigin: http://127.0.0.2:8080\r\n"
            "Last-Event-ID: 1\r\n\r\n");
        REQUIRE(rig.loop.run_until([&] { return rig.pool->pool().queued() == 1; }));
        REQUIRE(rig.pool->pool().run_next());
        rig.read_until(": mojo hold\n\n", got);
        CHECK(got.find("Access-Control-Allow-Origin: http://127.0.0.2:8080\r\n",
                       got.find("text/event-stream")) != std::string::npos);
        CHECK(rig.server->subscribed(rig.slot));
    }
    SECTION("another origin: 403 with its reason, no Access-Control field, no handler") {
        rig.send(preflight("/pf/hold?channel=c", "http://127.0.0.3:8080", "GET"));
        rig.read_until("(--cors-origin)\n", got);
        CHECK(got.starts_with("HTTP/1.1 403 Forbidden\r\n"));
        CHECK(got.find("Access-Control-") == std::string::npos);
        CHECK(rig.pool->pool().queued() == 0);
    }
    SECTION("a preflight of a POST is the mount's: the builtin's hold route allows GET") {
        rig.send(preflight("/pf/hold?channel=c", kAllowed, "POST"));
        REQUIRE(rig.loop.run_until([&] { return rig.pool->pool().queued() == 1; }));
        REQUIRE(rig.pool->pool().run_next());
        rig.read_until("Allow: GET, HEAD, OPTIONS\r\n", got);
        CHECK(got.starts_with("HTTP/1.1 204 No Content\r\n"));
        CHECK(got.find("Access-Control-") == std::string::npos);
    }
    SECTION("a mount added without preflights (a WSGI app's) is handed its preflight") {
        rig.send(preflight("/native/hold?channel=c", kAllowed, "GET"));
        REQUIRE(rig.loop.run_until([&] { return rig.pool->pool().queued() == 1; }));
        REQUIRE(rig.pool->pool().run_next());
        rig.read_until("Allow: GET, HEAD, OPTIONS\r\n", got);
        CHECK_FALSE(rig.server->subscribed(rig.slot));  // answered, not held
    }
}

TEST_CASE("preflight: without --cors-origin the mount answers it", "[cors][loop]") {
    Rig rig;
    add_mojo_mount(rig);
    rig.send(preflight("/pf/hold?channel=c", kAllowed, "GET"));
    REQUIRE(rig.loop.run_until([&] { return rig.pool->pool().queued() == 1; }));
    REQUIRE(rig.pool->pool().run_next());
    std::string got;
    rig.read_until("Allow: GET, HEAD, OPTIONS\r\n", got);
    CHECK(got.find("Access-Control-") == std::string::npos);
    CHECK_FALSE(rig.server->subscribed(rig.slot));
}

TEST_CASE("preflight: over HTTP/2, answered on its stream; the connection serves on",
          "[cors][h2]") {
    Rig rig(with_cors());
    add_mojo_mount(rig);
    auto c = rig.connect();
    testing::H2Client h(*c);
    const int32_t id = h.request("OPTIONS", "/pf/live?grant=x",
                                 {{"origin", kAllowed},
                                  {"access-control-request-method", "GET"},
                                  {"access-control-request-headers", "last-event-id"}});
    REQUIRE(h.until(rig, [&] { return h.streams[id].closed; }));
    CHECK(h.streams[id].header(":status") == "204");
    CHECK(h.streams[id].header("access-control-allow-origin") == kAllowed);
    CHECK(h.streams[id].header("access-control-allow-headers") == "last-event-id");
    CHECK(h.streams[id].error == NGHTTP2_NO_ERROR);
    CHECK(rig.pool->pool().queued() == 0);
    CHECK(rig.server->alive(c->slot));
}

TEST_CASE("preflight: a hold route of the builtin mount refuses POST 405 rather than hold it",
          "[cors][loop]") {
    Rig rig;
    rig.send("POST /native/hold?channel=c HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\n\r\nx=1");
    REQUIRE(rig.loop.run_until([&] { return rig.pool->pool().queued() == 1; }));
    REQUIRE(rig.pool->pool().run_next());
    std::string got;
    rig.read_until("not POST\n", got);
    CHECK(got.starts_with("HTTP/1.1 405 Method Not Allowed\r\n"));
    CHECK(got.find("Allow: GET, HEAD, OPTIONS\r\n") != std::string::npos);
    CHECK_FALSE(rig.server->subscribed(rig.slot));
}
