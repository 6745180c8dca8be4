// The admin API without sockets: AdminApi::handle on requests built here,
// over a real in-process bus whose queued frames the test reads back.
#include <catch2/catch.hpp>
#include <ctime>
#include <string>
#include <variant>

#include "bus/channel.hpp"
#include "grant/grant.hpp"
#include "server/admin.hpp"
#include "server/codec.hpp"

using namespace m0;
using m0::http::Request;
using m0::http::Response;

namespace {

constexpr const char* kKey = "0123456789abcdef-admin";

struct Admin {
    Metrics metrics;
    bus::BusChannel bus;
    std::vector<std::string> closed;  // channels POST /close or a close item named
    server::AdminApi api;

    explicit Admin(bus::BusOptions o = {}, bool open = false, std::string key = kKey)
        : bus([&] {
              o.codec = server::codec();  // as the binary's bus (serve.cpp)
              return o;
          }()),
          api(std::move(key), open, metrics, &bus,
              [this](const std::string& c, const server::AdminApi::Closed& done) {
                  closed.push_back(c);
                  done(1);
              }) {}

    Response post(std::string path, std::string body,
                  std::string auth = std::string("Bearer ") + kKey) {
        Request r;
        r.method = "POST";
        r.path = std::move(path);
        r.body = std::move(body);
        if (!auth.empty()) r.headers.add("Authorization", std::move(auth));
        return api.handle(r);
    }
    // The publish frames queued so far.
    std::vector<bus::PublishFrame> published() {
        std::vector<bus::PublishFrame> out;
        for (auto& f : bus.peek())
            if (auto* p = std::get_if<bus::PublishFrame>(&f)) out.push_back(*p);
        return out;
    }
};

}  // namespace

TEST_CASE("admin: POST /publish takes the m0serve shape and refuses bad JSON with a reason",
          "[admin]") {
    Admin a;
    auto r = a.post("/publish", R"({"channel":"news","data":"hi","event":"up"})");
    CHECK(r.status == 200);
    auto p = a.published();
    REQUIRE(p.size() == 1);
    CHECK(p[0].data == "hi");
    CHECK(p[0].event == "up");
    CHECK_FALSE(p[0].raw);
    r = a.post("/publish", "{\"channel\":\"news\",\"data\":\"\xff\"}");
    CHECK(r.status == 400);
    CHECK(r.body.find("UTF-8") != std::string::npos);
    r = a.post("/publish", R"({"channel":"news","data":1})");
    CHECK(r.status == 400);
    CHECK(r.body.find("strings") != std::string::npos);
    CHECK(a.post("/publish", "{").status == 400);
    // No data at all: refused with the reason rather than sent as an empty
    // event; a bad channel's reason comes first.
    r = a.post("/publish", R"({"channel":"news","event":"up"})");
    CHECK(r.status == 400);
    CHECK(r.body.starts_with("missing data"));
    r = a.post("/publish", R"({"channel":"m0.slot.1"})");
    CHECK(r.status == 400);
    CHECK(r.body.find("reserved") != std::string::npos);
    CHECK(a.published().size() == 1);
    CHECK(a.post("/close", R"({"channel":"news"})").status == 200);
    CHECK(a.closed == std::vector<std::string>{"news"});
}

TEST_CASE(
    "admin: POST /publish/ takes Pushpin's items: http-stream content published raw, "
    "http-response as a raw event of its format",
    "[admin][grip]") {
    Admin a;
    auto r = a.post("/publish/",
                    R"({"items":[{"channel":"a","id":"p2","prev-id":"p1","formats":)"
                    R"({"http-stream":{"content":"event: m\ndata: 1\n\n"}}},)"
                    R"({"channel":"b","formats":{"http-stream":{"content-bin":"AAEC/w=="}}},)"
                    R"({"channel":"c","formats":{"http-response":{"body":"x"}}},)"
                    R"({"channel":"d","formats":{"http-stream":{"action":"close"}}}]})");
    INFO(r.body);
    REQUIRE(r.status == 200);
    CHECK(r.body == "{\"ids\": [1, 2, 3], \"closed\": 1, \"skipped\": 0}\n");
    auto p = a.published();
    REQUIRE(p.size() == 3);
    CHECK(p[0].channel == "a");
    CHECK(p[0].raw);
    CHECK(p[0].event.empty());
    CHECK(p[0].data == "event: m\ndata: 1\n\n");
    CHECK(p[1].data == std::string("\0\1\2\xff", 4));
    CHECK(p[2].raw);
    CHECK(p[2].event == bus::kResponseFormat);
    http::ResponseItem item;
    REQUIRE(http::decode_response_item(p[2].data, item));
    CHECK(item.body == "x");
    CHECK(a.closed == std::vector<std::string>{"d"});
    SECTION("a bad item refuses the request whole: nothing is published") {
        r = a.post("/publish/",
                   R"({"items":[{"channel":"ok","formats":{"http-stream":{"content":"x"}}},)"
                   R"({"channel":"m0.slot.1.1","formats":{"http-stream":{"content":"x"}}}]})");
        CHECK(r.status == 400);
        CHECK(r.body.find("item 1") != std::string::npos);
        CHECK(a.published().size() == 3);
        // A close between them: still nothing published and nothing closed
        // (the runs of items on either side go to the bus one after the other).
        r = a.post("/publish/",
                   R"({"items":[{"channel":"ok","formats":{"http-stream":{"content":"x"}}},)"
                   R"({"channel":"e","formats":{"http-stream":{"action":"close"}}},)"
                   R"({"channel":"m0.slot.1.1","formats":{"http-stream":{"content":"x"}}}]})");
        CHECK(r.status == 400);
        CHECK(r.body.find("item 2") != std::string::npos);
        CHECK(a.published().size() == 3);
        CHECK(a.closed == std::vector<std::string>{"d"});
    }
    SECTION("content over --max-event-size is 413") {
        Admin small(bus::BusOptions{.max_event_size = 8});
        r = small.post(
            "/publish/",
            R"({"items":[{"channel":"a","formats":{"http-stream":{"content":"123456789"}}}]})");
        CHECK(r.status == 413);
        CHECK(small.published().empty());
        CHECK(small.bus.too_large.load() == 1);
    }
    SECTION("the bearer key is needed as for /publish") {
        CHECK(a.post("/publish/", R"({"items":[]})", "").status == 401);
    }
}

namespace {

// An HS256 JWT as gripcontrol makes one: {"iss": ..., "exp": ...} signed with `key`.
std::string grip_jwt(std::string_view claims, std::string_view key = kKey) {
    using grant::detail::base64url_encode;
    std::string input =
        base64url_encode(R"({"typ":"JWT","alg":"HS256"})") + "." + base64url_encode(claims);
    auto mac = grant::hmac_sha256(key, input);
    return input + "." +
           base64url_encode(
               std::string_view(reinterpret_cast<const char*>(mac.data()), mac.size()));
}

std::string exp_in(int64_t seconds) {
    return R"({"iss":"publisher","exp":)" + std::to_string(std::time(nullptr) + seconds) + "}";
}

}  // namespace

TEST_CASE("admin: a GRIP publisher's JWT signed with the admin key is taken in place of the key",
          "[admin][grip]") {
    Admin a;
    const std::string body = R"({"channel":"news","data":"x"})";
    CHECK(a.post("/publish", body, "Bearer " + grip_jwt(exp_in(60))).status == 200);
    CHECK(a.post("/publish/", R"({"items":[]})", "Bearer " + grip_jwt(R"({"iss":"a"})")).status ==
          200);
    struct {
        const char* what;
        std::string token, reason;
    } refused[] = {
        {"expired", grip_jwt(exp_in(-1)), "JWT expired"},
        {"another key", grip_jwt(exp_in(60), "not-the-admin-key"), "bad JWT signature"},
        {"alg none", "eyJhbGciOiJub25lIiwidHlwIjoiSldUIn0.eyJpc3MiOiJ4In0.",
         "JWT alg must be HS256"},
        {"garbage", "a.b.c", "malformed JWT"},
        {"no key at all", "", "bad or missing bearer key"},
        {"a wrong key", "not-the-admin-key-either", "bad or missing bearer key"},
    };
    for (auto& r : refused) {
        INFO(r.what);
        auto resp = a.post("/publish", body, "Bearer " + r.token);
        CHECK(resp.status == 401);
        CHECK(resp.body.find(r.reason) != std::string::npos);
        CHECK(resp.headers.get("WWW-Authenticate") == "Bearer");
    }
    CHECK(a.published().size() == 1);
}

TEST_CASE("admin: --admin-open takes POSTs with no key", "[admin][grip]") {
    Admin open({}, true, "");
    CHECK(open.post("/publish", R"({"channel":"a","data":"x"})", "").status == 200);
    Admin closed({}, false, "");
    CHECK(closed.post("/publish", R"({"channel":"a","data":"x"})", "").status == 403);
}

TEST_CASE("admin: GET /ready is 200 while serving and 503 once draining; other methods 405",
          "[admin]") {
    Admin a;
    Request r;
    r.method = "GET";
    r.path = "/ready";
    auto ok = a.api.handle(r);
    CHECK(ok.status == 200);
    CHECK(ok.body == "ready\n");
    r.method = "HEAD";
    CHECK(a.api.handle(r).status == 200);
    r.method = "POST";
    auto no = a.api.handle(r);
    CHECK(no.status == 405);
    CHECK(no.headers.get("Allow") == std::optional<std::string_view>("GET, HEAD"));
    a.api.set_draining();
    r.method = "GET";
    auto draining = a.api.handle(r);
    CHECK(draining.status == 503);
    CHECK(draining.headers.get("Retry-After") == std::optional<std::string_view>("1"));
    // No key is asked for: a probe has none.
    CHECK(a.api.handle(r).status == 503);
}

TEST_CASE("admin: POST /publish with an array publishes a batch, ids in order, checked whole",
          "[admin][batch]") {
    Admin a;
    auto r =
        a.post("/publish", R"( [{"channel":"a","data":"1"},{"channel":"b","data":"2","event":"up"},
                                     {"channel":"a","data":""}])");
    REQUIRE(r.status == 200);
    auto p = a.published();
    REQUIRE(p.size() == 3);
    CHECK(r.body == "{\"ids\": [" + std::to_string(p[0].id) + ", " + std::to_string(p[1].id) +
                        ", " + std::to_string(p[2].id) + "]}\n");
    CHECK(p[1].id == p[0].id + 1);
    CHECK(p[2].id == p[1].id + 1);
    CHECK(p[1].event == "up");
    CHECK(p[2].data.empty());
    // A bad event refuses the batch, naming it; nothing of it is published.
    r = a.post("/publish", R"([{"channel":"a","data":"1"},{"channel":"a"}])");
    CHECK(r.status == 400);
    CHECK(r.body.starts_with("event 1: missing data"));
    r = a.post("/publish", R"([{"channel":"a","data":"1"},{"channel":"m0.slot.1","data":"x"}])");
    CHECK(r.status == 400);
    CHECK(r.body.starts_with("event 1: "));
    r = a.post("/publish", R"([{"channel":"a","data":"1"}, 7])");
    CHECK(r.status == 400);
    CHECK(r.body.starts_with("event 1: body must be a JSON object"));
    CHECK(a.published().size() == 3);
    // An empty array: nothing to publish, no ids.
    r = a.post("/publish", "[]");
    CHECK(r.status == 200);
    CHECK(r.body == "{\"ids\": []}\n");
}

TEST_CASE("admin: a batch past --publish-batch-max or --max-event-size is refused whole: 413",
          "[admin][batch]") {
    Admin a(bus::BusOptions{.max_event_size = 64});
    a.api.set_batch_max(3);
    auto r = a.post("/publish", R"([{"channel":"a","data":"1"},{"channel":"a","data":"2"},
                                    {"channel":"a","data":"3"},{"channel":"a","data":"4"}])");
    CHECK(r.status == 413);
    CHECK(r.body == "batch of 4 events, over --publish-batch-max 3\n");
    r = a.post("/publish", R"([{"channel":"a","data":"1"},{"channel":"a","data":")" +
                               std::string(100, 'x') + R"("}])");
    CHECK(r.status == 413);
    CHECK(r.body.starts_with("event 1: event is "));
    CHECK(a.published().empty());
    r = a.post("/publish", R"([{"channel":"a","data":"1"},{"channel":"a","data":"2"},
                              {"channel":"a","data":"3"}])");
    CHECK(r.status == 200);
}

TEST_CASE("admin: a batch the bus has no room for is 503, and nothing of it is taken",
          "[admin][batch]") {
    Admin a(bus::BusOptions{.capacity = 2});
    auto r = a.post("/publish", R"([{"channel":"a","data":"1"},{"channel":"a","data":"2"},
                                    {"channel":"a","data":"3"}])");
    CHECK(r.status == 503);
    CHECK(r.body.find("no event of the batch was taken") != std::string::npos);
    CHECK(a.published().empty());
}
