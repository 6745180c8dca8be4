// GRIP on the hold path: Grip-Hold, Grip-Channel and Grip-Keep-Alive read by
// take_stream_hold (grip.hpp), as django-grip's set_hold_stream() sends them.
#include <catch2/catch.hpp>
#include <string>

#include "hold/grip.hpp"
#include "hold/hold.hpp"

using namespace m0;
using m0::hold::HoldKind;

namespace {

http::Response grip_answer(std::vector<std::pair<std::string, std::string>> grip) {
    http::Response r;
    r.headers.add("Content-Type", "text/plain");
    r.headers.add("Content-Length", "8");
    r.headers.add("X-App", "kept");
    for (auto& [k, v] : grip) r.headers.add(k, v);
    r.body = ": head\n\n";
    return r;
}

bool has_grip_header(const http::Response& r) {
    for (const auto& [k, v] : r.headers.items)
        if (http::iequals(k.substr(0, 5), "grip-")) return true;
    return false;
}

bus::KeepAlive keep_alive(std::string_view value) {
    bus::KeepAlive k;
    std::string err;
    INFO(value);
    bool ok = hold::grip_keep_alive(value, k, err);
    INFO(err);
    REQUIRE(ok);
    return k;
}

std::string keep_alive_error(std::string_view value) {
    bus::KeepAlive k;
    std::string err;
    INFO(value);
    REQUIRE_FALSE(hold::grip_keep_alive(value, k, err));
    return err;
}

}  // namespace

TEST_CASE("grip: Grip-Hold: stream is held like M0-Hold, every Grip-* header removed",
          "[hold][grip]") {
    // What django-grip's GripMiddleware writes for set_hold_stream(request,
    // [Channel("a", prev_id="7"), "b"], keep_alive_data="ka\n", keep_alive_timeout=20).
    auto r = grip_answer({{"Grip-Hold", "stream"},
                          {"Grip-Channel", "a; prev-id=7, b"},
                          {"Grip-Keep-Alive", "ka\\n; format=cstring; timeout=20"},
                          {"Grip-Status", "200"}});
    auto d = hold::take_stream_hold(r, "mojo-0", true);
    REQUIRE(d.kind == HoldKind::stream);
    CHECK(d.channels == std::vector<std::string>{"a", "b"});
    CHECK(d.keepalive.bytes == "ka\n");
    CHECK(d.keepalive.every == 20);
    CHECK_FALSE(has_grip_header(r));
    CHECK(r.headers.get("Content-Type") == "text/event-stream");
    CHECK_FALSE(r.headers.has("Content-Length"));
    CHECK(r.headers.get("X-App") == "kept");
    CHECK(r.body == ": head\n\n");
    SECTION("Grip-Channel may repeat") {
        auto r2 =
            grip_answer({{"grip-hold", "Stream"}, {"Grip-Channel", "a"}, {"GRIP-CHANNEL", "b"}});
        auto d2 = hold::take_stream_hold(r2, "w", true);
        REQUIRE(d2.kind == HoldKind::stream);
        CHECK(d2.channels == std::vector<std::string>{"a", "b"});
        CHECK(d2.keepalive.bytes.empty());  // the comment heartbeat
        CHECK(d2.keepalive.every == 0);
    }
    SECTION("without --realtime only the Grip-* headers go") {
        auto r2 = grip_answer({{"Grip-Hold", "stream"}, {"Grip-Channel", "a"}});
        auto d2 = hold::take_stream_hold(r2, "w", false);
        CHECK(d2.kind == HoldKind::stream);
        CHECK_FALSE(has_grip_header(r2));
        CHECK(r2.headers.get("Content-Length") == "8");
    }
}

TEST_CASE("grip: a Grip hold that cannot be served is bad, with the reason", "[hold][grip]") {
    struct {
        std::vector<std::pair<std::string, std::string>> headers;
        std::string reason;
    } cases[] = {
        {{{"Grip-Hold", "response"}, {"Grip-Channel", "a"}, {"Grip-Timeout", "soon"}},
         "Grip-Timeout"},
        {{{"Grip-Hold", "response"}, {"Grip-Channel", "a"}, {"Grip-Timeout", "86401"}},
         "Grip-Timeout"},
        {{{"Grip-Hold", "response"}, {"Grip-Channel", "a"}, {"Grip-Timeout", "-1"}},
         "Grip-Timeout"},
        {{{"Grip-Hold", "response"}}, "Grip-Hold without Grip-Channel"},
        {{{"Grip-Hold", "sideways"}, {"Grip-Channel", "a"}}, "unknown Grip-Hold value"},
        {{{"Grip-Hold", "stream"}}, "Grip-Hold without Grip-Channel"},
        {{{"Grip-Hold", "stream"}, {"Grip-Channel", "a,,b"}}, "Grip-Channel refused"},
        {{{"Grip-Hold", "stream"}, {"Grip-Channel", "m0.slot.1.1"}}, "Grip-Channel refused"},
        {{{"Grip-Hold", "stream"}, {"Grip-Channel", "a"}, {"Grip-Keep-Alive", "x; timeout=0"}},
         "timeout"},
        {{{"Grip-Hold", "stream"}, {"M0-Hold", "stream"}, {"Grip-Channel", "a"}}, "both"},
    };
    for (auto& c : cases) {
        auto r = grip_answer(c.headers);
        auto d = hold::take_stream_hold(r, "w", true);
        INFO(c.reason);
        CHECK(d.kind == HoldKind::bad);
        CHECK(d.error.find(c.reason) != std::string::npos);
        CHECK_FALSE(has_grip_header(r));
    }
    SECTION("Grip-* headers without Grip-Hold are not a hold, and left alone") {
        auto r = grip_answer({{"Grip-Channel", "a"}});
        CHECK(hold::take_stream_hold(r, "w", true).kind == HoldKind::none);
        CHECK(r.headers.has("Grip-Channel"));
    }
}

TEST_CASE("grip: Grip-Keep-Alive's data decodes in its format; the timeout is whole seconds",
          "[hold][grip]") {
    CHECK(keep_alive(":ping").bytes == ":ping");
    CHECK(keep_alive(" :ping ; format=raw").bytes == ":ping");
    CHECK(keep_alive(R"(a\\b\r\n\t\"; format=cstring)").bytes == "a\\b\r\n\t\"");
    CHECK(keep_alive("OiBrYQoK; format=base64; timeout=55").bytes == ": ka\n\n");
    CHECK(keep_alive("x; timeout=86400; mode=interval").every == 86400);
    CHECK(keep_alive("x; TIMEOUT=1").every == 1);
    CHECK(keep_alive_error("").find("empty") != std::string::npos);
    CHECK(keep_alive_error("; timeout=5").find("empty") != std::string::npos);
    CHECK(keep_alive_error(R"(a\q; format=cstring)").find("cstring") != std::string::npos);
    CHECK(keep_alive_error("a\\; format=cstring").find("cstring") != std::string::npos);
    CHECK(keep_alive_error("!!; format=base64").find("base64") != std::string::npos);
    CHECK(keep_alive_error("x; format=hex").find("raw, cstring or base64") != std::string::npos);
    for (const char* t : {"x; timeout=0", "x; timeout=86401", "x; timeout=1.5",
                          "x; timeout=", "x; timeout=-3", "x; timeout=5s"})
        CHECK(keep_alive_error(t).find("timeout") != std::string::npos);
}

TEST_CASE("grip: grip_channels splits at commas, drops parameters, trims", "[hold][grip]") {
    CHECK(hold::grip_channels("a") == std::vector<std::string>{"a"});
    CHECK(hold::grip_channels(" a ;prev-id=1 ,\tb; x=\"y\"") == std::vector<std::string>{"a", "b"});
    CHECK(hold::grip_channels("a,") == std::vector<std::string>{"a", ""});
}

TEST_CASE("grip: Grip-Hold: response is a long-poll; the handler's answer is kept as it is",
          "[hold][grip][poll]") {
    auto r = grip_answer({{"Grip-Hold", "response"},
                          {"Grip-Channel", "a; prev-id=17, b; prev-id=9; x=y, c; prev-id=p4"},
                          {"Grip-Timeout", "30"},
                          {"Grip-Keep-Alive", "ignored"}});
    r.status = 204;
    auto d = hold::take_stream_hold(r, "w", true);
    CHECK(d.kind == HoldKind::stream);
    CHECK(d.response);
    CHECK(d.timeout == 30);
    CHECK(d.prev_id == 9);  // the lowest numeric one; p4 is not a cursor
    CHECK(d.channels == std::vector<std::string>{"a", "b", "c"});
    CHECK(d.keepalive.bytes.empty());  // nothing is written to a long-poll
    CHECK(r.status == 204);            // the timeout's answer, not a stream head
    CHECK(r.headers.get("Content-Length") == "8");
    CHECK(r.headers.get("Content-Type") == std::optional<std::string_view>("text/plain"));
    CHECK_FALSE(has_grip_header(r));
    SECTION("Grip-Timeout: Pushpin's default, and a floor of one second") {
        auto r2 = grip_answer({{"Grip-Hold", "response"}, {"Grip-Channel", "a"}});
        CHECK(hold::take_stream_hold(r2, "w", true).timeout == hold::kGripTimeout);
        auto r3 =
            grip_answer({{"Grip-Hold", "response"}, {"Grip-Channel", "a"}, {"Grip-Timeout", "0"}});
        CHECK(hold::take_stream_hold(r3, "w", true).timeout == 1);
    }
    CHECK(hold::grip_prev_id("a, b") == 0);
    CHECK(hold::grip_prev_id("a; prev-id=\"12\"") == 12);
    CHECK(hold::grip_prev_id("a; prev-id=0") == 0);
}
