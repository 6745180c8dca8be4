// Access log lines: the combined log format (Apache's, nginx's default),
// with the request time and, for a hold, how long it lasted and how many
// events it delivered. Pure functions: any thread.
//
//   127.0.0.1 - - [01/Dec/2026:05:30:40 +0000] "GET /native/live?grant=[redacted] HTTP/1.1"
//       200 1234 "-" "curl/7.88.1" rt=0.003 hold=12.500 events=42
//
// (one line). rt is the seconds from the request to its answer's head (for a
// hold) or its end; bytes count everything written for the answer, head
// included, as nginx's $bytes_sent.
#pragma once
#include <cstdint>
#include <ctime>
#include <string>
#include <string_view>

namespace m0::http {

struct AccessRecord {
    std::string remote;   // the client (after --forwarded-allow-ips)
    time_t received = 0;  // wall clock, when the request arrived
    std::string request;  // "METHOD TARGET HTTP/1.1", the target redacted; empty: "-"
    int status = 0;
    uint64_t bytes = 0;
    std::string referer, user_agent;  // empty: "-"
    double seconds = 0;               // rt
    bool hold = false;
    double hold_seconds = 0;
    uint64_t events = 0;
};

// The line, without its LF. Quoted fields escape '"', '\' and every byte
// outside printable ASCII as \xHH, so no client input can forge a line.
std::string format_access(const AccessRecord& r);

// `target` with the value of every query parameter that carries a credential
// (grant, token, access_token, jwt, key, signature, sig, password, secret;
// names compared without case) replaced by "[redacted]".
std::string redact_target(std::string_view target);

}  // namespace m0::http
