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
    };
    return insert_after(std::move(rows), "tls-handshake-timeout", std::move(h2));
}

#undef AT

}  // namespace m0::app
