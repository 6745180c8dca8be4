#include <catch2/catch.hpp>
#include <cstdlib>
#include <ctime>

#include "http/access.hpp"

using m0::http::AccessRecord;
using m0::http::format_access;
using m0::http::redact_target;

TEST_CASE("access: a credential in the query is redacted, nothing else", "[http][access]") {
    CHECK(redact_target("/native/live?grant=abc.def") == "/native/live?grant=[redacted]");
    CHECK(redact_target("/x?a=1&GRANT=s&b=2&Token=t&access_token=u&jwt=v") ==
          "/x?a=1&GRANT=[redacted]&b=2&Token=[redacted]&access_token=[redacted]&jwt=[redacted]");
    CHECK(redact_target("/x?key=k&signature=s&sig=s&password=p&secret=q") ==
          "/x?key=[redacted]&signature=[redacted]&sig=[redacted]&password=[redacted]&secret=["
          "redacted]");
    // Names that only contain a secret's name, a bare name, and no query at all stay.
    CHECK(redact_target("/x?grantee=alice&keys=1&grant&tokens=2") ==
          "/x?grantee=alice&keys=1&grant&tokens=2");
    CHECK(redact_target("/plain/path") == "/plain/path");
    CHECK(redact_target("/x?") == "/x?");
    CHECK(redact_target("/x?a=1&&grant=z") == "/x?a=1&&grant=[redacted]");
}

TEST_CASE("access: the combined log format, then rt, then a hold's duration and events",
          "[http][access]") {
    setenv("TZ", "UTC", 1);
    tzset();
    AccessRecord r;
    r.remote = "127.0.0.3";
    r.received = 1796083200;  // 2026-12-01 00:00:00 UTC
    r.request = "GET /hold?channel=c HTTP/1.1";
    r.status = 200;
    r.bytes = 342;
    r.user_agent = "curl/7.88.1";
    r.seconds = 0.0014;
    CHECK(format_access(r) ==
          "127.0.0.3 - - [01/Dec/2026:00:00:00 +0000] \"GET /hold?channel=c HTTP/1.1\" 200 342 "
          "\"-\" \"curl/7.88.1\" rt=0.001");
    r.hold = true;
    r.hold_seconds = 12.5;
    r.events = 42;
    CHECK(format_access(r).ends_with(" rt=0.001 hold=12.500 events=42"));
}

TEST_CASE("access: client input cannot forge a line or a field", "[http][access]") {
    AccessRecord r;
    r.request = "";  // a request that never parsed
    r.status = 400;
    r.referer = "a\"b\\c\nd\x7f\xc3\xa9";
    r.user_agent = "x\r\n127.0.0.1 - - [forged]";
    std::string line = format_access(r);
    CHECK(line.find('\n') == std::string::npos);
    CHECK(line.find('\r') == std::string::npos);
    CHECK(line.starts_with("- - - ["));
    CHECK(line.find("] \"-\" 400 0 \"a\\x22b\\x5Cc\\x0Ad\\x7F\\xC3\\xA9\" ") != std::string::npos);
    CHECK(line.find("\"x\\x0D\\x0A127.0.0.1 - - [forged]\"") != std::string::npos);
}
