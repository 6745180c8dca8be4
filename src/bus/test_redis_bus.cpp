// The Redis bus against a real redis-server (started here on a free port,
// stopped by PID): URLs, shared ids, history and its gaps, outages.
#include <algorithm>
#include <catch2/catch.hpp>
#include <optional>

#include "bus/channel.hpp"
#include "bus/redis_bus.hpp"
#include "bus/test_redis_proxy.hpp"
#include "bus/test_redis_server.hpp"

using namespace m0;
using namespace m0::bus;
using m0::testing::RedisServer;

namespace {

// What a replay answers, the loop stepped until it does.
Replay replay_of(Loop& loop, RedisBus& bus, std::vector<std::string> channels, uint64_t after) {
    std::optional<Replay> got;
    bus.replay_later(channels, after, kUptoUnknown, [&](Replay r) { got = std::move(r); });
    REQUIRE(loop.run_until([&] { return got.has_value(); }));
    return *got;
}

std::vector<PublishEvent> batch(const std::string& channel, size_t n) {
    std::vector<PublishEvent> out;
    for (size_t i = 0; i < n; ++i) out.push_back({channel, "e" + std::to_string(i), "", false});
    return out;
}

// What publish_batch_later answers, the loop stepped until it does.
BatchResult batch_later(Loop& loop, RedisBus& bus, std::vector<PublishEvent> events) {
    std::optional<BatchResult> got;
    bus.publish_batch_later(std::move(events), [&](BatchResult b) { got = std::move(b); });
    REQUIRE(loop.run_until([&] { return got.has_value(); }));
    return *got;
}

std::vector<uint64_t> ids(const Replay& r) {
    std::vector<uint64_t> out;
    for (const auto& f : r.events) out.push_back(f.id);
    return out;
}

}  // namespace

TEST_CASE("redis bus: URLs are parsed, and a bad one is one line naming the flag", "[redis]") {
    std::string err;
    auto u = parse_redis_url("redis://10.0.0.5:6380/3", err);
    REQUIRE(u);
    CHECK(u->host == "10.0.0.5");
    CHECK(u->port == 6380);
    CHECK(u->db == 3);
    u = parse_redis_url("redis://localhost", err);
    REQUIRE(u);
    CHECK((u->host == "localhost" && u->port == 6379 && u->db == 0));
    u = parse_redis_url("redis://[::1]:7000/1", err);
    REQUIRE(u);
    CHECK((u->host == "::1" && u->port == 7000 && u->db == 1));
    u = parse_redis_url("redis+unix:///run/redis.sock?db=2", err);
    REQUIRE(u);
    CHECK((u->unix_path == "/run/redis.sock" && u->db == 2));
    for (const char* bad : {"", "http://x", "redis://", "redis://:6379", "redis://h:0",
                            "redis://h:99999", "redis://h:12ab", "redis://h/x",
                            "redis+unix://relative", "redis+unix:///s?x=1", "redis://[::1"}) {
        INFO(bad);
        err.clear();
        CHECK_FALSE(parse_redis_url(bad, err));
        CHECK(err.starts_with(std::string("--bus ") + bad + ": "));
        CHECK(err.find('\n') == std::string::npos);
    }
}

TEST_CASE("redis bus: two buses on one Redis share one counter; ids start at the clock",
          "[redis]") {
    RedisServer redis;
    Loop loop;
    RedisBus a(loop, m0::testing::bus_options(redis)), b(loop, m0::testing::bus_options(redis));
    REQUIRE(a.start(5));
    REQUIRE(b.start(5));
    const uint64_t before = clock_seed();
    std::vector<uint64_t> got;
    for (int i = 0; i < 6; ++i) {
        auto r = (i % 2 ? a : b).publish("c", "d" + std::to_string(i));
        REQUIRE(r.ok());
        got.push_back(r.id);
    }
    CHECK(got.front() > before);
    CHECK(std::is_sorted(got.begin(), got.end()));
    CHECK(std::adjacent_find(got.begin(), got.end()) == got.end());
    // The position follows what this process published.
    CHECK(a.position() >= got[5 - 1]);
    // publish_later (the loop's, for the admin API) numbers from the same counter.
    std::optional<PublishResult> later;
    a.publish_later("c", "later", "ev", false, [&](PublishResult r) { later = r; });
    REQUIRE(loop.run_until([&] { return later.has_value(); }));
    REQUIRE(later->ok());
    CHECK(later->id > got.back());
    // Checked before Redis is asked, as on every bus.
    CHECK(a.publish("m0.slot.1", "x").error == PublishError::bad_name);
    CHECK(a.publish("c", std::string(300 * 1024, 'x')).error == PublishError::too_large);
}

TEST_CASE(
    "redis bus: a replay is the stream after the cursor, merged in id order; a cursor below what "
    "was trimmed is a gap",
    "[redis]") {
    RedisServer redis;
    Loop loop;
    RedisBus bus(loop, m0::testing::bus_options(redis, 2));
    REQUIRE(bus.start(5));
    std::vector<uint64_t> a, b;
    for (int i = 0; i < 5; ++i) {
        a.push_back(bus.publish("a", "a" + std::to_string(i)).id);
        b.push_back(bus.publish("b", "b" + std::to_string(i), i == 4 ? "named" : "").id);
    }
    Replay r = replay_of(loop, bus, {"a", "b"}, b[2]);
    CHECK(ids(r) == std::vector<uint64_t>{a[3], b[3], a[4], b[4]});
    // A replay carries each event as the bytes its holds are written.
    REQUIRE(r.events.back().forms[0]);
    CHECK(*r.events.back().forms[0] ==
          "id: " + std::to_string(b[4]) + "\nevent: named\ndata: b4\n\n");
    CHECK(r.upto == b[4]);
    CHECK_FALSE(r.gap);  // trimmed: a up to a[2], b up to b[2]; nothing after b[2]
    // b[2] was trimmed and comes after a[2]: a hold on both lost it.
    CHECK(replay_of(loop, bus, {"a", "b"}, a[2]).gap);
    CHECK_FALSE(replay_of(loop, bus, {"a"}, a[2]).gap);
    CHECK(replay_of(loop, bus, {"a"}, a[1]).gap);
    CHECK(ids(replay_of(loop, bus, {"b"}, 0)) == std::vector<uint64_t>{b[3], b[4]});
}

TEST_CASE(
    "redis bus: Redis down: publishes fail loudly, the bus reconnects and resyncs; a Redis that "
    "lost its data is a gap",
    "[redis]") {
    RedisServer redis;
    Loop loop;
    RedisBus bus(loop, m0::testing::bus_options(redis));
    int resyncs = 0;
    bus.attach({[&] { ++resyncs; }, [](const std::string&) { return true; }});
    REQUIRE(bus.start(5));
    CHECK(resyncs == 1);
    const uint64_t old = bus.publish("c", "before").id;
    REQUIRE(old != 0);

    redis.stop();
    REQUIRE(loop.run_until([&] { return !bus.up(); }));
    PublishResult r = bus.publish("c", "while down");
    CHECK(r.error == PublishError::unavailable);
    CHECK(reason(r).find("redis bus redis://127.0.0.1:") == 0);
    std::optional<PublishResult> later;
    bus.publish_later("c", "while down", "", false, [&](PublishResult p) { later = p; });
    REQUIRE(later.has_value());  // at once: the loop never waits on a link that is down
    CHECK(later->error == PublishError::unavailable);
    CHECK(bus.link_stats().publish_failures == 2);

    redis.start();  // without its data: nothing was persisted
    REQUIRE(loop.run_until([&] { return bus.up(); }, std::chrono::milliseconds(5000)));
    CHECK(resyncs == 2);
    CHECK(bus.link_stats().reconnects == 1);
    Replay gap = replay_of(loop, bus, {"c"}, old);
    CHECK(gap.gap);  // the events after `old` are gone with the data
    const uint64_t next = bus.publish("c", "after").id;
    CHECK(next > old);                            // ids still grow: the script seeds from the clock
    CHECK(replay_of(loop, bus, {"c"}, old).gap);  // below the new epoch
    CHECK_FALSE(replay_of(loop, bus, {"c"}, next).gap);
}

TEST_CASE(
    "redis bus: a raw event (Pushpin content) keeps its flag and its bytes, in the stream and "
    "live, from publish and publish_later",
    "[redis][grip]") {
    RedisServer redis;
    Loop loop;
    RedisBus a(loop, m0::testing::bus_options(redis)), b(loop, m0::testing::bus_options(redis));
    REQUIRE(a.start(5));
    REQUIRE(b.start(5));
    b.attach({[] {}, [](const std::string&) { return true; }});
    const std::string content = "event: m\ndata: one\n\n";
    auto first = a.publish("c", content, "dropped for raw", true);
    REQUIRE(first.ok());
    auto plain = a.publish("c", "plain");
    REQUIRE(plain.ok());
    // b's replay subscribes it to "c": what comes later arrives live.
    Replay r = replay_of(loop, b, {"c"}, first.id - 1);
    REQUIRE(ids(r) == std::vector<uint64_t>{first.id, plain.id});
    CHECK(r.events[0].raw);
    REQUIRE(r.events[0].forms[0]);
    CHECK(*r.events[0].forms[0] == content);  // written as it is: no id:/data: lines
    CHECK_FALSE(r.events[1].raw);
    std::optional<PublishResult> later;
    a.publish_later("c", "data: two\n\n", {}, true, [&](PublishResult p) { later = p; });
    REQUIRE(loop.run_until([&] { return later.has_value(); }));
    REQUIRE(later->ok());
    std::deque<Frame> frames;
    REQUIRE(loop.run_until([&] {
        b.drain(frames);
        return !frames.empty();
    }));
    auto* live = std::get_if<PublishFrame>(&frames.back());
    REQUIRE(live);
    CHECK(live->id == later->id);
    CHECK(live->raw);
    CHECK(live->data == "data: two\n\n");
    // A raw event's size is its own length, against the same limit.
    CHECK(a.publish("c", std::string(300 * 1024, 'x'), {}, true).error == PublishError::too_large);
    // An http-response item keeps its format's name and its data, in the
    // stream and live: a long-poll in another process answers with it.
    auto item = a.publish("c", "{\"code\": 201}", kResponseFormat, true);
    REQUIRE(item.ok());
    frames.clear();
    REQUIRE(loop.run_until([&] {
        b.drain(frames);
        return !frames.empty();
    }));
    live = std::get_if<PublishFrame>(&frames.back());
    REQUIRE(live);
    CHECK(live->raw);
    CHECK(live->event == kResponseFormat);
    CHECK(live->data == "{\"code\": 201}");
    r = replay_of(loop, b, {"c"}, item.id - 1);
    REQUIRE(ids(r) == std::vector<uint64_t>{item.id});
    CHECK(r.events[0].event == kResponseFormat);
    CHECK(r.events[0].data == "{\"code\": 201}");
}

TEST_CASE(
    "redis bus: identical replays asked in one turn (a reconnect storm) share one read and one "
    "encoding; one asked after that read was sent gets a read of its own",
    "[redis]") {
    RedisServer redis;
    Loop loop;
    auto opts = m0::testing::bus_options(redis);
    int reads = 0;
    opts.hook = [&](RedisPoint p) {
        if (p == RedisPoint::reading) ++reads;
    };
    RedisBus bus(loop, opts);
    REQUIRE(bus.start(5));
    std::vector<uint64_t> a;
    for (int i = 0; i < 3; ++i) a.push_back(bus.publish("a", "a" + std::to_string(i)).id);

    std::vector<std::optional<Replay>> got(4);
    for (size_t i = 0; i < 3; ++i)
        bus.replay_later({"a"}, a[0], kUptoUnknown, [&got, i](Replay r) { got[i] = std::move(r); });
    // Another cursor: a read of its own.
    bus.replay_later({"a"}, a[1], kUptoUnknown, [&got](Replay r) { got[3] = std::move(r); });
    REQUIRE(loop.run_until([&] {
        return std::all_of(got.begin(), got.end(), [](const auto& g) { return g.has_value(); });
    }));
    CHECK(reads == 2);
    for (size_t i = 0; i < 3; ++i) {
        CHECK(ids(*got[i]) == std::vector<uint64_t>{a[1], a[2]});
        REQUIRE(got[i]->events.size() == 2);
        // The same bytes for every hold the read answered, not a copy each.
        CHECK(got[i]->events[0].forms == got[0]->events[0].forms);
        CHECK(got[i]->events[1].forms == got[0]->events[1].forms);
    }
    CHECK(ids(*got[3]) == std::vector<uint64_t>{a[2]});

    // The channel is subscribed now: a request is read at the end of its
    // turn. One asked once that read is on its way does not join it.
    std::optional<Replay> first, second;
    bus.replay_later({"a"}, a[0], kUptoUnknown, [&](Replay r) { first = std::move(r); });
    REQUIRE(loop.run_until([&] { return reads == 3; }));
    const uint64_t late = bus.publish("a", "late").id;
    bus.replay_later({"a"}, a[0], kUptoUnknown, [&](Replay r) { second = std::move(r); });
    REQUIRE(loop.run_until([&] { return first.has_value() && second.has_value(); }));
    CHECK(reads == 4);
    CHECK(ids(*second) == std::vector<uint64_t>{a[1], a[2], late});
}

TEST_CASE("redis bus: a batch is numbered in its order by the shared counter, both ways",
          "[redis][batch]") {
    RedisServer redis;
    Loop loop;
    RedisBus bus(loop, m0::testing::bus_options(redis));
    REQUIRE(bus.start(5));
    const uint64_t before = bus.publish("a", "before").id;
    BatchResult b = bus.publish_batch(batch("a", 5));
    REQUIRE(b.ok());
    REQUIRE(b.ids.size() == 5);
    BatchResult later = batch_later(loop, bus, batch("a", 4));
    REQUIRE(later.ok());
    REQUIRE(later.ids.size() == 4);
    std::vector<uint64_t> all{before};
    all.insert(all.end(), b.ids.begin(), b.ids.end());
    all.insert(all.end(), later.ids.begin(), later.ids.end());
    CHECK(std::is_sorted(all.begin(), all.end()));
    CHECK(std::adjacent_find(all.begin(), all.end()) == all.end());
    // In history in that order, each event with its own data.
    Replay r = replay_of(loop, bus, {"a"}, 0);
    CHECK(ids(r) == all);
    REQUIRE(r.events.size() == 10);
    CHECK(*r.events[3].forms[0] == "id: " + std::to_string(b.ids[2]) + "\ndata: e2\n\n");
    CHECK(bus.position() >= later.ids.back());
    // Checked whole before Redis is asked: a bad event names its index.
    auto bad = batch("a", 3);
    bad[1].channel = "m0.slot.1";
    b = bus.publish_batch(bad);
    CHECK(b.error.error == PublishError::bad_name);
    CHECK(b.failed == 1);
    CHECK(b.ids.empty());
    CHECK(ids(replay_of(loop, bus, {"a"}, 0)).size() == 10);
}

TEST_CASE(
    "redis bus: a batch whose answer is lost (the link cut in the middle of it) is an error "
    "that claims no id",
    "[redis][batch][faults]") {
    RedisServer redis;
    m0::testing::RedisFaultProxy proxy(redis.port());
    Loop loop;
    RedisBusOptions o = m0::testing::bus_options(redis);
    std::string err;
    o.url = *parse_redis_url(proxy.url(), err);
    RedisBus bus(loop, o);
    RedisBus straight(loop, m0::testing::bus_options(redis));
    REQUIRE(bus.start(5));
    REQUIRE(straight.start(5));
    // One script call: Redis ran it (the cut came after), but its answer
    // was lost, so no id is claimed.
    auto check = [&](const BatchResult& b, size_t) {
        CHECK_FALSE(b.ok());
        CHECK(b.error.error == PublishError::unavailable);
        CHECK(b.failed == 0);
        CHECK(b.ids.empty());
        CHECK(b.error.detail.find("none of the batch's 40 events answered as taken") !=
              std::string::npos);
    };
    SECTION("publish_batch: the blocking publish link") {
        REQUIRE(bus.publish("a", "opens the publish link").ok());
        proxy.cut_mid_reply(m0::testing::kPublishing);
        BatchResult b = bus.publish_batch(batch("a", 40));
        INFO(b.error.detail);
        check(b, 40);
    }
    SECTION("publish_batch_later: the loop's command link") {
        proxy.cut_mid_reply(m0::testing::kCommandLink);
        BatchResult b = batch_later(loop, bus, batch("a", 40));
        INFO(b.error.detail);
        check(b, 40);
    }
    proxy.release();
    // The bus comes back and takes the next batch whole.
    REQUIRE(loop.run_until([&] { return bus.up(); }));
    BatchResult again = batch_later(loop, bus, batch("a", 3));
    CHECK(again.ok());
}
