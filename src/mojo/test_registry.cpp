// The mojo mount registry: what `--mount PREFIX=NAME` may name, and the
// refusal of a name given twice (m0::app::run exits 2 on it; smoke
// outoftree-app drives that from an application's own binary).
#include <catch2/catch.hpp>

#include "mojo/builtin.hpp"
#include "mojo/registry.hpp"

using namespace m0;

namespace {

struct PingMount {
    static constexpr std::string_view name = "ping";
    explicit PingMount(const mojo::MojoEnv&) {}
    http::Response serve(const http::Request&) {
        http::Response r;
        r.body = "pong";
        return r;
    }
};

// Another type under the built-in mount's name.
struct ImpostorMount {
    static constexpr std::string_view name = "mojo";
    explicit ImpostorMount(const mojo::MojoEnv&) {}
    http::Response serve(const http::Request&) {
        http::Response r;
        r.body = "impostor";
        return r;
    }
};

std::string body_of(const mojo::Registry& reg, std::string_view name, const char* path) {
    auto h = reg.make(name, mojo::MojoEnv{});
    REQUIRE(h);
    http::Request req;
    req.method = "GET";
    req.path_info = path;
    return h->serve(req).body;
}

}  // namespace

TEST_CASE("registry: the listed types, by name, in the order listed", "[mojo]") {
    auto reg = mojo::registry<mojo::BuiltinMount, PingMount>();
    CHECK(reg.names() == std::vector<std::string>{"mojo", "ping"});
    CHECK(reg.duplicates().empty());
    CHECK(body_of(reg, "ping", "/") == "pong");
    CHECK(body_of(reg, "mojo", "/hello").find("hello") != std::string::npos);
    CHECK_FALSE(reg.make("nope", mojo::MojoEnv{}));
}

TEST_CASE("registry: each make is a handler of its own", "[mojo]") {
    auto reg = mojo::registry<PingMount>();
    auto a = reg.make("ping", mojo::MojoEnv{});
    auto b = reg.make("ping", mojo::MojoEnv{});
    REQUIRE(a);
    REQUIRE(b);
    CHECK(a.get() != b.get());
}

TEST_CASE("registry: a name given twice is refused and recorded, the first kept", "[mojo]") {
    auto reg = mojo::registry<mojo::BuiltinMount, PingMount, ImpostorMount>();
    CHECK(reg.names() == std::vector<std::string>{"mojo", "ping"});
    CHECK(reg.duplicates() == std::vector<std::string>{"mojo"});
    CHECK(body_of(reg, "mojo", "/hello") != "impostor");

    SECTION("added by hand, too") {
        mojo::Registry r;
        auto ping = [](const mojo::MojoEnv& env) -> std::unique_ptr<mojo::Handler> {
            return std::make_unique<mojo::HandlerFor<PingMount>>(env);
        };
        CHECK(r.add("x", ping));
        CHECK_FALSE(r.add("x", ping));
        CHECK(r.add("y", ping));
        CHECK(r.names() == std::vector<std::string>{"x", "y"});
        CHECK(r.duplicates() == std::vector<std::string>{"x"});
    }
}
