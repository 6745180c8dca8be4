// GRIP's long-poll on the loop (Grip-Hold: response, the builtin mount's
// /native/poll): a manual mojo pool, the real Server on a real Loop, a client
// on a socketpair.
#include <catch2/catch.hpp>
#include <string>

#include "http/json.hpp"
#include "server/test_hold_rig.hpp"

using namespace m0;

using Rig = testing::HoldRig;

namespace {

// Sends a poll request on the rig's connection and runs its handler.
void poll(Rig& rig, const std::string& query, const std::string& last_event_id = "") {
    std::string req = "GET /native/poll?" + query + " HTTP/1.1\r\nHost: h\r\n";
    if (!last_event_id.empty()) req += "Last-Event-ID: " + last_event_id + "\r\n";
    rig.send(req + "\r\n");
    REQUIRE(rig.loop.run_until([&] { return rig.pool->pool().queued() == 1; }));
    REQUIRE(rig.pool->pool().run_next());
}

// One whole answer off the front of what the client read: its head and body.
struct Answer {
    std::string head, body;
};
Answer take_answer(Rig& rig) {
    std::string& in = rig.conn->in;
    size_t end = in.find("\r\n\r\n");
    REQUIRE(end != std::string::npos);
    Answer a{in.substr(0, end + 2), ""};
    size_t len = 0;
    if (size_t cl = a.head.find("Content-Length: "); cl != std::string::npos)
        len = std::stoul(a.head.substr(cl + 16));
    REQUIRE(in.size() >= end + 4 + len);
    a.body = in.substr(end + 4, len);
    in.erase(0, end + 4 + len);
    return a;
}

}  // namespace

TEST_CASE("poll loop: the first event answers the request, and the connection asks again",
          "[poll][loop]") {
    Rig rig;
    poll(rig, "channel=c");
    REQUIRE(rig.step_until([&] { return rig.server->subscribed(rig.slot); }));
    CHECK(rig.conn->in.empty());  // nothing until an event
    REQUIRE(rig.bus.publish("c", "first", "tick").ok());
    REQUIRE(rig.bus.publish("c", "second").ok());
    std::string got;
    rig.read_until("first", got);
    Answer a = take_answer(rig);
    CHECK(a.head.starts_with("HTTP/1.1 200 OK\r\n"));
    CHECK(a.head.find("Content-Length: 5\r\n") != std::string::npos);
    CHECK(a.head.find("M0-Event-Id: 1\r\n") != std::string::npos);
    CHECK(a.head.find("M0-Event: tick\r\n") != std::string::npos);
    CHECK(a.head.find("Grip-") == std::string::npos);
    CHECK(a.body == "first");
    CHECK_FALSE(rig.server->subscribed(rig.slot));
    CHECK(rig.metrics.holds_open.load() == 0);
    // The same connection polls again from the id it was given: the second
    // event, from history.
    poll(rig, "channel=c&lastEventID=1");
    rig.read_until("second", got);
    a = take_answer(rig);
    CHECK(a.head.find("M0-Event-Id: 2\r\n") != std::string::npos);
    CHECK(a.body == "second");
    CHECK(rig.metrics.holds_open.load() == 0);
}

TEST_CASE("poll loop: Grip-Timeout answers with the handler's own answer", "[poll][loop]") {
    Rig rig;
    poll(rig, "channel=c&timeout=1");
    REQUIRE(rig.step_until([&] { return rig.server->subscribed(rig.slot); }));
    std::string got;
    rig.read_until("\r\n\r\n", got);
    Answer a = take_answer(rig);
    CHECK(a.head.starts_with("HTTP/1.1 204 No Content\r\n"));
    CHECK(a.head.find("M0-Event-Id") == std::string::npos);
    CHECK(a.head.find("Grip-") == std::string::npos);
    CHECK_FALSE(rig.server->subscribed(rig.slot));
    CHECK(rig.metrics.holds_open.load() == 0);
    CHECK(rig.server->alive(rig.slot));  // kept alive for the next poll
}

TEST_CASE("poll loop: a cursor older than the newest event is answered from history at once",
          "[poll][loop]") {
    Rig rig;
    REQUIRE(rig.bus.publish("c", "one").ok());
    REQUIRE(rig.bus.publish("c", "two").ok());
    SECTION("Last-Event-ID") { poll(rig, "channel=c", "1"); }
    SECTION("the query parameter") { poll(rig, "channel=c&lastEventID=1"); }
    SECTION("Grip-Channel's prev-id") { poll(rig, "channel=c&prev_id=1"); }
    std::string got;
    rig.read_until("two", got);
    Answer a = take_answer(rig);
    CHECK(a.head.find("M0-Event-Id: 2\r\n") != std::string::npos);
    CHECK(a.body == "two");
}

TEST_CASE(
    "poll loop: Pushpin's http-response item is the answer; its http-stream content a "
    "stream's",
    "[poll][loop]") {
    Rig rig;
    poll(rig, "channel=c");
    auto streamer = rig.open_holds(1);
    REQUIRE(rig.step_until([&] { return rig.server->subscribed(rig.slot); }));
    http::ResponseItem item;
    item.code = 201;
    item.headers = {{"Content-Type", "application/json"}};
    item.body = "{\"made\": true}";
    item.stream = "data: streamed\n\n";
    REQUIRE(
        rig.bus.publish("c", http::encode_response_item(item), bus::kResponseFormat, true).ok());
    std::string got;
    rig.read_until("true}", got);
    Answer a = take_answer(rig);
    CHECK(a.head.starts_with("HTTP/1.1 201 Created\r\n"));
    CHECK(a.head.find("Content-Type: application/json\r\n") != std::string::npos);
    CHECK(a.body == item.body);
    REQUIRE(rig.read_until(*streamer[0], "data: streamed\n\n"));
}

TEST_CASE("poll loop: a client that leaves releases its subscription; the shutdown answers",
          "[poll][loop]") {
    Rig rig;
    poll(rig, "channel=c");
    REQUIRE(rig.step_until([&] { return rig.server->subscribed(rig.slot); }));
    REQUIRE(rig.metrics.holds_open.load() == 1);
    SECTION("the client closes its socket") {
        rig.conn->close();
        rig.client = -1;
        REQUIRE(rig.step_until([&] { return !rig.server->alive(rig.slot); }));
        CHECK(rig.metrics.holds_open.load() == 0);
        CHECK(rig.server->subscriptions().subscribers("c").empty());
    }
    SECTION("the shutdown answers with the handler's own answer, and closes") {
        rig.server->shutdown();
        std::string got;
        rig.read_until("\r\n\r\n", got);
        CHECK(got.starts_with("HTTP/1.1 204 No Content\r\n"));
        CHECK(got.find("Connection: close\r\n") != std::string::npos);
        REQUIRE(rig.wait_eof(*rig.conn));
        CHECK(rig.metrics.holds_open.load() == 0);
    }
}
