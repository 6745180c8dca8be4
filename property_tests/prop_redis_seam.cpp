// Property: on the Redis bus, every hold receives every event published on
// its channels after its start exactly once, in id order, whatever the
// interleaving of publishes (from another process, at any step of a hold's
// start: before its SUBSCRIBE reaches Redis, after Redis answered it, while
// its replay read waits to be sent, after the replay), loop steps, holds
// opened at the position or at a cursor, and links cut mid-way (CLIENT KILL:
// the bus reconnects and resyncs every hold). Real redis-server (one for the
// run, a free port, stopped by PID), real RedisBus, real HoldTable.
#include <hiredis/hiredis.h>
#include <rapidcheck.h>

#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "bus/redis_bus.hpp"
#include "bus/test_redis_server.hpp"
#include "loop/log.hpp"
#include "server/holds.hpp"

using namespace m0;
using namespace m0::bus;
using namespace m0::server;

namespace {

testing::RedisServer* g_redis = nullptr;
int g_case = 0;  // channel names are per case: the cases share one Redis

struct Sink : HoldSink {
    std::map<uint32_t, std::string> sent;  // by slot index
    size_t write(SlotRef s, std::string_view bytes) override {
        sent[s.index] += bytes;
        return 0;
    }
    size_t backlog(SlotRef) const override { return 0; }
    void close_after_write(SlotRef) override {}
    // Only stream holds are opened here: a long-poll's answer is a defect.
    void answer(SlotRef, const bus::PublishFrame*) override {
        throw std::logic_error("a long-poll answered where only streams are held");
    }
};

enum class Kind { publish, hold, step, at_point, cut };

struct Action {
    Kind kind = Kind::step;
    int channel = 0;   // publish, at_point: 0..2
    int count = 1;     // publish, step, at_point
    int channels = 1;  // hold: a bitmask of the three channels, never 0
    int cursor = -1;   // hold: -1 starts at the position, else an index into what was published
    int point = 0;     // at_point: which RedisPoint
};

rc::Gen<Action> gen_action() {
    using namespace rc;
    return gen::apply(
        [](int k, int channel, int count, int channels, int cursor, int point) {
            Action a;
            a.kind = static_cast<Kind>(k);
            a.channel = channel;
            a.count = count;
            a.channels = channels;
            a.cursor = cursor;
            a.point = point;
            return a;
        },
        gen::weightedElement<int>({{4, 0}, {3, 1}, {4, 2}, {3, 3}, {1, 4}}), gen::inRange(0, 3),
        gen::inRange(1, 4), gen::inRange(1, 8), gen::inRange(-1, 6), gen::inRange(0, 4));
}

void run_case(const std::vector<Action>& plan) {
    ++g_case;
    const std::string names[3] = {"p" + std::to_string(g_case) + "a",
                                  "p" + std::to_string(g_case) + "b",
                                  "p" + std::to_string(g_case) + "c"};
    Loop loop, other_loop;
    RedisBus other(other_loop, testing::bus_options(*g_redis));
    RC_ASSERT(other.start(5));
    std::map<uint64_t, int> channel_of;  // every id published, its channel
    std::vector<uint64_t> published;
    auto publish = [&](int ch) {
        PublishResult r = other.publish(names[ch], "e");
        RC_ASSERT(r.ok());
        channel_of[r.id] = ch;
        published.push_back(r.id);
    };
    // Publishes armed for a step of a hold's start (at_point).
    std::multimap<int, int> armed;  // point -> channel
    RedisBusOptions o = testing::bus_options(*g_redis);
    o.hook = [&](RedisPoint p) {
        auto range = armed.equal_range(static_cast<int>(p));
        for (auto it = range.first; it != range.second; ++it) publish(it->second);
        armed.erase(range.first, range.second);
    };
    RedisBus bus(loop, o);
    Metrics metrics;
    Sink sink;
    HoldTable table(sink, {}, metrics);
    auto request = [&](SlotRef s, const std::vector<std::string>& chs, uint64_t after) {
        bus.replay_later(chs, after, kUptoUnknown, [&table, s](Replay r) {
            // No event is ever lost here (no trimming, no data loss): no reset.
            RC_ASSERT(!r.gap);
            table.replayed(s, r, 0, 0);
        });
    };
    bus.attach(
        {[&] {
             for (SlotRef s : table.open_slots()) {
                 uint64_t after = 0;
                 std::vector<std::string> chs;
                 if (table.begin_resync(s, after, chs)) request(s, chs, after);
             }
         },
         [&](const std::string& c) { return !table.subscriptions().subscribers(c).empty(); }});
    RC_ASSERT(bus.start(5));
    auto drain = [&] {
        std::deque<Frame> frames;
        bus.drain(frames);
        for (auto& f : frames)
            if (auto* p = std::get_if<PublishFrame>(&f)) table.publish(*p, 0);
    };
    struct Held {
        SlotRef slot;
        int channels;
        uint64_t start;
    };
    std::vector<Held> holds;
    redisContext* admin = redisConnect("127.0.0.1", g_redis->port());
    RC_ASSERT(admin && !admin->err);
    for (const Action& a : plan) {
        switch (a.kind) {
            case Kind::publish:
                for (int i = 0; i < a.count; ++i) publish(a.channel);
                break;
            case Kind::hold: {
                SlotRef s{static_cast<uint32_t>(holds.size() + 1), 1};
                std::vector<std::string> chs;
                for (int c = 0; c < 3; ++c)
                    if (a.channels & (1 << c)) chs.push_back(names[c]);
                uint64_t start = a.cursor >= 0 && static_cast<size_t>(a.cursor) < published.size()
                                     ? published[static_cast<size_t>(a.cursor)]
                                     : bus.position();
                holds.push_back({s, a.channels, start});
                metrics.holds_open.reserve();
                table.open_awaiting(s, start, chs);
                RC_ASSERT(table.start(s, 0));
                request(s, chs, start);
                break;
            }
            case Kind::step:
                for (int i = 0; i < a.count; ++i) loop.run_once();
                drain();
                break;
            case Kind::at_point:
                armed.emplace(a.point, a.channel);
                break;
            case Kind::cut:
                // The subscriber link goes: the bus drops both, reconnects, resyncs.
                freeReplyObject(redisCommand(admin, "CLIENT KILL TYPE pubsub"));
                break;
        }
    }
    redisFree(admin);
    armed.clear();
    for (int c = 0; c < 3; ++c) publish(c);  // the last event of each channel
    auto expected = [&](const Held& h) {
        std::vector<uint64_t> want;
        for (auto [id, ch] : channel_of)
            if (id > h.start && (h.channels & (1 << ch))) want.push_back(id);
        return want;
    };
    const bool settled = loop.run_until(
        [&] {
            drain();
            for (const Held& h : holds)
                if (testing::ids_in(sink.sent[h.slot.index]) != expected(h)) return false;
            return true;
        },
        std::chrono::milliseconds(5000));
    for (const Held& h : holds) {
        RC_LOG() << "hold " << h.slot.index << " on mask " << h.channels << " from " << h.start
                 << "\n";
        RC_ASSERT(testing::ids_in(sink.sent[h.slot.index]) == expected(h));
    }
    RC_ASSERT(settled);
}

}  // namespace

int main() {
    log::set_level(log::Level::error);  // every case connects; cut links warn
    testing::RedisServer redis;
    g_redis = &redis;
    bool ok = rc::check(
        "redis seam: each hold gets every event after its start once, in id order, however "
        "publishes, loop steps and cut links interleave with its start",
        [] {
            auto plan = *rc::gen::container<std::vector<Action>>(gen_action());
            run_case(plan);
        });
    return ok ? 0 : 1;
}
