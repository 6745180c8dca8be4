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
#include "loop/slot.hpp"
#include "pool/admission.hpp"
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

// What reads a WebSocket's frames: wslay's context, about 8.3 KiB (wslay
// 1.1.1 keeps a fixed 4 KiB input buffer and a fixed 4 KiB output buffer in
// it), and the state of the frame being read. Made when the client's bytes
// arrive (or a control frame is to go out), freed once what wslay was given
// is read to the end of a message (Server::ws_release): a subscriber only
// ever sends a pong now and then, so it keeps none. Loop thread only.
struct WsReader {
    wslay_event_context_ptr ctx = nullptr;
    // A close frame's reason, checked as UTF-8 past its two-byte code.
    bool in_close = false;
    uint64_t close_seen = 0;  // bytes of its payload read so far
    http::ws::Utf8Validator close_utf8;
    size_t budget = 0;  // bytes still read from the socket this turn
    // How far wslay has read what it was given: `fed` bytes given to it,
    // `framed` the bytes of the whole frames it read (each header's size is
    // known from its payload's length: wslay refuses a length not written in
    // the fewest bytes, and an unmasked client frame); `in_frame` between a
    // frame's start and end; `in_message` between a data message's first
    // frame and its last. Idle (nothing of wslay's lost when it is freed):
    // fed == framed, neither flag, nothing queued to send, no close.
    uint64_t fed = 0;
    uint64_t framed = 0;
    uint64_t frame_size = 0;  // the frame being read: header and payload
    bool in_frame = false;
    bool in_message = false;

    WsReader() = default;
    WsReader(const WsReader&) = delete;
    WsReader& operator=(const WsReader&) = delete;
    ~WsReader() {
        if (ctx) wslay_event_context_free(ctx);
    }
};

// What the handshake's check found, for the 101; freed once it went.
struct WsHandshake {
    std::string accept;                  // Sec-WebSocket-Accept
    std::vector<std::string> protocols;  // Sec-WebSocket-Protocol's offers
    std::string extensions;              // Sec-WebSocket-Extensions; empty: none
};

// Kept for the connection's life: as small as it can be, since a subscriber
// holds one (RSS per WebSocket subscriber against an SSE hold's: BENCHMARK.md).
struct WsState {
    std::unique_ptr<WsHandshake> handshake;  // from the check (dispatch) to the 101
    // From the 101 on (ws_open): the client's frames are read, control frames
    // written, through `reader` while it exists (Server::ws_reader).
    std::unique_ptr<WsReader> reader;
    std::unique_ptr<WohState> woh;  // WebSocket-over-HTTP (--ws-over-http) only
    // permessage-deflate (http/ws_deflate.hpp): the client's messages'
    // inflater, made with the first compressed one (most subscribers never
    // send one).
    std::unique_ptr<http::ws::Inflater> inflater;
    double last_heard = 0;  // monotonic: bytes last came from the client
    double ping_sent = 0;   // monotonic: the ping awaiting an answer; 0: none
    bool open = false;      // the 101 is queued
    bool deflate = false;   // permessage-deflate was negotiated
    bool quiet = false;     // a close went: wslay sends and reads nothing more
    bool failed = false;    // a close was queued for the client's error
    bool eof = false;       // the client's side ended (or failed)
    bool reading = false;   // inside wslay_event_recv: its callbacks send nothing

    Transport transport() const {
        return deflate ? Transport::websocket_deflate : Transport::websocket;
    }
};

}  // namespace m0::server
