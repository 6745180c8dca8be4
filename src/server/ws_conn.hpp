// A WebSocket connection's own state (ws_conn.cpp): its handshake's answer,
// the wslay context that reads its frames, and what the connection's
// reading and pings need. Loop thread only; private to the server folder.
#pragma once
#include <wslay/wslay.h>

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "http/message.hpp"
#include "http/websocket.hpp"
#include "http/ws_deflate.hpp"
#include "http/ws_events.hpp"
#include "pool/admission.hpp"
#include "pool/slot.hpp"
#include "server/subscriber.hpp"

namespace m0::server {

// A WebSocket-over-HTTP connection's dealings with its view
// (ws_over_http.cpp). Loop thread only.
struct WohState {
    std::string cid;     // Connection-Id
    http::Request base;  // the upgrade request as each event request starts
    const std::function<Admission(SlotRef, http::Request&&)>* submit = nullptr;  // its mount's
    std::vector<std::pair<std::string, std::string>> meta;  // Meta-NAME values, names lower-case
    std::vector<http::woh::Event> queued;  // the client's events not yet sent, in order
    size_t queued_bytes = 0;               // their contents' size
    bool in_flight = false;                // a request is on the pool: one at a time
    bool opened = false;                   // the view accepted: the 101 went
    bool detached = false;                 // `detach`: nothing more goes to the view
    bool ended = false;                    // closed by the view or failed: no DISCONNECT
    bool close_seen = false;               // the client's close went (or is queued) as CLOSE
    std::optional<std::string> prefix;     // grip on: the message prefix
    uint64_t position = 0;                 // the bus position as the request in flight went
    std::vector<std::string>
        subscribed_at_open;  // the OPEN answer's subscribes, made with the hold
    // keep-alive (a control message): this frame after `keepalive_every`
    // seconds without a message (or every so many seconds: interval).
    uint32_t keepalive_every = 0;
    bool keepalive_interval = false;
    std::string keepalive_frame;
    double last_out = 0;  // monotonic: the last message (or keep-alive) sent
};

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
    bool failed = false;            // a close was queued for the client's error
    bool eof = false;               // the client's side ended (or failed)
    bool reading = false;           // inside wslay_event_recv: its callbacks send nothing
    size_t budget = 0;              // bytes still read from the socket this turn
    double last_heard = 0;          // monotonic: bytes last came from the client
    double ping_sent = 0;           // monotonic: the ping awaiting an answer; 0: none
    std::unique_ptr<WohState> woh;  // WebSocket-over-HTTP (--ws-over-http) only
    // permessage-deflate (http/ws_deflate.hpp): the 101's extension value
    // (empty: not negotiated), and the client's messages' inflater, made
    // with the first compressed one (most subscribers never send one).
    std::string extensions;
    std::unique_ptr<http::ws::Inflater> inflater;

    Transport transport() const {
        return extensions.empty() ? Transport::websocket : Transport::websocket_deflate;
    }

    WsState() = default;
    WsState(const WsState&) = delete;
    WsState& operator=(const WsState&) = delete;
    ~WsState() {
        if (ctx) wslay_event_context_free(ctx);
    }
};

}  // namespace m0::server
