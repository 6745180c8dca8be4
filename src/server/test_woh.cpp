// WebSocket-over-HTTP on the real Server and Loop: the view is a mount whose
// requests the test takes and answers through the completion ring, as a pool
// thread would (the fixture Django view runs behind the real pool in smoke
// 98-websocket). What goes to the view, in what batches; what its answers do.
#include <catch2/catch.hpp>
#include <deque>
#include <string>
#include <vector>

#include "http/ws_events.hpp"
#include "server/test_rig.hpp"
#include "server/test_ws_frames.hpp"

using namespace m0;
using m0::testing::SocketClient;
using namespace m0::testing::wsf;
namespace woh = m0::http::woh;

namespace {

struct Asked {
    SlotRef slot;
    http::Request req;
    // Armed as a pool arms it: set when the server cancels the job.
    std::shared_ptr<const CancelFlag> cancel;
};

struct WohRig : testing::ServerRig {
    std::deque<Asked> asked;  // the view's requests, not yet answered

    static server::ServerConfig config() {
        server::ServerConfig cfg;
        cfg.heartbeat = 3600;
        cfg.ws.max_message = 1000;
        cfg.ws.close_timeout = 0.5;
        cfg.ws.over_http = {"/grip"};
        return cfg;
    }
    WohRig() : ServerRig(config(), true) {
        server->add_mount("/", [this](SlotRef s, http::Request&& r) {
            asked.push_back({s, std::move(r), ring.cancels.arm(s)});
            return Admission::queued;
        });
    }
    // The server goes first: closing a connection at its end still asks the
    // view (DISCONNECT), and `asked` must be there to take it.
    ~WohRig() { server.reset(); }
    // The upgrade of `c` to `target`; its OPEN request taken.
    Asked upgrade(SocketClient& c, const std::string& target = "/grip/room?channel=c",
                  const std::string& extra = "") {
        REQUIRE(c.send("GET " + target +
                       " HTTP/1.1\r\nHost: h\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                       "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
                       "Sec-WebSocket-Version: 13\r\n" +
                       extra + "\r\n"));
        return next();
    }
    // `c` sends a text message; the request it makes is taken.
    Asked say(SocketClient& c, const std::string& text) {
        REQUIRE(c.send(frame(0x1, text)));
        return next();
    }
    Asked next() {
        REQUIRE(step_until([&] { return !asked.empty(); }));
        Asked a = std::move(asked.front());
        asked.pop_front();
        return a;
    }
    void answer(SlotRef s, const std::vector<woh::Event>& events,
                std::vector<std::pair<std::string, std::string>> headers = {}) {
        http::Response r;
        r.headers.add("Content-Type", std::string(woh::kContentType));
        for (auto& [k, v] : headers) r.headers.add(k, v);
        r.body = woh::encode_events(events);
        post(s, std::move(r));
    }
    // Upgrades `c`, accepts with grip on, subscribed to `channel`; the 101 taken.
    void open(SocketClient& c, const std::string& channel = "c",
              std::vector<std::pair<std::string, std::string>> headers = {}) {
        Asked a = upgrade(c);
        headers.emplace_back("Sec-WebSocket-Extensions", "grip");
        answer(a.slot, {{"OPEN", std::nullopt}, subscribe(channel)}, headers);
        REQUIRE(read_until(c, "\r\n\r\n"));
        REQUIRE(c.in.starts_with("HTTP/1.1 101 "));
        c.in.erase(0, c.in.find("\r\n\r\n") + 4);
    }
    // A new client, opened as open() does.
    std::unique_ptr<SocketClient> opened() {
        auto c = connect();
        open(*c);
        return c;
    }
    static woh::Event subscribe(const std::string& channel, const char* type = "subscribe") {
        return {"TEXT",
                std::string("c:{\"type\":\"") + type + "\",\"channel\":\"" + channel + "\"}"};
    }
    std::vector<Frame> frames(SocketClient& c, size_t n) {
        step_until([&] {
            c.pump();
            return parse(c.in).size() >= n;
        });
        return parse(c.in);
    }
    // Steps until `c` holds as many frames as `want`; they are those.
    void expect(SocketClient& c, const std::vector<Frame>& want) {
        auto got = frames(c, want.size());
        REQUIRE(got.size() == want.size());
        for (size_t i = 0; i < want.size(); ++i) {
            INFO("frame " << i << ": " << got[i].payload);
            CHECK(got[i].op == want[i].op);
            CHECK(got[i].payload == want[i].payload);
        }
    }
    // Steps a little: whatever the loop has to do now is done.
    void settle() {
        for (int i = 0; i < 20; ++i)
            loop.run_until([] { return false; }, std::chrono::milliseconds(5));
    }
};

}  // namespace

TEST_CASE(
    "woh: OPEN goes to the view as Pushpin sends it, and nothing to the client before its answer",
    "[woh]") {
    WohRig rig;
    auto c = rig.connect();
    Asked a = rig.upgrade(*c, "/grip/room?channel=c", "Cookie: s=1\r\nMeta-Forged: x\r\n");
    const auto& h = a.req.headers;
    CHECK(a.req.method == "POST");
    CHECK(a.req.target == "/grip/room?channel=c");
    CHECK(a.req.body == "OPEN\r\n");
    CHECK(h.get("Content-Type") == std::string(woh::kContentType));
    CHECK(h.get("Accept") == std::string(woh::kContentType));
    CHECK(h.get("Content-Length") == "6");
    CHECK(h.get("Connection-Id").value_or("").size() > 0);
    CHECK(h.get("Cookie") == "s=1");
    for (const char* gone :
         {"Upgrade", "Connection", "Sec-WebSocket-Key", "Sec-WebSocket-Version", "Meta-Forged"})
        CHECK_FALSE(h.has(gone));
    rig.settle();
    c->pump();
    CHECK(c->in.empty());
}

TEST_CASE(
    "woh: the answer to OPEN subscribes before the 101; what was published while the view ran "
    "follows it, then the answer's messages, then live events",
    "[woh]") {
    WohRig rig;
    auto c = rig.connect();
    Asked a = rig.upgrade(*c);
    REQUIRE(rig.bus.publish("c", "early").ok());  // while the view decides
    rig.settle();                                 // and the loop has fanned it out
    rig.answer(a.slot,
               {{"OPEN", std::nullopt},
                WohRig::subscribe("c"),
                {"TEXT", "m:hello"},
                {"TEXT", "unprefixed: dropped"},
                {"BINARY", std::string("m:\0\1", 4)}},
               {{"Sec-WebSocket-Extensions", "grip"}});
    REQUIRE(rig.read_until(*c, "\r\n\r\n"));
    const std::string head = c->in.substr(0, c->in.find("\r\n\r\n") + 4);
    c->in.erase(0, head.size());
    CHECK(head.starts_with("HTTP/1.1 101 "));
    CHECK(head.find("Sec-WebSocket-Extensions") == std::string::npos);  // grip is the view's
    CHECK(rig.server->subscribed(a.slot));
    REQUIRE(rig.bus.publish("c", "late").ok());
    rig.expect(*c, {{0x1, R"({"id":"1","data":"early"})"},
                    {0x1, "hello"},
                    {0x2, std::string("\0\1", 2)},
                    {0x1, R"({"id":"2","data":"late"})"}});
}

TEST_CASE(
    "woh: past --max-holds an accepted WebSocket is refused 503 with Retry-After before any 101, "
    "and its place is free again when a hold ends",
    "[woh]") {
    WohRig rig;
    rig.metrics.holds_open.set_limit(1);
    auto first = rig.opened();
    CHECK(rig.metrics.holds_open.load() == 1);
    auto c = rig.connect();
    Asked a = rig.upgrade(*c);
    rig.answer(a.slot, {{"OPEN", std::nullopt}, WohRig::subscribe("c")},
               {{"Sec-WebSocket-Extensions", "grip"}});
    REQUIRE(rig.read_until(*c, "\r\n\r\n"));
    CHECK(c->in.starts_with("HTTP/1.1 503 "));
    CHECK(c->in.find("Retry-After: 5\r\n") != std::string::npos);
    CHECK(rig.metrics.holds_refused.load() == 1);
    CHECK(rig.metrics.holds_open.load() == 1);
    // The first leaves (its DISCONNECT goes to the view): the place is free.
    first.reset();
    Asked gone = rig.next();
    CHECK(gone.req.body.find("DISCONNECT") != std::string::npos);
    REQUIRE(rig.step_until([&] { return rig.metrics.holds_open.load() == 0; }));
    auto again = rig.opened();
    CHECK(rig.metrics.holds_open.load() == 1);
}

TEST_CASE("woh: one request in flight; what the client does meanwhile goes as one batch, in order",
          "[woh]") {
    WohRig rig;
    auto c = rig.opened();
    Asked first = rig.say(*c, "a");
    CHECK(first.req.body == "TEXT 1\r\na\r\n");
    REQUIRE(c->send(frame(0x2, "bb") + frame(0x9, "p") + frame(0x1, "c")));
    rig.settle();
    CHECK(rig.asked.empty());  // the first is still with the view
    rig.answer(first.slot, {{"TEXT", "m:got a"}});
    Asked second = rig.next();
    CHECK(second.req.body == "BINARY 2\r\nbb\r\nPING 1\r\np\r\nTEXT 1\r\nc\r\n");
    CHECK(second.req.headers.get("Connection-Id") == first.req.headers.get("Connection-Id"));
    auto f = rig.frames(*c, 2);  // wslay's pong, the view's message
    REQUIRE(f.size() >= 2);
    CHECK((f[0].op == 0xA && f[0].payload == "p"));
    CHECK(f[1].payload == "got a");
}

TEST_CASE(
    "woh: the view's refusal is the client's answer; an answer to OPEN without OPEN, or not "
    "events, is a 502 that says why",
    "[woh]") {
    WohRig rig;
    auto c = rig.connect();
    Asked a = rig.upgrade(*c);
    http::Response no;
    no.status = 403;
    no.body = "not this one\n";
    rig.post(a.slot, no);
    REQUIRE(rig.wait_eof(*c));
    CHECK(c->in.starts_with("HTTP/1.1 403 "));
    CHECK(c->in.ends_with("\r\n\r\nnot this one\n"));
    CHECK_FALSE(rig.server->subscribed(a.slot));

    auto d = rig.connect();
    Asked b = rig.upgrade(*d);
    rig.answer(b.slot, {{"TEXT", "m:hi"}});
    REQUIRE(rig.wait_eof(*d));
    CHECK(d->in.starts_with("HTTP/1.1 502 "));
    CHECK(d->in.find("does not begin with OPEN") != std::string::npos);

    auto e = rig.connect();
    Asked g = rig.upgrade(*e);
    http::Response bad;
    bad.headers.add("Content-Type", std::string(woh::kContentType));
    bad.body = "OPEN\r\nTEXT zz\r\n";
    rig.post(g.slot, bad);
    REQUIRE(rig.wait_eof(*e));
    CHECK(e->in.starts_with("HTTP/1.1 502 "));
    CHECK(e->in.find("is not hex") != std::string::npos);
}

TEST_CASE("woh: Set-Meta- goes back as Meta-; a bad answer later closes 1011, CLOSE with its code",
          "[woh]") {
    WohRig rig;
    auto c = rig.connect();
    rig.open(*c, "c", {{"Set-Meta-User", "ann"}, {"Set-Meta-Gone", ""}});
    Asked a = rig.say(*c, "x");
    CHECK(a.req.headers.get("Meta-user") == "ann");
    CHECK_FALSE(a.req.headers.has("Meta-gone"));
    http::Response bad;
    bad.headers.add("Content-Type", std::string(woh::kContentType));
    bad.body = "TEXT 9\r\nshort\r\n";
    rig.post(a.slot, bad);
    REQUIRE(rig.wait_eof(*c));
    CHECK(close_code(parse(c->in)) == 1011);

    auto d = rig.opened();
    Asked b = rig.say(*d, "y");
    rig.answer(b.slot, {{"TEXT", "m:bye"}, {"CLOSE", woh::close_content(4000, "done")}});
    auto f = rig.frames(*d, 2);
    REQUIRE(f.size() >= 2);
    CHECK(f[0].payload == "bye");
    CHECK(close_code(f) == 4000);
    CHECK(f[1].payload.substr(2) == "done");
}

TEST_CASE("woh: a client that vanishes sends DISCONNECT; one that closes sends CLOSE with its code",
          "[woh]") {
    WohRig rig;
    auto c = rig.opened();
    c->close();
    Asked a = rig.next();
    CHECK(a.req.body == "DISCONNECT\r\n");

    auto d = rig.opened();
    REQUIRE(d->send(frame(0x8, code(1000) + "bye")));
    Asked b = rig.next();
    CHECK(b.req.body == "CLOSE 5\r\n" + code(1000) + "bye\r\n");
    REQUIRE(rig.wait_eof(*d));
    CHECK(close_code(parse(d->in)) == 1000);
    rig.settle();
    CHECK(rig.asked.empty());  // no DISCONNECT after a close
    // The connection ended before its view answered CLOSE: the view hears it
    // all the same (a pool not yet at the job would skip a cancelled one).
    d->close();
    REQUIRE(rig.step_until([&] { return rig.server->connections() == 0; }));
    CHECK(rig.asked.empty());
    CHECK_FALSE(b.cancel->cancelled());
}

TEST_CASE(
    "woh: a later subscribe hears its channel, unsubscribe stops it, detach sends nothing more",
    "[woh]") {
    WohRig rig;
    auto c = rig.connect();
    rig.open(*c, "c");
    Asked a = rig.say(*c, "sub");
    REQUIRE(rig.bus.publish("d", "while the view ran").ok());
    rig.settle();
    rig.answer(a.slot, {WohRig::subscribe("d"),
                        WohRig::subscribe("c", "unsubscribe"),
                        {"TEXT", "c:{\"type\":\"detach\"}"}});
    rig.settle();
    REQUIRE(rig.bus.publish("c", "not heard").ok());
    REQUIRE(rig.bus.publish("d", "heard").ok());
    rig.expect(*c, {{0x1, R"({"id":"1","data":"while the view ran"})"},
                    {0x1, R"({"id":"3","data":"heard"})"}});
    REQUIRE(c->send(frame(0x1, "after detach")));
    c->close();
    rig.settle();
    CHECK(rig.asked.empty());
}

TEST_CASE(
    "woh: a client whose queued events pass 4 x --ws-max-message while the view is behind is "
    "closed 1013",
    "[woh]") {
    WohRig rig;
    auto c = rig.opened();
    (void)rig.say(*c, "first");  // never answered
    for (int i = 0; i < 5; ++i) REQUIRE(c->send(frame(0x1, std::string(900, 'x'))));
    REQUIRE(rig.wait_eof(*c));
    CHECK(close_code(parse(c->in)) == 1013);
}

TEST_CASE("woh: a control message the view gets wrong is refused and the connection goes on",
          "[woh]") {
    WohRig rig;
    auto c = rig.opened();
    Asked a = rig.say(*c, "x");
    rig.answer(
        a.slot,
        {{"TEXT", "c:{\"type\":\"session\"}"}, {"TEXT", "c:not json"}, {"TEXT", "m:still here"}});
    rig.expect(*c, {{0x1, "still here"}});
}

TEST_CASE(
    "woh: a ws-message item reaches a WebSocket verbatim, text or binary, in id order with "
    "other events",
    "[woh]") {
    WohRig rig;
    auto c = rig.opened();
    REQUIRE(rig.bus.publish("c", "one").ok());
    REQUIRE(rig.bus.publish("c", "{\"as\": \"is\"}", "ws-message", true).ok());
    REQUIRE(rig.bus.publish("c", std::string("\0\xff", 2), "ws-message-binary", true).ok());
    REQUIRE(rig.bus.publish("c", "data: stream only\n\n", "", true).ok());
    REQUIRE(rig.bus.publish("c", "four").ok());
    rig.expect(*c, {{0x1, R"({"id":"1","data":"one"})"},
                    {0x1, "{\"as\": \"is\"}"},
                    {0x2, std::string("\0\xff", 2)},
                    {0x1, R"({"id":"5","data":"four"})"}});
}

TEST_CASE("woh: a keep-alive control message sends its content after that many idle seconds",
          "[woh]") {
    WohRig rig;
    auto c = rig.opened();
    Asked a = rig.say(*c, "x");
    rig.answer(a.slot, {{"TEXT", "c:{\"type\":\"keep-alive\",\"content\":\"ka\",\"timeout\":1}"}});
    rig.expect(*c, {{0x1, "ka"}});
}

TEST_CASE(
    "woh: a view that closes with a code no endpoint may send is closed 1011 instead "
    "(fuzz_ws found it passed on)",
    "[woh]") {
    WohRig rig;
    for (uint16_t bad : {uint16_t(999), uint16_t(1005), uint16_t(1015), uint16_t(0x54a0)}) {
        auto c = rig.opened();
        Asked a = rig.say(*c, "x");
        rig.answer(a.slot, {{"CLOSE", woh::close_content(bad, "")}});
        REQUIRE(rig.wait_eof(*c));
        CHECK(close_code(parse(c->in)) == 1011);
    }
}
