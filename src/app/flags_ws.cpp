// The flag table's WebSocket rows (flags.cpp has the rest and says how a row
// is read). Main thread only, before anything else starts.
#include "app/flags.hpp"

namespace m0::app {

// clang-format off
#define AT(field) +[](Options& o) -> auto& { return o.field; }
// clang-format on

std::vector<Flag> with_ws_rows(std::vector<Flag> rows) {
    std::vector<Flag> ws{
        {
            .name = "ws-origin",
            .kind = Flag::list,
            .metavar = "ORIGIN",
            .shown = "the `--cors-origin` list",
            .help = "repeatable; a page from ORIGIN may open a WebSocket (* any)",
            .doc = "repeatable: pages (`scheme://host[:port]`, `*` any) that may open a WebSocket. "
                   "A handshake whose `Origin` is neither listed nor the server's own (that of "
                   "`Host`) is refused 403 (cross-site WebSocket hijacking); one without `Origin` "
                   "is not a browser's and is allowed",
            .to = custom(set::ws_origin),
        },
        {
            .name = "ws-over-http",
            .kind = Flag::list,
            .metavar = "PREFIX",
            .shown = "none",
            .help = "repeatable; WebSockets under PREFIX speak WebSocket-over-HTTP to their view",
            .doc = "repeatable: a WebSocket whose path is PREFIX or under it is served the "
                   "GRIP way: its events (OPEN, TEXT, BINARY, PING, PONG, CLOSE, DISCONNECT) "
                   "go to the mount's view as POSTs of `application/websocket-events`, as "
                   "Pushpin sends them, and the server carries out its answers (messages, "
                   "`c:` subscribe, unsubscribe, detach, keep-alive, `Set-Meta-*`, close). "
                   "Needs `--realtime`",
            .to = custom(set::ws_over_http),
        },
        {
            .name = "ws-no-deflate",
            .kind = Flag::toggle,
            .help = "never negotiate permessage-deflate (RFC 7692)",
            .doc = "WebSockets never negotiate permessage-deflate. Without it, a client that "
                   "offers it gets its events compressed (once an event, shared by every "
                   "such subscriber: `server_no_context_takeover`) and may send compressed "
                   "messages, inflated within `--ws-max-message`",
            .to = on(AT(server.ws.no_deflate)),
        },
        {
            .name = "ws-max-message",
            .metavar = "BYTES",
            .help = "a client's WebSocket message, at most (default {default})",
            .doc = "the largest message a WebSocket client may send, over all its fragments: "
                   "a larger one closes the connection with 1009",
            .to = number(AT(server.ws.max_message), 125, size_t(1) << 31),
        },
        {
            .name = "ws-ping-interval",
            .metavar = "SECONDS",
            .help = "a WebSocket silent this long is pinged (default {default})",
            .doc = "a WebSocket client that sent nothing for this long is sent a ping frame",
            .to = seconds(AT(server.ws.ping_interval)),
        },
        {
            .name = "ws-pong-timeout",
            .metavar = "SECONDS",
            .help = "a ping unanswered this long closes (default {default})",
            .doc = "a WebSocket that answers a ping with nothing for this long is closed",
            .to = seconds(AT(server.ws.pong_timeout)),
        },
        {
            .name = "ws-close-timeout",
            .metavar = "SECONDS",
            .help = "a WebSocket's close handshake, at most (default {default})",
            .doc = "after the server's close frame, how long the client has to close",
            .to = seconds(AT(server.ws.close_timeout)),
        },
    };
    return insert_after(std::move(rows), "cors-origin", std::move(ws));
}

#undef AT

}  // namespace m0::app
