// The accounting of an answer's body against its declared length (PEP 3333,
// "Handling the Content-Length Header"; RFC 9112 §6.3).
#include <catch2/catch.hpp>

#include "http/body_length.hpp"

using m0::http::BodyLength;

TEST_CASE("body length: a body longer than it declared is cut at the declared length",
          "[http][body]") {
    BodyLength b(15, true);
    CHECK(b.admit(10) == 10);
    CHECK_FALSE(b.complete());
    CHECK(b.admit(10) == 5);  // the crossing chunk: 5 go, 5 are dropped
    CHECK(b.complete());
    CHECK(b.admit(7) == 0);  // anything after: dropped
    CHECK(b.taken() == 15);
    CHECK(b.over() == 12);
    CHECK_FALSE(b.short_of_declared());
}

TEST_CASE("body length: a body shorter than it declared is short at its end", "[http][body]") {
    BodyLength b(100, true);
    CHECK(b.admit(10) == 10);
    CHECK_FALSE(b.complete());
    CHECK(b.short_of_declared());
    CHECK(b.over() == 0);
}

TEST_CASE("body length: an exact body is complete, neither over nor short", "[http][body]") {
    BodyLength b(5, true);
    CHECK(b.admit(2) == 2);
    CHECK(b.admit(3) == 3);
    CHECK(b.complete());
    CHECK_FALSE(b.short_of_declared());
    CHECK(b.over() == 0);
}

TEST_CASE("body length: a declared zero is complete at once and drops everything", "[http][body]") {
    BodyLength b(0, true);
    CHECK(b.complete());
    CHECK(b.admit(4) == 0);
    CHECK(b.over() == 4);
    CHECK_FALSE(b.short_of_declared());
}

TEST_CASE("body length: without a declared length every byte goes and nothing is short",
          "[http][body]") {
    BodyLength b(std::nullopt, true);
    CHECK(b.admit(1 << 20) == 1 << 20);
    CHECK_FALSE(b.complete());
    CHECK_FALSE(b.short_of_declared());
    CHECK(b.over() == 0);
}

TEST_CASE(
    "body length: an answer that carries no body (HEAD, 204, 304) is never short, and is still "
    "capped",
    "[http][body]") {
    BodyLength head(1000, false);  // HEAD: the length is the GET's
    CHECK_FALSE(head.short_of_declared());
    CHECK(head.admit(1200) == 1000);
    CHECK(head.over() == 200);
    for (int status : {100, 204, 304}) CHECK(m0::http::bodiless_status(status));
    for (int status : {200, 206, 404, 500}) CHECK_FALSE(m0::http::bodiless_status(status));
}

TEST_CASE("body length: Content-Length is 1*DIGIT", "[http][body]") {
    using m0::http::parse_content_length;
    CHECK(parse_content_length("0") == 0u);
    CHECK(parse_content_length("15") == 15u);
    CHECK(parse_content_length("18446744073709551615") == UINT64_MAX);
    for (const char* bad :
         {"", "-1", "+1", " 1", "1 ", "1,1", "0x10", "18446744073709551616", "1.0"})
        CHECK_FALSE(parse_content_length(bad).has_value());
}
