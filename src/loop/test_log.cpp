// The log line: client input cannot forge a line or reach a terminal raw.
#include <catch2/catch.hpp>

#include "loop/log.hpp"

using m0::log::format_line;

TEST_CASE("log: control bytes are written as \\xNN and a line feed starts a continuation line",
          "[loop][log]") {
    CHECK(format_line("GET /plain") == "GET /plain");
    CHECK(format_line(std::string("a\0b", 3)) == "a\\x00b");
    CHECK(format_line("a\rb\x1b[31mred\x7f") == "a\\x0db\\x1b[31mred\\x7f");
    CHECK(format_line("first\nm0serve: error: forged") == "first\n  | m0serve: error: forged");
    CHECK(format_line("caf\xc3\xa9") == "caf\xc3\xa9");  // UTF-8 passes as it is
}

TEST_CASE("log: a worker's lines start with its number, the parent's with the program alone",
          "[loop][log]") {
    CHECK(m0::log::prefix() == "m0serve");
    m0::log::set_worker(2);
    CHECK(m0::log::prefix() == "m0serve worker=2");
}
