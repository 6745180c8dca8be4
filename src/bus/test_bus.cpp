// The bus: channel and event names, the reserved per-slot namespace, the bus
// channel (one shared counter, id order = queue order, refusals), and the
// subscription table.
#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <cstdint>
#include <deque>
#include <string>
#include <thread>
#include <variant>
#include <vector>

#include "bus/channel.hpp"
#include "bus/names.hpp"
#include "bus/subscriptions.hpp"
#include "http/sse.hpp"
#include "http/websocket.hpp"
#include "server/codec.hpp"

using namespace m0;
using namespace m0::bus;

namespace {

std::vector<uint64_t> queued_ids(const BusChannel& ch) {
    std::vector<uint64_t> ids;
    for (const Frame& f : ch.peek())
        if (auto* p = std::get_if<PublishFrame>(&f)) ids.push_back(p->id);
    return ids;
}

}  // namespace

// ---- names -----------------------------------------------------------------

TEST_CASE("bus names: check_channel accepts ordinary names and refuses the bad ones",
          "[bus][names]") {
    SECTION("ordinary names") {
        CHECK(check_channel("news") == NameError::ok);
        CHECK(check_channel("room.42/updates:v1") == NameError::ok);
        CHECK(check_channel("spaced name") == NameError::ok);
        CHECK(check_channel("tab\tinside") == NameError::ok);
        CHECK(check_channel("m0.slots") == NameError::ok);  // not the "m0.slot." prefix
        CHECK(check_channel("m0.slot") == NameError::ok);
        CHECK(check_channel(std::string(kMaxChannelName, 'a')) == NameError::ok);
    }
    SECTION("empty") { CHECK(check_channel("") == NameError::empty); }
    SECTION("too long") {
        CHECK(check_channel(std::string(kMaxChannelName + 1, 'a')) == NameError::too_long);
    }
    SECTION("CR, LF, NUL and the M0-Channel separator") {
        CHECK(check_channel("a\rb") == NameError::bad_char);
        CHECK(check_channel("a\nb") == NameError::bad_char);
        CHECK(check_channel(std::string("a\0b", 3)) == NameError::bad_char);
        CHECK(check_channel("a,b") == NameError::bad_char);
        CHECK(check_channel("\n") == NameError::bad_char);
    }
    SECTION("a name that begins or ends with SP or HTAB") {
        // A hold's M0-Channel list trims OWS around its commas; a name that
        // could lose bytes there would be one name when checked and another
        // when held.
        for (const char* name : {" sp", "sp ", "\tsp", "sp\t", " sp ", " ", "\t", "  "}) {
            INFO("'" << name << "'");
            CHECK(check_channel(name) == NameError::edge_space);
        }
    }
    SECTION("the reserved prefix") {
        CHECK(check_channel("m0.slot.1.2") == NameError::reserved);
        CHECK(check_channel("m0.slot.") == NameError::reserved);
        CHECK(check_channel("m0.slot.anything") == NameError::reserved);
    }
    SECTION("every error has a reason of its own") {
        std::vector<std::string> reasons;
        for (auto e : {NameError::empty, NameError::too_long, NameError::bad_char,
                       NameError::edge_space, NameError::reserved})
            reasons.emplace_back(reason(e));
        for (size_t i = 0; i < reasons.size(); ++i)
            for (size_t j = i + 1; j < reasons.size(); ++j) CHECK(reasons[i] != reasons[j]);
        CHECK(std::string(reason(NameError::reserved)).find("reserved") != std::string::npos);
    }
}

TEST_CASE("bus names: check_event allows empty and commas, refuses CR, LF, NUL and length",
          "[bus][names]") {
    CHECK(check_event("") == NameError::ok);
    CHECK(check_event("update") == NameError::ok);
    CHECK(check_event("a,b") == NameError::ok);
    CHECK(check_event("m0.slot.1.1") == NameError::ok);  // events have no reserved namespace
    CHECK(check_event(std::string(256, 'e')) == NameError::ok);
    CHECK(check_event(std::string(257, 'e')) == NameError::too_long);
    CHECK(check_event("a\rb") == NameError::bad_char);
    CHECK(check_event("a\nb") == NameError::bad_char);
    CHECK(check_event(std::string("\0", 1)) == NameError::bad_char);
}

TEST_CASE("bus names: reserved_stream_url and parse_reserved_stream_url round trip",
          "[bus][names]") {
    for (SlotRef s :
         {SlotRef{0, 0}, SlotRef{3, 7}, SlotRef{4294967295u, 1}, SlotRef{12, 4294967295u}}) {
        std::string url = reserved_stream_url(s);
        INFO(url);
        CHECK(url.starts_with(kReservedPrefix));
        CHECK(is_reserved(url));
        CHECK(check_channel(url) == NameError::reserved);
        auto back = parse_reserved_stream_url(url);
        REQUIRE(back);
        CHECK(*back == s);
    }
    CHECK(reserved_stream_url({3, 7}) == "m0.slot.3.7");
}

TEST_CASE("bus names: parse_reserved_stream_url rejects anything but m0.slot.I.G", "[bus][names]") {
    for (const char* bad :
         {"", "news", "m0.slot.", "m0.slot.1", "m0.slot.1.", "m0.slot..2", "m0.slot.1.2.3",
          "m0.slot.a.2", "m0.slot.1.b", "m0.slot.-1.2", "m0.slot.1.2 ", "m0.slot. 1.2",
          "m0.slot.99999999999.1", "m0.slot.1.99999999999", "M0.SLOT.1.2", "x.m0.slot.1.2"}) {
        INFO("'" << bad << "'");
        CHECK_FALSE(parse_reserved_stream_url(bad));
    }
}

// ---- the bus channel ---------------------------------------------------------

TEST_CASE("bus channel: publish numbers events 1, 2, 3 in queue order", "[bus][channel]") {
    BusChannel ch;
    CHECK(ch.last_id() == 0);
    auto a = ch.publish("news", "one");
    auto b = ch.publish("sport", "two", "score");
    auto c = ch.publish("news", "three");
    CHECK(a.ok());
    CHECK(a.id == 1);
    CHECK(b.id == 2);
    CHECK(c.id == 3);
    CHECK(ch.last_id() == 3);
    CHECK(ch.published.load() == 3);
    CHECK(ch.refused.load() == 0);
    CHECK(queued_ids(ch) == std::vector<uint64_t>{1, 2, 3});

    std::deque<Frame> out;
    REQUIRE(ch.drain(out) == 3);
    auto& f1 = std::get<PublishFrame>(out[0]);
    auto& f2 = std::get<PublishFrame>(out[1]);
    auto& f3 = std::get<PublishFrame>(out[2]);
    CHECK(f1.id == 1);
    CHECK(f1.channel == "news");
    CHECK(f1.data == "one");
    CHECK(f1.event.empty());
    CHECK(f2.id == 2);
    CHECK(f2.channel == "sport");
    CHECK(f2.event == "score");
    CHECK(f2.data == "two");
    CHECK(f3.id == 3);

    SECTION("the counter is shared across drains and channels") {
        CHECK(ch.publish("other", "four").id == 4);
    }
}

TEST_CASE("bus channel: a refused name returns its NameError and takes no id", "[bus][channel]") {
    BusChannel ch;
    CHECK(ch.publish("a", "x").id == 1);
    struct {
        const char* what;
        std::string channel, event;
        NameError want;
    } bad[] = {
        {"empty channel", "", "", NameError::empty},
        {"reserved channel", "m0.slot.1.1", "", NameError::reserved},
        {"LF in channel", "a\nb", "", NameError::bad_char},
        {"comma in channel", "a,b", "", NameError::bad_char},
        {"leading space in channel", " a", "", NameError::edge_space},
        {"trailing tab in channel", "a\t", "", NameError::edge_space},
        {"long channel", std::string(300, 'c'), "", NameError::too_long},
        {"CR in event", "a", "e\r", NameError::bad_char},
        {"long event", "a", std::string(300, 'e'), NameError::too_long},
    };
    for (auto& b : bad) {
        INFO(b.what);
        auto r = ch.publish(b.channel, "data", b.event);
        CHECK(r.name_error == b.want);
        CHECK_FALSE(r.ok());
        CHECK(r.id == 0);
        CHECK(r.error == PublishError::bad_name);
    }
    CHECK(ch.queued() == 1);
    CHECK(ch.refused.load() == 0);  // a name error is not a refused frame
    CHECK(ch.published.load() == 1);
    CHECK(ch.publish("a", "y").id == 2);
}

TEST_CASE("bus channel: a full channel refuses, counts it, and takes no id", "[bus][channel]") {
    BusChannel ch(BusOptions{.capacity = 2});
    CHECK(ch.publish("a", "1").id == 1);
    CHECK(ch.send(HoldFrame{reserved_stream_url({0, 1}), 0, 0, 0, {"a"}}));
    auto r = ch.publish("a", "3");
    CHECK(r.error == PublishError::refused);
    CHECK_FALSE(r.ok());
    CHECK(r.id == 0);
    CHECK(r.name_error == NameError::ok);
    CHECK(ch.refused.load() == 1);
    CHECK_FALSE(ch.send(HoldFrame{reserved_stream_url({1, 1}), 0, 0, 0, {"a"}}));
    CHECK(ch.refused.load() == 2);
    CHECK(ch.published.load() == 1);
    CHECK(ch.last_id() == 1);

    std::deque<Frame> out;
    ch.drain(out);
    CHECK(ch.publish("a", "4").id == 2);  // the refused publish did not use up id 2

    SECTION("a closed channel refuses too") {
        ch.close();
        auto c = ch.publish("a", "5");
        CHECK(c.error == PublishError::refused);
        CHECK(c.id == 0);
        CHECK_FALSE(ch.send(HoldFrame{}));
        CHECK(ch.refused.load() == 4);
    }
}

TEST_CASE("bus channel: an event larger than max_event_size is refused too_large and takes no id",
          "[bus][channel]") {
    // The size is what the codec measures: the server's, the largest bytes
    // one subscriber is written (an SSE event or a WebSocket message), the id
    // counted at its widest (20 digits), so the check does not depend on the id.
    auto size_of = [](std::string_view event, std::string_view data) {
        return std::max(sse::encode_event(UINT64_MAX, event, data).size(),
                        http::ws::server_frame(http::ws::Opcode::text,
                                               http::ws::event_message(UINT64_MAX, event, data))
                            .size());
    };
    const std::string fits(100 - size_of("", ""), 'x');
    REQUIRE(size_of("", fits) == 100);
    // The Python package outside the server counts the same (test_m0_redis.py).
    CHECK(server::measure("ev", "a\nb\nc\nd\ne") == 76);
    CHECK(server::measure("", std::string(10, '\x01')) == 101);
    BusChannel ch(BusOptions{.capacity = 16, .max_event_size = 100, .codec = server::codec()});
    CHECK(ch.max_event_size() == 100);
    auto a = ch.publish("a", fits);
    CHECK(a.ok());
    CHECK(a.id == 1);

    struct {
        const char* what;
        std::string data, event;
    } big[] = {
        {"one byte over", fits + "x", ""},
        {"the event name counts", fits, "e"},
        {"each line end costs a data field", std::string(20, '\n'), ""},
        {"a control byte costs six in a WebSocket message", std::string(16, '\x01'), ""},
    };
    for (auto& b : big) {
        INFO(b.what);
        auto r = ch.publish("a", b.data, b.event);
        CHECK(r.error == PublishError::too_large);
        CHECK_FALSE(r.ok());
        CHECK(r.id == 0);
        CHECK(r.size == size_of(b.event, b.data));
        CHECK(r.size > 100);
        CHECK(r.limit == 100);
        std::string why = reason(r);
        CHECK(why.find("--max-event-size") != std::string::npos);
        CHECK(why.find("100") != std::string::npos);
        CHECK(why.find(std::to_string(r.size)) != std::string::npos);
    }
    CHECK(ch.too_large.load() == 4);
    CHECK(ch.refused.load() == 0);  // not a full channel
    CHECK(ch.published.load() == 1);
    CHECK(ch.queued() == 1);
    CHECK(ch.publish("a", "y").id == 2);  // the refusals used up no id

    SECTION("a bad name is reported before the size") {
        auto r = ch.publish("m0.slot.1.1", fits + "x");
        CHECK(r.error == PublishError::bad_name);
        CHECK(r.name_error == NameError::reserved);
        CHECK(ch.too_large.load() == 4);
    }
}

TEST_CASE("bus channel: with no codec an event's size is its data and name, and it has no forms",
          "[bus][channel]") {
    BusChannel ch(BusOptions{.capacity = 16, .max_event_size = 10});
    CHECK(ch.publish("a", "12345", "named").ok());
    auto r = ch.publish("a", "123456", "named");
    CHECK(r.error == PublishError::too_large);
    CHECK(r.size == 11);
    auto frames = ch.peek();
    REQUIRE(frames.size() == 1);
    CHECK_FALSE(std::get<PublishFrame>(frames[0]).encoded());
    CHECK(std::get<PublishFrame>(frames[0]).data == "12345");
}

TEST_CASE("bus channel: a raw event is numbered and kept like any other; its size is its length",
          "[bus][channel][grip]") {
    BusChannel ch(BusOptions{.capacity = 16, .max_event_size = 10});
    auto a = ch.publish("a", "0123456789", "dropped", true);
    REQUIRE(a.ok());
    CHECK(ch.publish("a", "0123456789x", {}, true).error == PublishError::too_large);
    auto frames = ch.peek();
    REQUIRE(frames.size() == 1);
    const auto& f = std::get<PublishFrame>(frames[0]);
    CHECK(f.raw);
    CHECK(f.data == "0123456789");
    CHECK(f.event.empty());  // written as it is: a name would appear nowhere
    auto replay = ch.replay({"a"}, 0, a.id);
    REQUIRE(replay.events.size() == 1);
    CHECK(replay.events[0].raw);
}

TEST_CASE("bus channel: by default a 1 MiB event is refused and a 64 KiB one is taken",
          "[bus][channel]") {
    BusChannel ch;
    CHECK(ch.max_event_size() == kDefaultMaxEventSize);
    CHECK(ch.publish("a", std::string(1 << 20, 'x')).error == PublishError::too_large);
    CHECK(ch.publish("a", std::string(64 * 1024, 'x')).ok());
}

TEST_CASE("bus channel: hold frames and publishes come out in the order they were sent",
          "[bus][channel]") {
    BusChannel ch;
    ch.publish("a", "before");
    REQUIRE(ch.send(HoldFrame{reserved_stream_url({5, 2}), 1, 0, 0, {"a", "b"}}));
    ch.publish("a", "after");
    REQUIRE(ch.send(HoldFrame{reserved_stream_url({6, 1}), 0, 0, 0, {"c"}}));

    std::deque<Frame> out;
    REQUIRE(ch.drain(out) == 4);
    REQUIRE(std::holds_alternative<PublishFrame>(out[0]));
    REQUIRE(std::holds_alternative<HoldFrame>(out[1]));
    REQUIRE(std::holds_alternative<PublishFrame>(out[2]));
    REQUIRE(std::holds_alternative<HoldFrame>(out[3]));
    CHECK(std::get<PublishFrame>(out[0]).data == "before");
    const auto& h = std::get<HoldFrame>(out[1]);
    CHECK(h.stream_url == "m0.slot.5.2");
    CHECK(h.cursor == 1);
    CHECK(h.channels == std::vector<std::string>{"a", "b"});
    CHECK(std::get<PublishFrame>(out[2]).data == "after");
    CHECK(std::get<HoldFrame>(out[3]).stream_url == "m0.slot.6.1");
}

TEST_CASE("bus channel: the eventfd wakes the loop on the first frame", "[bus][channel]") {
    BusChannel ch;
    uint64_t v = 0;
    CHECK(::read(ch.fd(), &v, sizeof v) < 0);  // nothing yet
    ch.publish("a", "x");
    CHECK(::read(ch.fd(), &v, sizeof v) == sizeof v);
}

TEST_CASE("bus channel: under 4 concurrent publishers ids strictly increase in queue order",
          "[bus][channel]") {
    constexpr int kThreads = 4;
    constexpr int kEach = 5000;
    BusChannel ch(BusOptions{.capacity = size_t(kThreads) * kEach});
    std::atomic<int> go{0};
    std::vector<std::vector<uint64_t>> got(kThreads);
    std::vector<std::thread> ts;
    for (int t = 0; t < kThreads; ++t)
        ts.emplace_back([&, t] {
            while (!go.load()) std::this_thread::yield();
            for (int i = 0; i < kEach; ++i) {
                auto r = ch.publish("c" + std::to_string(t),
                                    std::to_string(t) + ":" + std::to_string(i));
                got[t].push_back(r.id);
            }
        });
    go.store(1);
    for (auto& t : ts) t.join();

    // Each publisher saw its own ids strictly increase.
    for (int t = 0; t < kThreads; ++t) {
        INFO("publisher " << t);
        REQUIRE(got[t].size() == size_t(kEach));
        bool increasing = true;
        for (size_t i = 1; i < got[t].size(); ++i)
            if (got[t][i] <= got[t][i - 1]) increasing = false;
        CHECK(increasing);
        CHECK(got[t].front() >= 1);
    }
    // The queue holds ids 1..N in order: the id was taken where the position was.
    std::deque<Frame> out;
    REQUIRE(ch.drain(out) == size_t(kThreads) * kEach);
    bool queue_is_id_order = true;
    std::vector<int> next_seq(kThreads, 0);
    bool per_thread_order = true;
    for (size_t i = 0; i < out.size(); ++i) {
        const auto& f = std::get<PublishFrame>(out[i]);
        if (f.id != i + 1) queue_is_id_order = false;
        int t = f.channel[1] - '0';
        if (f.data != std::to_string(t) + ":" + std::to_string(next_seq[t]))
            per_thread_order = false;
        ++next_seq[t];
    }
    CHECK(queue_is_id_order);
    CHECK(per_thread_order);
    CHECK(ch.last_id() == uint64_t(kThreads) * kEach);
    CHECK(ch.published.load() == uint64_t(kThreads) * kEach);
}

// ---- lanes: one per loop (--loops) --------------------------------------------

namespace {
// What a lane holds, in order: "p<id>" for an event, "h<upto>:<slot index>" for an h frame.
std::vector<std::string> lane_items(const BusChannel& ch, size_t lane) {
    std::vector<std::string> out;
    for (const Frame& f : ch.peek(lane)) {
        if (auto* p = std::get_if<PublishFrame>(&f))
            out.push_back("p" + std::to_string(p->id));
        else
            out.push_back("h" + std::to_string(std::get<HoldFrame>(f).upto) + ":" +
                          std::get<HoldFrame>(f).stream_url);
    }
    return out;
}
}  // namespace

TEST_CASE("bus lanes: every event reaches every lane in id order; an h frame only its own lane",
          "[bus][channel][lanes]") {
    BusChannel ch(BusOptions{}, 3);
    REQUIRE(ch.lanes() == 3);
    Bus& one = ch.lane(1);
    Bus& two = ch.lane(2);
    CHECK(&ch.lane(0) == static_cast<Bus*>(&ch));
    CHECK(one.publish("a", "x").id == 1);  // a lane publishes through the hub
    CHECK(one.send(HoldFrame{"s1", 0, 0, 0, {"a"}}));
    CHECK(ch.publish("b", "y").id == 2);
    CHECK(two.send(HoldFrame{"s2", 0, 0, 0, {"b"}}));
    CHECK(two.publish("a", "z").id == 3);
    CHECK(ch.send(HoldFrame{"s0", 0, 0, 0, {"a"}}));

    CHECK(lane_items(ch, 0) == std::vector<std::string>{"p1", "p2", "p3", "h3:s0"});
    CHECK(lane_items(ch, 1) == std::vector<std::string>{"p1", "h1:s1", "p2", "p3"});
    CHECK(lane_items(ch, 2) == std::vector<std::string>{"p1", "p2", "h2:s2", "p3"});
    // One counter and one history for every lane; the counters are the hub's.
    CHECK(one.position() == 3);
    CHECK(two.position() == 3);
    CHECK(ch.published.load() == 3);
    CHECK(one.published.load() == 0);
    // Each lane's loop drains only its own queue, woken by its own eventfd.
    CHECK(one.fd() != ch.fd());
    CHECK(one.fd() != two.fd());
    std::deque<Frame> out;
    CHECK(one.drain(out) == 4);
    CHECK(ch.queued(1) == 0);
    CHECK(ch.queued(0) == 4);
    CHECK(ch.queued(2) == 4);
    // A replay through any lane reads the one history.
    Replay r;
    two.replay_later({"a"}, 0, 3, [&](Replay got) { r = std::move(got); });
    REQUIRE(r.events.size() == 2);
    CHECK(r.events[0].id == 1);
    CHECK(r.events[1].id == 3);
}

TEST_CASE(
    "bus channel: a replay stops at the frame's stamp (upto): what was published after it comes "
    "live, not twice",
    "[bus][channel]") {
    BusChannel ch(BusOptions{}, 1);
    REQUIRE(ch.publish("a", "one").id == 1);
    REQUIRE(ch.publish("a", "two").id == 2);
    REQUIRE(ch.send(HoldFrame{"s", 0, 0, 0, {"a"}}));  // stamped upto = 2
    REQUIRE(ch.publish("a", "three").id == 3);         // after the frame: live
    std::deque<Frame> out;
    REQUIRE(ch.drain(out) == 4);
    const auto& frame = std::get<HoldFrame>(out[2]);
    CHECK(frame.upto == 2);
    Replay r = ch.replay({"a"}, 0, frame.upto);
    REQUIRE(r.events.size() == 2);
    CHECK(r.events[1].id == 2);
    CHECK(r.upto == 2);
}

TEST_CASE(
    "bus lanes: an event is encoded once where it is numbered; every lane, the history and every "
    "replay share those bytes",
    "[bus][channel][lanes]") {
    // The server's codec, counting its calls.
    static std::atomic<int> encoded{0};
    encoded = 0;
    Codec counting = server::codec();
    counting.encode = [](PublishFrame& f) {
        ++encoded;
        server::encode(f);
    };
    BusChannel ch(BusOptions{.codec = counting}, 2);
    REQUIRE(ch.publish("a", "x", "note").id == 1);
    REQUIRE(ch.publish("a", "<p>raw</p>", "", true).id == 2);
    std::deque<Frame> zero, one;
    REQUIRE(ch.lane(0).drain(zero) == 2);
    REQUIRE(ch.lane(1).drain(one) == 2);
    const auto& first = std::get<PublishFrame>(zero[0]);
    const auto& sse = server::form(first, server::Form::sse);
    const auto& ws = server::form(first, server::Form::ws);
    REQUIRE(sse);
    REQUIRE(ws);
    CHECK(*sse == "id: 1\nevent: note\ndata: x\n\n");
    CHECK(*ws == http::ws::server_frame(http::ws::Opcode::text,
                                        R"({"id":"1","event":"note","data":"x"})"));
    const auto& raw = std::get<PublishFrame>(zero[1]);
    CHECK(*server::form(raw, server::Form::sse) == "<p>raw</p>");  // raw: as it is
    CHECK_FALSE(server::form(raw, server::Form::ws));              // not a WebSocket's
    CHECK(std::get<PublishFrame>(one[0]).forms == first.forms);    // the same bytes
    std::vector<Replay> replays(3);
    for (auto& r : replays) ch.lane(1).replay_later({"a"}, 0, 2, [&](Replay got) { r = got; });
    for (const auto& r : replays) {
        REQUIRE(r.events.size() == 2);
        CHECK(r.events[0].forms == first.forms);
        CHECK(r.events[0].data.empty());  // kept as its forms alone
    }
    CHECK(encoded == 2);  // once an event, for both lanes, the history and the replays
    // The history counts the bytes it keeps alive: each event's forms and its entry.
    CHECK(ch.history_stats().bytes >= first.data.size() + (sse->size() + ws->size()) * 2);
}

TEST_CASE("bus lanes: a publish that one full lane cannot take is refused on every lane",
          "[bus][channel][lanes]") {
    BusChannel ch(BusOptions{.capacity = 2}, 2);
    CHECK(ch.publish("a", "1").id == 1);
    CHECK(ch.lane(1).send(HoldFrame{"s", 0, 0, 0, {"a"}}));  // lane 1 is now full
    auto r = ch.publish("a", "2");
    CHECK(r.error == PublishError::refused);
    CHECK(r.id == 0);
    CHECK(ch.queued(0) == 1);  // lane 0 had room, and still did not get it
    CHECK(ch.refused.load() == 1);
    CHECK_FALSE(ch.lane(1).send(HoldFrame{"s", 0, 0, 0, {"a"}}));
    CHECK(ch.refused.load() == 2);  // a lane's refusal is counted on the hub
    std::deque<Frame> out;
    ch.lane(1).drain(out);
    CHECK(ch.publish("a", "3").id == 2);  // the refused publish took no id
    ch.close();
    CHECK_FALSE(ch.lane(1).send(HoldFrame{}));
    CHECK(ch.publish("a", "4").error == PublishError::refused);
}

TEST_CASE(
    "bus lanes: under concurrent publishers and h frames every lane holds ids 1..N in order, "
    "each h frame stamped with the last id before it on its lane",
    "[bus][channel][lanes]") {
    constexpr int kPublishers = 3, kEach = 3000, kLanes = 3, kHolds = 500;
    BusChannel ch(BusOptions{.capacity = size_t(kPublishers * kEach + kHolds)}, kLanes);
    std::atomic<int> go{0};
    std::vector<std::thread> ts;
    for (int t = 0; t < kPublishers; ++t)
        ts.emplace_back([&, t] {
            while (!go.load()) std::this_thread::yield();
            for (int i = 0; i < kEach; ++i) (void)ch.publish("c" + std::to_string(t), "x");
        });
    for (int l = 0; l < kLanes; ++l)
        ts.emplace_back([&, l] {
            while (!go.load()) std::this_thread::yield();
            for (int i = 0; i < kHolds; ++i)
                (void)ch.lane(size_t(l)).send(HoldFrame{"s", 0, 0, 0, {"c0"}});
        });
    go.store(1);
    for (auto& t : ts) t.join();
    for (size_t l = 0; l < kLanes; ++l) {
        INFO("lane " << l);
        std::deque<Frame> out;
        REQUIRE(ch.lane(l).drain(out) == size_t(kPublishers * kEach + kHolds));
        uint64_t last = 0;  // the last event id seen on this lane
        bool in_order = true, stamps_right = true;
        for (const Frame& f : out) {
            if (auto* p = std::get_if<PublishFrame>(&f)) {
                if (p->id != last + 1) in_order = false;
                last = p->id;
            } else if (std::get<HoldFrame>(f).upto != last) {
                stamps_right = false;
            }
        }
        CHECK(in_order);
        CHECK(stamps_right);
        CHECK(last == uint64_t(kPublishers * kEach));
    }
}

// ---- subscriptions -----------------------------------------------------------

namespace {
// The slots of a channel's members, in list order.
std::vector<SlotRef> slots_of(const Subscriptions& subs, const std::string& channel) {
    std::vector<SlotRef> out;
    for (const Member* m : subs.subscribers(channel)) out.push_back(m->slot);
    return out;
}
Member member(SlotRef slot) {
    Member m;
    m.slot = slot;
    return m;
}
}  // namespace

TEST_CASE(
    "subscriptions: subscribe lists members per channel in order; unsubscribe_all removes them",
    "[bus][subscriptions]") {
    Subscriptions subs;
    SlotRef a{1, 1}, b{2, 5};
    Member ma = member(a), mb = member(b), idle = member({3, 1});
    subs.subscribe(ma, {"news", "sport"});
    subs.subscribe(mb, {"news"});
    CHECK(ma.joined);
    CHECK(mb.joined);
    CHECK_FALSE(idle.joined);
    CHECK(subs.subscribers("news") == std::vector<Member*>{&ma, &mb});
    CHECK(slots_of(subs, "news") == std::vector<SlotRef>{a, b});
    CHECK(slots_of(subs, "sport") == std::vector<SlotRef>{a});
    CHECK(subs.subscribers("none").empty());
    CHECK(subs.channels() == 2);
    CHECK(subs.members() == 2);

    CHECK(subs.unsubscribe_all(ma) == 2);
    CHECK_FALSE(ma.joined);
    CHECK(ma.places.empty());
    CHECK(slots_of(subs, "news") == std::vector<SlotRef>{b});
    CHECK(subs.subscribers("sport").empty());
    CHECK(subs.channels() == 1);  // an emptied channel is forgotten
    CHECK(subs.members() == 1);

    SECTION("unsubscribing twice removes nothing the second time") {
        CHECK(subs.unsubscribe_all(ma) == 0);
        CHECK(subs.members() == 1);
    }
    SECTION("unsubscribing the last member empties the table") {
        CHECK(subs.unsubscribe_all(mb) == 1);
        CHECK(subs.channels() == 0);
        CHECK(subs.members() == 0);
    }
    SECTION("a member subscribed to no channel is a member all the same") {
        subs.subscribe(idle, {});
        CHECK(idle.joined);
        CHECK(subs.members() == 2);
        CHECK(subs.unsubscribe_all(idle) == 0);
        CHECK(subs.members() == 1);
    }
    subs.unsubscribe_all(mb);
}

TEST_CASE("subscriptions: duplicate channels are ignored", "[bus][subscriptions]") {
    Subscriptions subs;
    SlotRef a{0, 1};
    Member ma = member(a);
    subs.subscribe(ma, {"x", "x", "y"});
    subs.subscribe(ma, {"y", "z"});
    CHECK(slots_of(subs, "x") == std::vector<SlotRef>{a});
    CHECK(slots_of(subs, "y") == std::vector<SlotRef>{a});
    CHECK(slots_of(subs, "z") == std::vector<SlotRef>{a});
    CHECK(subs.unsubscribe_all(ma) == 3);
    CHECK(subs.channels() == 0);
    CHECK(subs.members() == 0);
}

TEST_CASE("subscriptions: an old connection's member does not touch the slot's new owner's",
          "[bus][subscriptions]") {
    Subscriptions subs;
    SlotRef old_owner{4, 1}, new_owner{4, 2};
    Member mo = member(old_owner), mn = member(new_owner);
    subs.subscribe(mo, {"a"});
    CHECK(subs.unsubscribe_all(mo) == 1);
    subs.subscribe(mn, {"a", "b"});
    CHECK_FALSE(mo.joined);
    CHECK(mn.joined);

    CHECK(subs.unsubscribe_all(mo) == 0);  // a late release of the old connection
    CHECK(mn.joined);
    CHECK(slots_of(subs, "a") == std::vector<SlotRef>{new_owner});
    CHECK(slots_of(subs, "b") == std::vector<SlotRef>{new_owner});
    CHECK(subs.unsubscribe_all(mn) == 2);
}

TEST_CASE("subscriptions: removals in any order leave exactly the others, each list still whole",
          "[bus][subscriptions]") {
    // Unsubscribing moves a list's last member into the removed one's place:
    // every member's remembered place must follow, or a later removal takes
    // the wrong member out.
    Subscriptions subs;
    std::vector<SlotRef> slots;
    std::deque<Member> members;  // records that do not move
    for (uint32_t i = 0; i < 40; ++i) {
        slots.push_back(SlotRef{i, 1});
        members.push_back(member(slots.back()));
        std::vector<std::string> channels{"all"};
        channels.push_back(i % 2 ? "odd" : "even");
        if (i % 3 == 0) channels.push_back("third");
        subs.subscribe(members.back(), channels);
    }
    std::vector<SlotRef> left = slots;
    auto sorted = [](std::vector<SlotRef> v) {
        std::sort(v.begin(), v.end(), [](SlotRef a, SlotRef b) { return a.index < b.index; });
        return v;
    };
    auto on = [&](const std::string& ch) {
        std::vector<SlotRef> want;
        for (SlotRef s : left)
            if (ch == "all" || (ch == "odd" && s.index % 2) || (ch == "even" && !(s.index % 2)) ||
                (ch == "third" && s.index % 3 == 0))
                want.push_back(s);
        return want;
    };
    // A fixed, scrambled order: first, last, and middle members of each list.
    for (uint32_t step = 0; step < 40; ++step) {
        const uint32_t i = (step * 17 + 5) % 40;
        SlotRef gone = slots[i];
        size_t want = 2 + (gone.index % 3 == 0 ? 1 : 0);
        REQUIRE(subs.unsubscribe_all(members[i]) == want);
        left.erase(std::find(left.begin(), left.end(), gone));
        for (const char* ch : {"all", "odd", "even", "third"})
            REQUIRE(sorted(slots_of(subs, ch)) == on(ch));
    }
    CHECK(subs.channels() == 0);
    CHECK(subs.members() == 0);
}
