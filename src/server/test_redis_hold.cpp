// The seam of a hold on the Redis bus, against a real redis-server: events
// published at every step of the hold's start (before its SUBSCRIBE reaches
// Redis, after Redis answered it, while the replay read waits to be sent,
// after the replay) reach the hold once each, in id order. Another bus on
// the same Redis publishes, as another m0serve process would.
#include <catch2/catch.hpp>
#include <map>
#include <stdexcept>

#include "bus/redis_bus.hpp"
#include "bus/test_redis_server.hpp"
#include "server/holds.hpp"

using namespace m0;
using namespace m0::bus;
using namespace m0::server;
using m0::testing::ids_in;
using m0::testing::RedisServer;

namespace {

struct Sink : HoldSink {
    std::string sent;
    size_t write(SlotRef, std::string_view bytes) override {
        sent += bytes;
        return 0;
    }
    size_t backlog(SlotRef) const override { return 0; }
    void close_after_write(SlotRef) override {}
    // Only stream holds are opened here: a long-poll's answer is a defect.
    void answer(SlotRef, const bus::PublishFrame*) override {
        throw std::logic_error("a long-poll answered where only streams are held");
    }
};

}  // namespace

TEST_CASE(
    "redis hold: every event after the hold's position arrives once, in id order, however it "
    "straddles the subscription",
    "[redis]") {
    // live_first: the live copies of the events the replay also holds reach
    // the hold before its replay (they wait behind it and are dropped there);
    // otherwise after it (muted by the replay's upto).
    const bool live_first = GENERATE(false, true);
    INFO("live copies " << (live_first ? "before" : "after") << " the replay");
    RedisServer redis;
    Loop loop, other_loop;
    RedisBus other(other_loop, m0::testing::bus_options(redis));  // another process: it publishes
    REQUIRE(other.start(5));
    std::vector<uint64_t> want;  // ids the hold must get, in order
    auto publish = [&](const std::string& channel, const std::string& data) {
        PublishResult r = other.publish(channel, data);
        REQUIRE(r.ok());
        if (channel == "a") want.push_back(r.id);
        return r.id;
    };
    RedisBusOptions o = m0::testing::bus_options(redis);
    std::vector<RedisPoint> points;
    o.hook = [&](RedisPoint p) {
        points.push_back(p);
        // At each step of the start: one event on the hold's channel, one on another.
        publish("a", "at step " + std::to_string(points.size()));
        publish("b", "elsewhere");
    };
    RedisBus bus(loop, o);
    REQUIRE(bus.start(5));

    publish("a", "long before");
    const uint64_t position = publish("a", "before the hold");
    want.clear();  // a hold that starts at `position` gets what comes later

    Metrics metrics;
    Sink sink;
    HoldTable table(sink, {}, metrics);
    const SlotRef slot{1, 1};
    metrics.holds_open.reserve();
    table.open_awaiting(slot, position, {"a"});
    REQUIRE(table.start(slot, 0));  // the head is out; events wait for the replay
    size_t live = 0;                // events of "a" that came live
    auto drain = [&] {
        std::deque<Frame> frames;
        bus.drain(frames);
        for (auto& f : frames) {
            auto* p = std::get_if<PublishFrame>(&f);
            if (!p) continue;
            live += p->channel == "a";
            table.publish(*p, 0);
        }
    };
    std::optional<Replay> replay;
    bus.replay_later({"a"}, position, kUptoUnknown, [&](Replay r) {
        if (live_first)
            replay = std::move(r);  // applied once the live copies are in
        else
            REQUIRE(table.replayed(slot, r, 0, 0));
    });
    REQUIRE(loop.run_until([&] { return !points.empty() && points.back() == RedisPoint::replayed; },
                           std::chrono::milliseconds(5000)));
    CHECK(points == std::vector<RedisPoint>{RedisPoint::subscribing, RedisPoint::subscribed,
                                            RedisPoint::reading, RedisPoint::replayed});
    if (live_first) {
        // The three published once the subscription took effect come live
        // (two of them the replay holds as well) before the replay is applied.
        REQUIRE(loop.run_until([&] {
            drain();
            return live >= 3;
        }));
        CHECK(sink.sent.empty());  // nothing is written ahead of the replay
        REQUIRE(table.replayed(slot, *replay, 0, 0));
    }
    publish("a", "after the replay");
    REQUIRE(loop.run_until([&] {
        drain();
        return !ids_in(sink.sent).empty() && ids_in(sink.sent).back() >= want.back();
    }));
    loop.run_until([] { return false; }, std::chrono::milliseconds(100));  // any straggler
    drain();
    CHECK(ids_in(sink.sent) == want);
    CHECK(want.size() == 5);  // one at each of the four steps, one after
}

TEST_CASE(
    "redis hold: a hold on two channels hears a batch that runs across both (batched messages "
    "and single ones) once each, in id order",
    "[redis][batch]") {
    RedisServer redis;
    Loop loop, other_loop;
    RedisBus other(other_loop, m0::testing::bus_options(redis));  // another process: it publishes
    RedisBus bus(loop, m0::testing::bus_options(redis));
    REQUIRE(other.start(5));
    REQUIRE(bus.start(5));
    const uint64_t position = other.publish("a", "before").id;

    Metrics metrics;
    Sink sink;
    HoldTable table(sink, {}, metrics);
    const SlotRef slot{1, 1};
    metrics.holds_open.reserve();
    table.open_awaiting(slot, position, {"a", "b"});
    REQUIRE(table.start(slot, 0));
    bool replayed = false;
    bus.replay_later({"a", "b"}, position, kUptoUnknown, [&](Replay r) {
        REQUIRE(table.replayed(slot, r, 0, 0));
        replayed = true;
    });
    REQUIRE(loop.run_until([&] { return replayed; }));

    std::vector<PublishEvent> batch;
    for (const char* c : {"a", "a", "b", "a", "b", "b", "b", "c", "a", "a", "a", "b"})
        batch.push_back({c, std::string(c) + std::to_string(batch.size()), "", false});
    BatchResult b = other.publish_batch(batch);
    REQUIRE(b.ok());
    std::vector<uint64_t> want;
    for (size_t i = 0; i < batch.size(); ++i)
        if (batch[i].channel != "c") want.push_back(b.ids[i]);
    auto drain = [&] {
        std::deque<Frame> frames;
        bus.drain(frames);
        for (auto& f : frames)
            if (auto* p = std::get_if<PublishFrame>(&f)) table.publish(*p, 0);
        return ids_in(sink.sent).size() >= want.size();
    };
    REQUIRE(loop.run_until(drain));
    loop.run_until([] { return false; }, std::chrono::milliseconds(100));  // any straggler
    drain();
    CHECK(ids_in(sink.sent) == want);
    CHECK(sink.sent.find("data: a8\n") != std::string::npos);
}
