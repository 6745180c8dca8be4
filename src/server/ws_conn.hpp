// A WebSocket connection's own state (ws_conn.cpp): its handshake's answer,
// the wslay context that reads its frames, and what the connection's
// reading and pings need. Loop thread only; private to the server folder.
#pragma once
#include <wslay/wslay.h>

#include <string>
#include <vector>

#include "http/websocket.hpp"

namespace m0::server {

struct WsState {
    // From the handshake's check (dispatch), for the 101.
    std::string accept;                  // Sec-WebSocket-Accept
    std::vector<std::string> protocols;  // Sec-WebSocket-Protocol's offers
    // From the 101 on: reads the client's frames, writes control frames.
    wslay_event_context_ptr ctx = nullptr;
    // A close frame's reason, checked as UTF-8 past its two-byte code.
    bool in_close = false;
    uint64_t close_seen = 0;  // bytes of its payload read so far
    http::ws::Utf8Validator close_utf8;
    bool failed = false;    // a close was queued for the client's error
    bool eof = false;       // the client's side ended (or failed)
    size_t budget = 0;      // bytes still read from the socket this turn
    double last_heard = 0;  // monotonic: bytes last came from the client
    double ping_sent = 0;   // monotonic: the ping awaiting an answer; 0: none

    WsState() = default;
    WsState(const WsState&) = delete;
    WsState& operator=(const WsState&) = delete;
    ~WsState() {
        if (ctx) wslay_event_context_free(ctx);
    }
};

}  // namespace m0::server
