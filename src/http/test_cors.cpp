#include <catch2/catch.hpp>

#include "http/cors.hpp"

using m0::http::CorsPolicy;
using m0::http::Headers;
using m0::http::normalize_origin;

namespace {

CorsPolicy policy(std::vector<std::string> origins, bool credentials = false) {
    std::string err;
    auto p = CorsPolicy::make(origins, credentials, err);
    INFO(err);
    REQUIRE(p);
    return *p;
}

std::string refusal(std::vector<std::string> origins, bool credentials = false) {
    std::string err;
    auto p = CorsPolicy::make(origins, credentials, err);
    CHECK_FALSE(p);
    return err;
}

size_t count(const Headers& h, std::string_view name) {
    size_t n = 0;
    for (const auto& [k, v] : h.items) n += m0::http::iequals(k, name);
    return n;
}

}  // namespace

TEST_CASE("cors: an origin is spelled one way: lower-case scheme and host, no default port",
          "[http][cors]") {
    CHECK(normalize_origin("http://127.0.0.2:8080") == "http://127.0.0.2:8080");
    CHECK(normalize_origin("HTTPS://App.Example.ORG") == "https://app.example.org");
    CHECK(normalize_origin("http://example.org:80") == "http://example.org");
    CHECK(normalize_origin("https://example.org:443") == "https://example.org");
    CHECK(normalize_origin("https://example.org:80") == "https://example.org:80");
    CHECK(normalize_origin("http://[::1]:9000") == "http://[::1]:9000");
    CHECK(normalize_origin("http://[::1]") == "http://[::1]");
    CHECK(normalize_origin("app+x.y-z://h_1") == "app+x.y-z://h_1");
}

TEST_CASE("cors: what is not scheme://host[:port] is not an origin", "[http][cors]") {
    for (const char* bad : {"",
                            "*",
                            "null",
                            "example.org",
                            "http://",
                            "http://example.org/",
                            "http://example.org/path",
                            "http://example.org?q",
                            "http://user@example.org",
                            "http://example.org:",
                            "http://example.org:0",
                            "http://example.org:65536",
                            "http://example.org:8x",
                            "http://exa mple.org",
                            "1http://example.org",
                            "://example.org",
                            "http://[::1",
                            "http://[zz]",
                            "http://example.org\r\nX: y",
                            "http://example.org:80:80"}) {
        INFO(bad);
        CHECK_FALSE(normalize_origin(bad));
    }
}

TEST_CASE("cors: a listed origin is echoed as sent; any other, or none, gets no header",
          "[http][cors]") {
    auto p = policy({"http://127.0.0.2:8080", "https://App.example.org"});
    CHECK(p.enabled());
    CHECK(p.allow_origin("http://127.0.0.2:8080") == "http://127.0.0.2:8080");
    SECTION("scheme and host compare without case, the echo keeps the request's spelling") {
        CHECK(p.allow_origin("HTTP://127.0.0.2:8080") == "HTTP://127.0.0.2:8080");
        CHECK(p.allow_origin("https://app.EXAMPLE.org") == "https://app.EXAMPLE.org");
        CHECK(p.allow_origin("https://app.example.org:443") == "https://app.example.org:443");
    }
    SECTION("another port, scheme, host, or a longer name is another origin") {
        CHECK_FALSE(p.allow_origin("http://127.0.0.2:8081"));
        CHECK_FALSE(p.allow_origin("http://127.0.0.2"));
        CHECK_FALSE(p.allow_origin("https://127.0.0.2:8080"));
        CHECK_FALSE(p.allow_origin("http://127.0.0.3:8080"));
        CHECK_FALSE(p.allow_origin("https://app.example.org.evil.test"));
        CHECK_FALSE(p.allow_origin("https://evil-app.example.org"));
        CHECK_FALSE(p.allow_origin("http://app.example.org"));
    }
    SECTION("no Origin, an opaque one, or a malformed one") {
        CHECK_FALSE(p.allow_origin(std::nullopt));
        CHECK_FALSE(p.allow_origin("null"));
        CHECK_FALSE(p.allow_origin("http://127.0.0.2:8080/"));
        CHECK_FALSE(p.allow_origin(""));
    }
}

TEST_CASE("cors: * allows every origin, and a request with none", "[http][cors]") {
    auto p = policy({"*"});
    CHECK(p.allow_origin("http://anything.test:1") == "*");
    CHECK(p.allow_origin(std::nullopt) == "*");
    CHECK(p.describe() == "*");
}

TEST_CASE("cors: the flags are checked at start-up", "[http][cors]") {
    CHECK(refusal({"http://ok.test", "http://bad.test/"}).find("'http://bad.test/'") !=
          std::string::npos);
    CHECK(refusal({"example.org"}).find("not an origin") != std::string::npos);
    CHECK(refusal({"*"}, true).find("--cors-credentials") != std::string::npos);
    CHECK(refusal({}, true).find("--cors-credentials needs --cors-origin") != std::string::npos);
    CHECK_FALSE(policy({}).enabled());
    CHECK(policy({}).describe() == "none");
    CHECK(policy({"HTTP://A.test:80", "http://a.test"}).describe() == "http://a.test");
    CHECK(policy({"http://a.test", "https://b.test"}, true).describe() ==
          "http://a.test, https://b.test with credentials");
}

TEST_CASE("cors: the hold head gets the policy's fields and nothing else", "[http][cors]") {
    Headers h;
    h.add("Content-Type", "text/event-stream");
    SECTION("an allowed origin: Allow-Origin, Vary, and Allow-Credentials when asked") {
        policy({"http://a.test"}, true).apply("http://a.test", h);
        CHECK(h.get("Access-Control-Allow-Origin") == "http://a.test");
        CHECK(h.get("Access-Control-Allow-Credentials") == "true");
        CHECK(h.get("Vary") == "Origin");
    }
    SECTION("a refused origin: no Access-Control field, even one the handler set") {
        h.add("Access-Control-Allow-Origin", "*");
        h.add("Access-Control-Allow-Credentials", "true");
        policy({"http://a.test"}, true).apply("http://b.test", h);
        CHECK(count(h, "Access-Control-Allow-Origin") == 0);
        CHECK(count(h, "Access-Control-Allow-Credentials") == 0);
        CHECK(h.get("Vary") == "Origin");
    }
    SECTION("the handler's Vary is kept and extended once") {
        h.add("Vary", "Cookie");
        auto p = policy({"http://a.test"});
        p.apply("http://a.test", h);
        p.apply("http://a.test", h);
        CHECK(h.get_joined("Vary") == "Cookie, Origin");
        CHECK(count(h, "Access-Control-Allow-Origin") == 1);
    }
    SECTION("* needs no Vary") {
        policy({"*"}).apply(std::nullopt, h);
        CHECK(h.get("Access-Control-Allow-Origin") == "*");
        CHECK_FALSE(h.has("Vary"));
    }
    SECTION("no --cors-origin: the head is left as the handler made it") {
        h.add("Access-Control-Allow-Origin", "https://set.by.app");
        policy({}).apply("http://a.test", h);
        CHECK(h.get("Access-Control-Allow-Origin") == "https://set.by.app");
        CHECK_FALSE(h.has("Vary"));
    }
}

namespace {

m0::http::Request preflight_of(std::string method, std::optional<std::string> origin,
                               std::optional<std::string> asks_headers = std::nullopt) {
    m0::http::Request r;
    r.method = "OPTIONS";
    if (origin) r.headers.add("Origin", *origin);
    r.headers.add("Access-Control-Request-Method", std::move(method));
    if (asks_headers) r.headers.add("Access-Control-Request-Headers", *asks_headers);
    return r;
}

}  // namespace

TEST_CASE("cors: a preflight is an OPTIONS with Origin and Access-Control-Request-Method",
          "[http][cors]") {
    using m0::http::is_preflight;
    using m0::http::preflight_reads;
    CHECK(is_preflight(preflight_of("GET", "http://a.test")));
    CHECK(preflight_reads(preflight_of("GET", "http://a.test")));
    CHECK(preflight_reads(preflight_of("HEAD", "http://a.test")));
    CHECK(is_preflight(preflight_of("POST", "http://a.test")));
    CHECK_FALSE(preflight_reads(preflight_of("POST", "http://a.test")));
    CHECK_FALSE(preflight_reads(preflight_of("get", "http://a.test")));  // methods have case
    CHECK_FALSE(is_preflight(preflight_of("GET", std::nullopt)));
    auto plain = preflight_of("GET", "http://a.test");
    plain.method = "GET";
    CHECK_FALSE(is_preflight(plain));
    m0::http::Request options;
    options.method = "OPTIONS";
    options.headers.add("Origin", "http://a.test");
    CHECK_FALSE(is_preflight(options));
}

TEST_CASE("cors: a hold's preflight: 204 with the origin, GET and the asked headers; else a reason",
          "[http][cors]") {
    SECTION("an allowed origin, with the headers a fetch-based EventSource sends") {
        auto r =
            policy({"http://a.test"}, true)
                .preflight(preflight_of("GET", "http://A.test:80", "last-event-id,authorization"));
        CHECK(r.status == 204);
        CHECK(r.body.empty());
        CHECK(r.headers.get("Access-Control-Allow-Origin") == "http://A.test:80");  // as sent
        CHECK(r.headers.get("Access-Control-Allow-Credentials") == "true");
        CHECK(r.headers.get("Access-Control-Allow-Methods") == "GET, HEAD");
        CHECK(r.headers.get("Access-Control-Allow-Headers") == "last-event-id, authorization");
        CHECK(r.headers.get("Access-Control-Max-Age") ==
              std::to_string(m0::http::kPreflightMaxAge));
        CHECK(r.headers.get("Vary") == "Origin");
    }
    SECTION("no headers asked: none allowed; spaces and empty items in the list are dropped") {
        auto p = policy({"*"});
        auto r = p.preflight(preflight_of("HEAD", "http://x.test"));
        CHECK(r.status == 204);
        CHECK(r.headers.get("Access-Control-Allow-Origin") == "*");
        CHECK_FALSE(r.headers.has("Access-Control-Allow-Headers"));
        CHECK_FALSE(r.headers.has("Vary"));
        r = p.preflight(preflight_of("GET", "http://x.test", " last-event-id ,, cache-control\t"));
        CHECK(r.headers.get("Access-Control-Allow-Headers") == "last-event-id, cache-control");
    }
    SECTION("another origin: 403 with a reason and no Access-Control field") {
        auto r = policy({"http://a.test"}, true).preflight(preflight_of("GET", "http://b.test"));
        CHECK(r.status == 403);
        CHECK(r.body.find("--cors-origin") != std::string::npos);
        CHECK(count(r.headers, "Access-Control-Allow-Origin") == 0);
        CHECK(count(r.headers, "Access-Control-Allow-Methods") == 0);
    }
    SECTION("a method a hold is not read with: 403 naming it") {
        auto r = policy({"http://a.test"}).preflight(preflight_of("DELETE", "http://a.test"));
        CHECK(r.status == 403);
        CHECK(r.body.find("DELETE") != std::string::npos);
        CHECK(count(r.headers, "Access-Control-Allow-Origin") == 0);
    }
    SECTION("asked headers that are not field names: 400") {
        auto r = policy({"http://a.test"})
                     .preflight(preflight_of("GET", "http://a.test", "last-event-id, x y"));
        CHECK(r.status == 400);
        CHECK(count(r.headers, "Access-Control-Allow-Origin") == 0);
    }
}
