// The pool side of a hold: read_cursor and take_stream_hold.
#include <algorithm>
#include <catch2/catch.hpp>
#include <string>

#include "hold/hold.hpp"

using namespace m0;
using m0::hold::HoldKind;

// ---- read_cursor -----------------------------------------------------------------

TEST_CASE("hold: read_cursor reads Last-Event-ID as a decimal cursor, else 0", "[hold]") {
    auto cursor = [](std::optional<std::string> v) {
        http::Request r;
        r.headers.add("Host", "h");
        if (v) r.headers.add("Last-Event-ID", *v);
        return hold::read_cursor(r);
    };
    CHECK(cursor(std::nullopt) == 0);
    CHECK(cursor("0") == 0);
    CHECK(cursor("17") == 17);
    CHECK(cursor("18446744073709551615") == 18446744073709551615ull);
    SECTION("garbage is 0") {
        CHECK(cursor("") == 0);
        CHECK(cursor("abc") == 0);
        CHECK(cursor("12abc") == 0);
        CHECK(cursor("-5") == 0);
        CHECK(cursor("+5") == 0);
        CHECK(cursor(" 5") == 0);
        CHECK(cursor("1.5") == 0);
        CHECK(cursor("18446744073709551616") == 0);  // overflow
    }
    SECTION("the header name is case-insensitive") {
        http::Request r;
        r.headers.add("last-event-id", "9");
        CHECK(hold::read_cursor(r) == 9);
    }
}

// ---- take_stream_hold -------------------------------------------------------------

namespace {

http::Response hold_answer(const char* mode, const char* channel) {
    http::Response r;
    r.status = 201;
    r.headers.add("Content-Type", "text/html");
    r.headers.add("Content-Length", "9");
    r.headers.add("Transfer-Encoding", "chunked");
    r.headers.add("X-App", "kept");
    if (mode) r.headers.add("M0-Hold", mode);
    if (channel) r.headers.add("M0-Channel", channel);
    r.body = ": head\n\n";
    return r;
}

size_t count(const http::Headers& h, std::string_view name) {
    size_t n = 0;
    for (const auto& [k, v] : h.items)
        if (http::iequals(k, name)) ++n;
    return n;
}

}  // namespace

TEST_CASE("hold: take_stream_hold without M0-Hold decides nothing and changes nothing", "[hold]") {
    http::Response r = hold_answer(nullptr, "news");  // M0-Channel alone is not a hold
    http::Response before = r;
    auto d = hold::take_stream_hold(r, "mojo-0", true);
    CHECK(d.kind == HoldKind::none);
    CHECK(d.channels.empty());
    CHECK(r.status == before.status);
    CHECK(r.headers.items == before.headers.items);
    CHECK(r.body == before.body);
}

TEST_CASE("hold: a stream hold rewrites the answer into the stream's head", "[hold]") {
    http::Response r = hold_answer("stream", "news, sport");
    r.stream = [](std::string&) { return false; };
    auto d = hold::take_stream_hold(r, "wsgi-3", true);
    REQUIRE(d.kind == HoldKind::stream);
    CHECK_FALSE(d.websocket);
    CHECK(d.error.empty());
    CHECK(d.channels == std::vector<std::string>{"news", "sport"});
    CHECK(r.status == 200);
    CHECK(r.headers.get("Content-Type") == std::optional<std::string_view>("text/event-stream"));
    CHECK(count(r.headers, "Content-Type") == 1);
    CHECK(r.headers.get("Cache-Control") == std::optional<std::string_view>("no-cache"));
    CHECK(r.headers.get("X-Accel-Buffering") == std::optional<std::string_view>("no"));
    CHECK(r.headers.get("x-worker") == std::optional<std::string_view>("wsgi-3"));
    CHECK_FALSE(r.headers.has("Content-Length"));
    CHECK_FALSE(r.headers.has("Transfer-Encoding"));
    CHECK_FALSE(r.headers.has("M0-Hold"));
    CHECK_FALSE(r.headers.has("M0-Channel"));
    CHECK(r.headers.get("X-App") == std::optional<std::string_view>("kept"));
    CHECK(r.body == ": head\n\n");  // the body is the first bytes of the stream
    CHECK_FALSE(r.stream);

    SECTION("several M0-Channel headers are joined") {
        http::Response r2 = hold_answer("stream", "a");
        r2.headers.add("m0-channel", "b,c");
        auto d2 = hold::take_stream_hold(r2, "w", true);
        CHECK(d2.kind == HoldKind::stream);
        CHECK(d2.channels == std::vector<std::string>{"a", "b", "c"});
        CHECK_FALSE(r2.headers.has("M0-Channel"));
    }
    SECTION("header names and the mode are case-insensitive") {
        http::Response r3;
        r3.headers.add("m0-hold", "Stream");
        r3.headers.add("M0-CHANNEL", "x");
        auto d3 = hold::take_stream_hold(r3, "w", true);
        CHECK(d3.kind == HoldKind::stream);
        CHECK(d3.channels == std::vector<std::string>{"x"});
        // Content-Type, Cache-Control, X-Accel-Buffering, x-worker
        CHECK(r3.headers.items.size() == 4);
    }
}

TEST_CASE("hold: M0-Hold: websocket is served as a stream hold, flagged", "[hold]") {
    http::Response r = hold_answer("websocket", "chat");
    auto d = hold::take_stream_hold(r, "mojo-1", true);
    CHECK(d.kind == HoldKind::stream);
    CHECK(d.websocket);
    CHECK(d.channels == std::vector<std::string>{"chat"});
    CHECK(r.status == 200);
    CHECK(r.headers.get("Content-Type") == std::optional<std::string_view>("text/event-stream"));
    CHECK_FALSE(r.headers.has("M0-Hold"));
}

TEST_CASE("hold: a hold that cannot be taken is bad, with a reason", "[hold]") {
    SECTION("an unknown M0-Hold value") {
        http::Response r = hold_answer("response", "news");
        auto d = hold::take_stream_hold(r, "w", true);
        CHECK(d.kind == HoldKind::bad);
        CHECK(d.error.find("response") != std::string::npos);
        CHECK_FALSE(r.headers.has("M0-Hold"));
    }
    SECTION("a missing M0-Channel") {
        http::Response r = hold_answer("stream", nullptr);
        auto d = hold::take_stream_hold(r, "w", true);
        CHECK(d.kind == HoldKind::bad);
        CHECK(d.error.find("M0-Channel") != std::string::npos);
    }
    SECTION("a reserved channel") {
        http::Response r = hold_answer("stream", "news, m0.slot.1.1");
        auto d = hold::take_stream_hold(r, "w", true);
        CHECK(d.kind == HoldKind::bad);
        CHECK(d.error.find("reserved") != std::string::npos);
    }
    SECTION("an empty name in the list") {
        http::Response r = hold_answer("stream", "a,,b");
        auto d = hold::take_stream_hold(r, "w", true);
        CHECK(d.kind == HoldKind::bad);
    }
    SECTION("an empty M0-Channel") {
        http::Response r = hold_answer("stream", "");
        auto d = hold::take_stream_hold(r, "w", true);
        CHECK(d.kind == HoldKind::bad);
    }
    SECTION("bad holds are not rewritten into a stream head") {
        http::Response r = hold_answer("bogus", "news");
        hold::take_stream_hold(r, "w", true);
        CHECK(r.status == 201);
        CHECK_FALSE(r.headers.has("Cache-Control"));
        CHECK(r.headers.get("Content-Type") == std::optional<std::string_view>("text/html"));
    }
}

TEST_CASE("hold: every name check_channel accepts is held as exactly those bytes", "[hold]") {
    // The OWS trimmed around the commas of M0-Channel must never be part of a
    // name: what a mount checked is what the hold joins.
    for (std::string name :
         {"sp", " sp", "sp ", "\tsp", "sp\t", " ", "a b", "a\tb", "caf\xc3\xa9"}) {
        INFO("'" << name << "'");
        if (bus::check_channel(name) != bus::NameError::ok) continue;
        for (std::string list : {name, "x, " + name, name + " ,x", "x," + name + ",y"}) {
            http::Response r = hold_answer("stream", list.c_str());
            auto d = hold::take_stream_hold(r, "w", true);
            REQUIRE(d.kind == HoldKind::stream);
            CHECK(std::find(d.channels.begin(), d.channels.end(), name) != d.channels.end());
        }
    }
}

TEST_CASE("hold: without realtime only the M0-* headers are removed", "[hold]") {
    http::Response r = hold_answer("stream", "news");
    auto d = hold::take_stream_hold(r, "mojo-0", false);
    CHECK(d.kind == HoldKind::stream);
    CHECK(d.channels == std::vector<std::string>{"news"});
    CHECK(r.status == 201);
    CHECK(r.body == ": head\n\n");
    CHECK_FALSE(r.headers.has("M0-Hold"));
    CHECK_FALSE(r.headers.has("M0-Channel"));
    CHECK(r.headers.items ==
          std::vector<std::pair<std::string, std::string>>{{"Content-Type", "text/html"},
                                                           {"Content-Length", "9"},
                                                           {"Transfer-Encoding", "chunked"},
                                                           {"X-App", "kept"}});
}
