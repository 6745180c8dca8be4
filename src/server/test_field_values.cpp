// A handler's field values as the client gets them: the whitespace around a
// value (which WSGI apps give: Django's Set-Cookie values begin with a space)
// is not sent, over HTTP/1.1 or HTTP/2, where an HTTP/2 client resets a
// stream whose field value begins or ends with it (RFC 9113 §8.2.1); a
// control character in a value is the handler's fault (502), as CR, LF and
// NUL are (test_hostile).
#include <catch2/catch.hpp>

#include "http/message.hpp"
#include "server/test_h2_client.hpp"

using namespace m0;
using namespace m0::testing;

namespace {

// A rig whose mount "/app" keeps each request; the test answers as a pool.
struct AppRig : ServerRig {
    std::vector<SlotRef> got;
    AppRig() {
        server->add_mount("/app", [this](SlotRef s, http::Request&&) {
            got.push_back(s);
            return Admission::queued;
        });
    }
};

// Django's answer to a login page: each cookie's value as
// SimpleCookie.output(header='') gives it, with the space it begins with.
http::Response with_cookies() {
    http::Response r;
    r.headers.add("Content-Type", "text/html; charset=utf-8");
    r.headers.add("Set-Cookie", " csrftoken=abc; expires=Thu, 02 Dec 2027 10:00:00 GMT; Path=/");
    r.headers.add("Set-Cookie", " sessionid=xyz; HttpOnly; Path=/; SameSite=Lax");
    r.headers.add("X-Around", "\t a b \t");
    r.headers.add("X-Blank", "  ");
    r.body = "page";
    return r;
}

}  // namespace

TEST_CASE("field values: trim_ows and is_field_value", "[http]") {
    CHECK(http::trim_ows(" a=1; Path=/") == "a=1; Path=/");
    CHECK(http::trim_ows("\t a \t") == "a");
    CHECK(http::trim_ows("a  b") == "a  b");
    CHECK(http::trim_ows(" \t ").empty());
    CHECK(http::is_field_value("a\tcaf\xc3\xa9 ~"));
    CHECK_FALSE(http::is_field_value("a\x01"));
    CHECK_FALSE(http::is_field_value("a\x7f"));
    CHECK_FALSE(http::is_field_value(std::string("a\0b", 3)));
    CHECK_FALSE(http::is_field_value("a\rb"));
}

TEST_CASE("field values: the whitespace around a value is not sent over HTTP/1.1", "[server]") {
    AppRig rig;
    auto c = rig.connect();
    REQUIRE(c->send("GET /app/login HTTP/1.1\r\nHost: h\r\n\r\n"));
    REQUIRE(rig.step_until([&] { return rig.got.size() == 1; }));
    rig.post(rig.got[0], with_cookies());
    REQUIRE(rig.read_until(*c, "page"));
    INFO(c->in);
    CHECK(c->in.find("\r\nSet-Cookie: csrftoken=abc; expires=Thu, 02 Dec 2027 10:00:00 GMT; "
                     "Path=/\r\n") != std::string::npos);
    CHECK(c->in.find("\r\nSet-Cookie: sessionid=xyz; HttpOnly; Path=/; SameSite=Lax\r\n") !=
          std::string::npos);
    CHECK(c->in.find("\r\nX-Around: a b\r\n") != std::string::npos);
    CHECK(c->in.find("\r\nX-Blank: \r\n") != std::string::npos);
}

TEST_CASE(
    "field values: the whitespace around a value is not sent over HTTP/2, where a client resets "
    "the stream that carries it",
    "[server][h2]") {
    AppRig rig;
    auto c = rig.connect();
    H2Client h(*c);  // nghttp2's client session checks each field (RFC 9113 §8.2.1)
    const int32_t id = h.request("GET", "/app/login");
    REQUIRE(h.until(rig, [&] { return rig.got.size() == 1; }));
    rig.post(rig.got[0], with_cookies());
    REQUIRE(h.until(rig, [&] { return h.streams[id].closed; }));
    const auto& st = h.streams[id];
    CHECK(st.error == NGHTTP2_NO_ERROR);
    CHECK(st.header(":status") == "200");
    CHECK(st.data == "page");
    std::vector<std::string> cookies;
    for (const auto& [k, v] : st.headers)
        if (k == "set-cookie") cookies.push_back(v);
    CHECK(cookies ==
          std::vector<std::string>{"csrftoken=abc; expires=Thu, 02 Dec 2027 10:00:00 GMT; Path=/",
                                   "sessionid=xyz; HttpOnly; Path=/; SameSite=Lax"});
    CHECK(st.header("x-around") == "a b");
    CHECK(st.header("x-blank").empty());
    CHECK(rig.server->alive(c->slot));
}

TEST_CASE("field values: a control character in a value is the handler's fault, 502",
          "[server][h2]") {
    const std::vector<std::pair<std::string, std::string>> cases = {{"SOH",
                                                                     "a\x01"
                                                                     "b"},
                                                                    {"DEL", "a\x7f"},
                                                                    {"ESC", "a\x1b[31m"}};
    for (const auto& [what, bad] : cases) {
        DYNAMIC_SECTION("over HTTP/1.1: " << what) {
            AppRig rig;
            auto c = rig.connect();
            REQUIRE(c->send("GET /app/x HTTP/1.1\r\nHost: h\r\n\r\n"));
            REQUIRE(rig.step_until([&] { return rig.got.size() == 1; }));
            http::Response r;
            r.headers.add("X-A", bad);
            r.body = "body";
            rig.post(rig.got[0], r);
            REQUIRE(rig.read_until(*c, "\r\n\r\n"));
            CHECK(c->in.starts_with("HTTP/1.1 502 "));
            CHECK(c->in.find("X-A") == std::string::npos);
        }
        DYNAMIC_SECTION("over HTTP/2: " << what) {
            AppRig rig;
            auto c = rig.connect();
            H2Client h(*c);
            const int32_t id = h.request("GET", "/app/x");
            REQUIRE(h.until(rig, [&] { return rig.got.size() == 1; }));
            http::Response r;
            r.headers.add("X-A", bad);
            r.body = "body";
            rig.post(rig.got[0], r);
            REQUIRE(h.until(rig, [&] { return h.streams[id].closed; }));
            CHECK(h.streams[id].error == NGHTTP2_NO_ERROR);
            CHECK(h.streams[id].header(":status") == "502");
            CHECK(h.streams[id].header("x-a").empty());
        }
    }
}

TEST_CASE(
    "field values: a handler's Connection: close ends its connection after the answer, whole or "
    "streamed; a request pipelined behind it is not read",
    "[server]") {
    for (const bool streamed : {false, true}) {
        DYNAMIC_SECTION((streamed ? "streamed" : "whole")) {
            AppRig rig;
            auto c = rig.connect();
            REQUIRE(
                c->send("GET /app/a HTTP/1.1\r\nHost: h\r\n\r\n"
                        "GET /app/b HTTP/1.1\r\nHost: h\r\n\r\n"));
            REQUIRE(rig.step_until([&] { return rig.got.size() == 1; }));
            http::Response r;
            r.headers.add("Connection", "keep-alive, Close");
            r.body = "bye";
            if (streamed) {
                auto st = std::make_shared<StreamState>(1 << 16);
                r.body.clear();
                rig.post_kind(rig.got[0], Completion::Kind::head, st, r);
                rig.post_kind(rig.got[0], Completion::Kind::chunk, st, {}, "bye");
                rig.post_kind(rig.got[0], Completion::Kind::end, st);
            } else {
                rig.post(rig.got[0], r);
            }
            CHECK(rig.wait_eof(*c));
            INFO(c->in);
            CHECK(c->in.find("\r\nConnection: close\r\n") != std::string::npos);
            CHECK(c->in.find("keep-alive") == std::string::npos);
            CHECK(c->in.find("bye") != std::string::npos);
            CHECK(rig.got.size() == 1);  // b was never read
        }
    }
}
