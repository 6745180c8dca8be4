// Bus: what the server and the pools need of a bus, whichever carries it.
// The in-process bus (channel.hpp) is the default; a shared bus implements the
// same interface.
//
// DESIGN
// One counter numbers every event, and publish order is id order. A hold
// starts from a position: the pool thread reads position() before the
// handler runs and sends it in the h frame; the bus stamps the frame with the
// last id queued before it (`upto`). The loop replays (replay()) what was
// published in (start, upto] from history, and everything after upto reaches
// the hold live, so nothing published after its handler began is lost and
// nothing arrives twice. A cursor the history cannot serve (its events were
// evicted, or it predates this bus: a restart) is a gap: the stream says so
// with one m0-reset event, then replays what is kept.
// Threads: publish, position, send and the counters: any thread. drain, fd
// and replay: the loop thread.
#pragma once
#include <atomic>
#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include "bus/frames.hpp"
#include "bus/history.hpp"
#include "bus/names.hpp"

namespace m0::bus {

// Why publish() refused an event. Every boundary answers from it: the admin
// API 400 / 413 / 503, _m0.publish ValueError / ValueError / RuntimeError.
enum class PublishError {
    ok,
    bad_name,   // the channel or event name: name_error says which
    too_large,  // over max_event_size(): size and limit say by how much
    refused,    // the channel is full or closed
};

struct PublishResult {
    uint64_t id = 0;  // 0 when refused
    PublishError error = PublishError::ok;
    NameError name_error = NameError::ok;  // error == bad_name
    size_t size = 0;                       // error == too_large: the event's size
    size_t limit = 0;                      // error == too_large: max_event_size()
    bool ok() const { return error == PublishError::ok; }
};

// One line for an error answer, e.g. "event is 1048620 bytes, over
// --max-event-size 262144"; "ok" for an accepted event.
std::string reason(const PublishResult& r);

class Bus {
  public:
    virtual ~Bus() = default;

    // Any thread. Checks the names, then the size, then numbers and queues
    // the event. `raw`: `data` is written to holds verbatim (PublishFrame::raw;
    // `event` must then be empty), and its size is its own length.
    virtual PublishResult publish(std::string channel, std::string data, std::string event = {},
                                  bool raw = false) = 0;
    // Any thread. The last id issued: a hold that starts here receives every
    // later event.
    virtual uint64_t position() const = 0;
    // Any thread. Queues an h frame (stamping its `upto`); false when refused.
    virtual bool send(HoldFrame frame) = 0;
    // Loop thread: takes every queued frame, in order.
    virtual size_t drain(std::deque<Frame>& out) = 0;
    virtual int fd() const = 0;
    // Loop thread: what a hold on `channels` that starts after `after` is
    // replayed, up to `upto` (its frame's stamp). gap: some of it is lost to
    // history, or `after` predates this bus.
    virtual Replay replay(const std::vector<std::string>& channels, uint64_t after,
                          uint64_t upto) = 0;
    // The largest event publish() takes.
    virtual size_t max_event_size() const = 0;

    struct HistoryStats {
        size_t events = 0, bytes = 0;
        uint64_t evictions = 0;
    };
    virtual HistoryStats history_stats() const = 0;

    std::atomic<uint64_t> published{0};  // events accepted
    std::atomic<uint64_t> refused{0};    // frames the channel would not take
    std::atomic<uint64_t> too_large{0};  // events over max_event_size()
};

}  // namespace m0::bus
