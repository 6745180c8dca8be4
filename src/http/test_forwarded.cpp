#include <catch2/catch.hpp>

#include "http/forwarded.hpp"

using m0::http::Request;
using m0::http::TrustedProxies;

namespace {

TrustedProxies trusted(const char* list) {
    std::string err;
    auto t = TrustedProxies::parse(list, err);
    REQUIRE(t);
    return *t;
}

Request from(const char* peer, const char* xff = nullptr, const char* proto = nullptr) {
    Request r;
    r.remote_addr = peer;
    if (xff) r.headers.add("X-Forwarded-For", xff);
    if (proto) r.headers.add("X-Forwarded-Proto", proto);
    return r;
}

}  // namespace

TEST_CASE("forwarded: the list takes addresses, CIDR blocks and *, and names what it refuses",
          "[http][forwarded]") {
    auto t = trusted("127.0.0.1, 10.0.0.0/8,::1, fd00::/8");
    CHECK(t.trusts("127.0.0.1"));
    CHECK_FALSE(t.trusts("127.0.0.2"));
    CHECK(t.trusts("10.255.1.2"));
    CHECK_FALSE(t.trusts("11.0.0.1"));
    CHECK(t.trusts("::1"));
    CHECK(t.trusts("fdab::7"));
    CHECK_FALSE(t.trusts("fe80::1"));
    CHECK_FALSE(t.trusts("not an address"));
    CHECK(trusted("192.168.1.0/23").trusts("192.168.0.9"));
    CHECK_FALSE(trusted("192.168.1.0/23").trusts("192.168.2.1"));
    CHECK(trusted("0.0.0.0/0").trusts("8.8.8.8"));
    CHECK_FALSE(trusted("0.0.0.0/0").trusts("::1"));
    CHECK(trusted("*").trusts("::1"));
    CHECK_FALSE(trusted("").any());
    for (const char* bad :
         {"localhost", "10.0.0.0/33", "::/129", "1.2.3.4/", "1.2.3.4/x", "1.2.3"}) {
        std::string err;
        CHECK_FALSE(TrustedProxies::parse(bad, err));
        CHECK(err.find(bad) != std::string::npos);
    }
}

TEST_CASE("forwarded: a trusted peer's X-Forwarded-For and -Proto set the client and scheme",
          "[http][forwarded]") {
    auto t = trusted("127.0.0.1");
    auto r = from("127.0.0.1", "203.0.113.9", "https");
    m0::http::apply_forwarded(r, t);
    CHECK(r.remote_addr == "203.0.113.9");
    CHECK(r.scheme == "https");

    SECTION("read from the right: what the client wrote left of it is not believed") {
        auto r2 = from("127.0.0.1", "1.1.1.1, 203.0.113.9");
        m0::http::apply_forwarded(r2, t);
        CHECK(r2.remote_addr == "203.0.113.9");
    }
    SECTION("trusted hops are skipped; all trusted gives the leftmost") {
        auto r2 = from("127.0.0.1", "198.51.100.7, 127.0.0.1");
        m0::http::apply_forwarded(r2, t);
        CHECK(r2.remote_addr == "198.51.100.7");
        auto r3 = from("127.0.0.1", "127.0.0.1,127.0.0.1");
        m0::http::apply_forwarded(r3, t);
        CHECK(r3.remote_addr == "127.0.0.1");
    }
    SECTION("several header lines are one list") {
        auto r2 = from("127.0.0.1", "1.1.1.1");
        r2.headers.add("X-Forwarded-For", "2001:db8::5");
        m0::http::apply_forwarded(r2, t);
        CHECK(r2.remote_addr == "2001:db8::5");
    }
    SECTION("a value that is not an address, or a scheme other than http/https, is ignored") {
        auto r2 = from("127.0.0.1", "unknown, <script>", "gopher");
        m0::http::apply_forwarded(r2, t);
        CHECK(r2.remote_addr == "127.0.0.1");
        CHECK(r2.scheme == "http");
        auto r3 = from("127.0.0.1", nullptr, "http, HTTPS");
        m0::http::apply_forwarded(r3, t);
        CHECK(r3.scheme == "https");
    }
}

TEST_CASE("forwarded: an untrusted peer's headers change nothing", "[http][forwarded]") {
    auto r = from("192.0.2.1", "203.0.113.9", "https");
    m0::http::apply_forwarded(r, trusted("127.0.0.1"));
    CHECK(r.remote_addr == "192.0.2.1");
    CHECK(r.scheme == "http");
    auto r2 = from("127.0.0.1", "203.0.113.9", "https");
    m0::http::apply_forwarded(r2, trusted(""));
    CHECK(r2.remote_addr == "127.0.0.1");
    CHECK(r2.scheme == "http");
}

TEST_CASE("forwarded: loopback_only is true only when every address a host names is loopback",
          "[http][forwarded]") {
    CHECK(m0::http::loopback_only("127.0.0.1"));
    CHECK(m0::http::loopback_only("127.3.2.1"));
    CHECK(m0::http::loopback_only("::1"));
    CHECK(m0::http::loopback_only("[::1]"));
    CHECK_FALSE(m0::http::loopback_only("0.0.0.0"));
    CHECK_FALSE(m0::http::loopback_only("10.1.2.3"));
    CHECK_FALSE(m0::http::loopback_only("::"));
    CHECK_FALSE(m0::http::loopback_only("no-such-host.invalid"));
}
