// The SSE encoder (WHATWG HTML §9.2).
#include <catch2/catch.hpp>
#include <string>
#include <tuple>
#include <vector>

#include "http/sse.hpp"

using namespace m0;

// ---- the SSE encoder -----------------------------------------------------------

TEST_CASE("sse: an event is an id line, an optional event line, data lines and a blank line",
          "[http][sse]") {
    SECTION("without an event name") {
        CHECK(sse::encode_event(1, "", "hello") == "id: 1\ndata: hello\n\n");
    }
    SECTION("with an event name") {
        CHECK(sse::encode_event(42, "update", "x") == "id: 42\nevent: update\ndata: x\n\n");
    }
    SECTION("large ids are written in full") {
        CHECK(sse::encode_event(18446744073709551615ull, "", "") ==
              "id: 18446744073709551615\ndata: \n\n");
    }
    SECTION("data that looks like a field stays data") {
        CHECK(sse::encode_event(2, "", "id: 9") == "id: 2\ndata: id: 9\n\n");
    }
}

TEST_CASE("sse: multi-line data becomes one data line per line, split at LF, CRLF and CR",
          "[http][sse]") {
    SECTION("LF") { CHECK(sse::encode_event(1, "", "a\nb") == "id: 1\ndata: a\ndata: b\n\n"); }
    SECTION("CRLF counts as one line end") {
        CHECK(sse::encode_event(1, "", "a\r\nb") == "id: 1\ndata: a\ndata: b\n\n");
    }
    SECTION("CR") { CHECK(sse::encode_event(1, "", "a\rb") == "id: 1\ndata: a\ndata: b\n\n"); }
    SECTION("mixed, with empty lines kept") {
        CHECK(sse::encode_event(3, "e", "one\r\rtwo\n\nthree\r\n") ==
              "id: 3\nevent: e\ndata: one\ndata: \ndata: two\ndata: \ndata: three\ndata: \n\n");
    }
    SECTION("LF CR is two line ends") {
        CHECK(sse::encode_event(1, "", "a\n\rb") == "id: 1\ndata: a\ndata: \ndata: b\n\n");
    }
    SECTION("a trailing line end gives a trailing empty data line (the client keeps the LF)") {
        CHECK(sse::encode_event(1, "", "a\n") == "id: 1\ndata: a\ndata: \n\n");
        CHECK(sse::encode_event(1, "", "a\r") == "id: 1\ndata: a\ndata: \n\n");
    }
    SECTION("only line ends") {
        CHECK(sse::encode_event(1, "", "\r\n") == "id: 1\ndata: \ndata: \n\n");
    }
}

TEST_CASE("sse: empty data is one empty data line", "[http][sse]") {
    CHECK(sse::encode_event(7, "", "") == "id: 7\ndata: \n\n");
    CHECK(sse::encode_event(7, "ping", "") == "id: 7\nevent: ping\ndata: \n\n");
}

TEST_CASE("sse: retry and heartbeat lines", "[http][sse]") {
    CHECK(sse::encode_retry(3000) == "retry: 3000\n\n");
    CHECK(sse::encode_retry(0) == "retry: 0\n\n");
    CHECK(sse::kHeartbeat == ":\n\n");
}

TEST_CASE("sse: encoded_size is the size of encode_event, without encoding", "[http][sse]") {
    for (uint64_t id : {uint64_t{1}, uint64_t{42}, uint64_t{18446744073709551615ull}})
        for (std::string_view event : {"", "update"})
            for (std::string_view data : {"", "x", "a\nb", "a\r\nb", "a\rb", "\n\r",
                                          "one\r\rtwo\n\n", "\r\n\r\n", "trailing\r", "\n"}) {
                INFO(id << " '" << event << "' '" << data << "'");
                CHECK(sse::encoded_size(id, event, data) ==
                      sse::encode_event(id, event, data).size());
            }
    // Each line end costs a "data: " field: 1000 LFs are 7 bytes each on the wire.
    CHECK(sse::encoded_size(1, "", std::string(1000, '\n')) == 6 + 1001 * 7 + 1);
}

TEST_CASE("sse: decode_event reads back what encode_event wrote, as a client reads it",
          "[http][sse]") {
    std::string event, data;
    for (auto [name, in, out] : std::vector<std::tuple<std::string, std::string, std::string>>{
             {"", "plain", "plain"},
             {"tick", "a\r\nb\rc\nd", "a\nb\nc\nd"},
             {"", "", ""},
             {"e", "\n\n", "\n\n"},
             {"", "trailing\r\n", "trailing\n"},
         }) {
        INFO(in);
        REQUIRE(sse::decode_event(sse::encode_event(77, name, in), event, data));
        CHECK(event == name);
        CHECK(data == out);
    }
    CHECK_FALSE(sse::decode_event("id: 1\n\n", event, data));               // no data line
    CHECK_FALSE(sse::decode_event("id: 1\ndata: x\n", event, data));        // not ended
    CHECK_FALSE(sse::decode_event("retry: 5\ndata: x\n\n", event, data));   // another field
    CHECK_FALSE(sse::decode_event("data: x\n\ndata: y\n\n", event, data));  // two events
}
