// The frames of the bus channel: what pool threads (and the admin API) queue
// for the loop. Plain values, any thread.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
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
};

struct PublishFrame {
    uint64_t id = 0;
    std::string channel;
    std::string event;  // empty: no `event:` line
    std::string data;
    // Pushpin's http-stream content (the admin API's POST /publish/): `data` is
    // written to holds as it is, live and in replay, with no id:/event:/data:
    // lines around it (the publisher formats its own stream). Still numbered
    // and kept in history like any event; `event` is empty.
    bool raw = false;
    // The bytes a hold is written for it (wire_bytes), made once where it is
    // numbered and shared by every lane, the history and every replay; null
    // (a frame read from a shared bus): the hold table makes them.
    std::shared_ptr<const std::string> wire;
};

// The bytes a hold is written for `f`: its SSE event (id:, event:, data:
// lines), or a raw event's data as it is.
std::shared_ptr<const std::string> wire_bytes(const PublishFrame& f);

using Frame = std::variant<HoldFrame, PublishFrame>;

inline constexpr uint64_t kUptoUnknown = UINT64_MAX;

}  // namespace m0::bus
