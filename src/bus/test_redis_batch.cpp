// A batch's live messages on the Redis bus, against a real redis-server: one
// message a run of the batch on one channel, at most kMaxBatchedMessage bytes,
// read by another bus whole, in id order, each event once; the single form
// where a subscriber does not read batched messages (an older m0serve in a
// rolling deploy), and read as ever.
#include <sys/time.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <string>
#include <variant>
#include <vector>

#include "bus/hiredis.hpp"
#include "bus/redis_bus.hpp"
#include "bus/redis_message.hpp"
#include "bus/test_redis_server.hpp"

using namespace m0;
using namespace m0::bus;
using m0::testing::RedisServer;

namespace {

// A plain pub/sub client on `redis` that records every message, raw, as
// Redis sends it. As a reader (`reads_batched`) it subscribes each channel's
// readers' name too, as RedisBus does; otherwise it is what an m0serve from
// before batched messages is to the publish script.
class RawSubscriber {
  public:
    RawSubscriber(const RedisServer& redis, const std::vector<std::string>& channels,
                  bool reads_batched) {
        ctx_ = redisConnect("127.0.0.1", redis.port());
        REQUIRE((ctx_ && !ctx_->err));
        for (const auto& c : channels) {
            std::vector<std::string> names{"m0:0:e:" + c};
            if (reads_batched) names.push_back("m0:0:r:" + c);
            for (const auto& n : names) {
                auto* r = static_cast<redisReply*>(
                    redisCommand(ctx_, "SUBSCRIBE %b", n.data(), n.size()));
                REQUIRE(r);
                freeReplyObject(r);
            }
        }
    }
    ~RawSubscriber() { redisFree(ctx_); }
    RawSubscriber(const RawSubscriber&) = delete;
    RawSubscriber& operator=(const RawSubscriber&) = delete;

    // Every message that comes within `quiet` of the one before: (channel, payload).
    std::vector<std::pair<std::string, std::string>> messages(int quiet_ms = 300) {
        timeval tv{0, quiet_ms * 1000};
        redisSetTimeout(ctx_, tv);
        std::vector<std::pair<std::string, std::string>> out;
        void* reply = nullptr;
        while (redisGetReply(ctx_, &reply) == REDIS_OK) {
            auto* r = static_cast<redisReply*>(reply);
            if (r->type == REDIS_REPLY_ARRAY && r->elements == 3 &&
                redis::reply_text(r->element[0]) == "message")
                out.emplace_back(redis::reply_text(r->element[1]),
                                 redis::reply_text(r->element[2]));
            freeReplyObject(r);
        }
        return out;
    }

  private:
    redisContext* ctx_ = nullptr;
};

// `bus` subscribed to `channels` (a hold's replay subscribes them first).
void subscribe(Loop& loop, RedisBus& bus, std::vector<std::string> channels) {
    bool done = false;
    bus.replay_later(channels, 0, kUptoUnknown, [&](Replay) { done = true; });
    REQUIRE(loop.run_until([&] { return done; }));
}

// The events `bus` queues until `n` have come, then any more within 200 ms.
std::vector<PublishFrame> heard(Loop& loop, RedisBus& bus, size_t n) {
    std::vector<PublishFrame> out;
    auto take = [&] {
        std::deque<Frame> frames;
        bus.drain(frames);
        for (auto& f : frames)
            if (auto* p = std::get_if<PublishFrame>(&f)) out.push_back(std::move(*p));
        return out.size() >= n;
    };
    REQUIRE(loop.run_until(take, std::chrono::milliseconds(5000)));
    loop.run_until([] { return false; }, std::chrono::milliseconds(200));
    take();
    return out;
}

std::vector<uint64_t> ids(const std::vector<PublishFrame>& frames) {
    std::vector<uint64_t> out;
    for (const auto& f : frames) out.push_back(f.id);
    return out;
}

// The events of `batch` whose channel is one of `channels`, with `ids`.
std::vector<PublishFrame> expected(const std::vector<PublishEvent>& batch,
                                   const std::vector<uint64_t>& given,
                                   const std::vector<std::string>& channels) {
    std::vector<PublishFrame> out;
    for (size_t i = 0; i < batch.size(); ++i)
        if (std::find(channels.begin(), channels.end(), batch[i].channel) != channels.end())
            out.push_back(
                {given[i], batch[i].channel, batch[i].event, batch[i].data, batch[i].raw});
    return out;
}

void check_same(const std::vector<PublishFrame>& got, const std::vector<PublishFrame>& want) {
    REQUIRE(ids(got) == ids(want));
    for (size_t i = 0; i < got.size(); ++i) {
        INFO(i);
        CHECK(got[i].channel == want[i].channel);
        CHECK(got[i].event == want[i].event);
        CHECK(got[i].data == want[i].data);
        CHECK(got[i].raw == want[i].raw);
    }
}

// A Redis, a bus that publishes and one that subscribes to `channels` (as
// two m0serve processes would be).
struct Buses {
    RedisServer redis;
    Loop loop;
    RedisBus pub{loop, m0::testing::bus_options(redis)}, sub{loop, m0::testing::bus_options(redis)};
    explicit Buses(std::vector<std::string> channels) {
        REQUIRE(pub.start(5));
        REQUIRE(sub.start(5));
        subscribe(loop, sub, std::move(channels));
    }
};

}  // namespace

TEST_CASE(
    "redis batch: a batch on one channel is one batched message, heard whole, in id order, "
    "each event once",
    "[redis][batch]") {
    Buses buses({"a"});
    auto& [redis, loop, pub, sub] = buses;
    RawSubscriber raw(redis, {"a"}, true);
    std::vector<PublishEvent> batch;
    // Named events, empty data, raw Pushpin items (a raw event's name is its
    // format's: none here, or an http-response).
    for (int i = 0; i < 100; ++i) {
        const bool raw = i % 11 == 0;
        std::string event = raw ? (i % 2 ? std::string(kResponseFormat) : "")
                                : (i % 5 ? "" : "ev" + std::to_string(i));
        batch.push_back(
            {"a", i % 7 ? "line " + std::to_string(i) + "\nnext" : "", std::move(event), raw});
    }
    BatchResult b = pub.publish_batch(batch);
    REQUIRE(b.ok());
    auto want = expected(batch, b.ids, {"a"});
    check_same(heard(loop, sub, 100), want);

    auto messages = raw.messages();
    REQUIRE(messages.size() == 1);
    CHECK(messages[0].first == "m0:0:e:a");
    CHECK(messages[0].second.starts_with("*1\n"));
    std::vector<PublishFrame> parsed;
    REQUIRE(redis::parse_message(messages[0].second, "a", parsed));
    check_same(parsed, want);
}

TEST_CASE(
    "redis batch: a batch on several channels is one message a run, and a bus holding two of "
    "them hears their events in id order, each once",
    "[redis][batch]") {
    Buses buses({"a", "b"});
    auto& [redis, loop, pub, sub] = buses;
    RawSubscriber raw(redis, {"a", "b"}, true);
    std::vector<PublishEvent> batch;
    for (const char* c : {"a", "a", "b", "b", "b", "a", "c", "c", "b", "a", "a"})
        batch.push_back({c, std::string(c) + std::to_string(batch.size()), "", false});
    BatchResult b = pub.publish_batch(batch);
    REQUIRE(b.ok());
    check_same(heard(loop, sub, 9), expected(batch, b.ids, {"a", "b"}));

    // Runs: a a | b b b | a | (c c: not subscribed here) | b | a a. A run of
    // one event keeps the single form, byte for byte.
    auto messages = raw.messages();
    REQUIRE(messages.size() == 5);
    std::vector<size_t> sizes;
    std::vector<PublishFrame> all;
    for (const auto& [name, payload] : messages) {
        const size_t before = all.size();
        REQUIRE(redis::parse_message(payload, name.substr(7), all));
        sizes.push_back(all.size() - before);
        CHECK(payload.starts_with("*1\n") == (all.size() - before > 1));
    }
    CHECK(sizes == std::vector<size_t>{2, 3, 1, 1, 2});
    CHECK(messages[2].second == std::to_string(b.ids[5]) + "\n\n\na5");
    check_same(all, expected(batch, b.ids, {"a", "b"}));
}

TEST_CASE(
    "redis batch: a run is cut into messages of at most kMaxBatchedMessage bytes; an event that "
    "fits with no other goes alone",
    "[redis][batch]") {
    Buses buses({"a"});
    auto& [redis, loop, pub, sub] = buses;
    RawSubscriber raw(redis, {"a"}, true);
    std::vector<PublishEvent> batch;
    for (int i = 0; i < 40; ++i)
        batch.push_back({"a", std::string(20000, char('a' + i % 26)), "", false});
    // Three of 200 KB, no two of which fit in one message, then a small one.
    for (char c : {'x', 'y', 'z'}) batch.push_back({"a", std::string(200000, c), "", false});
    batch.push_back({"a", "small", "", false});
    BatchResult b = pub.publish_batch(batch);
    REQUIRE(b.ok());
    auto want = expected(batch, b.ids, {"a"});
    check_same(heard(loop, sub, batch.size()), want);

    auto messages = raw.messages();
    std::vector<PublishFrame> all;
    size_t batched = 0, total = 0;
    for (const auto& [name, payload] : messages) {
        INFO(payload.size());
        CHECK(payload.size() <= redis::kMaxBatchedMessage);
        batched += payload.starts_with("*1\n");
        total += payload.size();
        REQUIRE(redis::parse_message(payload, "a", all));
    }
    check_same(all, want);
    // 40 events of about 20 KB: 13 a message, and the 40th with x; y alone,
    // in the single form; z with the small one.
    CHECK(total > 1400000);
    CHECK(messages.size() == 6);
    CHECK(batched == 5);
    REQUIRE(messages.size() > 4);
    CHECK(messages[4].second == std::to_string(b.ids[41]) + "\n\n\n" + std::string(200000, 'y'));
    CHECK(messages.size() >= total / redis::kMaxBatchedMessage + 1);
}

TEST_CASE(
    "redis batch: with a subscriber that does not read batched messages (an older m0serve), the "
    "channel gets the single form, an event a message; a single message is read as ever",
    "[redis][batch]") {
    Buses buses({"a", "b"});
    auto& [redis, loop, pub, sub] = buses;
    RawSubscriber old(redis, {"a"}, false);
    std::vector<PublishEvent> batch;
    for (const char* c : {"a", "a", "a", "b", "b"})
        batch.push_back({c, "d" + std::to_string(batch.size()), c[0] == 'a' ? "ev" : "", false});
    BatchResult b = pub.publish_batch(batch);
    REQUIRE(b.ok());
    check_same(heard(loop, sub, 5), expected(batch, b.ids, {"a", "b"}));
    // The older reader's channel: one message an event, in the one form it knows.
    auto messages = old.messages();
    REQUIRE(messages.size() == 3);
    for (size_t i = 0; i < 3; ++i)
        CHECK(messages[i].second == std::to_string(b.ids[i]) + "\nev\n\nd" + std::to_string(i));

    // A single message published by hand, as an m0serve before batched
    // messages publishes every event: read as one event.
    redisContext* c = redisConnect("127.0.0.1", redis.port());
    REQUIRE((c && !c->err));
    const std::string one = std::to_string(b.ids.back() + 1) + "\nnamed\n\nold\nform";
    freeReplyObject(redisCommand(c, "PUBLISH m0:0:e:b %b", one.data(), one.size()));
    redisFree(c);
    auto got = heard(loop, sub, 1);
    REQUIRE(got.size() == 1);
    CHECK(got[0].id == b.ids.back() + 1);
    CHECK(got[0].channel == "b");
    CHECK(got[0].event == "named");
    CHECK(got[0].data == "old\nform");
    CHECK_FALSE(got[0].raw);
}

TEST_CASE(
    "redis batch: a batch giving a stream more events than it keeps adds only those it keeps; "
    "the mark is the newest that went, and replays and gaps are as for single publishes",
    "[redis][batch]") {
    RedisServer redis;
    Loop loop;
    RedisBus bus(loop, m0::testing::bus_options(redis, 4));
    REQUIRE(bus.start(5));
    const uint64_t old = bus.publish("a", "old").id;
    std::vector<PublishEvent> batch;
    for (const char* c : {"a", "b", "a", "a", "a", "a", "b", "a", "a", "a"})
        batch.push_back({c, std::string(c) + std::to_string(batch.size()), "", false});
    BatchResult b = bus.publish_batch(batch);
    REQUIRE(b.ok());
    std::vector<uint64_t> a_ids, b_ids;
    for (size_t i = 0; i < batch.size(); ++i)
        (batch[i].channel == "a" ? a_ids : b_ids).push_back(b.ids[i]);
    REQUIRE(a_ids.size() == 8);
    // "a" keeps its last 4; "old" and the first 4 of the batch went, the
    // newest of them a_ids[3].
    auto replay = [&](std::vector<std::string> channels, uint64_t after) {
        std::optional<Replay> got;
        bus.replay_later(channels, after, kUptoUnknown, [&](Replay r) { got = std::move(r); });
        REQUIRE(loop.run_until([&] { return got.has_value(); }));
        return *got;
    };
    Replay r = replay({"a"}, a_ids[3]);
    CHECK_FALSE(r.gap);
    REQUIRE(r.events.size() == 4);
    for (size_t i = 0; i < 4; ++i) {
        CHECK(r.events[i].id == a_ids[4 + i]);
        // A replay keeps the bytes its holds are written.
        REQUIRE(r.events[i].forms[0]);
        const size_t at = std::find(b.ids.begin(), b.ids.end(), a_ids[4 + i]) - b.ids.begin();
        CHECK(*r.events[i].forms[0] ==
              "id: " + std::to_string(a_ids[4 + i]) + "\ndata: " + batch[at].data + "\n\n");
    }
    CHECK(replay({"a"}, a_ids[3] - 1).gap);
    CHECK(replay({"a"}, old).gap);
    // "b" had room for both of its events.
    r = replay({"b"}, old);
    CHECK_FALSE(r.gap);
    CHECK(ids(r.events) == b_ids);
}
