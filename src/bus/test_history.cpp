// History and replay: the bounds, the merge across channels, the gap marks;
// and the in-process bus that keeps it (ids from a start, frames stamped
// with what was queued before them).
#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "bus/channel.hpp"
#include "bus/history.hpp"
#include "server/codec.hpp"

using namespace m0;
using namespace m0::bus;

namespace {

PublishFrame ev(uint64_t id, std::string channel, std::string data = "x") {
    return PublishFrame{id, std::move(channel), "", std::move(data)};
}

std::vector<uint64_t> ids(const Replay& r) {
    std::vector<uint64_t> out;
    for (const auto& f : r.events) out.push_back(f.id);
    return out;
}

}  // namespace

TEST_CASE("history: replay merges a hold's channels in id order, after its start, up to its stamp",
          "[bus][history]") {
    History h;
    h.append(ev(1, "a"), 0);
    h.append(ev(2, "b"), 0);
    h.append(ev(3, "c"), 0);
    h.append(ev(4, "a"), 0);
    h.append(ev(5, "b"), 0);
    h.append(ev(6, "a"), 0);
    auto r = h.replay({"b", "a"}, 1, 5, 0);
    CHECK(ids(r) == std::vector<uint64_t>{2, 4, 5});  // not 1 (the start), not 6 (past the stamp)
    CHECK_FALSE(r.gap);
    CHECK(r.oldest == 1);
    SECTION("a channel named twice is replayed once") {
        CHECK(ids(h.replay({"a", "a"}, 0, 10, 0)) == std::vector<uint64_t>{1, 4, 6});
    }
    SECTION("an unknown channel has nothing and no gap") {
        auto u = h.replay({"zzz"}, 0, 10, 0);
        CHECK(u.events.empty());
        CHECK_FALSE(u.gap);
    }
    CHECK(h.events() == 6);
}

TEST_CASE("history: past the per-channel bound the oldest go, and a cursor before them is a gap",
          "[bus][history]") {
    History h(HistoryLimits{.per_channel = 3});
    for (uint64_t id = 1; id <= 5; ++id) h.append(ev(id, "a"), 0);
    h.append(ev(6, "b"), 0);
    CHECK(h.events() == 4);
    CHECK(h.evictions() == 2);
    auto r = h.replay({"a"}, 1, 6, 0);
    CHECK(ids(r) == std::vector<uint64_t>{3, 4, 5});
    CHECK(r.gap);  // 2 is gone
    CHECK(r.oldest == 3);
    CHECK_FALSE(h.replay({"a"}, 2, 6, 0).gap);  // everything after 2 is kept
    CHECK_FALSE(h.replay({"b"}, 0, 6, 0).gap);  // b lost nothing
}

TEST_CASE("history: the byte bound evicts the oldest event anywhere", "[bus][history]") {
    History probe;
    probe.append(ev(1, "a", std::string(1000, 'x')), 0);
    const size_t one = probe.bytes();
    History h(HistoryLimits{.max_bytes = 3 * one});
    h.append(ev(1, "a", std::string(1000, 'x')), 0);
    h.append(ev(2, "b", std::string(1000, 'x')), 0);
    h.append(ev(3, "a", std::string(1000, 'x')), 0);
    CHECK(h.events() == 3);
    h.append(ev(4, "b", std::string(1000, 'x')), 0);
    CHECK(h.events() == 3);
    CHECK(h.bytes() <= 3 * one);
    CHECK(ids(h.replay({"a", "b"}, 0, 10, 0)) == std::vector<uint64_t>{2, 3, 4});
    CHECK(h.replay({"a"}, 0, 10, 0).gap);  // 1 was a's
    CHECK(h.replay({"b"}, 1, 10, 0).gap == false);
}

TEST_CASE("history: events older than the age bound are gone", "[bus][history]") {
    History h(HistoryLimits{.max_age = 10});
    h.append(ev(1, "a"), 0);
    h.append(ev(2, "a"), 5);
    auto r = h.replay({"a"}, 0, 10, 12);
    CHECK(ids(r) == std::vector<uint64_t>{2});
    CHECK(r.gap);
    CHECK(h.events() == 1);
}

TEST_CASE("history: a channel whose events are all gone still marks its gap", "[bus][history]") {
    History h(HistoryLimits{.per_channel = 1, .max_age = 10});
    h.append(ev(1, "a"), 0);
    h.append(ev(2, "b"), 20);  // a's only event expires
    CHECK(h.events() == 1);
    CHECK(h.replay({"a"}, 0, 10, 20).gap);
    CHECK_FALSE(h.replay({"a"}, 1, 10, 20).gap);
}

TEST_CASE("history: many evictions on one busy channel keep memory to what is kept",
          "[bus][history]") {
    History h(HistoryLimits{.per_channel = 4});
    h.append(ev(1, "quiet"), 0);
    for (uint64_t id = 2; id < 10000; ++id) h.append(ev(id, "busy"), 0);
    CHECK(h.events() == 5);
    CHECK(ids(h.replay({"quiet", "busy"}, 0, 10000, 0)) ==
          std::vector<uint64_t>{1, 9996, 9997, 9998, 9999});
}

TEST_CASE(
    "history: an event that comes with its forms is kept as those bytes, not its text "
    "twice; one without (from a shared bus) keeps its text",
    "[bus][history]") {
    const std::string data(1000, 'd');
    History h;
    PublishFrame f = ev(7, "a", data);
    f.event = "tick";
    server::encode(f);
    const size_t wire = f.forms[0]->size() + f.forms[1]->size();
    REQUIRE(f.forms[0]->size() > data.size());
    h.append(f, 0);
    // The channel's name, the entry and the forms: not the data again.
    CHECK(h.bytes() >= wire);
    CHECK(h.bytes() < wire + 200);
    auto r = h.replay({"a"}, 0, 7, 0);
    REQUIRE(r.events.size() == 1);
    CHECK(r.events[0].id == 7);
    CHECK(r.events[0].channel == "a");
    CHECK(r.events[0].forms == f.forms);  // the same bytes, not a copy
    CHECK(r.events[0].data.empty());
    CHECK(r.events[0].event.empty());

    History bare;
    bare.append(ev(8, "a", data), 0);
    CHECK(bare.bytes() > data.size());
    auto b = bare.replay({"a"}, 0, 8, 0);
    REQUIRE(b.events.size() == 1);
    CHECK(b.events[0].data == data);
    CHECK_FALSE(b.events[0].encoded());
}

TEST_CASE("history: with --history 0 nothing is kept", "[bus][history]") {
    History h(HistoryLimits{.per_channel = 0});
    h.append(ev(1, "a"), 0);
    CHECK(h.events() == 0);
    CHECK(h.replay({"a"}, 0, 1, 0).events.empty());
}

TEST_CASE("bus: ids start after first_id; the h frame is stamped with the last id queued before it",
          "[bus][history]") {
    BusChannel b(BusOptions{.first_id = 1000});
    CHECK(b.position() == 1000);
    CHECK(b.publish("a", "one").id == 1001);
    REQUIRE(b.send(HoldFrame{reserved_stream_url({0, 1}), 0, 1001, 0, {"a"}}));
    CHECK(b.publish("a", "two").id == 1002);
    std::deque<Frame> out;
    REQUIRE(b.drain(out) == 3);
    CHECK(std::get<HoldFrame>(out[1]).upto == 1001);
    SECTION("replay reads what history kept") {
        auto r = b.replay({"a"}, 1000, 1002);
        CHECK(ids(r) == std::vector<uint64_t>{1001, 1002});
        CHECK_FALSE(r.gap);
    }
    SECTION("a cursor from before this bus began (a restart) is a gap") {
        CHECK(b.replay({"a"}, 999, 1002).gap);
        CHECK(b.replay({"a"}, 1, 1002).gap);
        CHECK_FALSE(b.replay({"a"}, 1000, 1002).gap);
    }
}

TEST_CASE("bus: the clock seed grows with time and stays exact in JavaScript", "[bus][history]") {
    uint64_t a = clock_seed();
    CHECK(a > 1'600'000'000'000ull * 1000);  // after 2020
    CHECK(a < (1ull << 53));
    CHECK(clock_seed() >= a);
}

TEST_CASE("bus: with --history 0 a cursor behind the position is a gap, not silence",
          "[bus][history]") {
    BusChannel b(BusOptions{.history = {.per_channel = 0}});
    b.publish("a", "one");
    b.publish("a", "two");
    CHECK(b.replay({"a"}, 1, 2).gap);
    CHECK_FALSE(b.replay({"a"}, 2, 2).gap);
}
