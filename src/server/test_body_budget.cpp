// --max-body-total: the request bodies buffered at once, in all, over
// HTTP/1.1 and HTTP/2; a body that would pass it is 503 with Retry-After,
// and a request's share comes back when the request is gone.
#include <catch2/catch.hpp>

#include "http/body_budget.hpp"
#include "server/test_h2_client.hpp"

using namespace m0;
using namespace m0::testing;

namespace {

// A rig whose mount "/app" keeps each request, as a pool's queue would,
// until the test drops it (a job ended).
struct AppRig : ServerRig {
    std::vector<std::pair<SlotRef, http::Request>> got;
    std::shared_ptr<http::BodyBudget> budget;  // the server's
    explicit AppRig(server::ServerConfig cfg) : ServerRig(cfg), budget(cfg.body_budget) {
        server->add_mount("/app", [this](SlotRef s, http::Request&& r) {
            got.emplace_back(s, std::move(r));
            return Admission::queued;
        });
    }
    uint64_t used() const { return budget->used(); }
};

server::ServerConfig small_total() {
    server::ServerConfig cfg;
    cfg.limits.max_body = 1000;
    cfg.body_budget = std::make_shared<http::BodyBudget>(1000);
    return cfg;
}

std::string post(const std::string& path, size_t length, const std::string& extra = "") {
    return "POST " + path + " HTTP/1.1\r\nHost: h\r\nContent-Length: " + std::to_string(length) +
           "\r\n" + extra + "\r\n";
}

}  // namespace

TEST_CASE("body budget: charges are taken within the limit and given back", "[http]") {
    auto budget = std::make_shared<http::BodyBudget>(100);
    {
        http::BodyCharge a(budget);
        CHECK(a.reach(60));
        CHECK(a.reach(40));  // less than it has: nothing more taken
        CHECK(budget->used() == 60);
        http::BodyCharge b(budget);
        CHECK_FALSE(b.reach(41));
        CHECK(b.bytes() == 0);
        CHECK(b.reach(40));
        CHECK(budget->used() == 100);
        CHECK_FALSE(a.reach(61));
        CHECK(a.bytes() == 60);
        CHECK(a.could_reach(60));
        CHECK_FALSE(a.could_reach(61));  // asked, nothing taken
        CHECK(budget->used() == 100);
    }
    CHECK(budget->used() == 0);
}

TEST_CASE(
    "body budget: over HTTP/1.1 a declared body that does not fit what is left is 503 before any "
    "100 Continue; a declared length reserves nothing; a request's share comes back when it is "
    "gone",
    "[server]") {
    AppRig rig(small_total());
    auto a = rig.connect();
    REQUIRE(a->send(post("/app/a", 900) + std::string(800, 'a')));  // 900 declared, 800 sent
    REQUIRE(rig.step_until([&] { return rig.used() == 800; }));

    auto b = rig.connect();
    REQUIRE(b->send(post("/app/b", 600, "Expect: 100-continue\r\n")));
    REQUIRE(rig.read_until(*b, "\r\n\r\n"));
    INFO(b->in);
    CHECK(b->in.starts_with("HTTP/1.1 503 "));
    CHECK(b->in.find("Retry-After: 1\r\n") != std::string::npos);
    CHECK(b->in.find("100 Continue") == std::string::npos);
    REQUIRE(rig.read_until(*b, "--max-body-total"));
    CHECK(rig.wait_eof(*b));
    CHECK(rig.metrics.bodies_refused.load() == 1);

    // A head that declares what fits, and sends nothing more: it holds none.
    auto idle = rig.connect();
    REQUIRE(idle->send(post("/app/idle", 200)));
    auto c = rig.connect();  // 800 + 150 fit
    REQUIRE(c->send(post("/app/c", 150) + std::string(150, 'c')));
    REQUIRE(rig.step_until([&] { return rig.got.size() == 1; }));
    CHECK(rig.used() == 950);
    REQUIRE(a->send(std::string(100, 'a')));  // a's last bytes pass the total: 1050
    REQUIRE(rig.read_until(*a, "--max-body-total"));
    CHECK(a->in.starts_with("HTTP/1.1 503 "));
    CHECK(rig.wait_eof(*a));
    CHECK(rig.used() == 150);  // a's 800 let go with it

    // The pool is done with c's request: its share comes back.
    rig.post(rig.got[0].first, http::Response{});
    rig.got.clear();
    CHECK(rig.used() == 0);
    auto d = rig.connect();
    REQUIRE(d->send(post("/app/d", 1000) + std::string(1000, 'd')));
    REQUIRE(rig.step_until([&] { return rig.got.size() == 1; }));
    CHECK(rig.used() == 1000);
    REQUIRE(idle->send("x"));  // now its 200 do not fit: refused at its first byte
    REQUIRE(rig.read_until(*idle, "--max-body-total"));
    rig.got.clear();
    CHECK(rig.used() == 0);
}

TEST_CASE("body budget: over HTTP/1.1 a chunked body that grows past the total is 503, closed",
          "[server]") {
    AppRig rig(small_total());
    auto a = rig.connect();
    REQUIRE(a->send(post("/app/a", 700) + std::string(700, 'a')));
    REQUIRE(rig.step_until([&] { return rig.got.size() == 1; }));
    auto b = rig.connect();
    REQUIRE(
        b->send("POST /app/b HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n"
                "c8\r\n" +
                std::string(200, 'b') + "\r\n"));
    REQUIRE(rig.step_until([&] { return rig.used() == 900; }));
    REQUIRE(b->send("c8\r\n" + std::string(200, 'b') + "\r\n0\r\n\r\n"));
    REQUIRE(rig.read_until(*b, "--max-body-total"));
    CHECK(b->in.starts_with("HTTP/1.1 503 "));
    CHECK(rig.wait_eof(*b));
    CHECK(rig.got.size() == 1);
    CHECK(rig.used() == 700);  // b's share went with its connection
}

TEST_CASE(
    "body budget: over HTTP/2 streams share the total; one that would pass it is 503 and reset, "
    "the connection serves on",
    "[server][h2]") {
    AppRig rig(small_total());
    auto c = rig.connect();
    H2Client h(*c);
    const int32_t a = h.upload("POST", "/app/a", {{"content-length", "600"}});
    h.send_body(a, std::string(500, 'a'), false);
    REQUIRE(h.until(rig, [&] { return rig.used() == 500; }));
    const int32_t b = h.upload("POST", "/app/b", {{"content-length", "600"}});  // 600 > 500 left
    const int32_t grows = h.upload("POST", "/app/grows");                       // no content-length
    h.send_body(grows, std::string(300, 'g'), false);
    REQUIRE(h.until(rig, [&] { return h.streams[b].closed && rig.used() == 800; }));
    CHECK(h.streams[b].header(":status") == "503");
    CHECK(h.streams[b].header("retry-after") == "1");
    CHECK(h.streams[b].data.find("--max-body-total") != std::string::npos);
    CHECK(h.streams[b].error == NGHTTP2_NO_ERROR);    // answered before its end: reset
    h.send_body(grows, std::string(300, 'g'), true);  // 1100
    REQUIRE(h.until(rig, [&] { return h.streams[grows].closed; }));
    CHECK(h.streams[grows].header(":status") == "503");
    CHECK(rig.used() == 500);
    h.send_body(a, std::string(100, 'a'), true);
    REQUIRE(h.until(rig, [&] { return rig.got.size() == 1; }));
    CHECK(rig.got[0].second.body.size() == 600);
    rig.post(rig.got[0].first, http::Response{});
    rig.got.clear();
    CHECK(rig.used() == 0);
    std::string body(1000, 'e');
    const int32_t e = h.request("POST", "/app/e", {{"content-length", "1000"}}, &body);
    REQUIRE(h.until(rig, [&] { return rig.got.size() == 1; }));
    CHECK(rig.got[0].second.body.size() == 1000);
    CHECK_FALSE(h.streams[e].closed);
    CHECK(rig.metrics.bodies_refused.load() == 2);
    CHECK(rig.server->alive(c->slot));
}
