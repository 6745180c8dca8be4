// The in-process bus's batches (BusChannel::publish_batch): consecutive ids
// in batch order on every lane and in history, checked whole before any is
// numbered, refused whole when a lane has no room, and pushed onto each lane
// in one step, so a loop draining meanwhile sees whole batches and is woken
// once a batch, not once an event.
#include <poll.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <cstdint>
#include <string>
#include <thread>
#include <variant>
#include <vector>

#include "bus/channel.hpp"
#include "server/codec.hpp"

using namespace m0;
using namespace m0::bus;

namespace {

std::vector<PublishFrame> lane_frames(const BusChannel& ch, size_t lane) {
    std::vector<PublishFrame> out;
    for (const Frame& f : ch.peek(lane))
        if (auto* p = std::get_if<PublishFrame>(&f)) out.push_back(*p);
    return out;
}

std::vector<PublishEvent> batch_of(size_t n, const std::string& tag) {
    std::vector<PublishEvent> events;
    for (size_t i = 0; i < n; ++i)
        events.push_back({i % 2 ? "odd" : "even", tag + std::to_string(i), "", false});
    return events;
}

}  // namespace

TEST_CASE("bus batch: consecutive ids in batch order, once on every lane, kept in history",
          "[bus][batch]") {
    BusChannel ch(BusOptions{.first_id = 100, .codec = server::codec()}, 3);
    REQUIRE(ch.publish("even", "before").id == 101);
    auto b = ch.publish_batch(batch_of(5, "e"));
    REQUIRE(b.ok());
    CHECK(b.ids == std::vector<uint64_t>{102, 103, 104, 105, 106});
    CHECK(ch.published.load() == 6);
    CHECK(ch.position() == 106);
    for (size_t lane = 0; lane < 3; ++lane) {
        auto frames = lane_frames(ch, lane);
        REQUIRE(frames.size() == 6);
        for (size_t i = 1; i < frames.size(); ++i) {
            CHECK(frames[i].id == 101 + i);
            CHECK(frames[i].data == "e" + std::to_string(i - 1));
            CHECK(frames[i].channel == (i % 2 ? "even" : "odd"));
            REQUIRE(frames[i].encoded());
        }
        // Every lane shares one encoding of each event.
        CHECK(frames[3].forms == lane_frames(ch, 0)[3].forms);
    }
    // History: a hold on "odd" from before the batch replays its events, in order.
    Replay r = ch.replay({"odd"}, 101, 106);
    REQUIRE(r.events.size() == 2);
    CHECK(r.events[0].id == 103);
    CHECK(r.events[1].id == 105);
}

TEST_CASE("bus batch: a bad event refuses the whole batch, naming it; nothing is numbered",
          "[bus][batch]") {
    BusChannel ch(BusOptions{.max_event_size = 64});
    auto events = batch_of(4, "x");
    events[2].channel = "bad\nname";
    auto b = ch.publish_batch(events);
    CHECK_FALSE(b.ok());
    CHECK(b.error.error == PublishError::bad_name);
    CHECK(b.failed == 2);
    CHECK(b.ids.empty());
    events = batch_of(4, "x");
    events[3].data = std::string(100, 'y');
    b = ch.publish_batch(events);
    CHECK(b.error.error == PublishError::too_large);
    CHECK(b.failed == 3);
    CHECK(ch.too_large.load() == 1);
    CHECK(ch.queued() == 0);
    CHECK(ch.last_id() == 0);
    // An empty batch is taken: no ids.
    b = ch.publish_batch({});
    CHECK(b.ok());
    CHECK(b.ids.empty());
}

TEST_CASE("bus batch: refused whole when any lane has no room for all of it", "[bus][batch]") {
    BusChannel ch(BusOptions{.capacity = 8}, 2);
    REQUIRE(ch.publish_batch(batch_of(5, "a")).ok());
    auto b = ch.publish_batch(batch_of(4, "b"));  // 5 + 4 > 8
    CHECK(b.error.error == PublishError::refused);
    CHECK(b.ids.empty());
    CHECK(ch.queued(0) == 5);
    CHECK(ch.queued(1) == 5);
    CHECK(ch.last_id() == 5);
    CHECK(ch.publish_batch(batch_of(3, "c")).ok());  // exactly full
    CHECK(ch.queued(1) == 8);
}

TEST_CASE("bus batch: pushed onto a lane under one hold of its lock, with one wake-up",
          "[bus][batch]") {
    // A consumer that drains the lane each time the publisher lets the
    // lane's lock go is the worst-timed loop there can be: it sees whatever
    // a loop woken at that moment would. It must find whole batches, each
    // announced by the lane's fd, and be called once a batch.
    constexpr size_t kBatches = 20, kSize = 50;
    BusChannel ch(BusOptions{.capacity = kBatches * kSize}, 2);
    size_t releases = 0, woken = 0;
    std::vector<size_t> drained;
    uint64_t last = 0;
    bool ordered = true;
    ch.on_lane_released(1, [&] {
        ++releases;
        Bus& lane = ch.lane(1);
        pollfd p{lane.fd(), POLLIN, 0};
        if (::poll(&p, 1, 0) == 1) ++woken;
        std::deque<Frame> frames;
        drained.push_back(lane.drain(frames));
        for (auto& f : frames) {
            uint64_t id = std::get<PublishFrame>(f).id;
            if (last && id != last + 1) ordered = false;
            last = id;
        }
    });
    for (size_t i = 0; i < kBatches; ++i)
        REQUIRE(ch.publish_batch(batch_of(kSize, std::to_string(i))).ok());
    CHECK(releases == kBatches);
    CHECK(woken == kBatches);
    CHECK(drained == std::vector<size_t>(kBatches, kSize));
    CHECK(ordered);
    CHECK(last == ch.last_id());
}

TEST_CASE("bus batch: a loop draining meanwhile sees whole batches, woken at most once each",
          "[bus][batch]") {
    constexpr size_t kBatches = 300, kSize = 50;
    BusChannel ch(BusOptions{.capacity = kBatches * kSize}, 2);
    std::atomic<bool> done{false};
    size_t wakes = 0, seen = 0, partial = 0;
    uint64_t last = 0;
    bool ordered = true;
    // Loop 1's part: woken by its lane's fd, it drains what is there.
    std::thread loop([&] {
        Bus& lane = ch.lane(1);
        for (int idle = 0; idle < 200 && seen < kBatches * kSize;) {
            pollfd p{lane.fd(), POLLIN, 0};
            if (::poll(&p, 1, 10) <= 0) {
                if (done.load()) ++idle;
                continue;
            }
            ++wakes;
            std::deque<Frame> frames;
            size_t n = lane.drain(frames);
            if (n % kSize != 0) ++partial;
            for (auto& f : frames) {
                uint64_t id = std::get<PublishFrame>(f).id;
                if (id != last + 1) ordered = false;
                last = id;
            }
            seen += n;
        }
    });
    for (size_t i = 0; i < kBatches; ++i)
        REQUIRE(ch.publish_batch(batch_of(kSize, std::to_string(i))).ok());
    done.store(true);
    loop.join();
    CHECK(seen == kBatches * kSize);
    CHECK(ordered);
    CHECK(partial == 0);
    CHECK(wakes <= kBatches);
}
