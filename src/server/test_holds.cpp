// The hold table without sockets: a sink that records what each slot is sent
// and whose backlog the test sets, and a clock the test moves.
#include <catch2/catch.hpp>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>

#include "http/json.hpp"
#include "server/codec.hpp"
#include "server/holds.hpp"

using namespace m0;
using namespace m0::server;

namespace {

uint64_t key(SlotRef s) { return (uint64_t(s.index) << 32) | s.gen; }

struct FakeSink : HoldSink {
    HoldTable* table = nullptr;
    std::map<uint64_t, std::string> sent;  // what each slot was sent
    std::map<uint64_t, size_t> unread;     // bytes each slot has not taken
    std::map<uint64_t, bool> closing;      // ending after its output drains
    bool reader_reads = true;              // false: every byte stays in the backlog
    std::set<uint64_t> stuck;              // slots whose every byte stays in the backlog
    bool keep = false;                     // keep each shared event, as an output does
    std::map<uint64_t, std::vector<SharedBytes>> kept;

    // Called after each write (the test may release holds in it, as the
    // server does when a write fails an HTTP/2 connection with many streams).
    std::function<void(SlotRef)> after_write;
    std::set<uint64_t> released;      // slots the test released
    size_t writes_after_release = 0;  // writes to a released slot: never

    size_t write(SlotRef s, std::string_view bytes) override {
        if (released.count(key(s))) ++writes_after_release;
        sent[key(s)] += bytes;
        if (!reader_reads || stuck.count(key(s))) unread[key(s)] += bytes.size();
        const size_t left = unread[key(s)];
        if (after_write) after_write(s);
        return left;
    }
    size_t write_shared(SlotRef s, const SharedBytes& bytes) override {
        if (keep) kept[key(s)].push_back(bytes);
        return write(s, *bytes);
    }
    size_t backlog(SlotRef s) const override {
        auto it = unread.find(key(s));
        return it == unread.end() ? 0 : it->second;
    }
    void close_after_write(SlotRef s) override { closing[key(s)] = true; }
    // Long-polls: the id each slot was answered with (0: its own answer);
    // the hold is released, as the server does.
    std::map<uint64_t, uint64_t> answered;
    void answer(SlotRef s, const bus::PublishFrame* event) override {
        answered[key(s)] = event ? event->id : 0;
        if (table) table->release(s);
    }
};

struct Table {
    Metrics metrics;
    FakeSink sink;
    HoldTable table;
    explicit Table(HoldConfig cfg = {}) : table(sink, cfg, metrics) { sink.table = &table; }
    // A hold as the server makes one: the pool counted it, the h frame opened
    // it, the head was written.
    void hold(SlotRef s, std::vector<std::string> channels, uint64_t cursor = 0) {
        metrics.holds_open.reserve();
        table.open(s, cursor, std::move(channels));
        REQUIRE(table.start(s, 0));
    }
    bus::PublishFrame event(uint64_t id, std::string channel, std::string data) {
        return bus::PublishFrame{id, std::move(channel), "", std::move(data)};
    }
};

const SlotRef kA{1, 1}, kB{2, 1}, kC{3, 1};

}  // namespace

TEST_CASE("holds: an event reaches every hold on its channel and no other", "[holds]") {
    Table t;
    t.hold(kA, {"x"});
    t.hold(kB, {"x", "y"});
    t.hold(kC, {"y"});
    t.table.publish(t.event(1, "x", "one"), 0);
    CHECK(t.sink.sent[key(kA)] == "id: 1\ndata: one\n\n");
    CHECK(t.sink.sent[key(kB)] == "id: 1\ndata: one\n\n");
    CHECK(t.sink.sent[key(kC)].empty());
    CHECK(t.metrics.events_delivered.load() == 2);
}

TEST_CASE("holds: ids at or below a hold's cursor are muted", "[holds]") {
    Table t;
    t.hold(kA, {"x"}, 2);
    for (uint64_t id = 1; id <= 4; ++id) t.table.publish(t.event(id, "x", "e"), 0);
    CHECK(t.sink.sent[key(kA)] == "id: 3\ndata: e\n\nid: 4\ndata: e\n\n");
    CHECK(t.metrics.events_muted.load() == 2);
}

TEST_CASE("holds: events that arrive before the head wait behind it, in order", "[holds]") {
    Table t;
    t.metrics.holds_open.reserve();
    t.table.open(kA, 0, {"x"});
    t.table.publish(t.event(1, "x", "early"), 0);
    t.table.publish(t.event(2, "x", "later"), 0);
    CHECK(t.sink.sent[key(kA)].empty());  // nothing before the head
    REQUIRE(t.table.start(kA, 0));
    CHECK(t.sink.sent[key(kA)] == "id: 1\ndata: early\n\nid: 2\ndata: later\n\n");
}

TEST_CASE("holds: holds released by a write while an event fans out hear nothing more of it",
          "[holds]") {
    // The channel's list points at each hold's record: one released in the
    // middle of the fan-out (its HTTP/2 connection failed on a neighbour's
    // write) must be skipped, its record kept until the fan-out ends.
    Table t;
    const std::vector<SlotRef> slots{kA, kB, kC, {4, 1}, {5, 1}};
    for (SlotRef s : slots) t.hold(s, {"x"});
    std::optional<SlotRef> first;
    t.sink.after_write = [&](SlotRef written) {
        if (first) return;
        first = written;
        for (SlotRef s : slots) {
            if (s == written) continue;
            t.sink.released.insert(key(s));
            t.table.release(s);
        }
    };
    t.table.publish(t.event(1, "x", "e"), 0);
    REQUIRE(first);
    CHECK(t.sink.writes_after_release == 0);
    CHECK(t.metrics.events_delivered.load() == 1);
    CHECK(t.table.size() == 1);
    CHECK(t.table.subscriptions().subscribers("x").size() == 1);
    CHECK(t.metrics.holds_open.load() == 1);
    for (SlotRef s : slots) CHECK(t.table.has(s) == (s == *first));
    t.sink.after_write = nullptr;
    t.table.publish(t.event(2, "x", "f"), 0);
    CHECK(t.sink.writes_after_release == 0);
    CHECK(t.sink.sent[key(*first)] == "id: 1\ndata: e\n\nid: 2\ndata: f\n\n");
    t.table.release(*first);
    CHECK(t.table.size() == 0);
    CHECK(t.table.subscriptions().members() == 0);
}

TEST_CASE("holds: a released slot hears nothing and is no longer counted", "[holds]") {
    Table t;
    t.hold(kA, {"x"});
    t.table.release(kA);
    t.table.publish(t.event(1, "x", "e"), 0);
    CHECK(t.sink.sent[key(kA)].empty());
    CHECK_FALSE(t.table.has(kA));
    CHECK(t.table.subscriptions().subscribers("x").empty());
    CHECK(t.metrics.holds_open.load() == 0);
    SECTION("a later generation of the same index is another hold") {
        t.hold(SlotRef{kA.index, kA.gen + 1}, {"x"});
        CHECK_FALSE(t.table.has(kA));
    }
}

TEST_CASE("holds: the heartbeat goes only to holds idle since the last tick", "[holds]") {
    Table t;
    t.hold(kA, {"x"});
    t.hold(kB, {"y"});
    t.table.publish(t.event(1, "x", "e"), 0);
    t.table.heartbeat(1);
    CHECK(t.sink.sent[key(kA)] == "id: 1\ndata: e\n\n");
    CHECK(t.sink.sent[key(kB)] == ":\n\n");
    t.table.heartbeat(2);
    CHECK(t.sink.sent[key(kA)] == "id: 1\ndata: e\n\n:\n\n");
}

TEST_CASE(
    "holds: a reader is slow when its backlog stays over the limit, not when it passes it once",
    "[holds][limits]") {
    HoldConfig cfg;
    cfg.buffer_limit = 100;
    cfg.drain_timeout = 5;
    Table t(cfg);
    t.hold(kA, {"x"});
    t.sink.reader_reads = false;
    const std::string big(60, 'b');
    t.table.publish(t.event(1, "x", big), 10);
    t.table.publish(t.event(2, "x", big), 10);  // over the limit, under twice it
    CHECK(t.table.holding() == std::vector<SlotRef>{kA});
    SECTION("it drains in time: not slow") {
        t.sink.unread[key(kA)] = 0;
        t.table.drained(kA, 0, 20);
        t.table.publish(t.event(3, "x", big), 20);
        t.table.publish(t.event(4, "x", big), 20);
        CHECK(t.table.holding() == std::vector<SlotRef>{kA});
        CHECK(t.metrics.slow_readers_closed.load() == 0);
    }
    SECTION("it stays over past the drain timeout: closed at the next write") {
        t.table.heartbeat(11);  // it wrote since the last tick: no heartbeat yet
        t.table.heartbeat(14.9);
        CHECK(t.table.holding() == std::vector<SlotRef>{kA});
        t.table.heartbeat(15.1);
        // Dropped: a retry hint (it comes back with its Last-Event-ID), then the end.
        CHECK(t.table.holding().empty());
        CHECK(t.sink.closing[key(kA)]);
        CHECK(t.sink.sent[key(kA)].ends_with(":\n\nretry: 1000\n\n"));
        CHECK(t.metrics.slow_readers_closed.load() == 1);
    }
    SECTION("it passes twice the limit: closed at once") {
        t.table.publish(t.event(3, "x", big), 10);
        t.table.publish(t.event(4, "x", big), 10);
        CHECK(t.table.holding().empty());
        CHECK(t.sink.closing[key(kA)]);
        CHECK(t.metrics.slow_readers_closed.load() == 1);
    }
}

TEST_CASE("holds: a dropped hold gets a retry hint, then nothing, and ends after it drains",
          "[holds]") {
    Table t;
    t.hold(kA, {"x"});
    t.hold(kB, {"x"});
    REQUIRE(t.table.drop(kA, 2500));
    CHECK(t.sink.sent[key(kA)] == "retry: 2500\n\n");
    CHECK(t.sink.closing[key(kA)]);
    CHECK_FALSE(t.table.drop(kA, 2500));  // once
    t.table.publish(t.event(1, "x", "e"), 0);
    CHECK(t.sink.sent[key(kA)] == "retry: 2500\n\n");
    CHECK(t.sink.sent[key(kB)] == "id: 1\ndata: e\n\n");
    CHECK(t.table.holding("x") == std::vector<SlotRef>{kB});
    t.table.heartbeat(1);
    CHECK(t.sink.sent[key(kA)] == "retry: 2500\n\n");
}

TEST_CASE("holds: an event fans out to fifty holds on one channel", "[holds]") {
    Table t;
    for (uint32_t i = 1; i <= 50; ++i) t.hold(SlotRef{i, 1}, {"x"});
    t.table.publish(t.event(7, "x", "fan"), 0);
    for (uint32_t i = 1; i <= 50; ++i)
        CHECK(t.sink.sent[key(SlotRef{i, 1})] == "id: 7\ndata: fan\n\n");
    CHECK(t.metrics.events_delivered.load() == 50);
}

TEST_CASE("holds: a replay larger than the limit is paced to the reader, not taken for slowness",
          "[holds][history][limits]") {
    HoldConfig cfg;
    cfg.buffer_limit = 100;
    cfg.drain_timeout = 5;
    Table t(cfg);
    bus::Replay replay;
    for (uint64_t id = 1; id <= 10; ++id)
        replay.events.push_back(bus::PublishFrame{id, "x", "", std::string(50, 'r')});
    t.metrics.holds_open.reserve();
    t.table.open(kA, 0, {"x"}, replay);
    t.sink.reader_reads = false;
    REQUIRE(t.table.start(kA, 0));
    // Written while the backlog was under the limit: two events (62 bytes each).
    CHECK(t.sink.sent[key(kA)].find("id: 2\n") != std::string::npos);
    CHECK(t.sink.sent[key(kA)].find("id: 3\n") == std::string::npos);
    // A live event waits behind the replay.
    t.table.publish(t.event(11, "x", "live"), 1);
    CHECK(t.sink.sent[key(kA)].find("id: 11\n") == std::string::npos);
    // The reader takes what it has, again and again: the rest follows, in order.
    for (int i = 0; i < 10; ++i) {
        t.sink.unread[key(kA)] = 0;
        t.table.drained(kA, 0, 2 + i * 0.1);
    }
    const std::string& got = t.sink.sent[key(kA)];
    size_t at = 0;
    for (uint64_t id = 1; id <= 11; ++id) {
        size_t next = got.find("id: " + std::to_string(id) + "\n", at);
        REQUIRE(next != std::string::npos);
        at = next;
    }
    CHECK(t.table.holding() == std::vector<SlotRef>{kA});
    CHECK(t.metrics.slow_readers_closed.load() == 0);
    SECTION("a catch-up that stalls past the drain timeout is a slow reader") {
        for (uint64_t id = 12; id <= 20; ++id) t.table.publish(t.event(id, "x", "more"), 3);
        t.table.heartbeat(9);
        CHECK(t.table.holding().empty());
        CHECK(t.metrics.slow_readers_closed.load() == 1);
    }
}

TEST_CASE("holds: a raw event (Pushpin content) is written as it is, live and in replay",
          "[holds][grip]") {
    Table t;
    auto raw = t.event(5, "x", "event: m\ndata: 1\n\n");
    raw.raw = true;
    t.hold(kA, {"x"});
    t.table.publish(raw, 0);
    CHECK(t.sink.sent[key(kA)] == "event: m\ndata: 1\n\n");
    SECTION("a replay sends the raw content again, in id order with the others") {
        bus::Replay replay;
        replay.events = {t.event(4, "x", "four"), raw};
        t.metrics.holds_open.reserve();
        t.table.open(kB, 3, {"x"}, replay);
        REQUIRE(t.table.start(kB, 0));
        CHECK(t.sink.sent[key(kB)] == "id: 4\ndata: four\n\nevent: m\ndata: 1\n\n");
    }
}

TEST_CASE("holds: a hold's own keep-alive (Grip-Keep-Alive) is written after its idle interval",
          "[holds][grip]") {
    Table t;
    t.metrics.holds_open.reserve();
    t.metrics.holds_open.reserve();
    t.table.open(kA, 0, {"x"}, {}, 0, bus::KeepAlive{"ka\n", 5});
    REQUIRE(t.table.start(kA, 100));
    t.table.open(kB, 0, {"x"}, {}, 0, bus::KeepAlive{": custom\n\n", 0});
    REQUIRE(t.table.start(kB, 100));
    t.table.keepalive(104);
    CHECK(t.sink.sent[key(kA)].empty());
    t.table.heartbeat(104);  // the --heartbeat tick leaves A to its own interval
    CHECK(t.sink.sent[key(kA)].empty());
    CHECK(t.sink.sent[key(kB)] == ": custom\n\n");  // B: its bytes, on the usual tick
    t.table.keepalive(105);
    CHECK(t.sink.sent[key(kA)] == "ka\n");
    t.table.publish(t.event(1, "x", "e"), 108);  // an event counts as activity
    t.table.keepalive(112);
    CHECK(t.sink.sent[key(kA)] == "ka\nid: 1\ndata: e\n\n");
    t.table.keepalive(113);
    CHECK(t.sink.sent[key(kA)] == "ka\nid: 1\ndata: e\n\nka\n");
    t.table.release(kA);
    t.table.keepalive(200);  // released: nothing more, nothing touched
    CHECK(t.sink.sent[key(kA)] == "ka\nid: 1\ndata: e\n\nka\n");
}

// A shared bus answers a hold's replay later (open_awaiting, replayed).
namespace {
bus::Replay replay_of(std::vector<bus::PublishFrame> events, uint64_t upto) {
    bus::Replay r;
    r.events = std::move(events);
    r.upto = upto;
    return r;
}
}  // namespace

TEST_CASE(
    "holds: a hold awaiting its replay writes nothing before it, then the replay, then the live "
    "events above its upto, each once",
    "[holds]") {
    Table t;
    t.metrics.holds_open.reserve();
    t.table.open_awaiting(kA, 10, {"x"});
    REQUIRE(t.table.start(kA, 0));
    t.table.publish(t.event(12, "x", "live and replayed"), 0);
    t.table.publish(t.event(14, "x", "live only"), 0);
    t.table.heartbeat(0);
    CHECK(t.sink.sent[key(kA)] == ":\n\n");  // only a heartbeat: the events wait
    REQUIRE(t.table.replayed(
        kA, replay_of({t.event(11, "x", "replayed"), t.event(12, "x", "live and replayed")}, 13), 0,
        0));
    t.table.publish(t.event(13, "x", "a late live copy of the replay's"), 0);
    t.table.publish(t.event(15, "x", "after"), 0);
    CHECK(t.sink.sent[key(kA)] ==
          ":\n\nid: 11\ndata: replayed\n\nid: 12\ndata: live and replayed\n\n"
          "id: 14\ndata: live only\n\nid: 15\ndata: after\n\n");
    CHECK(t.metrics.events_muted.load() == 2);  // 12 that waited, 13 that came late
    // A second answer (a stale one) changes nothing.
    CHECK(t.table.replayed(kA, replay_of({t.event(11, "x", "again")}, 13), 0, 0));
    CHECK(t.sink.sent[key(kA)].find("again") == std::string::npos);
}

TEST_CASE(
    "holds: a resync replays from the last id the hold queued, after an m0-reset when the bus lost "
    "events",
    "[holds]") {
    Table t;
    t.hold(kA, {"x", "y"});
    t.table.publish(t.event(5, "x", "before"), 0);
    uint64_t after = 0;
    std::vector<std::string> channels;
    REQUIRE(t.table.begin_resync(kA, after, channels));
    CHECK(after == 5);
    CHECK(channels == std::vector<std::string>{"x", "y"});
    t.table.publish(t.event(9, "y", "live, newer than the replay"), 0);
    REQUIRE(t.table.replayed(kA, replay_of({t.event(7, "y", "missed")}, 8), 7, 0));
    CHECK(t.sink.sent[key(kA)] ==
          "id: 5\ndata: before\n\n"
          "event: m0-reset\ndata: {\"oldest\": 7}\n\n"
          "id: 7\ndata: missed\n\nid: 9\ndata: live, newer than the replay\n\n");
    CHECK(t.metrics.resets_sent.load() == 1);
    CHECK_FALSE(t.table.begin_resync(SlotRef{9, 9}, after, channels));
}

// ---- fan-out: one encoding, shared --------------------------------------------

TEST_CASE("holds: an event is encoded once and shared by every hold, never copied",
          "[holds][fanout]") {
    Table t;
    t.sink.keep = true;
    constexpr int kHolds = 8;
    std::vector<SlotRef> slots;
    for (int i = 0; i < kHolds; ++i) slots.push_back(SlotRef{uint32_t(10 + i), 1});

    SECTION("written at once: every output gets the same bytes") {
        for (SlotRef s : slots) t.hold(s, {"x"});
        t.table.publish(t.event(7, "x", "shared"), 0);
        const SharedBytes& first = t.sink.kept[key(slots[0])].at(0);
        CHECK(*first == "id: 7\ndata: shared\n\n");
        for (SlotRef s : slots) {
            REQUIRE(t.sink.kept[key(s)].size() == 1);
            CHECK(t.sink.kept[key(s)][0].get() == first.get());
        }
        // The outputs hold every reference; the table kept none.
        CHECK(first.use_count() == kHolds);
        std::weak_ptr<const std::string> gone = first;
        t.sink.kept.clear();  // every socket took them
        CHECK(gone.expired());
    }
    SECTION("pending behind the head: every queue holds the same bytes, released with the hold") {
        for (SlotRef s : slots) {
            t.metrics.holds_open.reserve();
            t.table.open(s, 0, {"x"});
        }
        t.table.publish(t.event(7, "x", "shared"), 0);
        CHECK(t.sink.kept.empty());  // no head yet: nothing written
        // Half the holds start (their pending event is written), half close unstarted.
        for (int i = 0; i < kHolds; ++i) {
            if (i % 2 == 0)
                REQUIRE(t.table.start(slots[i], 0));
            else
                t.table.release(slots[i]);
        }
        const SharedBytes& first = t.sink.kept[key(slots[0])].at(0);
        for (int i = 0; i < kHolds; i += 2)
            CHECK(t.sink.kept[key(slots[i])].at(0).get() == first.get());
        // Only the outputs' references are left: the released queues let theirs go.
        CHECK(first.use_count() == kHolds / 2);
        std::weak_ptr<const std::string> gone = first;
        t.sink.kept.clear();
        CHECK(gone.expired());
    }
}

TEST_CASE(
    "holds: a replayed event is written from the bytes its frame carries, shared by every hold",
    "[holds][fanout]") {
    Table t;
    t.sink.keep = true;
    bus::PublishFrame f = t.event(7, "x", "again");
    server::encode(f);
    const auto& wire = server::form(f, server::Form::sse);
    bus::Replay r;
    r.events = {f};
    r.upto = 7;
    for (SlotRef s : {kA, kB, kC}) {
        t.metrics.holds_open.reserve();
        t.table.open(s, 3, {"x"}, r);
        REQUIRE(t.table.start(s, 0));
        REQUIRE(t.sink.kept[key(s)].size() == 1);
        CHECK(t.sink.kept[key(s)][0].get() == wire.get());
    }
    CHECK(*wire == "id: 7\ndata: again\n\n");
    // A frame from a shared bus carries none: the table encodes it.
    bus::Replay bare;
    bare.events = {t.event(8, "x", "late")};
    bare.upto = 8;
    SlotRef d{4, 1};
    t.metrics.holds_open.reserve();
    t.table.open(d, 7, {"x"}, bare);
    REQUIRE(t.table.start(d, 0));
    CHECK(t.sink.sent[key(d)] == "id: 8\ndata: late\n\n");
}

TEST_CASE("holds: slow readers dropped in the middle of a publish leave the others their event",
          "[holds][fanout][limits]") {
    HoldConfig cfg;
    cfg.buffer_limit = 16;
    Table t(cfg);
    const SlotRef slots[] = {{1, 1}, {2, 1}, {3, 1}, {4, 1}, {5, 1}};
    for (SlotRef s : slots) t.hold(s, {"x"});
    t.sink.stuck = {key(slots[1]), key(slots[3])};
    // 2 x the limit at once: the stuck readers are dropped as the event reaches them.
    t.table.publish(t.event(1, "x", std::string(40, 'e')), 0);
    for (SlotRef s : slots) CHECK(t.sink.sent[key(s)].rfind("id: 1\n", 0) == 0);
    CHECK(t.metrics.slow_readers_closed.load() == 2);
    CHECK_FALSE(t.table.subscribed(slots[1]));
    CHECK_FALSE(t.table.subscribed(slots[3]));
    CHECK(t.table.holding("x").size() == 3);
    // The next event reaches the three left, and only them.
    t.table.publish(t.event(2, "x", "next"), 0);
    for (SlotRef s : {slots[0], slots[2], slots[4]})
        CHECK(t.sink.sent[key(s)].find("id: 2\n") != std::string::npos);
    for (SlotRef s : {slots[1], slots[3]})
        CHECK(t.sink.sent[key(s)].find("id: 2\n") == std::string::npos);
}

// ---- long-polls (Transport::response) ---------------------------------------

namespace {

void poll(Table& t, SlotRef s, std::vector<std::string> channels, uint64_t cursor = 0,
          const bus::Replay& replay = {}) {
    t.metrics.holds_open.reserve();
    t.table.open(s, cursor, std::move(channels), replay, 0, {}, Transport::response);
}

bus::PublishFrame response_item(uint64_t id, std::string channel,
                                std::optional<std::string> stream) {
    http::ResponseItem item;
    item.code = 201;
    item.body = "made";
    item.stream = std::move(stream);
    return bus::PublishFrame{id, std::move(channel), bus::kResponseFormat,
                             http::encode_response_item(item), true};
}

}  // namespace

TEST_CASE("holds: a long-poll is answered by its first event, once, and then released",
          "[holds][poll]") {
    Table t;
    poll(t, kA, {"x"});
    t.hold(kB, {"x"});
    SECTION("an event after its head answers it at once") {
        REQUIRE(t.table.start(kA, 0));
        CHECK(t.sink.answered.empty());
        t.table.publish(t.event(1, "x", "one"), 0);
        CHECK(t.sink.answered[key(kA)] == 1);
    }
    SECTION("events before its head wait; the first answers it when the head may go") {
        t.table.publish(t.event(1, "x", "one"), 0);
        t.table.publish(t.event(2, "x", "two"), 0);
        CHECK(t.sink.answered.empty());
        REQUIRE(t.table.start(kA, 0));
        CHECK(t.sink.answered[key(kA)] == 1);
    }
    t.table.publish(t.event(3, "x", "three"), 0);
    CHECK(t.sink.answered.size() == 1);  // answered once
    CHECK_FALSE(t.table.has(kA));
    CHECK(t.table.subscriptions().subscribers("x").size() == 1);  // the stream's only
    CHECK(t.sink.sent[key(kA)].empty());                          // no bytes, no heartbeat
    t.table.heartbeat(100);
    CHECK(t.sink.sent[key(kA)].empty());
    CHECK(t.metrics.holds_open.load() == 1);
}

TEST_CASE("holds: a long-poll's cursor mutes older ids; its replay's first event answers it",
          "[holds][poll]") {
    Table t;
    SECTION("live: ids at or below the cursor are muted") {
        poll(t, kA, {"x"}, 5);
        REQUIRE(t.table.start(kA, 0));
        t.table.publish(t.event(4, "x", "old"), 0);
        t.table.publish(t.event(5, "x", "old"), 0);
        CHECK(t.sink.answered.empty());
        t.table.publish(t.event(6, "x", "new"), 0);
        CHECK(t.sink.answered[key(kA)] == 6);
    }
    SECTION("replayed: the lowest id above the cursor, ahead of a live event") {
        t.metrics.holds_open.reserve();
        t.table.open_awaiting(kA, 5, {"x"}, {}, Transport::response);
        t.table.publish(t.event(9, "x", "live"), 0);  // came while the replay was read
        REQUIRE(t.table.start(kA, 0));
        CHECK(t.sink.answered.empty());  // the replay comes first
        bus::Replay r;
        r.events = {t.event(5, "x", "seen"), t.event(7, "x", "missed"), t.event(8, "x", "m")};
        r.upto = 8;
        REQUIRE(t.table.replayed(kA, r, 0, 0));
        CHECK(t.sink.answered[key(kA)] == 7);
    }
    SECTION("an empty replay leaves the live event") {
        t.metrics.holds_open.reserve();
        t.table.open_awaiting(kA, 5, {"x"}, {}, Transport::response);
        t.table.publish(t.event(9, "x", "live"), 0);
        REQUIRE(t.table.start(kA, 0));
        REQUIRE(t.table.replayed(kA, bus::Replay{.upto = 8}, 0, 0));
        CHECK(t.sink.answered[key(kA)] == 9);
    }
}

TEST_CASE("holds: Pushpin's formats reach their own transports", "[holds][poll]") {
    Table t;
    poll(t, kA, {"x"});
    REQUIRE(t.table.start(kA, 0));
    t.hold(kB, {"x"});
    // http-stream content is a stream's only.
    bus::PublishFrame content{1, "x", "", "<p>raw</p>", true};
    t.table.publish(content, 0);
    CHECK(t.sink.sent[key(kB)] == "<p>raw</p>");
    CHECK(t.sink.answered.empty());
    SECTION("an http-response item without http-stream content is the long-poll's only") {
        t.table.publish(response_item(2, "x", std::nullopt), 0);
        CHECK(t.sink.answered[key(kA)] == 2);
        CHECK(t.sink.sent[key(kB)] == "<p>raw</p>");
    }
    SECTION("an item with both: each transport is written its own") {
        t.table.publish(response_item(2, "x", "<p>both</p>"), 0);
        CHECK(t.sink.answered[key(kA)] == 2);
        CHECK(t.sink.sent[key(kB)] == "<p>raw</p><p>both</p>");
    }
}

TEST_CASE("holds: a dropped long-poll is answered with the handler's own answer", "[holds][poll]") {
    Table t;
    poll(t, kA, {"x"});
    CHECK_FALSE(t.table.drop(kA, 1000));  // not started: nothing to drop yet
    REQUIRE(t.table.start(kA, 0));
    CHECK(t.table.holding("x") == std::vector<SlotRef>{kA});
    REQUIRE(t.table.drop(kA, 1000));
    CHECK(t.sink.answered[key(kA)] == 0);
    CHECK(t.sink.sent[key(kA)].empty());  // no retry hint: a long-poll has no stream
    CHECK_FALSE(t.table.has(kA));
    CHECK(t.metrics.holds_open.load() == 0);
}

TEST_CASE("long-poll answer: the handler's answer with the event in it", "[holds][poll]") {
    http::Response held;
    held.status = 204;
    held.headers.add("Content-Type", "text/plain");
    held.headers.add("Content-Length", "0");
    held.headers.add("X-App", "kept");
    const Subscriber& sub = subscriber(Transport::response);
    SECTION("an m0 event: its data, 200 for a bodiless status, its id and name") {
        bus::PublishFrame f{42, "x", "tick", "line 1\r\nline 2"};
        http::Response r = sub.answer(held, f);
        CHECK(r.status == 200);
        CHECK(r.body == "line 1\nline 2");  // as an EventSource client reads it
        // From history an event is only its forms: the same answer.
        bus::PublishFrame kept{42, "x", "", ""};
        bus::PublishFrame coded = f;
        server::encode(coded);
        kept.forms = coded.forms;
        http::Response again = sub.answer(held, kept);
        CHECK(again.body == r.body);
        CHECK(again.headers.get("M0-Event") == "tick");
        CHECK(r.headers.get("M0-Event-Id") == "42");
        CHECK(r.headers.get("M0-Event") == "tick");
        CHECK(r.headers.get("X-App") == "kept");
        CHECK_FALSE(r.headers.has("Content-Length"));
        held.status = 202;
        CHECK(sub.answer(held, f).status == 202);
    }
    SECTION("an http-response item: its code, its headers over the handler's, its body") {
        http::ResponseItem item;
        item.code = 409;
        item.headers = {{"content-type", "application/json"}, {"X-New", "1"}};
        item.body = std::string("{\"a\":\0}", 7);
        bus::PublishFrame f{7, "x", bus::kResponseFormat, http::encode_response_item(item), true};
        http::Response r = sub.answer(held, f);
        CHECK(r.status == 409);
        CHECK(r.body == item.body);
        CHECK(r.headers.get("Content-Type") == "application/json");
        CHECK(r.headers.get("X-New") == "1");
        CHECK(r.headers.get("X-App") == "kept");
        CHECK(r.headers.get("M0-Event-Id") == "7");
        CHECK_FALSE(r.headers.has("M0-Event"));
    }
}

TEST_CASE(
    "holds: with permessage-deflate an event is compressed once and the same bytes go to "
    "every such WebSocket",
    "[holds]") {
    Table t;
    t.sink.keep = true;
    const std::pair<SlotRef, Transport> holds[] = {{kA, Transport::websocket_deflate},
                                                   {kB, Transport::websocket_deflate},
                                                   {kC, Transport::websocket}};
    for (auto [s, transport] : holds) {
        t.metrics.holds_open.reserve();
        t.table.open(s, 0, {"x"}, {}, 0, {}, transport);
        REQUIRE(t.table.start(s, 0));
    }
    t.table.publish(t.event(7, "x", std::string(1000, 'z')), 0);
    const SharedBytes& a = t.sink.kept[key(kA)].at(0);
    CHECK(t.sink.kept[key(kB)].at(0).get() == a.get());  // one compression, shared
    CHECK((uint8_t((*a)[0]) & 0x40) != 0);               // RSV1: compressed
    CHECK(a->size() < 100);
    const SharedBytes& c = t.sink.kept[key(kC)].at(0);
    CHECK((uint8_t((*c)[0]) & 0x40) == 0);
    CHECK(c->size() > 1000);
}
