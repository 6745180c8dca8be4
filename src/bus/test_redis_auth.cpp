// The Redis bus on a Redis that wants a password: requirepass (the default
// user) and an ACL user, against a real redis-server (a free port, stopped by
// PID). Every link authenticates (the publish link, the command link, the
// subscriber link); a wrong password is a refusal start() reports, without
// the password.
#include <catch2/catch.hpp>
#include <optional>

#include "bus/redis_bus.hpp"
#include "bus/test_redis_server.hpp"

using namespace m0;
using namespace m0::bus;
using m0::testing::RedisServer;

namespace {

constexpr char kPassword[] = "p@ss:w/rd %";  // what redis-server is given
constexpr char kEncoded[] = "p%40ss%3Aw%2Frd%20%25";

RedisBusOptions options_for(const std::string& url) {
    std::string err;
    RedisBusOptions o;
    auto u = parse_redis_url(url, err);
    REQUIRE(u);
    o.url = *u;
    return o;
}

std::string at_port(const std::string& creds, const RedisServer& r) {
    return "redis://" + creds + "@127.0.0.1:" + std::to_string(r.port()) + "/0";
}

// Every link works: a publish (the publish link), a replay read (the command
// link) after a SUBSCRIBE (the subscriber link), and the event published by
// `other` arrives live on `bus`'s subscriber link.
void every_link_works(Loop& loop, RedisBus& bus, RedisBus& other) {
    auto first = bus.publish("c", "one");
    REQUIRE(first.ok());
    std::optional<Replay> got;
    bus.replay_later({"c"}, first.id - 1, kUptoUnknown, [&](Replay r) { got = std::move(r); });
    REQUIRE(loop.run_until([&] { return got.has_value(); }));
    REQUIRE(got->events.size() == 1);
    CHECK(got->events[0].id == first.id);
    auto second = other.publish("c", "two");
    REQUIRE(second.ok());
    std::deque<Frame> frames;
    bool heard = false;
    REQUIRE(loop.run_until([&] {
        bus.drain(frames);
        for (const auto& f : frames)
            if (const auto* p = std::get_if<PublishFrame>(&f)) heard = heard || p->id == second.id;
        frames.clear();
        return heard;
    }));
}

}  // namespace

TEST_CASE("redis auth: with requirepass, the URL's percent-encoded password opens every link",
          "[redis][auth]") {
    RedisServer redis(false, {"--requirepass", kPassword});
    Loop loop;
    RedisBus bus(loop, options_for(at_port(std::string(":") + kEncoded, redis)));
    RedisBus other(loop, options_for(at_port(std::string(":") + kEncoded, redis)));
    REQUIRE(bus.start(5));
    REQUIRE(other.start(5));
    CHECK(bus.refusal().empty());
    every_link_works(loop, bus, other);
}

TEST_CASE(
    "redis auth: a wrong password, or none, is a refusal start() reports without the "
    "password; publishes fail with it",
    "[redis][auth]") {
    RedisServer redis(false, {"--requirepass", kPassword});
    Loop loop;
    {
        RedisBus bus(loop, options_for(at_port(":wrong-secret", redis)));
        CHECK_FALSE(bus.start(5));
        CHECK(bus.refusal().find("Redis refused AUTH: WRONGPASS") == 0);
        CHECK(bus.refusal().find("wrong-secret") == std::string::npos);
        auto r = bus.publish("c", "x");
        CHECK_FALSE(r.ok());
        CHECK(r.detail.find("wrong-secret") == std::string::npos);
    }
    {
        RedisBus bus(loop, options_for("redis://127.0.0.1:" + std::to_string(redis.port())));
        CHECK_FALSE(bus.start(5));
        CHECK(bus.refusal().find("Redis refused PING: NOAUTH") == 0);
    }
    // An unreachable Redis is no refusal: start() waits, then serves without it.
    {
        RedisServer gone;
        const std::string url = at_port(":x", gone);
        gone.stop();
        RedisBus bus(loop, options_for(url));
        CHECK_FALSE(bus.start(0.3));
        CHECK(bus.refusal().empty());
    }
}

TEST_CASE(
    "redis auth: an ACL user with only the bus's commands and keys works; another user's "
    "password, or a disabled default user, is refused",
    "[redis][auth]") {
    // The ACL README's "The Redis bus" gives for the bus's user.
    RedisServer redis(
        false,
        {"--user",        "m0",     "on",      ">s3cret",  "~m0:*",       "&m0:*", "+@connection",
         "+@transaction", "+@read", "+@write", "+@pubsub", "+@scripting", "+time", "+role",
         "--user",        "other",  "on",      ">0ther",   "~*",          "+@all", "--user",
         "default",       "off"});
    Loop loop;
    RedisBus bus(loop, options_for(at_port("m0:s3cret", redis)));
    RedisBus other(loop, options_for(at_port("m0:s3cret", redis)));
    REQUIRE(bus.start(5));
    REQUIRE(other.start(5));
    every_link_works(loop, bus, other);
    RedisBus wrong(loop, options_for(at_port("m0:0ther", redis)));
    CHECK_FALSE(wrong.start(5));
    CHECK(wrong.refusal().find("Redis refused AUTH as m0: WRONGPASS") == 0);
    RedisBus none(loop, options_for(at_port(":s3cret", redis)));
    CHECK_FALSE(none.start(5));
    CHECK(none.refusal().find("WRONGPASS") != std::string::npos);
}
