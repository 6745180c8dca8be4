// Holds taken on a pool thread: one copy of the code for both pools.
//
// DESIGN (the order of operations is the mechanism)
// 1. read_cursor(): the pool thread reads Last-Event-ID from the request
//    before the handler runs (the handler may consume the request).
// 2. The handler answers with `M0-Hold: stream` and `M0-Channel: a,b` (or
//    GRIP's `Grip-Hold: stream`, `Grip-Channel`, `Grip-Keep-Alive`: grip.hpp).
// 3. take_stream_hold() consumes those headers and rewrites the response into
//    the stream's head: 200, text/event-stream, no-cache, Connection: close,
//    x-worker, no Content-Length, no Transfer-Encoding (close-delimited).
//    `M0-Hold: websocket` on a WebSocket upgrade (Start::websocket) is a
//    WebSocket subscriber: its h frame says so, and the loop writes the 101
//    (it checked the handshake before it dispatched the request).
// 4. finish_hold() sends the h frame on the loop's bus channel BEFORE it posts
//    the completion. The loop drains its bus channel before it finishes a
//    streaming head, so the subscription exists before the head is written,
//    and every event published after the hold was decided is queued after its
//    frame. A frame the channel will not take is a 503, not a head.
// Without --realtime there is no channel: the hold degrades to an ordinary
// response (the head as the body, the M0-* headers removed), logged once.
// Every function here runs on a pool thread (or a test's thread) and touches
// the loop only through the completion ring and the bus channel.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "bus/channel.hpp"
#include "http/message.hpp"
#include "pool/completion.hpp"
#include "pool/metrics.hpp"

namespace m0::hold {

// Points in a job's hand-off where a test may park the pool thread (see
// Handoff::hook); production leaves the hook empty. Each point sits right
// after the operation it names, so a test that runs the loop while a thread
// is parked sees exactly what that operation queued, in the order the code
// queued it.
enum class Point { handler_start, frame_sent, completion_posted };

// The defaults of --max-holds, --max-hold-channels and --output-high-water,
// written here once: the command line's Options and the server's
// ServerConfig start from them.
inline constexpr int64_t kMaxHolds = 10000;
inline constexpr size_t kMaxChannels = 64;
inline constexpr size_t kStreamHighWater = 256 * 1024;

// What a pool needs to hand its work back; shared by the pool's threads, read-only.
struct Handoff {
    CompletionRing* ring = nullptr;
    bus::Bus* bus = nullptr;  // null without --realtime: no holds
    Metrics* metrics = nullptr;
    size_t max_channels = kMaxChannels;  // --max-hold-channels: names one hold may join
    size_t stream_high_water = kStreamHighWater;
    std::function<void(Point, SlotRef)> hook;  // tests only

    void at(Point p, SlotRef s) const {
        if (hook) hook(p, s);
    }
};

enum class HoldKind { none, stream, bad };

struct HoldDecision {
    HoldKind kind = HoldKind::none;
    std::vector<std::string> channels;
    std::string error;  // kind == bad: why (for the log and the 502 body)
    // M0-Hold: websocket: a WebSocket on an upgrade request (Start::websocket),
    // else served as a stream hold.
    bool websocket = false;
    bus::KeepAlive keepalive;  // Grip-Keep-Alive (grip.hpp); default: the comment heartbeat
    // Grip-Hold: response, a long-poll: the answer is the handler's own,
    // unchanged but for its Grip-* headers, sent at `timeout` seconds unless
    // an event comes first; `prev_id` is Grip-Channel's (grip_prev_id).
    bool response = false;
    uint32_t timeout = 0;
    uint64_t prev_id = 0;
};

// Last-Event-ID as a cursor: ids <= cursor are muted, and the hold is
// replayed what history keeps after it. The header, else the `lastEventID`
// query parameter (for clients that cannot set headers); 0 when absent or not
// a decimal number.
uint64_t read_cursor(const http::Request& req);

// Where a hold starts, read on the pool thread before the handler runs.
struct Start {
    uint64_t cursor = 0;    // read_cursor()
    uint64_t position = 0;  // the bus position: what is published later is the hold's
    // The request is a WebSocket upgrade (the loop checked its handshake
    // before dispatching it): M0-Hold: websocket then holds it as one.
    bool websocket = false;
};
Start read_start(const Handoff& h, const http::Request& req);

// True when `headers` ask for a hold: M0-Hold or GRIP's Grip-Hold.
bool asks_hold(const http::Headers& headers);

// Consumes M0-Hold/M0-Channel, or GRIP's Grip-Hold/Grip-Channel/
// Grip-Keep-Alive (grip.hpp; every Grip-* header then removed). HoldKind::none:
// neither M0-Hold nor Grip-Hold, `resp` unchanged. HoldKind::bad: both, an
// unknown hold value, a missing or refused channel name, a bad
// Grip-Keep-Alive or Grip-Timeout (error says which). HoldKind::stream:
// with `realtime`, `resp` is rewritten into the stream's head (its body kept
// as the first bytes of the stream), but for a long-poll (decision.response),
// whose answer stays the handler's; without it, only those headers are removed.
HoldDecision take_stream_hold(http::Response& resp, std::string_view worker, bool realtime);

// Queues the reserved h frame for `slot` on `bus`. False when the channel is
// missing, full or closed.
bool send_hold_frame(bus::Bus* bus, SlotRef slot, Start start, std::vector<std::string> channels,
                     bus::KeepAlive keepalive = {}, bool response = false, uint32_t timeout = 0,
                     bool websocket = false);

// Finishes a job whose handler answered a hold (take_stream_hold already ran):
// checks --max-hold-channels (a 502: the handler's answer is at fault) and
// --max-holds, sends the frame, then posts the head. Posts a 503 instead when
// over --max-holds or when the frame is refused; degrades without a bus.
void finish_hold(const Handoff& h, SlotRef slot, Start start, http::Response head,
                 HoldDecision decision);

// Posts a whole response for `slot`.
void post_response(const Handoff& h, SlotRef slot, http::Response resp);

}  // namespace m0::hold
