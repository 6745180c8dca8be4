// HTTP/2 on the real loop: nghttp2's client session on a socketpair the
// server adopts (prior knowledge), requests through the router to a mount,
// answers whole and streamed, holds as streams, and the per-stream rules.
#include <catch2/catch.hpp>

#include "server/h2_conn.hpp"
#include "server/test_h2_client.hpp"
#include "server/test_hold_rig.hpp"

using namespace m0;
using namespace m0::testing;
using m0::server::ServerConfig;

namespace {

// A rig whose mount "/app" keeps each request; the test answers as a pool.
struct AppRig : ServerRig {
    std::vector<std::pair<SlotRef, http::Request>> got;
    explicit AppRig(ServerConfig cfg = {}) : ServerRig(std::move(cfg)) {
        server->add_mount("/app", [this](SlotRef s, http::Request&& r) {
            got.emplace_back(s, std::move(r));
            return Admission::queued;
        });
    }
};

http::Response text(int status, std::string body) {
    http::Response r{.status = status, .headers = {}, .body = std::move(body), .stream = {}};
    r.headers.add("Content-Type", "text/plain");
    return r;
}

// A hold of `h` on /native/hold?channel=`channel`, its head read.
int32_t open_hold(HoldRig& rig, H2Client& h, const std::string& channel) {
    const int32_t id = h.request("GET", "/native/hold?channel=" + channel);
    REQUIRE(h.until(rig, [&] { return rig.pool->pool().queued() == 1; }));
    REQUIRE(rig.pool->pool().run_next());
    REQUIRE(
        h.until(rig, [&] { return h.streams[id].data.find(": mojo hold") != std::string::npos; }));
    return id;
}

}  // namespace

TEST_CASE("h2: streams reach the mount with HTTP/2's request, answers go back on their streams") {
    AppRig rig;
    auto c = rig.connect();
    H2Client h(*c);
    const int32_t a = h.request("GET", "/app/one?x=1",
                                {{"cookie", "a=1"}, {"host", "other.test"}, {"cookie", "b=2"}});
    std::string body = "the body";
    const int32_t b = h.request("POST", "/app/two", {{"content-type", "text/plain"}}, &body);
    const int32_t none = h.request("GET", "/elsewhere");
    REQUIRE(h.until(rig, [&] { return rig.got.size() == 2 && h.streams[none].closed; }));
    CHECK(h.streams[none].header(":status") == "404");
    const http::Request& one = rig.got[0].second;
    CHECK(one.protocol() == "HTTP/2");
    CHECK(one.method == "GET");
    CHECK(one.script_name == "/app");
    CHECK(one.path_info == "/one");
    CHECK(one.query == "x=1");
    CHECK(one.headers.get_joined("host") == "example.test");  // :authority's, one
    CHECK(one.headers.get("cookie") == "a=1; b=2");           // RFC 9113 §8.2.3
    CHECK(rig.got[1].second.method == "POST");
    CHECK(rig.got[1].second.body == "the body");
    CHECK(rig.got[0].first != c->slot);  // each stream a slot of its own
    CHECK(rig.got[0].first != rig.got[1].first);
    // Answered out of order: each on its own stream.
    rig.post(rig.got[1].first, text(201, "two"));
    rig.post(rig.got[0].first, text(200, "one"));
    REQUIRE(h.until(rig, [&] { return h.streams[a].closed && h.streams[b].closed; }));
    CHECK(h.streams[a].header(":status") == "200");
    CHECK(h.streams[a].data == "one");
    CHECK(h.streams[a].header("content-length") == "3");
    CHECK(h.streams[b].header(":status") == "201");
    CHECK(h.streams[b].data == "two");
    CHECK(h.streams[a].error == NGHTTP2_NO_ERROR);
    CHECK(rig.server->alive(c->slot));  // the connection stays
}

TEST_CASE("h2: the preface byte by byte starts HTTP/2 on a plain connection") {
    AppRig rig;
    auto c = rig.connect();
    std::string wire(server::kH2Preface);
    wire += kEmptySettings;
    wire += raw_get(1, "/app/x");
    for (char ch : wire) {
        REQUIRE(c->send(std::string(1, ch)));
        rig.loop.run_until([] { return false; }, std::chrono::milliseconds(1));
    }
    REQUIRE(rig.step_until([&] { return rig.got.size() == 1; }));
    c->pump();
    REQUIRE(c->in.size() >= 9);
    CHECK(c->in[3] == NGHTTP2_SETTINGS);  // the server's first frame: its SETTINGS
    CHECK(rig.got[0].second.path_info == "/x");
}

TEST_CASE("h2: a streamed answer's chunks are DATA; HEAD gets the head alone") {
    AppRig rig;
    auto c = rig.connect();
    H2Client h(*c);
    const int32_t a = h.request("GET", "/app/stream");
    const int32_t hd = h.request("HEAD", "/app/stream");
    REQUIRE(h.until(rig, [&] { return rig.got.size() == 2; }));
    for (auto& [slot, req] : rig.got) {
        auto st = std::make_shared<StreamState>(1 << 20);
        rig.post_kind(slot, Completion::Kind::head, st, text(200, ""));
        rig.post_kind(slot, Completion::Kind::chunk, st, {}, "first ");
        rig.post_kind(slot, Completion::Kind::chunk, st, {}, "second");
        rig.post_kind(slot, Completion::Kind::end, st);
    }
    REQUIRE(h.until(rig, [&] { return h.streams[a].closed && h.streams[hd].closed; }));
    CHECK(h.streams[a].data == "first second");
    CHECK(h.streams[a].error == NGHTTP2_NO_ERROR);
    CHECK(h.streams[hd].header(":status") == "200");
    CHECK(h.streams[hd].data.empty());
}

TEST_CASE("h2: a body that fails midway resets its stream, not the connection") {
    AppRig rig;
    auto c = rig.connect();
    H2Client h(*c);
    const int32_t a = h.request("GET", "/app/stream");
    REQUIRE(h.until(rig, [&] { return rig.got.size() == 1; }));
    auto st = std::make_shared<StreamState>(1 << 20);
    rig.post_kind(rig.got[0].first, Completion::Kind::head, st, text(200, ""));
    rig.post_kind(rig.got[0].first, Completion::Kind::chunk, st, {}, "part");
    rig.post_kind(rig.got[0].first, Completion::Kind::end, st, {}, {}, true);
    REQUIRE(h.until(rig, [&] { return h.streams[a].closed; }));
    CHECK(h.streams[a].error == NGHTTP2_INTERNAL_ERROR);
    CHECK(rig.server->alive(c->slot));
}

TEST_CASE("h2: the request checks apply per stream (431, 413, content-length, timeout)") {
    ServerConfig cfg;
    cfg.limits.max_headers = 8;
    cfg.limits.max_body = 16;
    cfg.request_timeout = 0.2;
    AppRig rig(cfg);
    auto c = rig.connect();
    H2Client h(*c);
    std::vector<std::pair<std::string, std::string>> many;
    for (int i = 0; i < 12; ++i) many.emplace_back("x-h" + std::to_string(i), "v");
    const int32_t fields = h.request("GET", "/app/a", many);
    std::string big_body(100, 'x'), lying_body = "more than three";
    const int32_t big = h.request("POST", "/app/b", {}, &big_body);
    // RFC 9113 §8.1.1: a content-length the DATA disagrees with is malformed.
    const int32_t lying = h.request("POST", "/app/c", {{"content-length", "3"}}, &lying_body);
    const int32_t slow = h.request("GET", "/app/slow");
    REQUIRE(h.until(rig, [&] {
        return h.streams[fields].closed && h.streams[big].closed && h.streams[lying].closed &&
               h.streams[slow].closed;
    }));
    CHECK(h.streams[fields].header(":status") == "431");
    CHECK(h.streams[big].header(":status") == "413");
    CHECK(h.streams[lying].error == NGHTTP2_PROTOCOL_ERROR);
    CHECK(h.streams[slow].header(":status") == "504");
    CHECK(rig.got.size() == 1);  // only /app/slow reached the mount
    CHECK(rig.server->alive(c->slot));
}

TEST_CASE("h2: a body still arriving outlives header_timeout; a pause past body_timeout is 408") {
    ServerConfig cfg;
    cfg.header_timeout = 0.2;
    cfg.body_timeout = 0.3;
    cfg.limits.max_body = 16;
    AppRig rig(cfg);
    auto c = rig.connect();
    H2Client h(*c);
    const int32_t slow = h.upload("POST", "/app/up");
    const int32_t stuck = h.upload("POST", "/app/stuck");
    const int32_t big = h.upload("POST", "/app/big");
    h.send_body(stuck, "abc", false);
    h.send_body(big, std::string(20, 'x'), false);  // past max_body, and not at its end
    const auto t0 = std::chrono::steady_clock::now();
    const char* pieces[] = {"ab", "cd", "ef", "gh"};
    for (int i = 0; i < 4; ++i) {
        h.until(
            rig, [] { return false; }, std::chrono::milliseconds(150));
        h.send_body(slow, pieces[i], i == 3);
    }
    REQUIRE(h.until(rig, [&] { return rig.got.size() == 1 && h.streams[stuck].closed; }));
    CHECK(std::chrono::steady_clock::now() - t0 >= std::chrono::milliseconds(600));
    CHECK(rig.got[0].second.target == "/app/up");
    CHECK(rig.got[0].second.body == "abcdefgh");
    CHECK(h.streams[stuck].header(":status") == "408");
    CHECK(h.streams[stuck].data.find("--body-timeout") != std::string::npos);
    // Answered before their requests ended: RST_STREAM NO_ERROR, the client
    // stops sending (RFC 9113 §8.1), the streams are gone on both sides.
    CHECK(h.streams[stuck].error == NGHTTP2_NO_ERROR);
    REQUIRE(h.until(rig, [&] { return h.streams[big].closed; }));
    CHECK(h.streams[big].header(":status") == "413");
    CHECK(h.streams[big].error == NGHTTP2_NO_ERROR);
    CHECK(rig.server->h2_streams() == 1);  // the upload's, its answer due from the pool
    CHECK(rig.server->alive(c->slot));
}

TEST_CASE("h2: holds are streams: subscribed before HEADERS, events as DATA, RST_STREAM releases") {
    HoldRig rig;
    H2Client h(*rig.conn);
    const int32_t a = open_hold(rig, h, "c");
    const int32_t b = open_hold(rig, h, "c");
    CHECK(h.streams[a].header(":status") == "200");
    CHECK(h.streams[a].header("content-type") == "text/event-stream");
    CHECK(rig.server->holds() == 2);
    REQUIRE(rig.bus.publish("c", "one").ok());
    REQUIRE(h.until(rig, [&] {
        return h.streams[a].data.find("data: one") != std::string::npos &&
               h.streams[b].data.find("data: one") != std::string::npos;
    }));
    h.reset(a);
    REQUIRE(h.until(rig, [&] { return rig.server->holds() == 1; }));
    CHECK(rig.server->subscriptions().subscribers("c").size() == 1);
    REQUIRE(rig.bus.publish("c", "two").ok());
    REQUIRE(h.until(rig, [&] { return h.streams[b].data.find("data: two") != std::string::npos; }));
    CHECK(h.streams[a].data.find("data: two") == std::string::npos);
    CHECK(rig.server->alive(rig.slot));
}

TEST_CASE("h2: an idle hold's stream keeps no DATA item; each event brings one, the end one more") {
    HoldRig rig;
    H2Client h(*rig.conn);
    const int32_t a = open_hold(rig, h, "c");
    const int32_t b = open_hold(rig, h, "c");
    // The heads' first bytes taken: nothing of either is left on the session.
    REQUIRE(h.until(rig, [&] { return rig.server->h2_data_items() == 0; }));
    for (int i = 0; i < 3; ++i) {
        const std::string event = "data: e" + std::to_string(i);
        REQUIRE(rig.bus.publish("c", "e" + std::to_string(i)).ok());
        REQUIRE(h.until(rig, [&] {
            return h.streams[a].data.find(event) != std::string::npos &&
                   h.streams[b].data.find(event) != std::string::npos;
        }));
        CHECK(rig.server->h2_data_items() == 0);
        CHECK(!h.streams[a].closed);
        CHECK(!h.streams[b].closed);
    }
    // Two events at once on one stream's queue leave in order, then nothing.
    REQUIRE(rig.bus.publish("c", "x").ok());
    REQUIRE(rig.bus.publish("c", "y").ok());
    REQUIRE(h.until(rig, [&] { return h.streams[a].data.find("data: y") != std::string::npos; }));
    CHECK(h.streams[a].data.find("data: x") < h.streams[a].data.find("data: y"));
    // The end of an idle stream: its retry hint and END_STREAM in a new item.
    rig.server->shutdown();
    REQUIRE(h.until(rig, [&] { return h.streams[a].closed && h.streams[b].closed; }));
    CHECK(h.streams[a].error == NGHTTP2_NO_ERROR);
    CHECK(h.streams[b].data.find("retry: ") != std::string::npos);
    CHECK(h.streams[b].data.find("data: y") != std::string::npos);
}

TEST_CASE("h2: a stream whose window stays closed is a slow reader; its neighbours go on") {
    ServerConfig cfg;
    cfg.hold_buffer_limit = 4096;
    cfg.hold_drain_timeout = 0.2;
    HoldRig rig(cfg);
    // Every stream's window 1 KiB, opened only by what the test consumes.
    H2Client h(*rig.conn, true, {{NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, 1024}});
    const int32_t slow = open_hold(rig, h, "c");
    const int32_t fast = open_hold(rig, h, "c");
    h.consume(fast, h.streams[fast].data.size());
    const std::string payload(1000, 'e');
    for (int i = 0; i < 12; ++i) {
        REQUIRE(rig.bus.publish("c", payload).ok());
        REQUIRE(h.until(
            rig, [&] { return h.streams[fast].data.size() >= size_t(i + 1) * payload.size(); }));
        h.consume(fast, h.streams[fast].data.size());
        nghttp2_session_consume_connection(h.session, h.streams[slow].data.size());
    }
    REQUIRE(h.until(rig, [&] { return h.streams[slow].closed; }));
    CHECK(h.streams[slow].error == NGHTTP2_CANCEL);
    CHECK(!h.streams[fast].closed);
    CHECK(rig.server->holds() == 1);
    REQUIRE(rig.bus.publish("c", "after").ok());
    REQUIRE(h.until(rig,
                    [&] { return h.streams[fast].data.find("data: after") != std::string::npos; }));
}

TEST_CASE("h2: streams past --h2-max-concurrent-streams are refused") {
    // A client that ignores the limit (nghttp2's own would wait for a free
    // stream): three HEADERS frames at once, before our SETTINGS is acknowledged.
    ServerConfig cfg;
    cfg.h2_max_streams = 2;
    HoldRig rig(cfg);
    std::string wire(server::kH2Preface);
    wire += kEmptySettings;
    for (int32_t id = 1; id <= 5; id += 2) wire += raw_get(id, "/native/hold?channel=c");
    rig.send(wire);
    // RST_STREAM (type 3) on stream 5, REFUSED_STREAM (7).
    const std::string refused("\0\0\x04\x03\0\0\0\0\x05\0\0\0\x07", 13);
    REQUIRE(rig.ServerRig::read_until(*rig.conn, refused));
    REQUIRE(rig.loop.run_until([&] { return rig.pool->pool().queued() == 2; }));
}

TEST_CASE("h2: the drain sends each hold its retry hint, ends its stream, and GOAWAY") {
    HoldRig rig;
    H2Client h(*rig.conn);
    const int32_t a = open_hold(rig, h, "c");
    const int32_t b = open_hold(rig, h, "d");
    rig.server->shutdown();
    REQUIRE(h.until(rig, [&] { return h.streams[a].closed && h.streams[b].closed && h.goaway; }));
    CHECK(h.streams[a].data.find("retry: ") != std::string::npos);
    CHECK(h.streams[b].data.find("retry: ") != std::string::npos);
    CHECK(h.streams[a].error == NGHTTP2_NO_ERROR);
    CHECK(rig.wait_eof(*rig.conn));
}

TEST_CASE("h2: a long-poll is a stream: the first event answers it, else its Grip-Timeout") {
    HoldRig rig;
    H2Client h(*rig.conn);
    const int32_t a = h.request("GET", "/native/poll?channel=p");
    const int32_t b = h.request("GET", "/native/poll?channel=q&timeout=1");
    REQUIRE(h.until(rig, [&] { return rig.pool->pool().queued() == 2; }));
    REQUIRE(rig.pool->pool().run_next());
    REQUIRE(rig.pool->pool().run_next());
    REQUIRE(h.until(rig, [&] { return rig.server->holds() == 2; }));
    CHECK(!h.streams[a].closed);
    REQUIRE(rig.bus.publish("p", "the answer").ok());
    REQUIRE(h.until(rig, [&] { return h.streams[a].closed; }));
    CHECK(h.streams[a].header(":status") == "200");
    CHECK(h.streams[a].data == "the answer");
    CHECK(!h.streams[b].closed);
    REQUIRE(h.until(rig, [&] { return h.streams[b].closed; }));  // its Grip-Timeout
    CHECK(h.streams[b].header(":status") == "204");
    CHECK(rig.server->holds() == 0);
    CHECK(rig.server->alive(rig.slot));
}

TEST_CASE(
    "h2: each stream is a line of the access log: its request, status, bytes, a hold's events") {
    TempAccessLog log;
    HoldRig rig;
    rig.server->set_access_log(&log.log);
    H2Client h(*rig.conn);
    const int32_t hello = h.request("GET", "/native/hello", {{"user-agent", "h2-test"}});
    REQUIRE(h.until(rig, [&] { return rig.pool->pool().queued() == 1; }));
    REQUIRE(rig.pool->pool().run_next());
    REQUIRE(h.until(rig, [&] { return h.streams[hello].closed; }));
    const int32_t held = open_hold(rig, h, "c");
    REQUIRE(rig.bus.publish("c", "one").ok());
    REQUIRE(
        h.until(rig, [&] { return h.streams[held].data.find("data: one") != std::string::npos; }));
    h.reset(held);
    REQUIRE(h.until(rig, [&] { return log.lines().size() == 2; }));
    const auto lines = log.lines();
    CHECK(lines[0].find("\"GET /native/hello HTTP/2\" 200 16 ") != std::string::npos);
    CHECK(lines[0].find("\"h2-test\"") != std::string::npos);
    CHECK(lines[1].find("\"GET /native/hold?channel=c HTTP/2\" 200 ") != std::string::npos);
    CHECK(lines[1].find("events=1") != std::string::npos);
}

TEST_CASE(
    "h2: frames written at once go behind frames still in the output, and what the socket does "
    "not take follows from the output") {
    AppRig rig;
    auto c = rig.connect();
    // The server's socket takes little at a time: a write of what the
    // session has (up to 64 KiB) is taken only in part.
    const int small = 4096;
    REQUIRE(::setsockopt(c->server_fd, SOL_SOCKET, SO_SNDBUF, &small, sizeof small) == 0);
    // Windows wide open: the answers are bounded by the socket, not by flow control.
    H2Client h(*c, false, {{NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, (1u << 31) - 1}});
    REQUIRE(nghttp2_session_set_local_window_size(h.session, NGHTTP2_FLAG_NONE, 0, (1 << 30)) == 0);
    const int32_t a = h.request("GET", "/app/a");
    const int32_t b = h.request("GET", "/app/b");
    REQUIRE(h.until(rig, [&] { return rig.got.size() == 2; }));
    // More than the socket takes. A's frames go into the output (B's answer
    // is still due), and B's answer comes in the same loop turn, before the
    // output is written: its frames must follow A's, not overtake them.
    // Numbered lines: bytes out of order are a different body.
    std::string big;
    for (size_t i = 0; big.size() < (4u << 20); ++i) big += std::to_string(i) + "\n";
    rig.post(rig.got[0].first, text(200, big));
    rig.server->on_completions_ready();
    rig.post(rig.got[1].first, text(200, "b"));
    rig.server->on_completions_ready();
    // The server fills the socket while the client reads nothing: frames
    // written at once that the socket takes only in part.
    rig.step_until([] { return false; }, std::chrono::milliseconds(200));
    REQUIRE(h.until(rig, [&] { return h.streams[a].closed && h.streams[b].closed; }));
    CHECK(h.streams[a].error == NGHTTP2_NO_ERROR);
    CHECK(h.streams[a].data.size() == big.size());
    CHECK((h.streams[a].data == big));  // parenthesized: no 4 MiB printed
    CHECK(h.streams[b].data == "b");
    CHECK_FALSE(h.goaway);
    // A third answer, with nothing in the output and no other stream due:
    // written at once, and the socket too full to take it all again.
    const int32_t d = h.request("GET", "/app/d");
    REQUIRE(h.until(rig, [&] { return rig.got.size() == 3; }));
    rig.post(rig.got[2].first, text(200, big));
    rig.server->on_completions_ready();
    rig.step_until([] { return false; }, std::chrono::milliseconds(200));
    REQUIRE(h.until(rig, [&] { return h.streams[d].closed; }));
    CHECK(h.streams[d].data.size() == big.size());
    CHECK((h.streams[d].data == big));
    CHECK(rig.server->alive(c->slot));
}

TEST_CASE(
    "h2: a stream's receive window is --h2-window and the connection's 16 times it, so an upload "
    "is not held to HTTP/2's 65535 bytes a round trip") {
    for (const uint32_t window : {uint32_t(1) << 20, uint32_t(65535), uint32_t(1) << 30}) {
        DYNAMIC_SECTION("--h2-window " << window) {
            ServerConfig cfg;
            if (window != (uint32_t(1) << 20)) cfg.h2_window = window;  // else the default
            AppRig rig(cfg);
            auto c = rig.connect();
            H2Client h(*c);
            const int32_t id = h.request("GET", "/app/x");
            REQUIRE(h.until(rig, [&] { return rig.got.size() == 1; }));
            CHECK(nghttp2_session_get_remote_settings(
                      h.session, NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE) == window);
            const int64_t conn = std::min<int64_t>(int64_t(window) * 16, NGHTTP2_MAX_WINDOW_SIZE);
            CHECK(nghttp2_session_get_remote_window_size(h.session) == conn);
            rig.post(rig.got[0].first, text(200, "ok"));
            REQUIRE(h.until(rig, [&] { return h.streams[id].closed; }));
        }
    }
}
