// The frames of the bus channel: what pool threads (and the admin API) queue
// for the loop. Plain values, any thread.
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace m0::bus {

// A hold's own keep-alive (GRIP's Grip-Keep-Alive), in place of the comment
// heartbeat every --heartbeat seconds.
struct KeepAlive {
    std::string bytes;  // written when the hold is idle; empty: the ":" comment
    double every = 0;   // seconds of idleness before it is written; 0: --heartbeat
};

// The reserved "h" frame: hold this slot on these channels.
struct HoldFrame {
    std::string stream_url;  // reserved_stream_url(slot)
    uint64_t cursor = 0;     // Last-Event-ID: ids <= cursor are muted; 0 when absent
    // The bus position the pool thread read before the handler ran: a hold
    // without a cursor starts there, so what was published while the handler
    // rendered its head is replayed, not lost.
    uint64_t position = 0;
    // Set by the bus as it queues the frame: the last id queued before it.
    // Replay covers ids up to here; later ids reach the hold live. A shared
    // bus cannot say (other processes publish): kUptoUnknown, and its replay
    // reads the counter instead.
    uint64_t upto = 0;
    std::vector<std::string> channels;
    KeepAlive keepalive;  // Grip-Keep-Alive; default: the comment heartbeat
    // GRIP's long-poll (Grip-Hold: response): the first event on the channels
    // answers the request, or the handler's own answer does after `timeout`
    // seconds; false: a stream hold.
    bool response = false;
    uint32_t timeout = 0;
    // A WebSocket (M0-Hold: websocket on an upgrade request the loop checked):
    // the loop answers 101 and writes events as WebSocket messages.
    bool websocket = false;
};

// An event's forms (PublishFrame::forms): as many as its codec makes, which
// numbers them (server/codec.hpp); a null entry is a form the event is not
// written in.
inline constexpr size_t kForms = 2;
using Forms = std::array<std::shared_ptr<const std::string>, kForms>;

struct PublishFrame {
    uint64_t id = 0;
    std::string channel;
    std::string event;  // empty: no `event:` line
    std::string data;
    // A Pushpin item (the admin API's POST /publish/), still numbered and kept
    // in history like any event; `event` names its format:
    //   ""               http-stream content: `data` is written to stream
    //                    holds as it is, live and in replay, with no id:,
    //                    event: or data: lines around it (the publisher
    //                    formats its own stream);
    //   "http-response"  an http-response item: `data` is its JSON
    //                    (http/response_item.hpp), the answer of long-polls;
    //                    stream holds are written its http-stream content
    //                    when the item had one, else nothing;
    //   "ws-message", "ws-message-binary"
    //                    a ws-message item's content: a text (or binary)
    //                    message to WebSocket subscribers, as it is.
    bool raw = false;
    // The event's bytes in each form its transports write it (Codec), made
    // once where it is numbered and shared by every lane, the history and
    // every replay. The bus carries and counts them and never reads them.
    // Empty (a frame read from a shared bus, or a bus with no codec): each
    // transport makes its own where it writes them, once a loop.
    Forms forms;
    // Whether the codec gave it any form.
    bool encoded() const {
        for (const auto& b : forms)
            if (b) return true;
        return false;
    }
};

using Frame = std::variant<HoldFrame, PublishFrame>;

inline constexpr uint64_t kUptoUnknown = UINT64_MAX;

// The `event` of a raw frame that carries Pushpin's http-response item.
inline constexpr const char* kResponseFormat = "http-response";
// The `event` of a raw frame that carries a ws-message item's content, sent
// verbatim to WebSocket subscribers (text or binary) and to no one else.
inline constexpr std::string_view kWsTextFormat = "ws-message";
inline constexpr std::string_view kWsBinaryFormat = "ws-message-binary";
inline bool ws_message(const PublishFrame& f) {
    return f.raw && (f.event == kWsTextFormat || f.event == kWsBinaryFormat);
}
// A raw frame with a format (an http-response or ws-message item) is kept
// whole in history and replays: its bytes alone do not say what it is.
inline bool kept_whole(const PublishFrame& f) { return f.raw && !f.event.empty(); }

}  // namespace m0::bus
