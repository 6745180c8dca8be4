// The flag table's HTTP/2 rows (flags.cpp has the rest and says how a row
// is read). Main thread only, before anything else starts.
#include "app/flags.hpp"

namespace m0::app {

// clang-format off
#define AT(field) +[](Options& o) -> auto& { return o.field; }
// clang-format on

std::vector<Flag> with_h2_rows(std::vector<Flag> rows) {
    std::vector<Flag> h2{
        {
            .name = "h2-max-concurrent-streams",
            .metavar = "N",
            .help = "HTTP/2 streams open at once on one connection (default {default})",
            .doc = "SETTINGS_MAX_CONCURRENT_STREAMS: the streams an HTTP/2 client may have open "
                   "on one connection; one more is refused (RST_STREAM REFUSED_STREAM). Each "
                   "EventSource of a page holds one for as long as the page is open",
            .to = number(AT(server.h2_max_streams), 1, uint32_t(1) << 31),
        },
        {
            .name = "h2-max-stream-errors",
            .metavar = "N",
            .help = "stream errors an HTTP/2 client may cause on one connection at once, "
                    "refilled N/10 a second (default {default})",
            .doc = "each RST_STREAM the server sends for a client's own frames (a WINDOW_UPDATE "
                   "of 0, DATA past a stream's end, a header list far past the limits, ...) "
                   "draws on a budget of N a connection, refilled by a tenth of N a second; "
                   "past it the connection ends with GOAWAY ENHANCE_YOUR_CALM "
                   "(MadeYouReset, CVE-2025-8671: requests made and reset by the client's "
                   "doing escape --h2-max-concurrent-streams and the bound on its own RST_STREAMs)",
            .to = number(AT(server.h2_max_stream_errors), 1, uint32_t(1) << 20),
        },
        {
            .name = "h2-window",
            .metavar = "BYTES",
            .help = "an HTTP/2 stream's receive window; the connection's is 16\n"
                    "times it (default {default})",
            .doc = "SETTINGS_INITIAL_WINDOW_SIZE: what of an upload an HTTP/2 client may send "
                   "before it hears from the server; the connection's window is 16 times it "
                   "(at most 2^31-1). An upload goes at most a window a round trip: HTTP/2's "
                   "default of 65535 bytes is 640 KB/s over a 100 ms link. A pace, not a bound: "
                   "bodies are read whole, within `--max-body-size` and `--max-body-total`",
            .to = number(AT(server.h2_window), uint32_t(65535), uint32_t(0x7fffffff)),
        },
    };
    return insert_after(std::move(rows), "tls-handshake-timeout", std::move(h2));
}

#undef AT

}  // namespace m0::app
