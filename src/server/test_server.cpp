// server::Server on a real Loop: connections adopted from socketpair() (and, for
// the listener path, real sockets on 127.0.0.1), mounts whose submit runs a
// small app inline that answers through the completion ring, the loop stepped
// with run_until() while the test reads the client end non-blocking.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "server/test_http_reply.hpp"
#include "server/test_rig.hpp"

using namespace m0;
using namespace m0::http;
using namespace m0::server;
using m0::testing::ServerRig;
using Client = m0::testing::SocketClient;
using m0::testing::Reply;
using m0::testing::take_reply;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

namespace {

// ---- the client side ------------------------------------------------------------

size_t count(const Headers& h, std::string_view name) {
    size_t n = 0;
    for (const auto& [k, v] : h.items)
        if (iequals(k, name)) ++n;
    return n;
}

// A real TCP client of a listener on 127.0.0.1.
std::unique_ptr<Client> tcp_connect(uint16_t port) {
    int fd = m0::testing::connect_loopback(port);
    REQUIRE(fd >= 0);
    return std::make_unique<Client>(fd);
}

uint16_t local_port(int fd) {
    sockaddr_in sin{};
    socklen_t len = sizeof sin;
    REQUIRE(::getsockname(fd, reinterpret_cast<sockaddr*>(&sin), &len) == 0);
    return ntohs(sin.sin_port);
}

// ---- the server side -------------------------------------------------------------

struct Rig : ServerRig {
    struct Seen {
        std::string mount;
        SlotRef slot;
        Request req;
    };
    std::vector<Seen> seen;  // every request a mount received, in order
    // The app: runs inline in the mount's submit, answers by posting completions
    // (or not at all, to answer later).
    std::function<void(SlotRef, const Request&)> app;

    explicit Rig(ServerConfig cfg = {}, std::vector<std::string> mounts = {"/"},
                 bool with_bus = false)
        : ServerRig(std::move(cfg), with_bus) {
        app = [this](SlotRef s, const Request& r) {
            Response resp;
            resp.headers.add("Content-Type", "text/plain");
            resp.body = "hello " + r.target;
            post(s, std::move(resp));
        };
        for (auto& m : mounts) add_mount(m);
    }

    void add_mount(const std::string& prefix) {
        server->add_mount(prefix, [this, prefix](SlotRef s, Request&& r) {
            seen.push_back({prefix, s, std::move(r)});
            Request copy = seen.back().req;
            app(s, copy);
            return Admission::queued;
        });
    }
    std::unique_ptr<Client> connect(bool admin = false) {
        auto c = ServerRig::connect(admin);
        REQUIRE(c);
        return c;
    }

    // Steps the loop until `n` replies came on `c`, the peer closed with nothing
    // more to parse, or 3 s passed. head_only[i]: reply i answers a HEAD.
    std::vector<Reply> replies(Client& c, size_t n, std::vector<bool> head_only = {}) {
        std::vector<Reply> out;
        loop.run_until(
            [&] {
                c.pump();
                while (out.size() < n) {
                    bool head = out.size() < head_only.size() && head_only[out.size()];
                    auto r = take_reply(c.in, head, c.eof);
                    if (!r) break;
                    out.push_back(std::move(*r));
                }
                return out.size() >= n || c.eof;
            },
            3000ms);
        return out;
    }
    Reply reply(Client& c, bool head_only = false) {
        auto rs = replies(c, 1, {head_only});
        // A bounded prefix: Catch2 takes minutes to print a body of megabytes.
        INFO("received " << c.in.size() << " bytes, from: " << c.in.substr(0, 2048));
        REQUIRE(rs.size() == 1);
        return rs[0];
    }
};

const std::string kGet = "GET / HTTP/1.1\r\nHost: h\r\n\r\n";

std::string get(const std::string& target) {
    return "GET " + target + " HTTP/1.1\r\nHost: h\r\n\r\n";
}

}  // namespace

// ---- ordinary answers ------------------------------------------------------------

TEST_CASE("server: a GET is answered with Date, Server and Content-Length", "[http][server]") {
    Rig rig;
    auto c = rig.connect();
    c->send(get("/hello?x=1"));
    Reply r = rig.reply(*c);
    CHECK(r.status_line == "HTTP/1.1 200 OK");
    CHECK(r.body == "hello /hello?x=1");
    CHECK(r.headers.get("Content-Length") ==
          std::optional<std::string_view>(std::to_string(r.body.size())));
    CHECK(r.headers.get("Content-Type") == std::optional<std::string_view>("text/plain"));
    CHECK(r.headers.get("Server") == std::optional<std::string_view>("m0serve/" M0_VERSION));
    auto date = r.headers.get("Date");
    REQUIRE(date);
    CHECK(date->size() == 29);  // IMF-fixdate: "Sun, 06 Nov 1994 08:49:37 GMT"
    CHECK(date->ends_with(" GMT"));
    CHECK((*date)[3] == ',');
    CHECK_FALSE(r.headers.has("Connection"));  // HTTP/1.1 keep-alive is the default
    CHECK(c->in.empty());
    CHECK(rig.server->alive(c->slot));
    CHECK(rig.metrics.requests_total.load() == 1);

    REQUIRE(rig.seen.size() == 1);
    const Request& q = rig.seen[0].req;
    CHECK(q.method == "GET");
    CHECK(q.path == "/hello");
    CHECK(q.query == "x=1");
    CHECK(q.remote_addr == "127.0.0.1");
    CHECK(q.remote_port == 1);
    CHECK(rig.seen[0].slot == c->slot);
}

TEST_CASE("server: framing, Date and Connection headers belong to the server, not the app",
          "[http][server]") {
    Rig rig;
    rig.app = [&](SlotRef s, const Request&) {
        Response resp;
        resp.status = 201;
        resp.headers.add("Content-Length", "999");
        resp.headers.add("Transfer-Encoding", "chunked");
        // (its `close` would end the connection: test_field_values)
        resp.headers.add("Connection", "Keep-Alive, X-App");
        resp.headers.add("Keep-Alive", "timeout=5");
        resp.headers.add("Date", "yesterday");
        resp.headers.add("X-App", "1");
        resp.body = "made";
        rig.post(s, std::move(resp));
    };
    auto c = rig.connect();
    c->send(kGet);
    Reply r = rig.reply(*c);
    CHECK(r.status_line == "HTTP/1.1 201 Created");
    CHECK(r.body == "made");
    CHECK(r.headers.get("Content-Length") == std::optional<std::string_view>("4"));
    CHECK_FALSE(r.headers.has("Transfer-Encoding"));
    CHECK_FALSE(r.headers.has("Connection"));
    CHECK_FALSE(r.headers.has("Keep-Alive"));
    CHECK(count(r.headers, "Date") == 1);
    CHECK(r.headers.get("Date") != std::optional<std::string_view>("yesterday"));
    CHECK(r.headers.get("X-App") == std::optional<std::string_view>("1"));
    CHECK(rig.server->alive(c->slot));

    SECTION("an app's own Server header is kept and not doubled") {
        rig.app = [&](SlotRef s, const Request&) {
            Response resp;
            resp.headers.add("Server", "custom/1");
            rig.post(s, std::move(resp));
        };
        c->send(kGet);
        Reply r2 = rig.reply(*c);
        CHECK(count(r2.headers, "Server") == 1);
        CHECK(r2.headers.get("Server") == std::optional<std::string_view>("custom/1"));
    }
    SECTION("204 has no Content-Length and no body") {
        rig.app = [&](SlotRef s, const Request&) {
            Response resp;
            resp.status = 204;
            resp.body = "dropped";
            rig.post(s, std::move(resp));
        };
        c->send(kGet + kGet);
        auto rs = rig.replies(*c, 2);
        REQUIRE(rs.size() == 2);
        CHECK(rs[0].status == 204);
        CHECK_FALSE(rs[0].headers.has("Content-Length"));
        CHECK(rs[1].status == 204);  // nothing of the body leaked into the stream
        CHECK(c->in.empty());
    }
}

TEST_CASE("server: keep-alive: three pipelined requests are answered in order", "[http][server]") {
    Rig rig;
    auto c = rig.connect();
    SECTION("answered inline") {
        c->send(get("/a") + get("/b") + get("/c"));
        auto rs = rig.replies(*c, 3);
        REQUIRE(rs.size() == 3);
        CHECK(rs[0].body == "hello /a");
        CHECK(rs[1].body == "hello /b");
        CHECK(rs[2].body == "hello /c");
        CHECK(rig.server->alive(c->slot));
        CHECK(rig.metrics.requests_total.load() == 3);
        CHECK(rig.server->connections() == 1);
    }
    SECTION("the next request is not dispatched before the current one is answered") {
        std::vector<SlotRef> pending;
        rig.app = [&](SlotRef s, const Request&) { pending.push_back(s); };
        c->send(get("/a") + get("/b") + get("/c"));
        REQUIRE(rig.step_until([&] { return rig.seen.size() == 1; }));
        // Give the loop a few more turns: nothing more may be dispatched.
        for (int i = 0; i < 20; ++i) rig.loop.run_once();
        CHECK(rig.seen.size() == 1);
        for (const char* path : {"/a", "/b", "/c"}) {
            REQUIRE(rig.step_until([&] { return pending.size() == 1; }));
            CHECK(rig.seen.back().req.path == path);
            Response resp;
            resp.body = std::string("late ") + path;
            SlotRef s = pending[0];
            pending.clear();
            rig.post(s, std::move(resp));
            Reply r = rig.reply(*c);
            CHECK(r.body == std::string("late ") + path);
        }
        CHECK(rig.seen.size() == 3);
    }
}

TEST_CASE("server: a whole answer waits behind what an earlier answer left in the output",
          "[http][server]") {
    // A whole answer whose connection's output is empty goes to the socket at
    // once; one whose output still holds an earlier answer's bytes (here a
    // streamed one, handled in the same loop turn) must queue behind them.
    Rig rig;
    std::vector<SlotRef> pending;
    rig.app = [&](SlotRef s, const Request& req) {
        if (req.path == "/stream") {
            pending.push_back(s);
            return;
        }
        Response resp;
        resp.body = "second";
        rig.post(s, std::move(resp));
    };
    auto c = rig.connect();
    c->send(get("/stream") + get("/whole"));
    REQUIRE(rig.step_until([&] { return pending.size() == 1; }));
    auto st = std::make_shared<StreamState>(1 << 16);
    rig.post_kind(pending[0], Completion::Kind::head, st, Response{});
    rig.post_kind(pending[0], Completion::Kind::chunk, st, {}, "first");
    rig.post_kind(pending[0], Completion::Kind::end, st, {}, {}, false);
    // The stream's completions (its end dispatches the next request, whose
    // answer the app posts), then, with no loop turn between, that answer:
    // the stream's bytes are still in the output.
    rig.server->on_completions_ready();
    REQUIRE(rig.seen.size() == 2);
    REQUIRE(rig.server->unsent(c->slot) > 0);
    rig.server->on_completions_ready();
    auto rs = rig.replies(*c, 2);
    REQUIRE(rs.size() == 2);
    CHECK(rs[0].body == "first");
    CHECK(rs[1].body == "second");
}

TEST_CASE("server: the connection closes after an answer that does not keep alive",
          "[http][server]") {
    Rig rig;
    auto c = rig.connect();
    SECTION("HTTP/1.0") {
        c->send("GET /old HTTP/1.0\r\n\r\n");
        Reply r = rig.reply(*c);
        CHECK(r.status == 200);
        CHECK(r.status_line.starts_with("HTTP/1.1 "));  // the server speaks 1.1 (RFC 9110 §2.5)
        CHECK(r.headers.get("Connection") == std::optional<std::string_view>("close"));
        CHECK(r.body == "hello /old");
        CHECK(rig.wait_eof(*c));
        CHECK(c->in.empty());
    }
    SECTION("HTTP/1.1 with Connection: close") {
        c->send("GET / HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n" + get("/ignored"));
        Reply r = rig.reply(*c);
        CHECK(r.headers.get("Connection") == std::optional<std::string_view>("close"));
        CHECK(rig.wait_eof(*c));
        CHECK(c->in.empty());
        CHECK(rig.seen.size() == 1);  // the request after the close is not served
    }
    SECTION("HTTP/1.0 with Connection: keep-alive stays open and says so") {
        c->send("GET /1 HTTP/1.0\r\nConnection: keep-alive\r\n\r\n");
        Reply r = rig.reply(*c);
        CHECK(r.headers.get("Connection") == std::optional<std::string_view>("keep-alive"));
        c->send("GET /2 HTTP/1.0\r\nConnection: keep-alive\r\n\r\n");
        Reply r2 = rig.reply(*c);
        CHECK(r2.body == "hello /2");
        CHECK(rig.server->alive(c->slot));
    }
}

TEST_CASE("server: HEAD has the Content-Length a GET would have, and no body", "[http][server]") {
    Rig rig;
    auto c = rig.connect();
    c->send("HEAD /thing HTTP/1.1\r\nHost: h\r\n\r\n" + get("/after"));
    auto rs = rig.replies(*c, 2, {true, false});
    REQUIRE(rs.size() == 2);
    CHECK(rs[0].status == 200);
    CHECK(rs[0].headers.get("Content-Length") ==
          std::optional<std::string_view>(std::to_string(std::string("hello /thing").size())));
    CHECK(rs[0].body.empty());
    CHECK(rs[1].body == "hello /after");  // no body bytes of the HEAD came before it
    CHECK(c->in.empty());

    SECTION("an app's Content-Length for a HEAD is passed on") {
        rig.app = [&](SlotRef s, const Request&) {
            Response resp;
            resp.headers.add("Content-Length", "12345");
            rig.post(s, std::move(resp));
        };
        c->send("HEAD /big HTTP/1.1\r\nHost: h\r\n\r\n");
        Reply r = rig.reply(*c, true);
        CHECK(r.headers.get("Content-Length") == std::optional<std::string_view>("12345"));
        c->send(get("/x"));
        rig.app = [&](SlotRef s, const Request&) {
            Response resp;
            resp.body = "x";
            rig.post(s, std::move(resp));
        };
        CHECK(rig.reply(*c).body == "x");
    }
}

// Regression: the HEAD length was std::stoull(app value), which threw out of a
// libevent callback and took the whole server down on "Content-Length: abc".
TEST_CASE("server: HEAD with a malformed app Content-Length falls back to the body length",
          "[http][server]") {
    Rig rig;
    std::string value;
    rig.app = [&](SlotRef s, const Request&) {
        Response resp;
        resp.headers.add("Content-Length", value);
        resp.body = "body";
        rig.post(s, std::move(resp));
    };
    auto c = rig.connect();
    for (const char* v : {"abc", "", "99999999999999999999999", "-1"}) {
        INFO("Content-Length: '" << v << "'");
        value = v;
        c->send("HEAD / HTTP/1.1\r\nHost: h\r\n\r\n");
        Reply r = rig.reply(*c, true);
        CHECK(r.status == 200);
        CHECK(r.headers.get("Content-Length") == std::optional<std::string_view>("4"));
    }
    CHECK(rig.server->alive(c->slot));
}

// ---- routing ---------------------------------------------------------------------

TEST_CASE("server: a path no mount serves is 404 and the connection stays", "[http][server]") {
    Rig rig({}, {"/native"});
    auto c = rig.connect();
    c->send(get("/other") + get("/nativex") + get("/native/ok"));
    auto rs = rig.replies(*c, 3);
    REQUIRE(rs.size() == 3);
    CHECK(rs[0].status == 404);
    CHECK_FALSE(rs[0].body.empty());
    CHECK(rs[1].status == 404);
    CHECK(rs[2].status == 200);
    REQUIRE(rig.seen.size() == 1);
    CHECK(rig.seen[0].req.path == "/native/ok");
    CHECK(rig.server->alive(c->slot));
}

TEST_CASE("server: routing takes the longest mount prefix on a path-segment boundary",
          "[http][server]") {
    Rig rig({}, {"/", "/native"});
    auto c = rig.connect();
    struct {
        const char* target;
        const char* mount;
        const char* script_name;
        const char* path_info;
    } cases[] = {
        {"/native/x", "/native", "/native", "/x"},
        {"/native/x/y?q=1", "/native", "/native", "/x/y"},
        {"/native", "/native", "/native", ""},
        {"/native/", "/native", "/native", "/"},
        {"/native/a%20b", "/native", "/native", "/a b"},
        {"/nativex", "/", "", "/nativex"},
        {"/", "/", "", "/"},
        {"/other/page", "/", "", "/other/page"},
    };
    for (auto& k : cases) {
        INFO(k.target);
        size_t before = rig.seen.size();
        c->send(get(k.target));
        Reply r = rig.reply(*c);
        CHECK(r.status == 200);
        REQUIRE(rig.seen.size() == before + 1);
        const auto& s = rig.seen.back();
        CHECK(s.mount == k.mount);
        CHECK(s.req.script_name == k.script_name);
        CHECK(s.req.path_info == k.path_info);
    }
    SECTION("mount order does not matter") {
        Rig rig2({}, {"/native", "/", "/native/deep"});
        auto c2 = rig2.connect();
        c2->send(get("/native/deep/x") + get("/native/deeper") + get("/z"));
        REQUIRE(rig2.replies(*c2, 3).size() == 3);
        REQUIRE(rig2.seen.size() == 3);
        CHECK(rig2.seen[0].mount == "/native/deep");
        CHECK(rig2.seen[0].req.path_info == "/x");
        CHECK(rig2.seen[1].mount == "/native");
        CHECK(rig2.seen[1].req.path_info == "/deeper");
        CHECK(rig2.seen[2].mount == "/");
    }
}

TEST_CASE("server: a mount that refuses the job answers 503 and closes", "[http][server]") {
    Rig rig({}, {});
    rig.server->add_mount("/", [](SlotRef, Request&&) { return Admission::stopping; });
    auto c = rig.connect();
    c->send(kGet);
    Reply r = rig.reply(*c);
    CHECK(r.status == 503);
    CHECK(r.body == "server is shutting down\n");
    CHECK_FALSE(r.headers.has("Retry-After"));
    CHECK(r.headers.get("Connection") == std::optional<std::string_view>("close"));
    CHECK(rig.wait_eof(*c));
}

TEST_CASE("server: a mount whose queue is full answers 503 with Retry-After and says so",
          "[http][server]") {
    Rig rig({}, {});
    rig.server->add_mount("/", [](SlotRef, Request&&) { return Admission::full; });
    auto c = rig.connect();
    c->send(kGet);
    Reply r = rig.reply(*c);
    CHECK(r.status == 503);
    CHECK(r.body == "too many queued requests\n");
    CHECK(r.headers.get("Retry-After") == std::optional<std::string_view>("1"));
    CHECK(r.headers.get("Connection") == std::optional<std::string_view>("close"));
    CHECK(rig.wait_eof(*c));
}

TEST_CASE("server: a client that resets while its request is queued cancels that request only",
          "[http][server]") {
    Rig rig({}, {});
    // The mount queues and never answers; each request's flag by client port.
    std::map<uint16_t, std::shared_ptr<const CancelFlag>> flags;
    rig.server->add_mount("/", [&](SlotRef s, Request&& r) {
        flags[r.remote_port] = rig.ring.cancels.arm(s);
        return Admission::queued;
    });
    std::string err;
    REQUIRE(rig.server->listen("127.0.0.1", 0, false, err));
    auto leaving = tcp_connect(rig.server->bound_port(false));
    auto staying = tcp_connect(rig.server->bound_port(false));
    const uint16_t leaving_port = local_port(leaving->fd), staying_port = local_port(staying->fd);
    leaving->send(kGet);
    staying->send(kGet);
    REQUIRE(rig.step_until([&] { return flags.size() == 2; }));
    REQUIRE(flags.count(leaving_port) == 1);
    REQUIRE(flags.count(staying_port) == 1);
    CHECK_FALSE(flags[leaving_port]->cancelled());
    linger hard{1, 0};  // close with a reset: the server sees the client leave
    REQUIRE(::setsockopt(leaving->fd, SOL_SOCKET, SO_LINGER, &hard, sizeof hard) == 0);
    leaving->close();
    REQUIRE(rig.step_until([&] { return rig.server->connections() == 1; }));
    CHECK(flags[leaving_port]->cancelled());
    CHECK_FALSE(flags[staying_port]->cancelled());
}

// ---- limits and timeouts ---------------------------------------------------------

TEST_CASE("server: the limits of ServerConfig are answered and the connection closed",
          "[http][server]") {
    SECTION("a head over max_header is 431") {
        ServerConfig cfg;
        cfg.limits.max_header = 256;
        Rig rig(cfg);
        auto c = rig.connect();
        c->send("GET / HTTP/1.1\r\nHost: h\r\nX-Big: " + std::string(1000, 'b') + "\r\n\r\n");
        Reply r = rig.reply(*c);
        CHECK(r.status == 431);
        CHECK(r.headers.get("Connection") == std::optional<std::string_view>("close"));
        CHECK(rig.wait_eof(*c));
        CHECK(rig.seen.empty());
    }
    SECTION("a Content-Length over max_body is 413 at the head, before the body is sent") {
        ServerConfig cfg;
        cfg.limits.max_body = 16;
        Rig rig(cfg);
        auto c = rig.connect();
        c->send("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 100\r\n\r\n");
        Reply r = rig.reply(*c);
        CHECK(r.status == 413);
        CHECK(rig.wait_eof(*c));
        CHECK(rig.seen.empty());
    }
    SECTION("a chunked body over max_body is 413") {
        ServerConfig cfg;
        cfg.limits.max_body = 16;
        Rig rig(cfg);
        auto c = rig.connect();
        c->send(
            "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n"
            "10\r\n0123456789abcdef\r\n1\r\nx\r\n");
        Reply r = rig.reply(*c);
        CHECK(r.status == 413);
        CHECK(rig.wait_eof(*c));
    }
    SECTION("a body within max_body is served") {
        ServerConfig cfg;
        cfg.limits.max_body = 16;
        Rig rig(cfg);
        auto c = rig.connect();
        c->send("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 16\r\n\r\n0123456789abcdef");
        CHECK(rig.reply(*c).status == 200);
        REQUIRE(rig.seen.size() == 1);
        CHECK(rig.seen[0].req.body == "0123456789abcdef");
    }
}

TEST_CASE("server: Expect: 100-continue is answered 100 before the body is read",
          "[http][server]") {
    Rig rig;
    auto c = rig.connect();
    c->send("PUT /up HTTP/1.1\r\nHost: h\r\nExpect: 100-continue\r\nContent-Length: 4\r\n\r\n");
    Reply r = rig.reply(*c);
    CHECK(r.status_line == "HTTP/1.1 100 Continue");
    CHECK(rig.seen.empty());
    c->send("body");
    Reply r2 = rig.reply(*c);
    CHECK(r2.status == 200);
    REQUIRE(rig.seen.size() == 1);
    CHECK(rig.seen[0].req.body == "body");
}

TEST_CASE("server: a request not received within header_timeout is 408", "[http][server]") {
    ServerConfig cfg;
    cfg.header_timeout = 0.2;
    cfg.body_timeout = 0.2;  // a partial body's pause (the next case has more)
    Rig rig(cfg);
    auto c = rig.connect();
    SECTION("a partial head") {
        auto t0 = Clock::now();
        c->send("GET / HTTP/1.1\r\nHost:");
        Reply r = rig.reply(*c);
        auto waited = Clock::now() - t0;
        CHECK(r.status == 408);
        CHECK(waited >= 150ms);
        CHECK(rig.wait_eof(*c));
        CHECK(rig.seen.empty());
    }
    SECTION("a partial body") {
        c->send("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 10\r\n\r\nabc");
        Reply r = rig.reply(*c);
        CHECK(r.status == 408);
        CHECK(rig.wait_eof(*c));
    }
    SECTION("a connection that never speaks is closed without an answer") {
        auto t0 = Clock::now();
        CHECK(rig.wait_eof(*c));
        CHECK(Clock::now() - t0 >= 150ms);
        CHECK(c->in.empty());
        CHECK(rig.server->connections() == 0);
    }
}

TEST_CASE("server: a body still arriving outlives header_timeout; a pause past body_timeout is 408",
          "[http][server]") {
    ServerConfig cfg;
    cfg.header_timeout = 0.2;
    cfg.body_timeout = 0.3;
    Rig rig(cfg);
    auto c = rig.connect();
    SECTION("a slow upload: each piece within body_timeout, the whole past header_timeout") {
        c->send("POST /up HTTP/1.1\r\nHost: h\r\nContent-Length: 8\r\n\r\n");
        const auto t0 = Clock::now();
        for (const char* piece : {"ab", "cd", "ef", "gh"}) {
            const auto until = Clock::now() + 150ms;
            rig.step_until([] { return false; }, 150ms);
            REQUIRE(Clock::now() >= until);
            c->send(piece);
        }
        Reply r = rig.reply(*c);
        CHECK(Clock::now() - t0 >= 600ms);  // three times header_timeout
        CHECK(r.status == 200);
        REQUIRE(rig.seen.size() == 1);
        CHECK(rig.seen[0].req.body == "abcdefgh");
    }
    SECTION("a body that stops: 408 once it has sent nothing for body_timeout") {
        c->send("POST /up HTTP/1.1\r\nHost: h\r\nContent-Length: 8\r\n\r\nabc");
        const auto t0 = Clock::now();
        Reply r = rig.reply(*c);
        CHECK(r.status == 408);
        CHECK(r.body.find("--body-timeout") != std::string::npos);
        CHECK(Clock::now() - t0 >= 250ms);
        CHECK(rig.wait_eof(*c));
        CHECK(rig.seen.empty());
    }
    SECTION("chunked: the same rule") {
        c->send("POST /up HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n");
        for (const char* piece : {"2\r\nab\r\n", "2\r\ncd\r\n", "0\r\n\r\n"}) {
            rig.step_until([] { return false; }, 150ms);
            c->send(piece);
        }
        Reply r = rig.reply(*c);
        CHECK(r.status == 200);
        REQUIRE(rig.seen.size() == 1);
        CHECK(rig.seen[0].req.body == "abcd");
    }
}

TEST_CASE("server: an idle keep-alive connection is closed after keepalive_timeout",
          "[http][server]") {
    ServerConfig cfg;
    cfg.keepalive_timeout = 0.2;
    Rig rig(cfg);
    auto c = rig.connect();
    c->send(kGet);
    CHECK(rig.reply(*c).status == 200);
    auto t0 = Clock::now();
    REQUIRE(rig.server->alive(c->slot));
    CHECK(rig.wait_eof(*c));
    CHECK(Clock::now() - t0 >= 150ms);
    CHECK(c->in.empty());  // closed quietly: no 408 for an idle connection
    CHECK(rig.step_until([&] { return rig.server->connections() == 0; }));
    CHECK_FALSE(rig.server->alive(c->slot));
    CHECK(rig.metrics.connections_open.load() == 0);

    SECTION("a request started on the idle connection is timed as a head (408)") {
        ServerConfig cfg2;
        cfg2.keepalive_timeout = 0.2;
        cfg2.header_timeout = 0.2;
        Rig rig2(cfg2);
        auto c2 = rig2.connect();
        c2->send(kGet + "GET / HT");
        auto rs = rig2.replies(*c2, 2);
        REQUIRE(rs.size() == 2);
        CHECK(rs[0].status == 200);
        CHECK(rs[1].status == 408);
    }
}

TEST_CASE("server: malformed and smuggling-shaped requests are refused and the connection closed",
          "[http][server]") {
    struct {
        const char* what;
        std::string input;
        int status;
    } cases[] = {
        {"garbage request line", "HELLO\r\n\r\n", 400},
        {"binary garbage", std::string("\x16\x03\x01\x00\xa5\x01\x00", 7), 400},
        {"Content-Length with Transfer-Encoding",
         "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n"
         "0\r\n\r\nGET /smuggled HTTP/1.1\r\nHost: h\r\n\r\n",
         400},
        {"Transfer-Encoding with Content-Length",
         "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n"
         "0\r\n\r\n",
         400},
        {"two differing Content-Lengths",
         "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab", 400},
        {"a coding the server does not implement (RFC 9112 §6.1: 501)",
         "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n", 501},
        {"chunked not the final coding",
         "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked, gzip\r\n\r\n0\r\n\r\n", 400},
        {"whitespace before a field's colon",
         "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding  : chunked\r\n\r\n0\r\n\r\n", 400},
        {"two Host fields", "GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", 400},
        {"Transfer-Encoding on HTTP/1.0",
         "POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 400},
        {"bad chunk size",
         "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\nxyz\r\n", 400},
        {"missing Host", "GET / HTTP/1.1\r\n\r\n", 400},
        {"HTTP/2.0", "GET / HTTP/2.0\r\nHost: h\r\n\r\n", 505},
        {"unsupported Expect", "GET / HTTP/1.1\r\nHost: h\r\nExpect: magic\r\n\r\n", 417},
    };
    for (auto& k : cases) {
        DYNAMIC_SECTION(k.what) {
            Rig rig;
            auto c = rig.connect();
            c->send(k.input);
            Reply r = rig.reply(*c);
            CHECK(r.status == k.status);
            CHECK(r.headers.get("Connection") == std::optional<std::string_view>("close"));
            CHECK_FALSE(r.body.empty());
            CHECK(rig.wait_eof(*c));
            CHECK(c->in.empty());
            CHECK(rig.seen.empty());
        }
    }
    SECTION("a bad request after a good one: the good one is answered, then 400 and close") {
        Rig rig;
        auto c = rig.connect();
        c->send(get("/good") + "BAD LINE\r\n\r\n" + get("/never"));
        auto rs = rig.replies(*c, 2);
        REQUIRE(rs.size() == 2);
        CHECK(rs[0].status == 200);
        CHECK(rs[1].status == 400);
        CHECK(rig.wait_eof(*c));
        CHECK(rig.seen.size() == 1);
    }
}

// ---- slots and late completions --------------------------------------------------

TEST_CASE("server: a completion for a departed slot is dropped and the slot's generation changes",
          "[http][server]") {
    Rig rig;
    std::vector<SlotRef> deferred;
    rig.app = [&](SlotRef s, const Request& r) {
        if (r.path == "/slow") {
            deferred.push_back(s);
            return;
        }
        Response resp;
        resp.body = "fast";
        rig.post(s, std::move(resp));
    };
    auto c = rig.connect();
    SlotRef old = c->slot;

    SECTION("the client resets while its request runs") {
        // The answer to /fast stays unread in the client's socket, so closing it
        // resets the connection (ECONNRESET on the server's read).
        c->send(get("/fast") + get("/slow"));
        REQUIRE(rig.step_until([&] { return deferred.size() == 1; }));
        c->close();
        REQUIRE(rig.step_until([&] { return !rig.server->alive(old); }));
        CHECK(rig.server->connections() == 0);

        Response late;
        late.body = "too late";
        rig.post(deferred[0], std::move(late));
        CHECK(rig.step_until([&] { return rig.metrics.completions_dropped.load() == 1; }));

        auto c2 = rig.connect();
        CHECK(c2->slot.index == old.index);  // the index is reused...
        CHECK(c2->slot.gen != old.gen);      // ...under a new generation
        CHECK_FALSE(rig.server->alive(old));
        CHECK(rig.server->alive(c2->slot));
        // The new owner of the index still works and never sees the late answer.
        c2->send(get("/x"));
        Reply r = rig.reply(*c2);
        CHECK(r.body == "fast");
        CHECK(c2->in.empty());
    }
    SECTION("a completion naming an older generation of a reused index is dropped") {
        c->send(get("/fast"));
        CHECK(rig.reply(*c).body == "fast");
        c->close();  // between requests: the slot is released at once
        REQUIRE(rig.step_until([&] { return !rig.server->alive(old); }));
        auto c2 = rig.connect();
        REQUIRE(c2->slot.index == old.index);
        CHECK(c2->slot.gen != old.gen);
        Response stale;
        stale.body = "stale";
        rig.post(old, std::move(stale));
        CHECK(rig.step_until([&] { return rig.metrics.completions_dropped.load() == 1; }));
        for (int i = 0; i < 10; ++i) rig.loop.run_once();
        c2->pump();
        CHECK(c2->in.empty());  // the stranger on the reused index heard nothing
        CHECK(rig.server->alive(c2->slot));
    }
}

TEST_CASE("server: a client that half-closes while its request runs still gets the answer",
          "[http][server]") {
    Rig rig;
    std::vector<SlotRef> deferred;
    rig.app = [&](SlotRef s, const Request&) { deferred.push_back(s); };
    auto c = rig.connect();
    c->send(kGet);
    REQUIRE(rig.step_until([&] { return deferred.size() == 1; }));
    ::shutdown(c->fd, SHUT_WR);
    for (int i = 0; i < 20; ++i) rig.loop.run_once();
    CHECK(rig.server->alive(c->slot));
    Response resp;
    resp.body = "still here";
    rig.post(deferred[0], std::move(resp));
    // The departure probe (an interim 100), then the answer.
    auto rs = rig.replies(*c, 2);
    REQUIRE(rs.size() == 2);
    CHECK(rs[0].status == 100);
    CHECK(rs[1].body == "still here");
    CHECK(rig.wait_eof(*c));
    CHECK(rig.metrics.completions_dropped.load() == 0);
}

// ---- streamed bodies -------------------------------------------------------------

TEST_CASE("server: a streamed body is chunk-framed on HTTP/1.1", "[http][server]") {
    const std::string kAlpha = "abcdefghijklmnopqrstuvwxyz";
    Rig rig;
    bool aborted = false;
    std::string first_bytes;
    std::optional<std::string> length;
    rig.app = [&](SlotRef s, const Request&) {
        auto st = std::make_shared<StreamState>(1 << 16);
        Response head;
        head.headers.add("Content-Type", "text/plain");
        if (length) head.headers.add("Content-Length", *length);
        head.body = first_bytes;
        rig.post_kind(s, Completion::Kind::head, st, std::move(head));
        rig.post_kind(s, Completion::Kind::chunk, st, {}, "hello");
        rig.post_kind(s, Completion::Kind::chunk, st, {}, "");  // an empty chunk writes nothing
        rig.post_kind(s, Completion::Kind::chunk, st, {}, " world");
        rig.post_kind(s, Completion::Kind::chunk, st, {}, "abcdefghijklmnopqrstuvwxyz");  // size 1a
        rig.post_kind(s, Completion::Kind::end, st, {}, {}, aborted);
    };
    auto c = rig.connect();

    SECTION("HTTP/1.1: chunked, then the connection is reused") {
        c->send(kGet);
        Reply r = rig.reply(*c);
        CHECK(r.status == 200);
        CHECK(r.headers.get("Transfer-Encoding") == std::optional<std::string_view>("chunked"));
        CHECK_FALSE(r.headers.has("Content-Length"));
        CHECK(r.raw_body == "5\r\nhello\r\n6\r\n world\r\n1a\r\n" + kAlpha + "\r\n0\r\n\r\n");
        CHECK(r.body == "hello world" + kAlpha);
        CHECK(c->in.empty());
        c->send(kGet);
        CHECK(rig.reply(*c).body == "hello world" + kAlpha);
        CHECK(rig.server->alive(c->slot));
    }
    SECTION("the head's own body is the first chunk") {
        first_bytes = "<<";
        c->send(kGet);
        Reply r = rig.reply(*c);
        CHECK(r.raw_body ==
              "2\r\n<<\r\n5\r\nhello\r\n6\r\n world\r\n1a\r\n" + kAlpha + "\r\n0\r\n\r\n");
    }
    SECTION("with the app's Content-Length the body is sent as is") {
        length = "37";
        c->send(kGet);
        Reply r = rig.reply(*c);
        CHECK_FALSE(r.headers.has("Transfer-Encoding"));
        CHECK(r.headers.get("Content-Length") == std::optional<std::string_view>("37"));
        CHECK(r.raw_body == "hello world" + kAlpha);
        CHECK(rig.server->alive(c->slot));
    }
    SECTION("past the app's Content-Length nothing is sent: the next answer starts clean") {
        length = "8";  // "hello wo" of 37
        c->send(kGet);
        Reply r = rig.reply(*c);
        CHECK(r.headers.get("Content-Length") == std::optional<std::string_view>("8"));
        CHECK(r.raw_body == "hello wo");
        CHECK(c->in.empty());
        c->send(kGet);
        CHECK(rig.reply(*c).raw_body == "hello wo");
        CHECK(rig.server->alive(c->slot));
    }
    SECTION("short of the app's Content-Length the connection closes after what there is") {
        length = "100";
        c->send(kGet + kGet);
        REQUIRE(rig.wait_eof(*c));
        CHECK(c->in.ends_with("\r\n\r\nhello world" + kAlpha));  // and no second answer
        SlotRef slot = c->slot;
        c->close();
        CHECK(rig.step_until([&] { return !rig.server->alive(slot); }));
    }
    SECTION("HEAD: no framing and no body, and the connection is kept") {
        c->send("HEAD / HTTP/1.1\r\nHost: x\r\n\r\n" + kGet);
        Reply h = rig.reply(*c, true);
        CHECK(h.status == 200);
        CHECK_FALSE(h.headers.has("Transfer-Encoding"));
        CHECK_FALSE(h.headers.has("Connection"));
        CHECK(rig.reply(*c).body == "hello world" + kAlpha);
        CHECK(rig.server->alive(c->slot));
    }
    SECTION("HTTP/1.0: close-delimited, no chunks") {
        c->send("GET / HTTP/1.0\r\n\r\n");
        REQUIRE(rig.wait_eof(*c));
        auto r = take_reply(c->in, false, true);
        REQUIRE(r);
        CHECK_FALSE(r->headers.has("Transfer-Encoding"));
        CHECK(r->headers.get("Connection") == std::optional<std::string_view>("close"));
        CHECK(r->raw_body == "hello world" + kAlpha);
    }
    SECTION("an aborted body is not terminated and the connection is closed") {
        aborted = true;
        c->send(kGet);
        REQUIRE(rig.wait_eof(*c));
        CHECK(c->in.ends_with("5\r\nhello\r\n6\r\n world\r\n1a\r\n" + kAlpha + "\r\n"));
        CHECK_FALSE(c->in.ends_with("0\r\n\r\n"));
        SlotRef slot = c->slot;
        c->close();  // ends the server's lingering close at once
        CHECK(rig.step_until([&] { return !rig.server->alive(slot); }));
    }
}

// ---- file bodies (wsgi.file_wrapper) ---------------------------------------------

TEST_CASE(
    "server: a file body goes out from its offset for its length, framed by the answer's "
    "Content-Length; cut short, the connection closes after it",
    "[http][server][file]") {
    char dir[] = "/tmp/m0-server-file-XXXXXX";
    REQUIRE(mkdtemp(dir));
    const std::string path = std::string(dir) + "/f";
    struct Removed {  // also when a REQUIRE ends the test early
        const std::string& path;
        const char* dir;
        ~Removed() {
            std::remove(path.c_str());
            rmdir(dir);
        }
    } removed{path, dir};
    std::string content;
    for (int i = 0; i < 300000; ++i) content += static_cast<char>('a' + i % 26);
    FILE* fp = fopen(path.c_str(), "wb");
    REQUIRE(fp);
    fwrite(content.data(), 1, content.size(), fp);
    fclose(fp);
    std::vector<int> fds;
    Rig rig;
    uint64_t offset = 7, length = 250000;
    bool cut = false;
    std::string declared = "250000";
    rig.app = [&](SlotRef s, const Request&) {
        int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
        REQUIRE(fd >= 0);
        fds.push_back(fd);
        Completion c;
        c.kind = Completion::Kind::response;
        c.slot = s;
        c.response.headers.add("Content-Length", declared);
        c.file = std::make_shared<FileBody>(fd, offset, length, cut);
        rig.ring.push(std::move(c));
    };
    auto c = rig.connect();
    SECTION("whole: the connection is kept for the next answer") {
        c->send(kGet + kGet);
        for (int i = 0; i < 2; ++i) {
            Reply r = rig.reply(*c);
            CHECK(r.status == 200);
            CHECK(r.headers.get("Content-Length") == std::optional<std::string_view>("250000"));
            CHECK(r.body == content.substr(7, 250000));
        }
        CHECK(c->in.empty());
        CHECK(rig.server->alive(c->slot));
    }
    SECTION("HEAD: the head alone") {
        c->send("HEAD / HTTP/1.1\r\nHost: x\r\n\r\n" + kGet);
        Reply h = rig.reply(*c, true);
        CHECK(h.headers.get("Content-Length") == std::optional<std::string_view>("250000"));
        CHECK(rig.reply(*c).body == content.substr(7, 250000));
    }
    SECTION("cut: what the file holds, then the close") {
        declared = "300000";
        length = 1000;
        cut = true;
        c->send(kGet + kGet);
        REQUIRE(rig.wait_eof(*c));
        CHECK(c->in.ends_with("\r\n\r\n" + content.substr(7, 1000)));
        CHECK(c->in.find("HTTP/1.1", 1) == std::string::npos);  // no second answer
        SlotRef slot = c->slot;
        c->close();
        CHECK(rig.step_until([&] { return !rig.server->alive(slot); }));
    }
    // Every descriptor the server took is closed once its file was sent.
    CHECK(rig.step_until([&] {
        for (int fd : fds)
            if (fcntl(fd, F_GETFD) != -1) return false;
        return true;
    }));
}

// ---- the admin side --------------------------------------------------------------

namespace {
std::string publish(const std::string& body, const char* auth) {
    std::string s = "POST /publish HTTP/1.1\r\nHost: h\r\nContent-Type: application/json\r\n";
    if (auth) s += std::string("Authorization: ") + auth + "\r\n";
    return s + "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
}
ServerConfig admin_cfg() {
    ServerConfig cfg;
    cfg.admin_key = "sekrit";
    return cfg;
}
}  // namespace

TEST_CASE("server admin: GET /metrics is Prometheus text", "[http][server][admin]") {
    Rig rig(admin_cfg());
    auto c = rig.connect(true);
    c->send("GET /metrics HTTP/1.1\r\nHost: h\r\n\r\n");
    Reply r = rig.reply(*c);
    CHECK(r.status == 200);
    auto ct = r.headers.get("Content-Type");
    REQUIRE(ct);
    CHECK(ct->starts_with("text/plain; version=0.0.4"));
    CHECK(r.body.find("# TYPE m0_connections_open gauge\n") != std::string::npos);
    // The gauge counts client connections; the admin one is not among them.
    CHECK(r.body.find("\nm0_connections_open 0\n") != std::string::npos);
    CHECK(r.body.find("\nm0_requests_total 1\n") != std::string::npos);
    CHECK(rig.seen.empty());  // the admin side never reaches a mount

    SECTION("the gauge follows the connections") {
        auto other = rig.connect();
        c->send("GET /metrics HTTP/1.1\r\nHost: h\r\n\r\n");
        CHECK(rig.reply(*c).body.find("\nm0_connections_open 1\n") != std::string::npos);
    }
    SECTION("other admin paths are 404, other methods on /publish 405") {
        c->send("GET /nothing HTTP/1.1\r\nHost: h\r\n\r\nGET /publish HTTP/1.1\r\nHost: h\r\n\r\n");
        auto rs = rig.replies(*c, 2);
        REQUIRE(rs.size() == 2);
        CHECK(rs[0].status == 404);
        CHECK(rs[1].status == 405);
        CHECK(rs[1].headers.get("Allow") == std::optional<std::string_view>("POST"));
    }
}

TEST_CASE("server admin: POST /publish needs the bearer key and a bus", "[http][server][admin]") {
    const std::string body = R"({"channel": "news", "data": "hi", "event": "update"})";
    SECTION("without the key: 401") {
        Rig rig(admin_cfg(), {"/"}, true);
        auto c = rig.connect(true);
        c->send(publish(body, nullptr));
        Reply r = rig.reply(*c);
        CHECK(r.status == 401);
        CHECK(r.headers.get("WWW-Authenticate") == std::optional<std::string_view>("Bearer"));
        CHECK(rig.bus.published.load() == 0);
    }
    SECTION("with a wrong key: 401") {
        Rig rig(admin_cfg(), {"/"}, true);
        auto c = rig.connect(true);
        c->send(publish(body, "Bearer sekriT") + publish(body, "Bearer sekrit2") +
                publish(body, "sekrit"));
        auto rs = rig.replies(*c, 3);
        REQUIRE(rs.size() == 3);
        for (auto& r : rs) CHECK(r.status == 401);
        CHECK(rig.bus.published.load() == 0);
    }
    SECTION("with the key and no bus (no --realtime): 503") {
        Rig rig(admin_cfg());
        auto c = rig.connect(true);
        c->send(publish(body, "Bearer sekrit"));
        CHECK(rig.reply(*c).status == 503);
    }
    SECTION("no admin key configured: 403") {
        Rig rig({}, {"/"}, true);
        auto c = rig.connect(true);
        c->send(publish(body, "Bearer "));
        CHECK(rig.reply(*c).status == 403);
        CHECK(rig.bus.published.load() == 0);
    }
    SECTION("with the key and a bus: 200 and the id") {
        Rig rig(admin_cfg(), {"/"}, true);
        auto c = rig.connect(true);
        c->send(publish(body, "Bearer sekrit"));
        Reply r = rig.reply(*c);
        CHECK(r.status == 200);
        CHECK(r.headers.get("Content-Type") == std::optional<std::string_view>("application/json"));
        CHECK(r.body == "{\"id\": 1}\n");
        CHECK(rig.bus.published.load() == 1);
        CHECK(rig.bus.last_id() == 1);
        c->send(publish(R"({"channel":"news","data":""})", "Bearer sekrit"));
        CHECK(rig.reply(*c).body == "{\"id\": 2}\n");
        // No data at all: refused with the reason, nothing published.
        c->send(publish(R"({"channel":"news"})", "Bearer sekrit"));
        r = rig.reply(*c);
        CHECK(r.status == 400);
        CHECK(r.body.starts_with("missing data"));
        CHECK(rig.bus.published.load() == 2);
    }
    SECTION("a refused channel name or a bad body: 400, nothing published") {
        Rig rig(admin_cfg(), {"/"}, true);
        auto c = rig.connect(true);
        c->send(publish(R"({"channel": "m0.slot.0.1", "data": "x"})", "Bearer sekrit"));
        Reply r = rig.reply(*c);
        CHECK(r.status == 400);
        CHECK(r.body.find("reserved") != std::string::npos);
        c->send(publish(R"({"channel": "a\nb"})", "Bearer sekrit"));
        CHECK(rig.reply(*c).status == 400);
        c->send(publish(R"({"channel": " news", "data": "x"})", "Bearer sekrit"));
        r = rig.reply(*c);
        CHECK(r.status == 400);
        CHECK(r.body.find("space") != std::string::npos);
        c->send(publish(R"({"data": "no channel"})", "Bearer sekrit"));
        CHECK(rig.reply(*c).status == 400);
        c->send(publish(R"({"channel": "news", "data": 5})", "Bearer sekrit"));
        CHECK(rig.reply(*c).status == 400);
        c->send(publish(R"(not json)", "Bearer sekrit"));
        CHECK(rig.reply(*c).status == 400);
        CHECK(rig.bus.published.load() == 0);
        CHECK(rig.bus.last_id() == 0);
    }
}

TEST_CASE("server admin: POST /publish of an event over the bus's max event size is 413",
          "[http][server][admin]") {
    Rig rig(admin_cfg(), {"/"}, true);
    auto c = rig.connect(true);
    const std::string big(rig.bus.max_event_size(), 'x');  // plus its fields: over
    // Larger than the socket buffer: written as the server reads.
    const std::string req =
        publish(R"({"channel": "news", "data": ")" + big + R"("})", "Bearer sekrit");
    size_t off = 0;
    REQUIRE(rig.step_until([&] {
        ssize_t n = ::send(c->fd, req.data() + off, req.size() - off, MSG_NOSIGNAL);
        if (n > 0) off += size_t(n);
        return off == req.size();
    }));
    Reply r = rig.reply(*c);
    CHECK(r.status == 413);
    CHECK(r.body.find("--max-event-size") != std::string::npos);
    CHECK(r.body.find(std::to_string(rig.bus.max_event_size())) != std::string::npos);
    CHECK(rig.bus.published.load() == 0);
    CHECK(rig.bus.last_id() == 0);
    c->send("GET /metrics HTTP/1.1\r\nHost: h\r\n\r\n");
    CHECK(rig.reply(*c).body.find("\nm0_events_too_large_total 1\n") != std::string::npos);
    c->send(publish(R"({"channel": "news", "data": "small"})", "Bearer sekrit"));
    CHECK(rig.reply(*c).body == "{\"id\": 1}\n");
}

// ---- the listener ------------------------------------------------------------------

namespace {
// Of this process's sockets (the server runs in it), the one accepted for
// `client`: its local port is the listener's, its peer's the client's own.
int accepted_for(int client, uint16_t listener_port) {
    const uint16_t client_port = local_port(client);
    for (int fd = 0; fd < 4096; ++fd) {
        if (fd == client) continue;
        sockaddr_in self{}, peer{};
        socklen_t a = sizeof self, b = sizeof peer;
        if (::getsockname(fd, reinterpret_cast<sockaddr*>(&self), &a) != 0 ||
            ::getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &b) != 0 ||
            self.sin_family != AF_INET)
            continue;
        if (ntohs(self.sin_port) == listener_port && ntohs(peer.sin_port) == client_port) return fd;
    }
    return -1;
}

int nodelay(int fd) {
    int on = 0;
    socklen_t len = sizeof on;
    REQUIRE(::getsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, &len) == 0);
    return on;
}
}  // namespace

TEST_CASE(
    "server: TCP connections, a client's and the admin's, are accepted with TCP_NODELAY (a "
    "streamed chunk after its head must not wait for the client's delayed ACK)",
    "[http][server]") {
    Rig rig(admin_cfg());
    std::string err;
    for (bool admin : {false, true}) {
        REQUIRE(rig.server->listen("127.0.0.1", 0, admin, err));
        const uint16_t port = rig.server->bound_port(admin);
        auto c = tcp_connect(port);
        int fd = -1;
        REQUIRE(rig.step_until([&] { return (fd = accepted_for(c->fd, port)) >= 0; }));
        INFO((admin ? "admin" : "client"));
        CHECK(nodelay(fd) != 0);
        CHECK(nodelay(c->fd) == 0);  // the client's end is as the kernel made it
    }
}

TEST_CASE("server: max_connections is enforced on the listener with a 503", "[http][server]") {
    ServerConfig cfg;
    cfg.max_connections = 2;
    Rig rig(cfg);
    std::string err;
    REQUIRE(rig.server->listen("127.0.0.1", 0, false, err));
    uint16_t port = rig.server->bound_port(false);
    REQUIRE(port != 0);

    auto c1 = tcp_connect(port);
    auto c2 = tcp_connect(port);
    REQUIRE(rig.step_until([&] { return rig.server->connections() == 2; }));
    auto c3 = tcp_connect(port);
    REQUIRE(rig.wait_eof(*c3));
    auto r = take_reply(c3->in, false, true);
    REQUIRE(r);
    CHECK(r->status == 503);
    CHECK(r->body == "too many connections\n");
    CHECK(r->headers.get("Retry-After") == std::optional<std::string_view>("1"));
    CHECK(r->headers.get("Server") == std::optional<std::string_view>("m0serve/" M0_VERSION));
    CHECK(r->headers.has("Date"));
    CHECK(r->headers.get("Connection") == std::optional<std::string_view>("close"));
    CHECK(rig.metrics.connections_refused.load() == 1);
    CHECK(rig.server->connections() == 2);

    // The accepted ones are served, with the peer's address and the bound port.
    c1->send(get("/one"));
    CHECK(rig.reply(*c1).body == "hello /one");
    REQUIRE(rig.seen.size() == 1);
    CHECK(rig.seen[0].req.remote_addr == "127.0.0.1");
    CHECK(rig.seen[0].req.remote_port == local_port(c1->fd));
    CHECK(rig.seen[0].req.server_port == port);
    CHECK(rig.seen[0].req.server_name == "127.0.0.1");

    SECTION("a place freed by a leaving client is taken by the next") {
        c2->close();
        REQUIRE(rig.step_until([&] { return rig.server->connections() == 1; }));
        auto c4 = tcp_connect(port);
        REQUIRE(rig.step_until([&] { return rig.server->connections() == 2; }));
        c4->send(get("/four"));
        CHECK(rig.reply(*c4).body == "hello /four");
        CHECK(rig.metrics.connections_refused.load() == 1);
    }
    SECTION("a second listen on the same port fails with a reason") {
        std::string err2;
        Loop other_loop;
        CompletionRing other_ring;
        Metrics other_metrics;
        Server other(other_loop, {}, other_ring, nullptr, other_metrics);
        CHECK_FALSE(other.listen("127.0.0.1", port, false, err2));
        CHECK_FALSE(err2.empty());
        CHECK_FALSE(other.listen("not-an-address", 0, false, err2));
    }
}

namespace {
// A TCP socket listening on 127.0.0.1:`port` (0: any) with SO_REUSEPORT,
// as a server with several loops or workers binds its port; -1 if it fails.
int reuseport_listener(uint16_t port) {
    int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::listen(fd, 8) != 0) {
        ::close(fd);
        return -1;
    }
    return fd;
}

uint16_t port_of_fd(int fd) {
    sockaddr_in a{};
    socklen_t len = sizeof a;
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
    return ntohs(a.sin_port);
}
}  // namespace

TEST_CASE(
    "server: a port another process listens on with SO_REUSEPORT is refused before the loops "
    "bind it; one left in TIME_WAIT is free; the admin listener never shares its port",
    "[http][server]") {
    std::string err;
    int other = reuseport_listener(0);
    REQUIRE(other >= 0);
    const uint16_t port = port_of_fd(other);

    // Without the check, a server with several loops would join that port.
    ServerConfig shared;
    shared.reuse_port = true;
    Rig joiner(shared);
    CHECK(joiner.server->listen("127.0.0.1", port, false, err));
    CHECK_FALSE(check_port_free("127.0.0.1", port, err));
    CHECK(err == "cannot listen on 127.0.0.1:" + std::to_string(port) +
                     ": Address already in use (another process listens on it)");

    SECTION("a connection left in TIME_WAIT after its listener closed does not count") {
        joiner.server.reset();  // its listener closes: every connection reaches `other`
        auto c = tcp_connect(port);
        int accepted = -1;
        for (int i = 0; i < 400 && accepted < 0; ++i) {
            accepted = ::accept4(other, nullptr, nullptr, SOCK_CLOEXEC);
            if (accepted < 0) std::this_thread::sleep_for(5ms);
        }
        REQUIRE(accepted >= 0);
        ::close(accepted);  // the listening side closes first: TIME_WAIT on `port`
        c.reset();
        ::close(other);
        other = -1;
        err.clear();
        const bool free = check_port_free("127.0.0.1", port, err);
        INFO(err);
        CHECK(free);
    }
    SECTION("the admin listener of a server with several loops is bound without SO_REUSEPORT") {
        Rig admin_rig(shared);
        REQUIRE(admin_rig.server->listen("127.0.0.1", 0, true, err));
        const uint16_t admin_port = admin_rig.server->bound_port(true);
        REQUIRE(admin_port != 0);
        int intruder = reuseport_listener(admin_port);
        CHECK(intruder < 0);
        if (intruder >= 0) ::close(intruder);
        // A client listener of that server does take SO_REUSEPORT: its
        // other loops join it.
        REQUIRE(admin_rig.server->listen("127.0.0.1", 0, false, err));
        int sibling = reuseport_listener(admin_rig.server->bound_port(false));
        CHECK(sibling >= 0);
        if (sibling >= 0) ::close(sibling);
    }
    if (other >= 0) ::close(other);
}

namespace {
// Lowers this process's RLIMIT_NOFILE so that no new fd can be made (every
// number below the limit is in use), and sends stderr to a file; both are
// restored when it goes, whatever the test did in between.
struct NoFreeFds {
    rlimit old{};
    int saved_stderr = -1;
    std::FILE* log = nullptr;
    bool lowered = false;

    NoFreeFds() {
        log = std::tmpfile();
        REQUIRE(log);
        saved_stderr = ::dup(2);
        REQUIRE(saved_stderr >= 0);
        REQUIRE(::dup2(::fileno(log), 2) == 2);
        REQUIRE(::getrlimit(RLIMIT_NOFILE, &old) == 0);
        int lowest = ::open("/dev/null", O_RDONLY | O_CLOEXEC);  // the lowest free number
        REQUIRE(lowest >= 0);
        ::close(lowest);
        rlimit low = old;
        low.rlim_cur = rlim_t(lowest);
        REQUIRE(::setrlimit(RLIMIT_NOFILE, &low) == 0);
        lowered = true;
        REQUIRE(::open("/dev/null", O_RDONLY | O_CLOEXEC) < 0);
        REQUIRE(errno == EMFILE);
    }
    void restore() {
        if (lowered) ::setrlimit(RLIMIT_NOFILE, &old);
        lowered = false;
        if (saved_stderr >= 0) {
            ::dup2(saved_stderr, 2);
            ::close(saved_stderr);
            saved_stderr = -1;
        }
    }
    // What was written to stderr meanwhile (after restore()).
    std::string text() {
        std::string out;
        std::rewind(log);
        char buf[4096];
        size_t n;
        while ((n = std::fread(buf, 1, sizeof buf, log)) > 0) out.append(buf, n);
        return out;
    }
    ~NoFreeFds() {
        restore();
        if (log) std::fclose(log);
    }
};

size_t count_of(const std::string& text, std::string_view what) {
    size_t n = 0;
    for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
    return n;
}
}  // namespace

TEST_CASE("server: out of file descriptors, accepting pauses instead of spinning, then resumes",
          "[http][server][limits]") {
    Rig rig;
    std::string err;
    REQUIRE(rig.server->listen("127.0.0.1", 0, false, err));
    uint16_t port = rig.server->bound_port(false);
    // Connected by the kernel, waiting in the backlog: the listening socket
    // stays readable for as long as they are not accepted.
    std::vector<std::unique_ptr<Client>> clients;
    for (int i = 0; i < 3; ++i) clients.push_back(tcp_connect(port));
    // Something to wake the loop every 20 ms, so that a loop that does not
    // spin still turns.
    Timer tick(
        rig.loop, [] {}, true);
    tick.start(0.02);

    size_t turns = 0;
    uint64_t paused = 0;
    size_t accepted = 0;
    std::string log;
    {
        NoFreeFds no_fds;
        // Each EVLOOP_ONCE turn waits for something to happen, then runs it:
        // a spinning listener makes every turn return at once.
        auto until = Clock::now() + 300ms;
        while (Clock::now() < until) {
            event_base_loop(rig.loop.base(), EVLOOP_ONCE);
            ++turns;
        }
        paused = rig.metrics.accept_paused.load();
        accepted = rig.server->connections();
        no_fds.restore();
        log = no_fds.text();
    }
    INFO("loop turns in 300 ms: " << turns << "; log: " << log.substr(0, 400));
    CHECK(accepted == 0);
    CHECK(turns < 100);
    CHECK(paused >= 1);
    CHECK(paused <= 10);
    CHECK(count_of(log, "out of file descriptors: accepting paused") == 1);
    CHECK(log.size() < 1000);

    // The fds are back: the waiting clients are accepted and served.
    REQUIRE(rig.step_until([&] { return rig.server->connections() == 3; }));
    for (auto& c : clients) {
        c->send(get("/back"));
        CHECK(rig.reply(*c).body == "hello /back");
    }
    auto late = tcp_connect(port);
    late->send(get("/late"));
    CHECK(rig.reply(*late).body == "hello /late");
    CHECK(rig.metrics.accept_paused.load() == paused);
}

// ---- regressions ----

// A scraper's keep-alive admin connection must not take a client's place.
TEST_CASE("server: admin connections do not count against max_connections",
          "[http][server][admin]") {
    ServerConfig cfg;
    cfg.max_connections = 1;
    Rig rig(cfg);
    std::string err;
    REQUIRE(rig.server->listen("127.0.0.1", 0, false, err));
    auto admin = rig.connect(true);
    auto c = tcp_connect(rig.server->bound_port(false));
    c->send(kGet);
    Reply r = rig.reply(*c);
    CHECK(r.status == 200);
    CHECK(rig.metrics.connections_refused.load() == 0);
}

// ---- backpressure, idleness, half-close, shutdown --------------------------------

TEST_CASE("server: a client that pipelines and never reads stops being read at the high-water mark",
          "[http][server][limits]") {
    ServerConfig cfg;
    cfg.stream_high_water = 16 * 1024;
    Rig rig(cfg);
    const std::string body(8 * 1024, 'b');
    rig.app = [&](SlotRef s, const Request&) {
        Response resp;
        resp.body = body;
        rig.post(s, std::move(resp));
    };
    auto c = rig.connect();
    // A small receive buffer so the answers pile up on the server's side.
    int small = 4096;
    ::setsockopt(c->fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
    std::string pipeline;
    const size_t n = 300;
    for (size_t i = 0; i < n; ++i) pipeline += get("/p" + std::to_string(i));
    c->send(pipeline);
    // Step the loop a while without reading: the server parses only while its
    // unsent output is under the mark.
    for (int i = 0; i < 200; ++i) rig.loop.run_once();
    CHECK(rig.seen.size() < n);
    CHECK(rig.server->unsent(c->slot) <= cfg.stream_high_water + body.size() + 512);
    // Reading drains it all, in order.
    auto rs = rig.replies(*c, n);
    REQUIRE(rs.size() == n);
    CHECK(rs.back().body == body);
    CHECK(rig.seen.size() == n);
    CHECK(rig.seen.back().req.target == "/p" + std::to_string(n - 1));
}

TEST_CASE("server: the keep-alive timer starts when an answer has drained, not when it is queued",
          "[http][server][limits]") {
    ServerConfig cfg;
    cfg.keepalive_timeout = 0.2;
    Rig rig(cfg);
    const std::string body(2 * 1024 * 1024, 'z');
    rig.app = [&](SlotRef s, const Request&) {
        Response resp;
        resp.body = body;
        rig.post(s, std::move(resp));
    };
    auto c = rig.connect();
    c->send(kGet);
    // A slow reader: 32 KiB every 10 ms, so the answer takes well over the
    // keep-alive timeout to arrive.
    auto last = Clock::now() - 1s;
    std::optional<Reply> r;
    rig.step_until(
        [&] {
            if (Clock::now() - last >= 10ms) {
                last = Clock::now();
                char buf[32 * 1024];
                ssize_t got = ::recv(c->fd, buf, sizeof buf, 0);
                if (got > 0) c->in.append(buf, size_t(got));
                if (got == 0) c->eof = true;
            }
            r = take_reply(c->in, false, c->eof);
            return r.has_value() || c->eof;
        },
        10000ms);
    REQUIRE(r);
    CHECK(r->body.size() == body.size());
    // Idle from now on: closed after the timeout.
    CHECK(rig.wait_eof(*c));
}

TEST_CASE("server: requests pipelined before a half-close are all answered, then it closes",
          "[http][server]") {
    Rig rig;
    std::vector<SlotRef> deferred;
    rig.app = [&](SlotRef s, const Request&) { deferred.push_back(s); };
    auto c = rig.connect();
    c->send(get("/a") + get("/b") + get("/c"));
    ::shutdown(c->fd, SHUT_WR);
    for (size_t i = 0; i < 3; ++i) {
        REQUIRE(rig.step_until([&] { return deferred.size() == i + 1; }));
        for (int k = 0; k < 10; ++k) rig.loop.run_once();
        Response resp;
        resp.body = "answer " + std::to_string(i);
        rig.post(deferred[i], std::move(resp));
    }
    auto rs = rig.replies(*c, 4);
    REQUIRE(rs.size() == 4);
    CHECK(rs[0].status == 100);  // the departure probe, sent once, at the FIN
    CHECK(rs[1].body == "answer 0");
    CHECK(rs[3].body == "answer 2");
    CHECK(rig.wait_eof(*c));
    CHECK(rig.seen.size() == 3);
}

TEST_CASE("server: a client that closes its socket while its request waits is let go",
          "[http][server]") {
    Rig rig;
    std::string err;
    REQUIRE(rig.server->listen("127.0.0.1", 0, false, err));
    std::vector<SlotRef> deferred;
    rig.app = [&](SlotRef s, const Request&) { deferred.push_back(s); };
    SECTION("HTTP/1.1: the probe meets a reset, and the connection is released") {
        auto c = tcp_connect(rig.server->bound_port(false));
        c->send(kGet);
        REQUIRE(rig.step_until([&] { return deferred.size() == 1; }));
        c->close();  // a FIN, the same on the wire as a half-close
        CHECK(rig.step_until([&] { return !rig.server->alive(deferred[0]); }));
        CHECK(rig.server->connections() == 0);
    }
    SECTION("HTTP/1.0: no 1xx may be sent, so the request is kept to its answer") {
        auto c = tcp_connect(rig.server->bound_port(false));
        c->send("GET / HTTP/1.0\r\n\r\n");
        REQUIRE(rig.step_until([&] { return deferred.size() == 1; }));
        c->close();
        rig.step_until([] { return false; }, 300ms);
        CHECK(rig.server->alive(deferred[0]));
    }
}

TEST_CASE("server: shutdown closes the listener at once and answers what is in flight",
          "[http][server]") {
    ServerConfig cfg;
    cfg.grace = 5;
    Rig rig(cfg);
    std::string err;
    REQUIRE(rig.server->listen("127.0.0.1", 0, false, err));
    uint16_t port = rig.server->bound_port(false);
    std::vector<SlotRef> deferred;
    rig.app = [&](SlotRef s, const Request&) { deferred.push_back(s); };
    auto c = tcp_connect(port);
    c->send(kGet);
    REQUIRE(rig.step_until([&] { return deferred.size() == 1; }));
    rig.server->shutdown();
    // A new client is refused at once rather than left waiting in a backlog.
    int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in sin{};
    sin.sin_family = AF_INET;
    sin.sin_port = htons(port);
    sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    CHECK(::connect(fd, reinterpret_cast<sockaddr*>(&sin), sizeof sin) == -1);
    CHECK(errno == ECONNREFUSED);
    ::close(fd);
    Response resp;
    resp.body = "finished";
    rig.post(deferred[0], std::move(resp));
    Reply r = rig.reply(*c);
    CHECK(r.body == "finished");
    CHECK(r.headers.get("Connection") == std::optional<std::string_view>("close"));
    CHECK_FALSE(rig.server->grace_expired());
}

TEST_CASE(
    "server: at shutdown the clients waiting in the listener's backlog are accepted and "
    "answered, not reset by the close",
    "[http][server]") {
    ServerConfig cfg;
    cfg.grace = 5;
    Rig rig(cfg);
    std::string err;
    REQUIRE(rig.server->listen("127.0.0.1", 0, false, err));
    // Connected by the kernel, their requests sent, the loop not yet turned:
    // nothing has accepted them when the shutdown comes.
    auto a = tcp_connect(rig.server->bound_port(false));
    auto b = tcp_connect(rig.server->bound_port(false));
    a->send(get("/a"));
    b->send(get("/b"));
    rig.server->shutdown();
    CHECK(rig.metrics.connections_total.load() == 2);
    for (auto* c : {a.get(), b.get()}) {
        Reply r = rig.reply(*c);
        CHECK(r.status == 200);
        CHECK(r.headers.get("Connection") == std::optional<std::string_view>("close"));
    }
    CHECK(rig.seen.size() == 2);
    CHECK(rig.step_until([&] { return rig.metrics.connections_open.load() == 0; }));
    CHECK_FALSE(rig.server->grace_expired());
}

TEST_CASE(
    "server: at shutdown an idle keep-alive connection is closed, a new one that has sent "
    "nothing yet is answered its first request, then closed",
    "[http][server]") {
    ServerConfig cfg;
    cfg.grace = 5;
    Rig rig(cfg);
    std::string err;
    REQUIRE(rig.server->listen("127.0.0.1", 0, false, err));
    uint16_t port = rig.server->bound_port(false);
    rig.app = [&](SlotRef s, const Request&) {
        Response resp;
        resp.body = "answered";
        rig.post(s, std::move(resp));
    };
    auto idle = tcp_connect(port);
    idle->send(kGet);
    CHECK(rig.reply(*idle).body == "answered");
    // Accepted (the kernel completed it; the loop adopts it), its request not sent yet.
    auto fresh = tcp_connect(port);
    REQUIRE(rig.step_until([&] { return rig.metrics.connections_open.load() == 2; }));
    rig.server->shutdown();
    fresh->send(kGet);
    Reply r = rig.reply(*fresh);
    CHECK(r.status == 200);
    CHECK(r.body == "answered");
    CHECK(r.headers.get("Connection") == std::optional<std::string_view>("close"));
    CHECK(rig.step_until([&] { return rig.metrics.connections_open.load() == 0; }));
}

TEST_CASE(
    "server: at shutdown an answer written in the same loop turn, not yet on the socket, "
    "still reaches its client before the close",
    "[http][server]") {
    ServerConfig cfg;
    cfg.grace = 5;
    Rig rig(cfg);
    std::string err;
    REQUIRE(rig.server->listen("127.0.0.1", 0, false, err));
    std::vector<SlotRef> deferred;
    rig.app = [&](SlotRef s, const Request&) { deferred.push_back(s); };
    auto c = tcp_connect(rig.server->bound_port(false));
    c->send(kGet);
    REQUIRE(rig.step_until([&] { return deferred.size() == 1; }));
    Response resp;
    // More than the socket takes at once (the rest waits in the output).
    constexpr size_t kBody = 16 * 1024 * 1024;
    resp.body = std::string(kBody, 'a');
    rig.post(deferred[0], std::move(resp));
    // The answer goes into the connection's output, and the shutdown comes
    // before the loop turns again to write it: the connection is idle
    // between requests, with its answer still to send.
    rig.server->on_completions_ready();
    REQUIRE(rig.server->unsent(deferred[0]) > 0);
    rig.server->shutdown();
    Reply r = rig.reply(*c);
    CHECK(r.status == 200);
    CHECK(r.body.size() == kBody);
    CHECK(rig.step_until([&] { return rig.metrics.connections_open.load() == 0; }));
}

TEST_CASE(
    "server admin: GET /ready on the admin listener turns 503 when shutdown begins, and "
    "answers while the drain lasts",
    "[http][server][admin]") {
    ServerConfig cfg;
    cfg.grace = 5;
    Rig rig(cfg);
    std::string err;
    REQUIRE(rig.server->listen("127.0.0.1", 0, false, err));
    REQUIRE(rig.server->listen("127.0.0.1", 0, true, err));
    uint16_t port = rig.server->bound_port(false), admin = rig.server->bound_port(true);
    std::vector<SlotRef> deferred;
    rig.app = [&](SlotRef s, const Request&) { deferred.push_back(s); };
    auto probe = [&] {
        auto a = tcp_connect(admin);
        a->send("GET /ready HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n");
        return rig.reply(*a).status;
    };
    CHECK(probe() == 200);
    auto c = tcp_connect(port);
    c->send(kGet);
    REQUIRE(rig.step_until([&] { return deferred.size() == 1; }));
    CHECK(probe() == 200);
    rig.server->shutdown();
    // A request still runs: the server drains, and the admin listener says so.
    CHECK(probe() == 503);
    Response resp;
    resp.body = "finished";
    rig.post(deferred[0], std::move(resp));
    CHECK(rig.reply(*c).body == "finished");
}

TEST_CASE("server: pipelined input waiting to be parsed stays bounded while requests run",
          "[http][server][limits]") {
    ServerConfig cfg;
    cfg.stream_high_water = 64 * 1024 * 1024;  // the output bound stays out of the way
    Rig rig(cfg);
    std::vector<SlotRef> deferred;
    rig.app = [&](SlotRef s, const Request&) { deferred.push_back(s); };
    auto c = rig.connect();
    std::string chunk;
    for (int i = 0; i < 1000; ++i) chunk += get("/p");
    size_t most = 0, answered = 0;
    auto t0 = Clock::now();
    // The client writes all it can and never reads; each request is answered
    // as soon as it is dispatched.
    while (Clock::now() - t0 < 1500ms) {
        ::send(c->fd, chunk.data(), chunk.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
        rig.loop.run_once();
        while (answered < deferred.size()) {
            Response resp;
            resp.body = "ok";
            rig.post(deferred[answered++], std::move(resp));
        }
        most = std::max(most, rig.server->unread(c->slot));
    }
    REQUIRE(answered > 10);
    CHECK(most <= 1024 * 1024 + 256 * 1024);
}

TEST_CASE(
    "server: an application past request_timeout is answered 504, and its late answer "
    "is dropped",
    "[http][server][limits]") {
    ServerConfig cfg;
    cfg.request_timeout = 0.2;
    Rig rig(cfg);
    std::vector<SlotRef> deferred;
    rig.app = [&](SlotRef s, const Request&) { deferred.push_back(s); };
    auto c = rig.connect();
    c->send(kGet);
    auto t0 = Clock::now();
    Reply r = rig.reply(*c);
    CHECK(r.status == 504);
    CHECK(Clock::now() - t0 >= 150ms);
    CHECK(r.headers.get("Connection") == std::optional<std::string_view>("close"));
    CHECK(rig.wait_eof(*c));
    CHECK(rig.metrics.requests_timed_out.load() == 1);
    // The application answers at last: nobody hears it.
    REQUIRE(deferred.size() == 1);
    Response late;
    late.body = "too late";
    rig.post(deferred[0], std::move(late));
    auto other = rig.connect();
    rig.app = [&](SlotRef s, const Request&) {
        Response resp;
        resp.body = "fresh";
        rig.post(s, std::move(resp));
    };
    other->send(kGet);
    CHECK(rig.reply(*other).body == "fresh");
    CHECK(rig.metrics.completions_dropped.load() == 1);
    CHECK(other->in.find("too late") == std::string::npos);
}

namespace {

// A client connected to the unix socket at `path`; null when it cannot connect.
std::unique_ptr<Client> unix_client(const std::string& path) {
    int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return nullptr;
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    std::snprintf(a.sun_path, sizeof a.sun_path, "%s", path.c_str());
    if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
        ::close(fd);
        return nullptr;
    }
    return std::make_unique<Client>(fd);
}

}  // namespace

TEST_CASE(
    "server: a unix socket listener serves; its peer is trusted as a proxy; the file has "
    "its mode, replaces a stale one, refuses a live one, and goes when it closes",
    "[server][unix]") {
    char dir[] = "/tmp/m0-unix-XXXXXX";
    REQUIRE(::mkdtemp(dir));
    const std::string path = std::string(dir) + "/s.sock";
    {
        // A stale file: bound, never listened on, closed.
        int s = ::socket(AF_UNIX, SOCK_STREAM, 0);
        sockaddr_un a{};
        a.sun_family = AF_UNIX;
        std::snprintf(a.sun_path, sizeof a.sun_path, "%s", path.c_str());
        REQUIRE(::bind(s, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
        ::close(s);
    }
    ServerConfig cfg;
    std::string err;
    REQUIRE(TrustedProxies::parse("", err));
    cfg.forwarded_allow = *TrustedProxies::parse("", err);  // no TCP peer is trusted
    auto rig = std::make_unique<ServerRig>(cfg);
    std::string seen_addr, seen_name;
    rig->server->add_mount("/", [&](SlotRef s, Request&& r) {
        seen_addr = r.remote_addr;
        seen_name = r.server_name + ":" + std::to_string(r.server_port);
        Response resp;
        resp.body = "ok";
        rig->post(s, std::move(resp));
        return Admission::queued;
    });
    UnixSocketOptions opts;
    opts.mode = 0600;
    REQUIRE(rig->server->listen_unix(path, opts, false, err));
    struct stat st {};
    REQUIRE(::stat(path.c_str(), &st) == 0);
    CHECK((st.st_mode & 0777) == 0600);
    CHECK(rig->server->listening(false) == std::vector<std::string>{"unix:" + path});

    auto c = unix_client(path);
    REQUIRE(c);
    REQUIRE(c->send("GET / HTTP/1.1\r\nHost: h\r\nX-Forwarded-For: 198.51.100.7\r\n\r\n"));
    REQUIRE(rig->read_until(*c, "ok"));
    CHECK(seen_addr == "198.51.100.7");
    CHECK(seen_name == "localhost:80");

    // Another server cannot take a socket someone accepts on.
    ServerRig other;
    CHECK_FALSE(other.server->listen_unix(path, opts, false, err));
    CHECK(err.find("another process accepts on it") != std::string::npos);

    c.reset();
    rig.reset();  // closes the listener: the file goes
    CHECK(::access(path.c_str(), F_OK) != 0);
    ::rmdir(dir);
}
