// Hostile input: tables of malformed and hostile requests, admin API calls and
// handler answers, each with the answer RFC 9110/9112 ask for, run against the
// real Server on a real Loop (clients on socketpairs, the loop stepped by the
// test). For every case: the answers match (statuses in order, or a clean
// close without an answer); the connection closes when it must, with nothing
// after the expected answers; the server stays up; and a fresh well-formed
// request is answered 200 right after, on the same connection if it stays
// open, else on a new one. Client cases are fed whole, one byte at a time
// (the loop stepped between bytes) and split at random points.
#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cerrno>
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "mojo/mojo_pool.hpp"
#include "server/test_http_reply.hpp"
#include "server/test_rig.hpp"

using namespace m0;
using namespace m0::http;
using Client = m0::testing::SocketClient;
using m0::testing::Reply;
using m0::testing::take_reply;
using namespace std::chrono_literals;

namespace {

// ---- the client side ------------------------------------------------------------

template <size_t N>
std::string bytes(const char (&s)[N]) {  // keeps NUL bytes
    return std::string(s, N - 1);
}

bool closes_with_header(const Reply& a) {
    return a.headers.get("Connection") == std::optional<std::string_view>("close");
}

// ---- the server side -------------------------------------------------------------

const std::string kFresh = "GET /fresh HTTP/1.1\r\nHost: h\r\n\r\n";

// A handler for a mojo mount, answering what the test says.
struct FixedHandler : mojo::Handler {
    std::function<Response(const Request&)> answer;
    Response serve(const Request& r) override { return answer(r); }
};

struct Rig : testing::ServerRig {
    std::vector<Request> seen;  // every request the "/" mount received, in order
    // The "/" app: runs inline, answers through the completion ring.
    std::function<void(SlotRef, const Request&)> app;
    int interim = 0;  // 1xx answers read (not returned by answers())
    // With `mojo`: a manual mojo pool serving FixedHandler at /native.
    FixedHandler handler;
    std::unique_ptr<mojo::MojoPool> pool;

    explicit Rig(server::ServerConfig cfg = {}, bool realtime = false, bool mojo = false)
        : ServerRig(quiet(std::move(cfg)), realtime) {
        app = [this](SlotRef s, const Request& r) {
            Response resp;
            resp.headers.add("Content-Type", "text/plain");
            resp.body = "ok " + r.target;
            post(s, std::move(resp));
        };
        server->add_mount("/", [this](SlotRef s, Request&& r) {
            seen.push_back(std::move(r));
            Request copy = seen.back();
            app(s, copy);
            return Admission::queued;
        });
        if (mojo) {
            hold::Handoff h;
            h.ring = &ring;
            h.bus = realtime ? &bus : nullptr;
            h.metrics = &metrics;
            pool = std::make_unique<mojo::MojoPool>(0, h);
            server->add_mount("/native", [this](SlotRef s, Request&& r) {
                return pool->submit(handler, s, std::move(r));
            });
        }
    }
    static server::ServerConfig quiet(server::ServerConfig cfg) {
        cfg.heartbeat = 3600;
        return cfg;
    }
    std::unique_ptr<Client> client(bool admin = false) {
        auto c = connect(admin);
        REQUIRE(c);
        return c;
    }

    // Writes `data` to `c` in the pieces that `cuts` (ascending offsets) make,
    // stepping the loop after each so that the server reads it on its own, and
    // reading what comes back so that the server's output never blocks. Stops
    // at a write error: the server may close before the client is done.
    void write(Client& c, std::string_view data, const std::vector<size_t>& cuts = {}) {
        const auto deadline = std::chrono::steady_clock::now() + 10s;
        size_t from = 0;
        std::vector<size_t> ends = cuts;
        ends.push_back(data.size());
        for (size_t to : ends) {
            while (from < to) {
                ssize_t n =
                    ::send(c.fd, data.data() + from, to - from, MSG_NOSIGNAL | MSG_DONTWAIT);
                if (n > 0) {
                    from += size_t(n);
                    continue;
                }
                if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) &&
                    std::chrono::steady_clock::now() < deadline) {
                    loop.run_once();
                    c.pump();
                    continue;
                }
                return;  // the server closed (or stopped reading for good)
            }
            loop.run_once();
            loop.run_once();
        }
    }
    // Steps the loop until `n` final answers came on `c` (interim 1xx ones are
    // counted in `interim` and skipped), the peer closed, or 3 s passed.
    std::vector<Reply> answers(Client& c, size_t n, const std::vector<bool>& head = {}) {
        std::vector<Reply> out;
        if (n == 0) return out;
        loop.run_until(
            [&] {
                c.pump();
                while (out.size() < n) {
                    bool h = out.size() < head.size() && head[out.size()];
                    auto a = take_reply(c.in, h, c.eof);
                    if (!a) break;
                    if (a->status / 100 == 1) {
                        ++interim;
                        continue;
                    }
                    out.push_back(std::move(*a));
                }
                return out.size() >= n || c.eof;
            },
            3000ms);
        return out;
    }
    // A well-formed request on `c` (or, if null, on a new connection) is 200.
    void fresh(Client* c, bool admin = false) {
        std::unique_ptr<Client> own;
        if (!c) {
            own = client(admin);
            c = own.get();
        }
        REQUIRE(c->send(admin ? std::string("GET /metrics HTTP/1.1\r\nHost: h\r\n\r\n") : kFresh));
        auto got = answers(*c, 1);
        INFO("left unread: " << c->in);
        REQUIRE(got.size() == 1);
        CHECK(got[0].status == 200);
        if (!admin) CHECK(got[0].body == "ok /fresh");
        CHECK(c->in.empty());
        CHECK(server->alive(c->slot));
    }
};

// ---- the table ---------------------------------------------------------------------

struct Case {
    std::string name;
    std::string bytes;         // sent as they are
    std::vector<int> answers;  // final statuses in order; empty: closed without an answer
    bool closes = false;       // the connection must close after them
    bool half_close = false;   // the client shuts its sending side after the bytes
    std::vector<bool> head;    // answer i answers a HEAD
    std::function<void(Rig&, const std::vector<Reply>&)> check = nullptr;
    int published = 0;  // admin cases: events the bus took
};

using Check = std::function<void(Rig&, const std::vector<Reply>&)>;

// Refused: an error answer, then the connection closes (every refusal closes:
// the bytes after a malformed request cannot be trusted to frame another).
Case refused(std::string name, std::string b, int status, Check check = nullptr) {
    return {std::move(name), std::move(b), {status}, true, false, {}, std::move(check)};
}
// Served and kept open.
Case served(std::string name, std::string b, Check check = nullptr) {
    return {std::move(name), std::move(b), {200}, false, false, {}, std::move(check)};
}
// Served, then closed (HTTP/1.0, Connection: close).
Case served_closed(std::string name, std::string b, Check check = nullptr) {
    return {std::move(name), std::move(b), {200}, true, false, {}, std::move(check)};
}
// Cut short, then half-closed: RFC 9112 §8, "A server that receives an
// incomplete request message, usually due to a canceled request or a
// triggered timeout exception, MAY send an error response prior to closing
// the connection": this one closes without an answer.
Case cut_short(std::string name, std::string b) {
    return {std::move(name), std::move(b), {}, true, true};
}
Case pipeline(std::string name, std::string b, std::vector<int> statuses, bool closes,
              bool half_close = false, Check check = nullptr) {
    return {std::move(name), std::move(b), std::move(statuses), closes,
            half_close,      {},           std::move(check)};
}

std::string get(const std::string& target, const std::string& fields = "Host: h\r\n") {
    return "GET " + target + " HTTP/1.1\r\n" + fields + "\r\n";
}
std::string with_fields(const std::string& fields) { return get("/", "Host: h\r\n" + fields); }
std::string post(const std::string& fields, const std::string& body) {
    return "POST /p HTTP/1.1\r\nHost: h\r\n" + fields + "\r\n" + body;
}
std::string chunked(const std::string& body) {
    return post("Transfer-Encoding: chunked\r\n", body);
}
std::string field_lines(size_t n) {
    std::string s;
    for (size_t i = 0; i < n; ++i) s += "X-" + std::to_string(i) + ": v\r\n";
    return s;
}
Check body_is(std::string want) {
    return [want](Rig& rig, const std::vector<Reply>&) {
        REQUIRE(rig.seen.size() >= 1);
        CHECK(rig.seen[0].body == want);
    };
}
// The refusal's body is `reason` (its one line).
Check reason_is(std::string reason) {
    return [reason](Rig&, const std::vector<Reply>& a) {
        REQUIRE(a.size() == 1);
        CHECK(a[0].body == reason + "\n");
    };
}
Check field_is(std::string name, std::string want) {
    return [name, want](Rig& rig, const std::vector<Reply>&) {
        REQUIRE(rig.seen.size() >= 1);
        CHECK(rig.seen[0].headers.get(name) == std::optional<std::string_view>(want));
    };
}

const std::vector<Case>& client_cases() {
    static const std::vector<Case> all = [] {
        std::vector<Case> t;
        auto add = [&](Case c) { t.push_back(std::move(c)); };

        // ---- the request line: RFC 9112 §3 (request-line = method SP request-target
        // SP HTTP-version; "Recipients of an invalid request-line SHOULD respond
        // with either a 400 (Bad Request) error"), RFC 9110 §9.1 (an unknown
        // method is 501), RFC 9110 §2.5 and §15.6.6 (versions: a higher minor
        // version is served as 1.1, another major version is 505).
        add(refused("an unknown method is 501", "BREW /pot HTTP/1.1\r\nHost: h\r\n\r\n", 501));
        add(refused("a lowercase method is an unknown method: 501", get("/").replace(0, 3, "get"),
                    501));
        add(refused("a known method with a suffix is an unknown method: 501",
                    "GETX / HTTP/1.1\r\nHost: h\r\n\r\n", 501));
        add(refused("a method longer than any served is 501",
                    std::string(64, 'M') + " / HTTP/1.1\r\nHost: h\r\n\r\n", 501));
        add(refused("CONNECT is not implemented: 501",
                    "CONNECT h:443 HTTP/1.1\r\nHost: h:443\r\n\r\n", 501));
        add(refused("a method with a non-token byte is 400", "GE(T / HTTP/1.1\r\nHost: h\r\n\r\n",
                    400));
        add(refused("a NUL in the method is 400", bytes("GE\0T / HTTP/1.1\r\nHost: h\r\n\r\n"),
                    400));
        add(refused("a control byte before the method is 400",
                    "\x01GET / HTTP/1.1\r\nHost: h\r\n\r\n", 400));
        add(refused("a space before the method is 400", " GET / HTTP/1.1\r\nHost: h\r\n\r\n", 400));
        add(refused("two spaces after the method are 400", "GET  / HTTP/1.1\r\nHost: h\r\n\r\n",
                    400));
        add(refused("a tab between the method and the target is 400",
                    "GET\t/ HTTP/1.1\r\nHost: h\r\n\r\n", 400));
        add(refused("two spaces before the version are 400", "GET /  HTTP/1.1\r\nHost: h\r\n\r\n",
                    400));
        add(refused("a space after the version is 400", "GET / HTTP/1.1 \r\nHost: h\r\n\r\n", 400));
        add(refused("a request line of one word is 400", "GET\r\nHost: h\r\n\r\n", 400));
        add(refused("a request line without a version (HTTP/0.9) is 505", "GET /\r\n\r\n", 505));
        add(refused("HTTP/2.0 is 505", "GET / HTTP/2.0\r\nHost: h\r\n\r\n", 505));
        add(refused("HTTP/3.0 is 505", "GET / HTTP/3.0\r\nHost: h\r\n\r\n", 505));
        add(refused("HTTP/0.9 is 505", "GET / HTTP/0.9\r\nHost: h\r\n\r\n", 505));
        // The preface itself starts HTTP/2 (test_h2); one that breaks off is HTTP/1.1's.
        add(refused("a connection preface gone wrong is 505", "PRI * HTTP/2.0\r\n\r\nXX\r\n\r\n",
                    505));
        add(refused("HTTP/1.10 is 400", "GET / HTTP/1.10\r\nHost: h\r\n\r\n", 400));
        add(refused("HTTP/01.1 is 400", "GET / HTTP/01.1\r\nHost: h\r\n\r\n", 400));
        add(refused("HTTP/1 is 400", "GET / HTTP/1\r\nHost: h\r\n\r\n", 400));
        add(refused("HTTP/1.1.1 is 400", "GET / HTTP/1.1.1\r\nHost: h\r\n\r\n", 400));
        add(refused("a lowercase protocol name is 400", "GET / http/1.1\r\nHost: h\r\n\r\n", 400));
        add(refused("a version of letters is 400", "GET / HTTP/x.y\r\nHost: h\r\n\r\n", 400));
        add(served("HTTP/1.2 is served as HTTP/1.1", "GET / HTTP/1.2\r\nHost: h\r\n\r\n",
                   [](Rig&, const std::vector<Reply>& a) {
                       CHECK_FALSE(a[0].headers.has("Connection"));
                   }));
        add(served_closed("HTTP/1.0 is served, then closed", "GET / HTTP/1.0\r\nHost: h\r\n\r\n"));
        add(served("HTTP/1.0 with Connection: keep-alive stays open",
                   "GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n"));
        // RFC 9112 §2.2: "a recipient MAY recognize a single LF as a line
        // terminator"; this one does not (CRLF only, in heads and chunked framing).
        add(refused("a bare LF ending the request line is 400", "GET / HTTP/1.1\nHost: h\r\n\r\n",
                    400));
        add(refused("bare LF line ends throughout are 400", "GET / HTTP/1.1\nHost: h\n\n", 400));
        // RFC 9112 §2.2: "A recipient of such a bare CR MUST consider that element
        // to be invalid or replace each bare CR with SP".
        add(refused("a bare CR in the request line is 400", "GET / HTTP/1.1\rHost: h\r\n\r\n",
                    400));
        add(refused("a bare CR inside the target is 400", "GET /a\rb HTTP/1.1\r\nHost: h\r\n\r\n",
                    400));
        // RFC 3986 §2: a URI is visible US-ASCII.
        add(refused("a NUL in the target is 400", bytes("GET /a\0b HTTP/1.1\r\nHost: h\r\n\r\n"),
                    400));
        add(refused("a control byte in the target is 400", "GET /a\x01 HTTP/1.1\r\nHost: h\r\n\r\n",
                    400));
        add(refused("DEL in the target is 400", "GET /a\x7f HTTP/1.1\r\nHost: h\r\n\r\n", 400));
        add(refused("raw UTF-8 in the target is 400",
                    "GET /caf\xc3\xa9 HTTP/1.1\r\nHost: h\r\n\r\n", 400));
        add(refused("a space inside the target is 400", "GET /a b HTTP/1.1\r\nHost: h\r\n\r\n",
                    400));
        add(refused("a tab inside the target is 400", "GET /a\tb HTTP/1.1\r\nHost: h\r\n\r\n",
                    400));
        // RFC 9112 §2.2: "a server that is expecting to receive and parse a
        // request-line SHOULD ignore at least one empty line (CRLF) received prior
        // to the request-line".
        add(served("empty lines before the request line are ignored", "\r\n\r\n" + get("/")));
        add(refused("a bare LF before the request line is 400", "\n" + get("/"), 400));
        add(refused("a TLS ClientHello is 400",
                    bytes("\x16\x03\x01\x00\xa5\x01\x00\x00\xa1\x03\x03"), 400));
        add(cut_short("an empty line, then a half-close: closed without an answer", "\r\n"));
        add(cut_short("half a method, then a half-close: closed without an answer", "GE"));
        add(cut_short("half an unknown method, then a half-close: closed without an answer",
                      "BRE"));
        add(cut_short("a request line alone, then a half-close: closed without an answer",
                      "GET / HTTP/1.1\r\n"));

        // ---- the request target: RFC 9112 §3.2 (origin-form, absolute-form,
        // authority-form only for CONNECT, asterisk-form only for OPTIONS), RFC
        // 9110 §4.2 (http URIs), RFC 3986 §2.1 (percent-encoding).
        // RFC 9112 §3.2.2: "A server MUST accept the absolute-form in requests"
        // and "MUST ignore the received Host header field (if any) and instead use
        // the host information of the request-target".
        add(served("absolute-form is served, its authority in place of Host",
                   "GET http://example.com/x?y=1 HTTP/1.1\r\nHost: other\r\n\r\n",
                   [](Rig& rig, const std::vector<Reply>&) {
                       REQUIRE(rig.seen.size() == 1);
                       CHECK(rig.seen[0].path == "/x");
                       CHECK(rig.seen[0].query == "y=1");
                       CHECK(rig.seen[0].headers.get("Host") ==
                             std::optional<std::string_view>("example.com"));
                       CHECK(rig.seen[0].headers.items.size() == 1);
                   }));
        add(served("absolute-form with a port keeps it in Host",
                   "GET http://example.com:8080/ HTTP/1.1\r\nHost: example.com:8080\r\n\r\n",
                   field_is("Host", "example.com:8080")));
        add(served("absolute-form without a path is /",
                   "GET http://example.com HTTP/1.1\r\nHost: example.com\r\n\r\n",
                   [](Rig& rig, const std::vector<Reply>&) {
                       REQUIRE(rig.seen.size() == 1);
                       CHECK(rig.seen[0].path == "/");
                   }));
        add(served("absolute-form with https is served",
                   "GET https://example.com/s HTTP/1.1\r\nHost: example.com\r\n\r\n"));
        add(refused("absolute-form with userinfo is 400",
                    "GET http://user:pw@example.com/ HTTP/1.1\r\nHost: example.com\r\n\r\n", 400));
        add(refused("absolute-form with an empty host is 400",
                    "GET http:///x HTTP/1.1\r\nHost: h\r\n\r\n", 400));
        add(refused("absolute-form with a scheme other than http(s) is 400",
                    "GET ftp://example.com/ HTTP/1.1\r\nHost: example.com\r\n\r\n", 400));
        add(refused("absolute-form still needs a Host field on HTTP/1.1: 400",
                    "GET http://example.com/ HTTP/1.1\r\n\r\n", 400));
        add(refused("absolute-form with an invalid Host field is 400",
                    "GET http://example.com/ HTTP/1.1\r\nHost: a b\r\n\r\n", 400));
        add(served("asterisk-form on OPTIONS reaches the application",
                   "OPTIONS * HTTP/1.1\r\nHost: h\r\n\r\n",
                   [](Rig& rig, const std::vector<Reply>&) {
                       REQUIRE(rig.seen.size() == 1);
                       CHECK(rig.seen[0].path == "*");
                   }));
        add(refused("asterisk-form on GET is 400", get("*"), 400));
        add(refused("asterisk-form on POST is 400",
                    "POST * HTTP/1.1\r\nHost: h\r\nContent-Length: 0\r\n\r\n", 400));
        add(refused("authority-form on GET is 400", get("example.com:80"), 400));
        add(refused("a relative target is 400", get("a/b"), 400));
        add(refused("a fragment in the target is 400", get("/a#top"), 400));
        // RFC 3986 §7.3: "%00" "should be rejected if the application is not
        // expecting to receive raw data within a component".
        add(refused("an encoded NUL in the path is 400", get("/a%00b"), 400));
        add(refused("an encoded NUL in a later segment is 400", get("/ok/%00/x"), 400));
        add(refused("a truncated percent-encoding in the path is 400", get("/a%4"), 400));
        add(refused("a percent sign without hex digits in the path is 400", get("/100%zz"), 400));
        // Paths are bytes: PEP 3333 hands them on as latin-1, so invalid UTF-8
        // reaches the application as it was encoded.
        add(served("encoded invalid UTF-8 in the path reaches the application as bytes",
                   get("/%ff%fe%c3"), [](Rig& rig, const std::vector<Reply>&) {
                       REQUIRE(rig.seen.size() == 1);
                       CHECK(rig.seen[0].path_info == "/\xff\xfe\xc3");
                   }));
        add(served("an encoded overlong slash reaches the application as bytes", get("/%c0%af"),
                   [](Rig& rig, const std::vector<Reply>&) {
                       REQUIRE(rig.seen.size() == 1);
                       CHECK(rig.seen[0].path_info == "/\xc0\xaf");
                   }));
        add(served("an encoded NUL in the query is left to the application", get("/q?x=%00"),
                   [](Rig& rig, const std::vector<Reply>&) {
                       REQUIRE(rig.seen.size() == 1);
                       CHECK(rig.seen[0].query == "x=%00");
                   }));

        // ---- header fields: RFC 9112 §5 (field-line = field-name ":" OWS
        // field-value OWS; "No whitespace is allowed between the field name and
        // colon ... MUST reject ... 400"), §5.2 (obs-fold: reject with 400, or
        // replace; rejected here), RFC 9110 §5.1 (field-name = token), §5.5 (CR,
        // LF, NUL in a value are invalid), RFC 9112 §3.2 (Host), RFC 9110 §8.6
        // (Content-Length), RFC 6585 §5 (431).
        add(refused("a field line without a colon is 400", with_fields("NoColon\r\n"), 400));
        add(refused("a space before the colon is 400", get("/", "Host : h\r\n"), 400));
        add(refused("a tab before the colon is 400", with_fields("X-A\t: 1\r\n"), 400));
        add(refused("a space inside a field name is 400", with_fields("X A: 1\r\n"), 400));
        add(refused("obs-fold with a space is 400", with_fields("X-A: a\r\n b\r\n"), 400));
        add(refused("obs-fold with a tab is 400", with_fields("X-A: a\r\n\tb\r\n"), 400));
        add(refused("an obs-folded Transfer-Encoding is 400",
                    post("Transfer-Encoding:\r\n chunked\r\n", "0\r\n\r\n"), 400));
        add(refused("whitespace before the first field line is 400",
                    "GET / HTTP/1.1\r\n Host: h\r\n\r\n", 400));
        add(refused("a NUL in a field name is 400", with_fields(bytes("X\0A: 1\r\n")), 400));
        add(refused("a NUL in a field value is 400", with_fields(bytes("X-A: a\0b\r\n")), 400));
        add(refused("a bare CR in a field value is 400", with_fields("X-A: a\rb\r\n"), 400));
        add(refused("a bare CR in a field name is 400", with_fields("X\rA: 1\r\n"), 400));
        add(refused("a bare LF in a field value is 400", with_fields("X-A: a\nb\r\n"), 400));
        add(refused("a control byte in a field value is 400", with_fields("X-A: a\x01z\r\n"), 400));
        add(refused("DEL in a field value is 400", with_fields("X-A: a\x7fz\r\n"), 400));
        add(refused("an empty field name is 400", with_fields(": v\r\n"), 400));
        add(refused("a field name with a delimiter is 400", with_fields("X(A): 1\r\n"), 400));
        add(refused("a field name with UTF-8 is 400", with_fields("X\xc3\xa9: 1\r\n"), 400));
        add(served("a tab inside a field value is kept", with_fields("X-A: a\tb\r\n"),
                   field_is("X-A", "a\tb")));
        add(served("obs-text in a field value is kept", with_fields("X-A: caf\xc3\xa9\r\n"),
                   field_is("X-A", "caf\xc3\xa9")));
        add(served("an empty field value is kept", with_fields("X-Empty:\r\n"),
                   field_is("X-Empty", "")));
        add(served("whitespace around a field value is not part of it",
                   with_fields("X-A: \t v w \t\r\n"), field_is("X-A", "v w")));
        add(refused("two Host fields are 400", get("/", "Host: a\r\nHost: b\r\n"), 400));
        add(refused("two identical Host fields are 400", get("/", "Host: h\r\nHost: h\r\n"), 400));
        add(refused("a Host list is 400", get("/", "Host: a, b\r\n"), 400));
        add(refused("a Host with a space inside is 400", get("/", "Host: a b\r\n"), 400));
        add(refused("a Host with userinfo is 400", get("/", "Host: u@h\r\n"), 400));
        add(refused("no Host on HTTP/1.1 is 400", get("/", ""), 400));
        add(served_closed("no Host on HTTP/1.0 is served", "GET / HTTP/1.0\r\n\r\n"));
        add(refused("two differing Content-Lengths are 400",
                    post("Content-Length: 1\r\nContent-Length: 2\r\n", "ab"), 400));
        // RFC 9110 §8.6: a list of one repeated value "MAY" be taken as one, or
        // the message rejected as invalid: rejected.
        add(refused("two identical Content-Lengths are 400",
                    post("Content-Length: 2\r\nContent-Length: 2\r\n", "ab"), 400));
        add(refused("a Content-Length list is 400", post("Content-Length: 2, 2\r\n", "ab"), 400));
        add(refused("two differing Content-Types are 400",
                    post("Content-Type: text/plain\r\nContent-Type: application/json\r\n"
                         "Content-Length: 2\r\n",
                         "{}"),
                    400));
        add(served("a Content-Type repeated with one value is served",
                   post("Content-Type: text/plain\r\ncontent-type: text/plain\r\n"
                        "Content-Length: 2\r\n",
                        "hi"),
                   body_is("hi")));
        add(served("100 field lines are served (--max-headers 100)", with_fields(field_lines(99))));
        add(refused("101 field lines are 431 (--max-headers 100)", with_fields(field_lines(100)),
                    431));
        add(refused("a field value over --max-header-size is 431",
                    with_fields("X-Big: " + std::string(20000, 'v') + "\r\n"), 431));
        add(refused(
            "many short field lines over --max-header-size are 431",
            [] {
                std::string s;
                for (int i = 0; i < 90; ++i)
                    s += "X-" + std::to_string(i) + ": " + std::string(200, 'v') + "\r\n";
                return with_fields(s);
            }(),
            431));
        add(refused("a field name over --max-header-size is 431",
                    with_fields(std::string(20000, 'N') + ": v\r\n"), 431));
        // RFC 9110 §10.1.1: 100-continue only when a body comes; an expectation
        // the server cannot meet is 417.
        add(served("Expect: 100-continue on a GET is answered at once",
                   with_fields("Expect: 100-continue\r\n"),
                   [](Rig& rig, const std::vector<Reply>&) { CHECK(rig.interim == 0); }));
        add(served("Expect: 100-continue with a body: 100, then the answer",
                   post("Expect: 100-continue\r\nContent-Length: 5\r\n", "hello"),
                   [](Rig& rig, const std::vector<Reply>&) {
                       CHECK(rig.interim == 1);
                       REQUIRE(rig.seen.size() == 1);
                       CHECK(rig.seen[0].body == "hello");
                   }));
        add(refused("an unknown expectation is 417", with_fields("Expect: magic\r\n"), 417));

        // ---- framing: RFC 9112 §6.1 ("A server MAY reject a request that contains
        // both Content-Length and Transfer-Encoding ... Regardless, the server
        // MUST close the connection"; Transfer-Encoding on HTTP/1.0 "MUST" be
        // treated as faulty framing; a coding not understood "SHOULD" be 501),
        // §6.3 (chunked not final: "MUST respond with the 400"; an invalid
        // Content-Length: 400; no length: an empty body), §7.1 (chunks).
        add(refused("Content-Length then Transfer-Encoding is 400",
                    post("Content-Length: 5\r\nTransfer-Encoding: chunked\r\n", "0\r\n\r\n"), 400));
        add(refused("Transfer-Encoding then Content-Length is 400",
                    post("Transfer-Encoding: chunked\r\nContent-Length: 5\r\n", "0\r\n\r\n"), 400));
        add(refused("Content-Length: 0 with Transfer-Encoding is 400",
                    post("Content-Length: 0\r\nTransfer-Encoding: chunked\r\n", "0\r\n\r\n"), 400));
        add(refused("a request smuggled behind Content-Length and Transfer-Encoding is not served",
                    post("Content-Length: 44\r\nTransfer-Encoding: chunked\r\n",
                         "0\r\n\r\nGET /smuggled HTTP/1.1\r\nHost: h\r\n\r\n"),
                    400));
        add(refused("Transfer-Encoding on HTTP/1.0 is 400",
                    "POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nab\r\n0\r\n\r\n",
                    400));
        add(refused("Transfer-Encoding and Content-Length on HTTP/1.0 are 400",
                    "POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\nContent-Length: 2\r\n\r\nab",
                    400));
        add(served_closed("Content-Length on HTTP/1.0 is served, then closed",
                          "POST / HTTP/1.0\r\nContent-Length: 5\r\n\r\nhello", body_is("hello")));
        add(served("Content-Length on HTTP/1.0 with keep-alive stays open",
                   "POST / HTTP/1.0\r\nConnection: keep-alive\r\nContent-Length: 5\r\n\r\nhello",
                   body_is("hello")));
        add(served("a POST without Content-Length or Transfer-Encoding has an empty body",
                   post("", ""), body_is("")));
        {
            const std::string inner = "GET /smuggled HTTP/1.1\r\nHost: h\r\n\r\n";
            add(pipeline("a GET's Content-Length body is its body, not a request",
                         get("/first", "Host: h\r\nContent-Length: " +
                                           std::to_string(inner.size()) + "\r\n") +
                             inner + get("/second"),
                         {200, 200}, false, false, [inner](Rig& rig, const std::vector<Reply>&) {
                             REQUIRE(rig.seen.size() == 2);
                             CHECK(rig.seen[0].body == inner);
                             CHECK(rig.seen[1].path == "/second");
                         }));
        }
        add(refused("a negative Content-Length is 400", post("Content-Length: -1\r\n", ""), 400));
        add(refused("a Content-Length with a plus sign is 400",
                    post("Content-Length: +2\r\n", "ab"), 400));
        add(refused("a hexadecimal Content-Length is 400", post("Content-Length: 0x2\r\n", "ab"),
                    400));
        add(refused("a Content-Length of two numbers is 400", post("Content-Length: 1 2\r\n", "ab"),
                    400));
        add(refused("an empty Content-Length is 400", post("Content-Length:\r\n", ""), 400));
        add(refused("a Content-Length with a letter after it is 400",
                    post("Content-Length: 2x\r\n", "ab"), 400));
        // RFC 9110 §8.6 asks a recipient to "anticipate potentially large decimal
        // numerals and prevent parsing errors due to integer conversion overflows";
        // a length past 64 bits cannot be held and is taken as invalid (400), not
        // as a body too large (413): http-parser stops at the digit that overflows.
        add(refused("a Content-Length past 2^64 is 400",
                    post("Content-Length: 99999999999999999999999\r\n", "ab"), 400));
        add(refused("a Content-Length of a thousand digits is 400",
                    post("Content-Length: " + std::string(1000, '9') + "\r\n", ""), 400));
        add(refused("a Content-Length far over --max-body-size is 413",
                    post("Content-Length: 1000000000000\r\n", "ab"), 413));
        add(refused("Transfer-Encoding: gzip (chunked not final) is 400",
                    post("Transfer-Encoding: gzip\r\n", "ab"), 400));
        add(refused("Transfer-Encoding: identity is 400",
                    post("Transfer-Encoding: identity\r\n", "ab"), 400));
        add(refused("Transfer-Encoding: chunked, gzip is 400",
                    post("Transfer-Encoding: chunked, gzip\r\n", "0\r\n\r\n"), 400));
        add(refused("Transfer-Encoding: gzip, chunked is 501",
                    post("Transfer-Encoding: gzip, chunked\r\n", "0\r\n\r\n"), 501));
        add(refused("Transfer-Encoding: x-custom, chunked is 501",
                    post("Transfer-Encoding: x-custom, chunked\r\n", "0\r\n\r\n"), 501));
        add(refused("Transfer-Encoding: chunked, chunked is 400",
                    post("Transfer-Encoding: chunked, chunked\r\n", "0\r\n\r\n"), 400));
        add(refused(
            "two Transfer-Encoding fields are 400",
            post("Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n", "0\r\n\r\n"),
            400));
        add(refused("an empty Transfer-Encoding is 400", post("Transfer-Encoding:\r\n", ""), 400));
        add(refused("chunked with a parameter is 400",
                    post("Transfer-Encoding: chunked;q=1\r\n", "0\r\n\r\n"), 400));
        add(refused("Transfer-Encoding with whitespace before its colon is 400",
                    post("Transfer-Encoding : chunked\r\n", "0\r\n\r\n"), 400));
        add(served("Transfer-Encoding: ChUnKeD is chunked",
                   post("Transfer-Encoding: ChUnKeD\r\n", "2\r\nab\r\n0\r\n\r\n"), body_is("ab")));
        // RFC 9112 §7.1.1: "A recipient MUST ignore unrecognized chunk extensions."
        add(served("chunk extensions are ignored", chunked("5;name=value\r\nhello\r\n0;x\r\n\r\n"),
                   body_is("hello")));
        add(served("a quoted chunk extension is ignored",
                   chunked("5;a=\"b;c\\\"d\"\r\nhello\r\n0\r\n\r\n"), body_is("hello")));
        add(served("whitespace before a chunk extension is ignored",
                   chunked("5 ;a=b\r\nhello\r\n0\r\n\r\n"), body_is("hello")));
        add(refused("a bare LF inside a chunk extension is 400",
                    chunked("5;a\nb\r\nhello\r\n0\r\n\r\n"), 400));
        add(refused("a NUL inside a chunk extension is 400",
                    chunked(bytes("5;a\0b\r\nhello\r\n0\r\n\r\n")), 400));
        add(refused("a bare CR inside a chunk extension is 400",
                    chunked("5;a\rb\r\nhello\r\n0\r\n\r\n"), 400));
        add(refused(
            "chunk extensions over --max-header-size are 400",
            [] {
                std::string b;
                for (int i = 0; i < 20; ++i) b += "1;" + std::string(1000, 'e') + "\r\nx\r\n";
                return chunked(b + "0\r\n\r\n");
            }(),
            400));
        add(served("an upper-case hex chunk size", chunked("A\r\n0123456789\r\n0\r\n\r\n"),
                   body_is("0123456789")));
        add(served("a lower-case hex chunk size", chunked("a\r\n0123456789\r\n0\r\n\r\n"),
                   body_is("0123456789")));
        add(served("a mixed-case hex chunk size",
                   chunked("1aB\r\n" + std::string(0x1ab, 'z') + "\r\n0\r\n\r\n"),
                   body_is(std::string(0x1ab, 'z'))));
        add(served("leading zeros in chunk sizes", chunked("0005\r\nhello\r\n000\r\n\r\n"),
                   body_is("hello")));
        add(refused("a negative chunk size is 400", chunked("-5\r\nhello\r\n0\r\n\r\n"), 400));
        add(refused("a chunk size with 0x is 400", chunked("0x5\r\nhello\r\n0\r\n\r\n"), 400));
        add(refused("a space inside a chunk size is 400", chunked("5 5\r\nhello\r\n0\r\n\r\n"),
                    400));
        add(refused("a chunk size past 2^64 is 400",
                    chunked("10000000000000000\r\nhello\r\n0\r\n\r\n"), 400));
        add(refused("a chunk size far over --max-body-size is 413 at its size line",
                    chunked("fffffffffff\r\nhello"), 413));
        add(refused("a bare LF after a chunk size is 400", chunked("5\nhello\r\n0\r\n\r\n"), 400));
        add(refused("chunk data longer than its size is 400", chunked("3\r\nhello\r\n0\r\n\r\n"),
                    400));
        add(refused("chunk data without its CRLF is 400", chunked("5\r\nhello0\r\n\r\n"), 400));
        add(refused("an empty chunk size line is 400", chunked("\r\nhello\r\n0\r\n\r\n"), 400));
        // RFC 9110 §6.5.1: fields that frame or route the message "cannot be
        // processed outside the header section": a trailer naming one is refused
        // with a reason that names it. Other trailer fields are dropped: a
        // recipient "MUST NOT merge" one into the header section unless its
        // definition allows it.
        add(refused("a trailer naming Content-Length is 400",
                    chunked("2\r\nab\r\n0\r\nContent-Length: 5\r\n\r\n"), 400,
                    reason_is("Content-Length is not allowed as a trailer field")));
        add(refused("a trailer naming Transfer-Encoding is 400",
                    chunked("2\r\nab\r\n0\r\nTransfer-Encoding: gzip\r\n\r\n"), 400,
                    reason_is("Transfer-Encoding is not allowed as a trailer field")));
        add(refused("a trailer naming Host is 400", chunked("2\r\nab\r\n0\r\nHost: evil\r\n\r\n"),
                    400, reason_is("Host is not allowed as a trailer field")));
        add(refused("a trailer naming Trailer is 400",
                    chunked("2\r\nab\r\n0\r\nTrailer: X-Checksum\r\n\r\n"), 400,
                    reason_is("Trailer is not allowed as a trailer field")));
        add(served("a trailer naming X-Checksum is dropped",
                   chunked("2\r\nab\r\n0\r\nX-Checksum: 1\r\n\r\n"),
                   [](Rig& rig, const std::vector<Reply>&) {
                       REQUIRE(rig.seen.size() == 1);
                       CHECK(rig.seen[0].body == "ab");
                       CHECK_FALSE(rig.seen[0].headers.has("X-Checksum"));
                   }));
        add(refused("a bare LF in a trailer is 400", chunked("2\r\nab\r\n0\r\nX: 1\n\r\n"), 400));
        add(refused("whitespace before a trailer field's colon is 400",
                    chunked("2\r\nab\r\n0\r\nX : 1\r\n\r\n"), 400));
        add(cut_short("a Content-Length body cut short, then a half-close",
                      post("Content-Length: 10\r\n", "abc")));
        add(cut_short("a chunked body cut short before its last chunk, then a half-close",
                      chunked("5\r\nhello\r\n")));
        add(cut_short("a chunked body cut short in its trailers, then a half-close",
                      chunked("5\r\nhello\r\n0\r\nX-T: 1\r\n")));
        add(cut_short("a head cut short in a field value, then a half-close",
                      "GET / HTTP/1.1\r\nHost: h\r\nX-A: abc"));

        // ---- pipelines: RFC 9112 §9.3.2, "A server MAY process a sequence of
        // pipelined requests in parallel if they all have safe methods ... but it
        // MUST send the corresponding responses in the same order that the
        // requests were received"; RFC 9112 §9.6 (close).
        add(pipeline("three pipelined requests are answered in order",
                     get("/a") + get("/b") + get("/c"), {200, 200, 200}, false, false,
                     [](Rig&, const std::vector<Reply>& a) {
                         CHECK(a[0].body == "ok /a");
                         CHECK(a[1].body == "ok /b");
                         CHECK(a[2].body == "ok /c");
                     }));
        add(pipeline("a bad request in the middle: the one before is answered, then 400",
                     get("/a") + "GET / HTTP/1.1\r\nHost : h\r\n\r\n" + get("/c"), {200, 400},
                     true));
        add(pipeline("an unknown method in the middle: the one before is answered, then 501",
                     get("/a") + "BREW /pot HTTP/1.1\r\nHost: h\r\n\r\n" + get("/c"), {200, 501},
                     true));
        add(pipeline("a smuggling-shaped request in the middle: 200, then 400, nothing after",
                     get("/a") +
                         post("Content-Length: 4\r\nTransfer-Encoding: chunked\r\n", "0\r\n\r\n") +
                         get("/c"),
                     {200, 400}, true));
        add(pipeline("an HTTP/1.0 request in the middle ends the pipeline after its answer",
                     get("/a") + "GET /b HTTP/1.0\r\n\r\n" + get("/c"), {200, 200}, true));
        add(pipeline("Connection: close in the middle ends the pipeline after its answer",
                     get("/a") + get("/b", "Host: h\r\nConnection: close\r\n") + get("/c"),
                     {200, 200}, true));
        add(Case{"a HEAD in a pipeline has no body before the next answer",
                 "HEAD /a HTTP/1.1\r\nHost: h\r\n\r\n" + get("/b"),
                 {200, 200},
                 false,
                 false,
                 {true, false},
                 [](Rig&, const std::vector<Reply>& a) {
                     CHECK(a[0].body.empty());
                     CHECK(a[0].headers.get("Content-Length") ==
                           std::optional<std::string_view>("5"));
                     CHECK(a[1].body == "ok /b");
                 }});
        add(pipeline("pipelined requests, then a half-close: every one is answered, then closed",
                     get("/a") + get("/b") + get("/c"), {200, 200, 200}, true, true));
        add(pipeline(
            "pipelined bodies, then a half-close: every one is answered, then closed",
            post("Content-Length: 5\r\n", "hello") + chunked("5\r\nworld\r\n0\r\n\r\n") + get("/c"),
            {200, 200, 200}, true, true, [](Rig& rig, const std::vector<Reply>&) {
                REQUIRE(rig.seen.size() == 3);
                CHECK(rig.seen[0].body == "hello");
                CHECK(rig.seen[1].body == "world");
            }));
        add(
            pipeline("a pipeline ending in half a request, then a half-close: the whole ones "
                     "are answered",
                     get("/a") + get("/b") + "GET /c HTTP/1.1\r\nHo", {200, 200}, true, true));
        add(pipeline("a pipeline ending in a bad request, then a half-close: 200, then 400",
                     get("/a") + "GET / HTTP/1.10\r\nHost: h\r\n\r\n", {200, 400}, true, true));

        // ---- absurd lengths.
        // RFC 9112 §3: a request-target longer than the server parses: "MUST"
        // be 414.
        add(refused("a target over --max-header-size is 414", get("/" + std::string(20000, 't')),
                    414));
        add(refused("a target of 1 MiB is 414", get("/" + std::string(1 << 20, 't')), 414));
        add(refused("a method of 100 KiB is 501", std::string(100 * 1024, 'M') + " / HTTP/1.1\r\n",
                    501));
        add(refused("a field value of 1 MiB is 431",
                    with_fields("X-Big: " + std::string(1 << 20, 'v') + "\r\n"), 431));
        add(refused("ten thousand field lines are 431", with_fields(field_lines(10000)), 431));
        add(served("a thousand empty lines before the request line are ignored", [] {
            std::string s;
            for (int i = 0; i < 1000; ++i) s += "\r\n";
            return s + get("/");
        }()));
        add(refused("a version of 10 KiB is 400",
                    "GET / HTTP/1.1" + std::string(10 * 1024, '1') + "\r\n\r\n", 400));
        add(refused("a chunk extension of 1 MiB is 400",
                    chunked("1;" + std::string(1 << 20, 'e') + "\r\nx\r\n0\r\n\r\n"), 400));
        return t;
    }();
    return all;
}

enum class Feed { whole, bytewise, random };

const char* feed_name(Feed f) {
    switch (f) {
        case Feed::whole:
            return "whole";
        case Feed::bytewise:
            return "byte by byte";
        case Feed::random:
            return "split at random";
    }
    return "";
}

std::vector<size_t> cuts_for(const std::string& name, size_t size, Feed f) {
    std::vector<size_t> cuts;
    if (f == Feed::bytewise) {
        for (size_t i = 1; i < size; ++i) cuts.push_back(i);
    } else if (f == Feed::random && size > 1) {
        std::mt19937 rng(uint32_t(std::hash<std::string>{}(name)));
        std::uniform_int_distribution<size_t> at(1, size - 1);
        for (int i = 0; i < 4; ++i) cuts.push_back(at(rng));
        std::sort(cuts.begin(), cuts.end());
        cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
    }
    return cuts;
}

size_t count_2xx(const std::vector<int>& statuses) {
    return size_t(
        std::count_if(statuses.begin(), statuses.end(), [](int s) { return s / 100 == 2; }));
}

struct Played {
    std::unique_ptr<Client> open;  // the connection, if it stays open
    std::vector<Reply> answers;
};

// Runs one case on `rig`: sends, checks the answers and the close.
Played play(Rig& rig, const Case& k, const std::vector<size_t>& cuts, bool admin = false) {
    auto c = rig.client(admin);
    rig.write(*c, k.bytes, cuts);
    if (k.half_close) ::shutdown(c->fd, SHUT_WR);
    auto got = rig.answers(*c, k.answers.size(), k.head);
    std::vector<int> statuses;
    for (const auto& a : got) statuses.push_back(a.status);
    INFO("left unread: " << c->in.substr(0, 300));
    CHECK(statuses == k.answers);
    for (const auto& a : got)
        if (a.status >= 400) CHECK_FALSE(a.body.empty());  // a reason comes with a refusal
    if (k.closes) {
        CHECK(rig.wait_eof(*c));
        CHECK(c->in.empty());  // nothing after the expected answers
        // The server's own decision to close is said in the answer (RFC 9112
        // §9.6); after a client's half-close there is nobody left to tell.
        if (!got.empty() && !k.half_close) CHECK(closes_with_header(got.back()));
        return {nullptr, std::move(got)};
    }
    CHECK(rig.server->alive(c->slot));
    CHECK(c->in.empty());
    if (!got.empty()) CHECK_FALSE(closes_with_header(got.back()));
    return {std::move(c), std::move(got)};
}

}  // namespace

// ---- client requests ----------------------------------------------------------------

TEST_CASE("hostile: the client table has at least 120 cases, each named once", "[hostile]") {
    const auto& t = client_cases();
    CHECK(t.size() >= 120);
    std::vector<std::string> names;
    for (const auto& k : t) names.push_back(k.name);
    std::sort(names.begin(), names.end());
    CHECK(std::adjacent_find(names.begin(), names.end()) == names.end());
}

TEST_CASE(
    "hostile: each malformed or hostile request gets the answer RFC 9110/9112 ask for, and a "
    "well-formed request is served right after",
    "[hostile][http][server]") {
    for (const Case& k : client_cases()) {
        for (Feed f : {Feed::whole, Feed::bytewise, Feed::random}) {
            if (f == Feed::bytewise && k.bytes.size() > 4096) continue;
            DYNAMIC_SECTION(k.name << " (" << feed_name(f) << ")") {
                Rig rig;
                auto played = play(rig, k, cuts_for(k.name, k.bytes.size(), f));
                CHECK(rig.seen.size() == count_2xx(k.answers));  // refusals reach no app
                if (k.check && played.answers.size() == k.answers.size())
                    k.check(rig, played.answers);
                rig.fresh(played.open.get());
                rig.fresh(nullptr);
            }
        }
    }
}

TEST_CASE("hostile: one server takes the whole client table in turn and still serves",
          "[hostile][http][server]") {
    Rig rig;
    size_t served = 0;
    for (const Case& k : client_cases()) {
        INFO(k.name);
        auto open = play(rig, k, {}).open;
        served += count_2xx(k.answers);
        if (open) {
            rig.fresh(open.get());
            ++served;
        }
    }
    CHECK(rig.seen.size() == served);
    rig.fresh(nullptr);
    // Every connection the table opened has ended.
    CHECK(rig.step_until([&] { return rig.server->connections() == 0; }, 5000ms));
    CHECK(rig.metrics.connections_open.load() == 0);
}

// ---- the admin API ------------------------------------------------------------------

namespace {

const std::string kKey = "sekrit";

std::string admin_post(const std::string& path, const std::string& body,
                       const std::string& auth = "Bearer " + kKey) {
    std::string s = "POST " + path + " HTTP/1.1\r\nHost: h\r\nContent-Type: application/json\r\n";
    if (!auth.empty()) s += "Authorization: " + auth + "\r\n";
    return s + "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
}
std::string publish(const std::string& body, const std::string& auth = "Bearer " + kKey) {
    return admin_post("/publish", body, auth);
}
Case admin(std::string name, std::string b, int status, int published = 0, Check check = nullptr) {
    Case c{std::move(name), std::move(b), {status}, false, false, {}, std::move(check)};
    c.published = published;
    return c;
}
Check allow_is(std::string want) {
    return [want](Rig&, const std::vector<Reply>& a) {
        CHECK(a[0].headers.get("Allow") == std::optional<std::string_view>(want));
    };
}
Check asks_for_bearer() {
    return [](Rig&, const std::vector<Reply>& a) {
        CHECK(a[0].headers.get("WWW-Authenticate") == std::optional<std::string_view>("Bearer"));
    };
}

const std::vector<Case>& admin_cases() {
    static const std::vector<Case> all = [] {
        std::vector<Case> t;
        auto add = [&](Case c) { t.push_back(std::move(c)); };
        const std::string ok = R"({"channel": "news", "data": "hi"})";

        // ---- bad JSON (RFC 8259): the admin API takes one flat object of strings.
        add(admin("an empty body is 400", publish(""), 400));
        add(admin("an unclosed object is 400", publish("{"), 400));
        // An array is a batch (test_admin): one that is not of objects is 400.
        add(admin("an array of a number is 400", publish("[5]"), 400));
        add(admin("an array of an object and a string is 400",
                  publish(R"([{"channel": "news", "data": "x"}, "news"])"), 400));
        add(admin("null is 400", publish("null"), 400));
        add(admin("a string is 400", publish("\"news\""), 400));
        add(admin("a trailing comma is 400", publish(R"({"channel": "news",})"), 400));
        add(admin("a nested object is 400", publish(R"({"channel": {"a": "b"}})"), 400));
        add(admin("a number value is 400", publish(R"({"channel": "news", "data": 5})"), 400));
        add(admin("bytes after the object are 400", publish(ok + "x"), 400));
        add(admin("two objects are 400", publish(ok + ok), 400));
        add(admin("a bad escape is 400", publish(R"({"channel": "a\q"})"), 400));
        add(admin("a lone surrogate is 400", publish(R"({"channel": "\ud800"})"), 400));
        add(admin("a raw control byte in a string is 400", publish("{\"channel\": \"a\x01z\"}"),
                  400));
        add(admin("a key without quotes is 400", publish("{channel: \"news\"}"), 400));
        add(admin("ten thousand nested arrays are 400", publish(std::string(10000, '[')), 400));
        // RFC 8259 §8.1: JSON between systems "MUST be encoded using UTF-8".
        add(admin("a body that is not UTF-8 is 400",
                  publish("{\"channel\": \"caf\xe9\", \"data\": \"x\"}"), 400));
        add(admin("an overlong UTF-8 form is 400",
                  publish("{\"channel\": \"a\xc0\xafz\", \"data\": \"x\"}"), 400));
        add(admin("an encoded surrogate in UTF-8 is 400",
                  publish("{\"channel\": \"a\xed\xa0\x80z\", \"data\": \"x\"}"), 400));
        add(admin("UTF-8 in a channel and its data is published",
                  publish("{\"channel\": \"caf\xc3\xa9\", \"data\": \"\xe2\x98\x83 \\u2603\"}"),
                  200, 1));
        // ---- names (bus/names.hpp): what no hold could be told apart or framed.
        add(admin("a missing channel is 400", publish(R"({"data": "x"})"), 400));
        add(admin("an empty channel is 400", publish(R"({"channel": ""})"), 400));
        add(admin("a reserved channel is 400", publish(R"({"channel": "m0.slot.0.1"})"), 400));
        add(admin("a NUL in a channel is 400", publish(R"({"channel": "a\u0000b"})"), 400));
        add(admin("CR LF in a channel is 400", publish(R"({"channel": "a\r\nb"})"), 400));
        add(admin("a comma in a channel is 400", publish(R"({"channel": "a,b"})"), 400));
        add(admin("a channel with a leading space is 400", publish(R"({"channel": " a"})"), 400));
        add(admin("a channel of 257 bytes is 400",
                  publish(R"({"channel": ")" + std::string(257, 'c') + R"("})"), 400));
        add(admin("LF in an event name is 400", publish(R"({"channel": "news", "event": "a\nb"})"),
                  400));
        // RFC 8259 §4: names "SHOULD be unique"; of repeated keys the last is the
        // one checked and the one used.
        add(admin("of repeated keys the last is checked",
                  publish(R"({"channel": "news", "channel": "m0.slot.0.1"})"), 400));
        add(admin("a channel of 256 bytes is published",
                  publish(R"({"channel": ")" + std::string(256, 'c') + R"(", "data": ""})"), 200,
                  1));
        add(admin("a publish with no data is 400", publish(R"({"channel": "news"})"), 400));
        add(admin("/close with bad JSON is 400", admin_post("/close", "{"), 400));
        add(admin("/close without a channel is 400", admin_post("/close", "{}"), 400));
        add(admin("/close of a reserved channel is 400",
                  admin_post("/close", R"({"channel": "m0.slot.1.1"})"), 400));
        add(admin(
            "/close of a channel nobody holds closes nothing",
            admin_post("/close", R"({"channel": "news"})"), 200, 0,
            [](Rig&, const std::vector<Reply>& a) { CHECK(a[0].body == "{\"closed\": 0}\n"); }));
        // ---- huge bodies: RFC 9110 §15.5.14 (413).
        {
            Case c = refused("a body over --max-body-size is 413 at the head",
                             "POST /publish HTTP/1.1\r\nHost: h\r\nAuthorization: Bearer " + kKey +
                                 "\r\nContent-Length: 17000000\r\n\r\n{",
                             413);
            add(c);
        }
        add(refused("a chunk over --max-body-size is 413 at its size line",
                    "POST /publish HTTP/1.1\r\nHost: h\r\nAuthorization: Bearer " + kKey +
                        "\r\nTransfer-Encoding: chunked\r\n\r\n2000000\r\n{",
                    413));
        add(admin(
            "an event over --max-event-size is 413",
            publish(R"({"channel": "news", "data": ")" + std::string(300 * 1024, 'x') + R"("})"),
            413));
        add(admin(
            "a chunked publish is served",
            "POST /publish HTTP/1.1\r\nHost: h\r\nAuthorization: Bearer " + kKey +
                "\r\nTransfer-Encoding: chunked\r\n\r\n" +
                [&] {
                    char size[16];
                    std::snprintf(size, sizeof size, "%zx", ok.size());
                    return std::string(size);
                }() +
                "\r\n" + ok + "\r\n0\r\n\r\n",
            200, 1));
        add(admin("a publish after 100-continue is served",
                  "POST /publish HTTP/1.1\r\nHost: h\r\nAuthorization: Bearer " + kKey +
                      "\r\nExpect: 100-continue\r\nContent-Length: " + std::to_string(ok.size()) +
                      "\r\n\r\n" + ok,
                  200, 1));
        // ---- methods: RFC 9110 §15.5.6, "The origin server MUST generate an
        // Allow header field in a 405 response".
        add(admin("GET /publish is 405", get("/publish"), 405, 0, allow_is("POST")));
        add(admin("PUT /publish is 405",
                  "PUT /publish HTTP/1.1\r\nHost: h\r\nContent-Length: 2\r\n"
                  "\r\n{}",
                  405, 0, allow_is("POST")));
        add(admin("GET /close is 405", get("/close"), 405, 0, allow_is("POST")));
        add(admin("DELETE /close is 405", "DELETE /close HTTP/1.1\r\nHost: h\r\n\r\n", 405, 0,
                  allow_is("POST")));
        add(admin("POST /metrics is 405", admin_post("/metrics", "{}"), 405, 0,
                  allow_is("GET, HEAD")));
        add(admin("DELETE /metrics is 405", "DELETE /metrics HTTP/1.1\r\nHost: h\r\n\r\n", 405, 0,
                  allow_is("GET, HEAD")));
        add(Case{"HEAD /metrics is the head alone",
                 "HEAD /metrics HTTP/1.1\r\nHost: h\r\n\r\n",
                 {200},
                 false,
                 false,
                 {true},
                 [](Rig&, const std::vector<Reply>& a) { CHECK(a[0].body.empty()); }});
        add(admin("an unknown admin path is 404", get("/nothing"), 404));
        // /publish/ is Pushpin's format (test_admin.cpp): the m0serve shape there is 400.
        add(admin("/publish/ is not /publish: 400", admin_post("/publish/", ok), 400));
        add(admin("a query does not change the path", admin_post("/publish?x=1", ok), 200, 1));
        // ---- keys: RFC 9110 §11.1 (the scheme is case-insensitive), §11.4
        // (credentials = auth-scheme [ 1*SP ( token68 / #auth-param ) ]), §11.6.1
        // (401 with WWW-Authenticate).
        add(admin("no Authorization is 401", publish(ok, ""), 401, 0, asks_for_bearer()));
        add(admin("a wrong key is 401", publish(ok, "Bearer wrong!"), 401, 0, asks_for_bearer()));
        add(admin("a key that differs in case is 401", publish(ok, "Bearer SEKRIT"), 401));
        add(admin("a prefix of the key is 401", publish(ok, "Bearer sekri"), 401));
        add(admin("the key and more is 401", publish(ok, "Bearer sekrit2"), 401));
        add(admin("the key without a scheme is 401", publish(ok, kKey), 401));
        add(admin("the scheme without a key is 401", publish(ok, "Bearer"), 401));
        add(admin("the scheme and a space is 401", publish(ok, "Bearer "), 401));
        add(admin("Basic credentials are 401", publish(ok, "Basic c2Vrcml0"), 401));
        add(admin("a tab after the scheme is 401", publish(ok, "Bearer\tsekrit"), 401));
        add(admin("the scheme in lower case is accepted", publish(ok, "bearer " + kKey), 200, 1));
        add(admin("the scheme in upper case is accepted", publish(ok, "BEARER " + kKey), 200, 1));
        add(admin("two spaces after the scheme are accepted", publish(ok, "Bearer  " + kKey), 200,
                  1));
        add(admin("a valid publish is 200", publish(ok), 200, 1,
                  [](Rig&, const std::vector<Reply>& a) { CHECK(a[0].body == "{\"id\": 1}\n"); }));
        // ---- the request itself: the admin listener parses as the client one does.
        add(refused("two Content-Lengths on /publish are 400",
                    "POST /publish HTTP/1.1\r\nHost: h\r\nContent-Length: 2\r\n"
                    "Content-Length: 3\r\n\r\n{}",
                    400));
        add(refused("a bare LF on the admin listener is 400", "GET /metrics HTTP/1.1\nHost: h\n\n",
                    400));
        // ---- the admin API is the listener's one mount, and it holds no WebSocket:
        // an upgrade is a request like any (a client listener would answer 426).
        add(admin("an upgrade to WebSocket is answered as a request, not checked as a handshake",
                  "GET /metrics HTTP/1.1\r\nHost: h\r\nUpgrade: websocket\r\n"
                  "Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
                  "Sec-WebSocket-Version: 8\r\n\r\n",
                  200));
        return t;
    }();
    return all;
}

server::ServerConfig admin_cfg() {
    server::ServerConfig cfg;
    cfg.admin_key = kKey;
    return cfg;
}

}  // namespace

TEST_CASE(
    "hostile: each hostile admin request gets its answer, publishes only when it should, and "
    "GET /metrics is served right after",
    "[hostile][http][server][admin]") {
    for (const Case& k : admin_cases()) {
        for (Feed f : {Feed::whole, Feed::random}) {
            DYNAMIC_SECTION(k.name << " (" << feed_name(f) << ")") {
                Rig rig(admin_cfg(), true);
                auto played = play(rig, k, cuts_for(k.name, k.bytes.size(), f), true);
                CHECK(rig.bus.published.load() == uint64_t(k.published));
                CHECK(rig.seen.empty());  // the admin side reaches no mount
                if (k.check && played.answers.size() == k.answers.size())
                    k.check(rig, played.answers);
                rig.fresh(played.open.get(), true);
                rig.fresh(nullptr, true);
            }
        }
    }
}

// ---- what a handler may answer ----------------------------------------------------------

namespace {

struct HandlerCase {
    enum class Kind { whole, stream, mojo, mojo_hold };
    std::string name;
    Kind kind;
    int status;  // what the handler answers
    std::vector<std::pair<std::string, std::string>> fields;
    int want;     // the status the client gets
    bool closes;  // and whether the connection ends after it
    bool head = false;
};

using K = HandlerCase::Kind;

const std::vector<HandlerCase>& handler_cases() {
    // RFC 9110 §5.1 (field-name = token), §5.5 ("Field values containing CR, LF,
    // or NUL characters are invalid and dangerous"), §15 ("Values outside the
    // range 100..599 are invalid"; a 1xx is interim, §15.2). What a handler
    // answers that cannot be written as it is becomes a 502 (RFC 9110 §15.6.3:
    // the server, acting for the handler, "received an invalid response"); a
    // whole answer keeps the connection, a stream or hold head that is already
    // under way ends it.
    static const std::vector<HandlerCase> all = {
        {"CR LF in a header value", K::whole, 200, {{"X-A", "a\r\nX-Injected: 1"}}, 502, false},
        {"a whole second response in a header value",
         K::whole,
         200,
         {{"X-A", "a\r\n\r\nHTTP/1.1 200 OK\r\nX-Injected: 1\r\nContent-Length: 0\r\n\r\n"}},
         502,
         false},
        {"CR LF in a Location", K::whole, 302, {{"Location", "/x\r\nX-Injected: 1"}}, 502, false},
        {"a bare LF in a header value", K::whole, 200, {{"X-A", "a\nX-Injected: 1"}}, 502, false},
        {"a bare CR in a header value", K::whole, 200, {{"X-A", "a\rX-Injected: 1"}}, 502, false},
        {"a NUL in a header value", K::whole, 200, {{"X-A", std::string("a\0b", 3)}}, 502, false},
        {"CR LF in a header name", K::whole, 200, {{"X-A\r\nX-Injected", "1"}}, 502, false},
        {"a colon in a header name", K::whole, 200, {{"X-Injected: 1\r\nX-A", "1"}}, 502, false},
        {"a space in a header name", K::whole, 200, {{"X A", "1"}}, 502, false},
        {"an empty header name", K::whole, 200, {{"", "1"}}, 502, false},
        {"status 0", K::whole, 0, {}, 502, false},
        {"status 99", K::whole, 99, {}, 502, false},
        {"status 100 as the final answer", K::whole, 100, {}, 502, false},
        {"status 101 as the final answer", K::whole, 101, {}, 502, false},
        {"status 600", K::whole, 600, {}, 502, false},
        {"status 1000", K::whole, 1000, {}, 502, false},
        {"status -1", K::whole, -1, {}, 502, false},
        {"status 599 is passed on", K::whole, 599, {}, 599, false},
        {"a tab and obs-text in a header value are passed on",
         K::whole,
         200,
         {{"X-A", "a\tcaf\xc3\xa9"}},
         200,
         false},
        {"CR LF in a header value answered to a HEAD",
         K::whole,
         200,
         {{"X-A", "a\r\nX-Injected: 1"}},
         502,
         false,
         true},
        {"CR LF in a Content-Length answered to a HEAD",
         K::whole,
         200,
         {{"Content-Length", "5\r\nX-Injected: 1"}},
         502,
         false,
         true},
        {"CR LF in a header value of a streamed head",
         K::stream,
         200,
         {{"X-A", "a\r\nX-Injected: 1"}},
         502,
         true},
        {"CR LF in the Content-Length of a streamed head",
         K::stream,
         200,
         {{"Content-Length", "4\r\nX-Injected: 1"}},
         502,
         true},
        {"a Content-Length that is not a number on a streamed head",
         K::stream,
         200,
         {{"Content-Length", "abc"}},
         502,
         true},
        {"status 100 on a streamed head", K::stream, 100, {}, 502, true},
        {"a well-formed streamed head is passed on", K::stream, 200, {{"X-A", "a"}}, 200, false},
        {"CR LF in a header value from a mojo mount",
         K::mojo,
         200,
         {{"X-A", "a\r\nX-Injected: 1"}},
         502,
         false},
        {"a NUL in a header value from a mojo mount",
         K::mojo,
         200,
         {{"X-A", std::string("a\0b", 3)}},
         502,
         false},
        {"status 0 from a mojo mount", K::mojo, 0, {}, 502, false},
        {"CR LF in another header of a mojo hold",
         K::mojo_hold,
         200,
         {{"M0-Hold", "stream"}, {"M0-Channel", "c"}, {"X-A", "a\r\nX-Injected: 1"}},
         502,
         true},
        {"CR LF inside M0-Channel of a mojo hold",
         K::mojo_hold,
         200,
         {{"M0-Hold", "stream"}, {"M0-Channel", "c\r\nX-Injected: 1"}},
         502,
         false},
        {"an empty name inside M0-Channel of a mojo hold",
         K::mojo_hold,
         200,
         {{"M0-Hold", "stream"}, {"M0-Channel", "a,,b"}},
         502,
         false},
        {"a reserved name in M0-Channel of a mojo hold",
         K::mojo_hold,
         200,
         {{"M0-Hold", "stream"}, {"M0-Channel", "m0.slot.0.1"}},
         502,
         false},
    };
    return all;
}

Response answer_of(const HandlerCase& k) {
    Response r;
    r.status = k.status;
    for (const auto& [name, value] : k.fields) r.headers.add(name, value);
    if (k.kind != K::mojo_hold) r.headers.add("Content-Type", "text/plain");
    r.body = k.kind == K::mojo_hold ? ": hold\n\n" : "body";
    return r;
}

}  // namespace

TEST_CASE(
    "hostile: a handler's answer that cannot be written as it is becomes a 502, never a split "
    "response, and the next request is served",
    "[hostile][http][server]") {
    for (const HandlerCase& k : handler_cases()) {
        DYNAMIC_SECTION(k.name) {
            const bool mojo = k.kind == K::mojo || k.kind == K::mojo_hold;
            Rig rig({}, true, mojo);
            const Response answer = answer_of(k);
            rig.handler.answer = [&](const Request&) { return answer; };
            bool posted = false;
            rig.app = [&](SlotRef s, const Request& r) {
                if (r.path != "/h") {  // the fresh requests
                    Response ok;
                    ok.body = "ok " + r.target;
                    rig.post(s, std::move(ok));
                    return;
                }
                posted = true;
                if (k.kind == K::whole) {
                    rig.post(s, answer);
                    return;
                }
                auto st = std::make_shared<StreamState>(1 << 16);
                rig.post_kind(s, Completion::Kind::head, st, answer);
                rig.post_kind(s, Completion::Kind::chunk, st, {}, "more");
                rig.post_kind(s, Completion::Kind::end, st);
            };
            auto c = rig.client();
            const std::string method = k.head ? "HEAD" : "GET";
            REQUIRE(
                c->send(method + (mojo ? " /native/h" : " /h") + " HTTP/1.1\r\nHost: h\r\n\r\n"));
            if (mojo) {
                REQUIRE(rig.step_until([&] { return rig.pool->pool().queued() == 1; }));
                REQUIRE(rig.pool->pool().run_next());
            }
            auto got = rig.answers(*c, 1, {k.head});
            INFO("received: " << c->in);
            REQUIRE(got.size() == 1);
            CHECK(got[0].status == k.want);
            CHECK_FALSE(got[0].headers.has("X-Injected"));
            if (k.head) CHECK(got[0].body.empty());
            if (k.want == 502) {
                if (!k.head) CHECK_FALSE(got[0].body.empty());  // the reason
                CHECK_FALSE(got[0].headers.has("X-A"));         // none of the handler's fields
            }
            if (k.closes) {
                CHECK(rig.wait_eof(*c));
                CHECK(c->in.empty());  // the stream's later chunks were dropped
                CHECK_FALSE(rig.server->subscribed(c->slot));
                rig.fresh(nullptr);
            } else {
                rig.fresh(c.get());
            }
            CHECK(rig.metrics.holds_open.load() == 0);
            if (!mojo) CHECK(posted);
        }
    }
}

TEST_CASE(
    "hostile: a hold on 10,000 channels is refused 502 with its count; one on the limit's 64 is "
    "held, hears any of them, and is released whole when its client leaves",
    "[hostile][hold][server]") {
    // Each name is a subscription kept for the hold's life: past
    // --max-hold-channels (default 64) the handler's answer is at fault.
    Rig rig({}, true, true);
    auto names = [](int n) {
        std::string list;
        for (int i = 0; i < n; ++i) list += (i ? "," : "") + std::string("c") + std::to_string(i);
        return list;
    };
    std::string list = names(10000);
    rig.handler.answer = [&](const Request&) {
        Response r;
        r.headers.add("M0-Hold", "stream");
        r.headers.add("M0-Channel", list);
        r.body = ": hold\n\n";
        return r;
    };
    // A client whose request the mojo pool has answered.
    auto answered = [&] {
        auto c = rig.client();
        REQUIRE(c->send("GET /native/h HTTP/1.1\r\nHost: h\r\n\r\n"));
        REQUIRE(rig.step_until([&] { return rig.pool->pool().queued() == 1; }));
        REQUIRE(rig.pool->pool().run_next());
        return c;
    };
    auto refused = answered();
    REQUIRE(rig.read_until(*refused, "over --max-hold-channels 64"));
    CHECK(refused->in.rfind("HTTP/1.1 502 ", 0) == 0);
    CHECK(refused->in.find("10000 channels") != std::string::npos);
    CHECK(rig.server->subscriptions().subscribers("c0").empty());
    CHECK(rig.metrics.holds_open.load() == 0);

    list = names(64);
    auto c = answered();
    REQUIRE(rig.read_until(*c, ": hold\n\n"));
    CHECK(c->in.rfind("HTTP/1.1 200 OK\r\n", 0) == 0);
    CHECK(c->in.find("M0-Channel") == std::string::npos);  // consumed, not written
    CHECK(rig.server->holding(c->slot));
    CHECK(rig.server->subscriptions().subscribers("c0").size() == 1);
    CHECK(rig.server->subscriptions().subscribers("c63").size() == 1);
    REQUIRE(rig.bus.publish("c63", "last").ok());
    REQUIRE(rig.bus.publish("c32", "middle").ok());
    rig.server->on_bus_ready();
    REQUIRE(rig.read_until(*c, "data: middle\n\n"));
    CHECK(c->in.find("data: last\n\n") != std::string::npos);
    SlotRef slot = c->slot;
    c->close();
    REQUIRE(rig.step_until([&] { return !rig.server->alive(slot); }));
    CHECK_FALSE(rig.server->subscribed(slot));
    CHECK(rig.server->subscriptions().subscribers("c0").empty());
    CHECK(rig.server->subscriptions().subscribers("c63").empty());
    CHECK(rig.metrics.holds_open.load() == 0);
    rig.fresh(nullptr);
}

TEST_CASE("hostile: a hold answered to HEAD is a head without a body, not a hold",
          "[hostile][hold][server]") {
    Rig rig({}, true, true);
    rig.handler.answer = [](const Request&) {
        Response r;
        r.headers.add("M0-Hold", "stream");
        r.headers.add("M0-Channel", "c");
        r.body = ": hold\n\n";
        return r;
    };
    auto c = rig.client();
    REQUIRE(c->send("HEAD /native/h HTTP/1.1\r\nHost: h\r\n\r\n"));
    REQUIRE(rig.step_until([&] { return rig.pool->pool().queued() == 1; }));
    REQUIRE(rig.pool->pool().run_next());
    // RFC 9110 §9.3.2: "The server SHOULD send the same header fields in response
    // to a HEAD request as it would have sent if the request method had been GET"
    // and no content; the stream a GET would open never opens.
    REQUIRE(rig.wait_eof(*c));
    auto a = take_reply(c->in, true, true);
    REQUIRE(a);
    CHECK(a->status == 200);
    CHECK(a->headers.get("Content-Type") == std::optional<std::string_view>("text/event-stream"));
    CHECK(c->in.empty());  // no body, no event, no heartbeat
    CHECK_FALSE(rig.server->subscribed(c->slot));
    CHECK(rig.metrics.holds_total.load() == 0);
    CHECK(rig.metrics.holds_open.load() == 0);
    REQUIRE(rig.bus.publish("c", "after").ok());
    rig.server->on_bus_ready();
    CHECK(rig.metrics.events_delivered.load() == 0);
    rig.fresh(nullptr);
}
