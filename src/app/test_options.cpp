#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "app/options.hpp"

using m0::app::OptionError;
using m0::app::Options;

namespace {

const std::vector<std::string> kMojo{"mojo"};

Options parse(std::vector<std::string> args) {
    std::string name = "m0serve";
    std::vector<char*> argv{name.data()};
    for (auto& a : args) argv.push_back(a.data());
    return m0::app::parse_options(static_cast<int>(argv.size()), argv.data(), kMojo);
}

std::string error_of(std::vector<std::string> args) {
    try {
        parse(std::move(args));
    } catch (const OptionError& e) {
        return e.what();
    }
    return "(no error)";
}

}  // namespace

TEST_CASE("options: a positional APP is the WSGI application at /", "[app][options]") {
    auto o = parse({"config.wsgi", "--mount", "/native=mojo"});
    REQUIRE(o.mounts.size() == 2);
    CHECK(o.mounts[0].prefix == "/native");
    CHECK_FALSE(o.mounts[0].wsgi);
    CHECK(o.mounts[1].prefix == "/");
    CHECK(o.mounts[1].spec == "config.wsgi:application");
    CHECK(o.mounts[1].wsgi);
    CHECK(parse({"pkg.app:make"}).mounts[0].spec == "pkg.app:make");
}

TEST_CASE("options: --flag=value and --flag value are the same", "[app][options]") {
    auto a = parse({"app", "--blocking-threads=8", "--listen", "127.0.0.1:9000"});
    auto b = parse({"app", "--blocking-threads", "8", "--listen=127.0.0.1:9000"});
    CHECK(a.blocking_threads == 8);
    CHECK(b.blocking_threads == 8);
    CHECK(a.port == 9000);
    CHECK(b.port == 9000);
}

TEST_CASE("options: bad input is one line naming the flag", "[app][options]") {
    CHECK(error_of({"app", "--bogus"}) == "unknown option '--bogus' (see --help)");
    CHECK(error_of({"app", "--blocking-threads", "0"}) ==
          "--blocking-threads wants a number from 1 to 1024, got '0'");
    CHECK(error_of({"app", "--listen"}) == "--listen needs a value");
    CHECK(error_of({}).starts_with("nothing to serve"));
    CHECK(error_of({"a", "b"}) == "one APP only, got 'a' and 'b'");
    CHECK(error_of({"--mount", "/=nosuch"}).find("neither module:callable") != std::string::npos);
    CHECK(error_of({"app", "--admin-open"}) == "--admin-open needs --admin-listen");
    CHECK(error_of({"app", "--bus", "redis://127.0.0.1:6379"}).ends_with("needs --realtime"));
    CHECK(error_of({"app", "--realtime", "--workers", "2"}).find("needs a shared bus") !=
          std::string::npos);
}
