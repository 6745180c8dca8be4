// The Redis bus's live messages (redis_message.hpp): both forms read, in
// order; anything else refused whole, fed whole and cut short at every byte.
#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "bus/redis_message.hpp"

using namespace m0::bus;
using m0::bus::redis::parse_message;

namespace {

std::vector<PublishFrame> parsed(std::string_view payload, bool& ok) {
    std::vector<PublishFrame> out;
    ok = parse_message(payload, "c", out);
    return out;
}

}  // namespace

TEST_CASE("redis message: the single form is one event, as before batched messages", "[redis]") {
    bool ok = false;
    auto f = parsed("1234\nupdate\n\none\ntwo", ok);
    REQUIRE(ok);
    REQUIRE(f.size() == 1);
    CHECK(f[0].id == 1234);
    CHECK(f[0].channel == "c");
    CHECK(f[0].event == "update");
    CHECK(f[0].data == "one\ntwo");
    CHECK_FALSE(f[0].raw);
    f = parsed("7\n\n1\ndata: x\n\n", ok);
    REQUIRE(ok);
    CHECK((f[0].id == 7 && f[0].raw && f[0].data == "data: x\n\n"));
    // Fewer than three line ends: not a message.
    parsed("7\nev\n", ok);
    CHECK_FALSE(ok);
}

TEST_CASE("redis message: the batched form is its events in order, with any bytes in them",
          "[redis]") {
    const std::string payload =
        "*1\n"
        "100 2 8 0\nup"
        "a b\n\n9 9"
        "101 0 0 1\n"
        "102 13 4 1\nhttp-response{\"x\"";
    bool ok = false;
    auto f = parsed(payload, ok);
    REQUIRE(ok);
    REQUIRE(f.size() == 3);
    CHECK((f[0].id == 100 && f[0].event == "up" && f[0].data == "a b\n\n9 9" && !f[0].raw));
    CHECK((f[1].id == 101 && f[1].event.empty() && f[1].data.empty() && f[1].raw));
    CHECK((f[2].id == 102 && f[2].event == kResponseFormat && f[2].data == "{\"x\"" && f[2].raw));
    // Appended: what was in `out` stays.
    std::vector<PublishFrame> out(1);
    REQUIRE(parse_message(payload, "c", out));
    CHECK(out.size() == 4);

    // Cut short anywhere, it is refused whole, `out` as it was; except where
    // the cut falls between two events and leaves two or more.
    for (size_t n = 0; n < payload.size(); ++n) {
        INFO(n);
        std::vector<PublishFrame> part(1);
        const bool taken = parse_message(payload.substr(0, n), "c", part);
        const bool whole_two = n == payload.find("102 ");
        CHECK(taken == whole_two);
        CHECK(part.size() == (whole_two ? 3u : 1u));
    }
}

TEST_CASE("redis message: a batched message that is not well formed is refused whole", "[redis]") {
    for (const char* bad : {
             "*1\n",                             // no event
             "*1\n5 0 1 0\nx",                   // one event: the single form's
             "*2\n5 0 1 0\nx6 0 1 0\ny",         // another version
             "*1\n5 0 1 2\nx6 0 1 0\ny",         // RAW neither 0 nor 1
             "*1\n5 0 9 0\nx6 0 1 0\ny",         // a length past the end
             "*1\n5 0 1 0\nx6 0 1 0\nyz",        // bytes after the last event
             "*1\n5  0 1 0\nx6 0 1 0\ny",        // two spaces
             "*1\n5 0 1 0 x6 0 1 0\ny",          // no line end
             "*1\nx 0 1 0\nx6 0 1 0\ny",         // no id
             "*1\n5 0 -1 0\nx6 0 1 0\ny",        // a negative length
             "*1\n5 0 99999999999999999999 0\n"  // a length past 2^64
         }) {
        INFO(bad);
        bool ok = true;
        auto f = parsed(bad, ok);
        CHECK_FALSE(ok);
        CHECK(f.empty());
    }
}
