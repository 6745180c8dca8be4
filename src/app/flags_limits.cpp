// The flag table's rows for what a request may be (flags.cpp has the rest and
// says how a row is read). Main thread only, before anything else starts.
#include "app/flags.hpp"

namespace m0::app {

// clang-format off
#define AT(field) +[](Options& o) -> auto& { return o.field; }
// clang-format on

std::vector<Flag> with_request_rows(std::vector<Flag> rows) {
    std::vector<Flag> request{
        {
            .name = "max-header-size",
            .kind = Flag::value,
            .metavar = "BYTES",
            .help = "request head limit, 431 past it (default {default})",
            .doc = "request line plus headers; past it: 431 (414 when the request target alone is "
                   "longer)",
            .to = number(AT(server.limits.max_header), 256, 1 << 24),
        },
        {
            .name = "max-headers",
            .kind = Flag::value,
            .metavar = "N",
            .help = "header field lines per request, 431 past it (default {default})",
            .doc = "header field lines of one request (trailer fields included); past it: 431 "
                   "`too many header fields`",
            .to = number(AT(server.limits.max_headers), 1, 100000),
        },
        {
            .name = "max-body-size",
            .kind = Flag::value,
            .metavar = "BYTES",
            .help = "request body limit, 413 past it (default {default})",
            .doc = "request body; past it: 413",
            .to = number(AT(server.limits.max_body), 0, size_t(1) << 40),
        },
        {
            .name = "max-body-total",
            .kind = Flag::value,
            .metavar = "BYTES",
            .shown = "268435456, or --max-body-size if larger",
            .help = "request bodies buffered at once in all, 503 past it\n"
                    "(default {default})",
            .doc = "request bodies a process buffers at once, in all (each is read whole before "
                   "its application runs), counted as bytes arrive: a request whose body would "
                   "pass it (its bytes as they come, or at its head a Content-Length larger "
                   "than what is left, before any `100 Continue`; a declared length reserves "
                   "nothing) is answered 503 with `Retry-After` and the reason; over HTTP/1.1 the "
                   "connection then closes, over HTTP/2 the stream is reset. Without it one "
                   "HTTP/2 connection's streams could hold `--h2-max-concurrent-streams` times "
                   "`--max-body-size`. Given, at least `--max-body-size`; "
                   "`m0_request_bodies_refused_total` counts the refusals",
            .to = number(AT(server.max_body_total), 1, uint64_t(1) << 44),
        },
        {
            .name = "header-timeout",
            .kind = Flag::value,
            .metavar = "SECONDS",
            .help = "time to receive a request's head, 408 past it (default {default})",
            .doc = "a request head not complete in time: 408, closed",
            .to = seconds(AT(server.header_timeout)),
        },
        {
            .name = "body-timeout",
            .kind = Flag::value,
            .metavar = "SECONDS",
            .help = "a request body's longest pause, 408 past it (default {default})",
            .doc = "a request body that sends nothing this long: 408, closed; a body still "
                   "arriving is never cut (an upload on a slow link takes what it takes)",
            .to = seconds(AT(server.body_timeout)),
        },
    };
    return insert_after(std::move(rows), "forwarded-allow-ips", std::move(request));
}

#undef AT

}  // namespace m0::app
