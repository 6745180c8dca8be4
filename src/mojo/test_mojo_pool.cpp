// The mojo pool's unit forms (the gate's unit half):
//   - a streamed body that is not a hold is refused 409 and the job marked raised;
//   - a hold consumes its headers, becomes the head, and its h frame naming the
//     slot, the cursor and the channel is on the loop's channel by the time the
//     completion is;
//   - a refused frame gives 503; over --max-holds gives 503; no --realtime degrades.
// `make sabotage-pool` mutates the hold code and the refusal and requires this to fail.
#include <catch2/catch.hpp>
#include <ctime>

#include "bus/channel.hpp"
#include "grant/grant.hpp"
#include "mojo/builtin.hpp"
#include "mojo/mojo_pool.hpp"

using namespace m0;

namespace {

struct Rig {
    CompletionRing ring;
    bus::BusChannel bus;
    Metrics metrics;
    mojo::HandlerFor<mojo::BuiltinMount> handler{mojo::MojoEnv{}};
    std::unique_ptr<mojo::MojoPool> pool;
    // Frames on the bus channel at the moment each completion was pushed.
    std::vector<size_t> frames_at_push;

    explicit Rig(bool realtime = true, int64_t max_holds = 100) {
        hold::Handoff h;
        h.ring = &ring;
        h.bus = realtime ? &bus : nullptr;
        h.metrics = &metrics;
        metrics.holds_open.set_limit(max_holds);
        ring.observer = [this](const Completion&, size_t) {
            frames_at_push.push_back(bus.queued());
        };
        pool = std::make_unique<mojo::MojoPool>(0, h);  // manual: the test runs each job
    }

    Completion run(const std::string& path_info, const std::string& query = "",
                   http::Headers headers = {}, SlotRef slot = {3, 7}) {
        http::Request r;
        r.method = "GET";
        r.path_info = path_info;
        r.query = query;
        r.headers = std::move(headers);
        REQUIRE(pool->submit(handler, slot, std::move(r)) == Admission::queued);
        REQUIRE(pool->pool().run_next());
        std::deque<Completion> out;
        REQUIRE(ring.drain(out) == 1);
        return std::move(out.front());
    }
};

http::Headers last_event_id(const char* v) {
    http::Headers h;
    h.add("Last-Event-ID", v);
    return h;
}

}  // namespace

TEST_CASE("mojo pool: a streamed body that is not a hold is refused 409 and marked raised",
          "[mojo][pool]") {
    Rig rig;
    Completion c = rig.run("/stream");
    CHECK(c.kind == Completion::Kind::response);
    CHECK(c.response.status == 409);
    CHECK_FALSE(c.response.stream);
    CHECK(rig.pool->pool().raised.load() == 1);
    CHECK(rig.bus.queued() == 0);
}

TEST_CASE("mojo pool: an ordinary answer is one response and not raised", "[mojo][pool]") {
    Rig rig;
    Completion c = rig.run("/hello");
    CHECK(c.kind == Completion::Kind::response);
    CHECK(c.response.status == 200);
    CHECK(c.response.body == "hello from mojo\n");
    CHECK(rig.pool->pool().raised.load() == 0);
}

TEST_CASE(
    "mojo pool: a hold consumes its headers, becomes the head, and its h frame is on the "
    "loop's channel by the time the completion is",
    "[mojo][pool][hold]") {
    Rig rig;
    SlotRef slot{5, 9};
    Completion c = rig.run("/hold", "channel=news,sport", last_event_id("41"), slot);

    // The frame was queued before the completion was pushed.
    REQUIRE(rig.frames_at_push.size() == 1);
    CHECK(rig.frames_at_push[0] == 1);

    // The completion is the stream's head.
    CHECK(c.kind == Completion::Kind::hold);
    CHECK(c.slot == slot);
    const auto& r = c.response;
    CHECK(r.status == 200);
    CHECK_FALSE(r.headers.has("M0-Hold"));
    CHECK_FALSE(r.headers.has("M0-Channel"));
    CHECK_FALSE(r.headers.has("Content-Length"));
    CHECK_FALSE(r.headers.has("Transfer-Encoding"));
    CHECK(r.headers.get("Content-Type") == std::optional<std::string_view>("text/event-stream"));
    CHECK(r.headers.get("Cache-Control") == std::optional<std::string_view>("no-cache"));
    CHECK(r.headers.get("x-worker") == std::optional<std::string_view>("mojo-0"));
    CHECK(r.body == ": mojo hold\n\n");

    // The frame names the slot (its reserved stream url), the cursor, the channels.
    auto frames = rig.bus.peek();
    REQUIRE(frames.size() == 1);
    auto* f = std::get_if<bus::HoldFrame>(&frames.front());
    REQUIRE(f);
    CHECK(f->stream_url == bus::reserved_stream_url(slot));
    CHECK(bus::parse_reserved_stream_url(f->stream_url) == std::optional<SlotRef>(slot));
    CHECK(f->cursor == 41);
    CHECK(f->channels == std::vector<std::string>{"news", "sport"});
    CHECK(rig.metrics.holds_open.load() == 1);
    CHECK(rig.pool->pool().raised.load() == 0);
}

TEST_CASE(
    "mojo pool: run_here (--mojo-in-loop) runs a quick mount on the calling thread, nothing "
    "queued, the h frame before the completion as on a pool thread",
    "[mojo][pool][hold]") {
    Rig rig;
    CHECK(rig.handler.quick());  // BuiltinMount declares itself quick
    SlotRef slot{4, 2};
    http::Request r;
    r.method = "GET";
    r.path_info = "/hold";
    r.query = "channel=news";
    const uint64_t completed = rig.pool->pool().completed.load();
    REQUIRE(rig.pool->run_here(rig.handler, slot, std::move(r), nullptr, 1) == Admission::queued);
    CHECK(rig.pool->pool().queued() == 0);
    CHECK_FALSE(rig.pool->pool().run_next());  // it ran already
    CHECK(rig.pool->pool().completed.load() == completed + 1);
    REQUIRE(rig.frames_at_push == std::vector<size_t>{1});
    std::deque<Completion> out;
    REQUIRE(rig.ring.drain(out) == 1);
    CHECK(out.front().kind == Completion::Kind::hold);
    CHECK(out.front().slot == slot);
    CHECK(out.front().response.headers.get("x-worker") ==
          std::optional<std::string_view>("mojo-loop-1"));
    auto frames = rig.bus.peek();
    REQUIRE(frames.size() == 1);
    CHECK(std::holds_alternative<bus::HoldFrame>(frames.front()));
}

namespace {
struct SlowMount {  // declares nothing: not quick
    static constexpr std::string_view name = "slow";
    explicit SlowMount(const mojo::MojoEnv&) {}
    http::Response serve(const http::Request&) { return {}; }
};
}  // namespace

TEST_CASE("mojo pool: a mount that does not declare itself quick is not", "[mojo][pool]") {
    mojo::HandlerFor<SlowMount> h{mojo::MojoEnv{}};
    CHECK_FALSE(h.quick());
}

TEST_CASE("mojo pool: /hold refuses a channel with edge whitespace 400 instead of trimming it",
          "[mojo][pool][hold]") {
    for (const char* query : {"channel=%20sp", "channel=sp%20", "channel=%09sp", "channel=+sp",
                              "channel=a,%20b", "channel=%20", "channel=%20%20", "channel=a,%20"}) {
        INFO(query);
        Rig rig;
        Completion c = rig.run("/hold", query);
        CHECK(c.kind == Completion::Kind::response);
        CHECK(c.response.status == 400);
        CHECK(c.response.body.find("space") != std::string::npos);
        CHECK(rig.bus.queued() == 0);
        CHECK(rig.metrics.holds_open.load() == 0);
    }
}

TEST_CASE("mojo pool: a hold without Last-Event-ID has cursor 0", "[mojo][pool][hold]") {
    Rig rig;
    rig.run("/hold", "channel=a");
    auto frames = rig.bus.peek();
    REQUIRE(frames.size() == 1);
    CHECK(std::get<bus::HoldFrame>(frames.front()).cursor == 0);
}

TEST_CASE("mojo pool: a frame the channel will not take is answered 503, not a head",
          "[mojo][pool][hold]") {
    Rig rig;
    rig.bus.close();
    Completion c = rig.run("/hold", "channel=a");
    CHECK(c.kind == Completion::Kind::response);
    CHECK(c.response.status == 503);
    CHECK(c.response.headers.has("Retry-After"));
    CHECK(rig.bus.refused.load() == 1);
    CHECK(rig.metrics.holds_open.load() == 0);
}

TEST_CASE("mojo pool: past max_holds a hold answer is 503 with Retry-After", "[mojo][pool][hold]") {
    Rig rig(true, 1);
    CHECK(rig.run("/hold", "channel=a", {}, {1, 1}).kind == Completion::Kind::hold);
    Completion c = rig.run("/hold", "channel=a", {}, {2, 1});
    CHECK(c.kind == Completion::Kind::response);
    CHECK(c.response.status == 503);
    CHECK(c.response.headers.get("Retry-After").has_value());
    CHECK(rig.metrics.holds_refused.load() == 1);
    CHECK(rig.metrics.holds_open.load() == 1);
    CHECK(rig.bus.queued() == 1);  // only the first hold's frame
}

TEST_CASE("mojo pool: without --realtime a hold degrades to an ordinary response",
          "[mojo][pool][hold]") {
    Rig rig(false);
    Completion c = rig.run("/hold", "channel=a");
    CHECK(c.kind == Completion::Kind::response);
    CHECK(c.response.status == 200);
    CHECK(c.response.body == ": mojo hold\n\n");
    CHECK_FALSE(c.response.headers.has("M0-Hold"));
    CHECK_FALSE(c.response.headers.has("M0-Channel"));
    CHECK(rig.bus.queued() == 0);
}

namespace {
struct OddMount {
    static constexpr std::string_view name = "odd";
    explicit OddMount(const mojo::MojoEnv&) {}
    http::Response serve(const http::Request& req) {
        http::Response r;
        if (req.path_info == "/websocket") {
            r.headers.add("M0-Hold", "websocket");
            r.headers.add("M0-Channel", "ws");
        } else if (req.path_info == "/bogus") {
            r.headers.add("M0-Hold", "forever");
            r.headers.add("M0-Channel", "x");
        } else if (req.path_info == "/reserved") {
            r.headers.add("M0-Hold", "stream");
            r.headers.add("M0-Channel", "m0.slot.1.1");
        } else {
            throw std::runtime_error("handler failed");
        }
        return r;
    }
};
}  // namespace

TEST_CASE("mojo pool: other M0-Hold values, refused channels and exceptions",
          "[mojo][pool][hold]") {
    CompletionRing ring;
    bus::BusChannel bus;
    hold::Handoff h;
    h.ring = &ring;
    h.bus = &bus;
    Pool pool("mojo", 0);
    mojo::HandlerFor<OddMount> handler{mojo::MojoEnv{}};
    auto run = [&](const char* path) {
        http::Request r;
        r.path_info = path;
        mojo::serve_job(h, pool, handler, {1, 1}, r, 0);
        std::deque<Completion> out;
        REQUIRE(ring.drain(out) == 1);
        return std::move(out.front());
    };
    SECTION("websocket degrades to a stream hold") {
        CHECK(run("/websocket").kind == Completion::Kind::hold);
        CHECK(bus.queued() == 1);
    }
    SECTION("an unknown value is a 502") {
        CHECK(run("/bogus").response.status == 502);
        CHECK(bus.queued() == 0);
    }
    SECTION("a reserved channel is refused 502") {
        CHECK(run("/reserved").response.status == 502);
        CHECK(bus.queued() == 0);
    }
    SECTION("a handler exception is a 500 and raised") {
        CHECK(run("/throw").response.status == 500);
        CHECK(pool.raised.load() == 1);
    }
}

TEST_CASE(
    "mojo pool: /live holds on the channels of a verified grant and refuses every bad one 403",
    "[mojo][pool][grant]") {
    std::string err;
    auto keys = grant::KeyRing::from_text(
        "new " + std::string(64, 'a') + "\nold " + std::string(64, 'b') + "\n", err);
    REQUIRE(keys);
    grant::SharedKeyRing shared(*keys);
    mojo::MojoEnv env{&shared};
    CompletionRing ring;
    bus::BusChannel bus;
    hold::Handoff h;
    h.ring = &ring;
    h.bus = &bus;
    Pool pool("mojo", 0);
    mojo::HandlerFor<mojo::BuiltinMount> handler{env};
    const int64_t now = static_cast<int64_t>(std::time(nullptr));
    auto run = [&](const std::string& token) {
        http::Request r;
        r.method = "GET";
        r.path_info = "/live";
        r.query = "grant=" + token;
        mojo::serve_job(h, pool, handler, {1, 1}, r, 0);
        std::deque<Completion> out;
        REQUIRE(ring.drain(out) == 1);
        return std::move(out.front());
    };
    SECTION("a grant signed by the current key holds on its channels") {
        auto c = run(grant::sign(*keys->find("new"), {"notate_document_1", "x"}, now + 60));
        CHECK(c.kind == Completion::Kind::hold);
        auto frames = bus.peek();
        REQUIRE(frames.size() == 1);
        CHECK(std::get<bus::HoldFrame>(frames.front()).channels ==
              std::vector<std::string>{"notate_document_1", "x"});
    }
    SECTION("the hold joins exactly the grant's channels, whatever else the URL carries") {
        std::string token = grant::sign(*keys->find("new"), {"news", "a b"}, now + 60);
        for (const std::string& query :
             {"grant=" + token + "&channel=admin", "channel=admin&grant=" + token,
              "channel=news,admin&grant=" + token + "&channel=%20news",
              "grant=" + token +
                  "&grant=" + grant::sign(*keys->find("new"), {"admin"}, now + 60)}) {
            INFO(query);
            bus::BusChannel b;
            h.bus = &b;
            http::Request r;
            r.method = "GET";
            r.path_info = "/live";
            r.query = query;
            mojo::serve_job(h, pool, handler, {1, 1}, r, 0);
            std::deque<Completion> out;
            REQUIRE(ring.drain(out) == 1);
            CHECK(out.front().kind == Completion::Kind::hold);
            auto frames = b.peek();
            REQUIRE(frames.size() == 1);
            CHECK(std::get<bus::HoldFrame>(frames.front()).channels ==
                  std::vector<std::string>{"news", "a b"});
            h.bus = &bus;
        }
    }
    SECTION("a grant naming a channel with edge whitespace is refused, never trimmed") {
        // Signed with the ring's own key, so only the name is wrong: sign()
        // itself refuses such a name, so the token is built by hand.
        for (const char* name : {" admin", "admin ", "\tadmin", " "}) {
            INFO("'" << name << "'");
            const grant::Key& k = *keys->find("new");
            std::string payload = grant::detail::encode_payload(k.id, now + 60, {name});
            auto mac = grant::hmac_sha256(k.secret, payload);
            std::string token = grant::detail::base64url_encode(payload) + "." +
                                grant::detail::base64url_encode(std::string_view(
                                    reinterpret_cast<const char*>(mac.data()), mac.size()));
            auto c = run(token);
            CHECK(c.kind == Completion::Kind::response);
            CHECK(c.response.status == 403);
        }
        CHECK(bus.queued() == 0);
    }
    SECTION("a grant signed by a rotated-out key still in the file holds") {
        CHECK(run(grant::sign(*keys->find("old"), {"a"}, now + 60)).kind == Completion::Kind::hold);
    }
    SECTION(
        "expired, forged, truncated and unknown-key grants are 403 with a reason, never a hold") {
        std::string good = grant::sign(*keys->find("new"), {"a"}, now + 60);
        grant::Key stranger{"new", std::string(32, 'z')};
        grant::Key unknown{"gone", std::string(32, 'a')};
        for (const auto& [token, reason] : std::vector<std::pair<std::string, std::string>>{
                 {grant::sign(*keys->find("new"), {"a"}, now - 1), "grant expired"},
                 {grant::sign(stranger, {"a"}, now + 60), "bad grant signature"},
                 {good.substr(0, good.size() - 5), "malformed grant"},
                 {grant::sign(unknown, {"a"}, now + 60), "unknown grant key"},
             }) {
            auto c = run(token);
            CHECK(c.kind == Completion::Kind::response);
            CHECK(c.response.status == 403);
            CHECK(c.response.body == reason + "\n");
        }
        CHECK(bus.queued() == 0);
    }
}

TEST_CASE("mojo pool: a request whose client left before a thread took it is not run",
          "[mojo][pool]") {
    Rig rig;
    auto request = [] {
        http::Request r;
        r.method = "GET";
        r.path_info = "/hello";
        return r;
    };
    REQUIRE(rig.pool->submit(rig.handler, {1, 1}, request()) == Admission::queued);
    REQUIRE(rig.pool->submit(rig.handler, {2, 1}, request()) == Admission::queued);
    rig.ring.cancels.cancel({1, 1});  // what the loop does when slot 1's client leaves
    REQUIRE(rig.pool->pool().run_next());
    CHECK_FALSE(rig.pool->pool().run_next());
    std::deque<Completion> out;
    rig.ring.drain(out);
    REQUIRE(out.size() == 1);
    CHECK(out.front().slot == SlotRef{2, 1});
    CHECK(rig.pool->pool().skipped.load() == 1);
}
