// Bus: what the server and the pools need of a bus, whichever carries it.
// The in-process bus (channel.hpp) is the default; a shared bus implements the
// same interface.
//
// DESIGN
// One counter numbers every event, and publish order is id order. A hold
// starts from a position: the pool thread reads position() before the
// handler runs and sends it in the h frame; the bus stamps the frame with the
// last id queued before it (`upto`). The loop replays (replay_later()) what was
// published in (start, upto] from history, and everything after upto reaches
// the hold live, so nothing published after its handler began is lost and
// nothing arrives twice. A cursor the history cannot serve (its events were
// evicted, or it predates this bus: a restart) is a gap: the stream says so
// with one m0-reset event, then replays what is kept.
// A shared bus (redis_bus.hpp) answers on the loop later: publish_later()
// and replay_later() take a callback, and a hold's live events that arrive
// before its replay wait behind it (the replay's `upto` says which of them it
// already holds). After an outage the bus calls LoopHooks::resync, and the
// loop replays every hold from the last id it queued.
// Threads: publish, position, send and the counters: any thread. drain, fd,
// publish_later, replay_later and attach: the loop thread.
#pragma once
#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <string>
#include <vector>

#include "bus/codec.hpp"
#include "bus/frames.hpp"
#include "bus/history.hpp"
#include "bus/names.hpp"

namespace m0::bus {

// The default --max-event-size of every bus (256 KiB: a quarter of the
// default --hold-buffer-limit).
inline constexpr size_t kDefaultMaxEventSize = 256 * 1024;

// Why publish() refused an event. Every boundary answers from it: the admin
// API 400 / 413 / 503, _m0.publish ValueError / ValueError / RuntimeError.
enum class PublishError {
    ok,
    bad_name,     // the channel or event name: name_error says which
    too_large,    // over max_event_size(): size and limit say by how much
    refused,      // the channel is full or closed
    unavailable,  // a shared bus is unreachable or failed: detail says why
};

struct PublishResult {
    uint64_t id = 0;  // 0 when refused
    PublishError error = PublishError::ok;
    NameError name_error = NameError::ok;  // error == bad_name
    size_t size = 0;                       // error == too_large: the event's size
    size_t limit = 0;                      // error == too_large: max_event_size()
    std::string detail;                    // error == unavailable: one line
    bool ok() const { return error == PublishError::ok; }
};

// One line for an error answer, e.g. "event is 1048620 bytes, over
// --max-event-size 262144"; "ok" for an accepted event.
std::string reason(const PublishResult& r);

// The checks every publish boundary makes before an event is numbered: the
// channel and event names, then the size against `max_event_size`: a raw
// event's own length, any other's as `codec` measures it (its largest form,
// the id counted at 20 digits). ok, bad_name or too_large.
// A raw event keeps its format's name (PublishFrame::raw): empty for
// http-stream content, kResponseFormat for an http-response item; any other
// name of a raw event is dropped, for it would appear nowhere.
// (In bus.cpp, not inline: a change to it rebuilds one file, not every one
// that includes this header.)
void keep_format(bool raw, std::string& event);

PublishResult check_publish(const std::string& channel, const std::string& event,
                            const std::string& data, size_t max_event_size, const Codec& codec,
                            bool raw = false);

// One event of a batch (Bus::publish_batch).
struct PublishEvent {
    std::string channel;
    std::string data;
    std::string event;  // empty: no `event:` line
    bool raw = false;   // as publish()'s `raw`
};

// A batch's answer. Every event is checked (names, size) before any is
// numbered: a refused one refuses the whole batch, nothing published, and
// `failed` names it. Past the checks, `ids` holds, in order, the id of every
// event taken: all of them when ok(). A bus that fails on the way (a shared
// bus that goes away mid-batch) answers the events it took, and `failed` is
// the first it cannot vouch for (not taken, or its answer lost).
struct BatchResult {
    std::vector<uint64_t> ids;
    PublishResult error;  // the refusal or failure; ok when every event was taken
    size_t failed = 0;    // the index of the event `error` is about
    bool ok() const { return error.ok(); }
};

// The checks of check_publish for every event of `events` (keep_format
// applied to each); the first refused names its index. ok when none is.
BatchResult check_batch(std::vector<PublishEvent>& events, size_t max_event_size,
                        const Codec& codec);

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
    // Loop thread: `done` gets, on the loop thread, at once or after a round
    // trip, what a hold on `channels` that starts after `after` is replayed:
    // up to `upto` (its frame's stamp) in process, up to the shared counter
    // read after the channels are subscribed on a shared bus (Replay::upto
    // says which). gap: some of it is lost to history, or `after` predates
    // this bus. A shared bus that is down drops the request (never calls
    // `done`): LoopHooks::resync asks again once it is back.
    using ReplayDone = std::function<void(Replay)>;
    virtual void replay_later(const std::vector<std::string>& channels, uint64_t after,
                              uint64_t upto, ReplayDone done) = 0;
    // Loop thread: publish() for the loop, which must not wait on a network:
    // `done` gets the result on the loop thread, at once or later. In
    // process: publish() at once.
    using PublishDone = std::function<void(PublishResult)>;
    virtual void publish_later(std::string channel, std::string data, std::string event, bool raw,
                               PublishDone done) {
        done(publish(std::move(channel), std::move(data), std::move(event), raw));
    }
    // Any thread. Several events at once, ids in their order, consecutive in
    // process (BatchResult). The default publishes one after the other; the
    // buses take a batch in one step (one lock and one wake-up of each loop
    // in process, one round trip on Redis).
    virtual BatchResult publish_batch(std::vector<PublishEvent> events);
    // Loop thread: publish_batch() for the loop (publish_later()'s terms).
    using BatchDone = std::function<void(BatchResult)>;
    virtual void publish_batch_later(std::vector<PublishEvent> events, BatchDone done) {
        done(publish_batch(std::move(events)));
    }
    // What a shared bus asks of the loop (loop thread).
    struct LoopHooks {
        std::function<void()> resync;                  // replay every hold from its last id
        std::function<bool(const std::string&)> held;  // some hold listens to this channel
    };
    virtual void attach(LoopHooks) {}
    // The largest event publish() takes.
    virtual size_t max_event_size() const = 0;
    // What measures and encodes its events (fixed at construction).
    virtual const Codec& codec() const = 0;

    struct HistoryStats {
        size_t events = 0, bytes = 0;
        uint64_t evictions = 0;
    };
    virtual HistoryStats history_stats() const = 0;

    // A shared bus's link (for /metrics); shared == false in process.
    struct LinkStats {
        bool shared = false;
        bool up = false;
        uint64_t reconnects = 0, publish_failures = 0;
    };
    virtual LinkStats link_stats() const { return {}; }

    std::atomic<uint64_t> published{0};  // events accepted
    std::atomic<uint64_t> refused{0};    // frames the channel would not take
    std::atomic<uint64_t> too_large{0};  // events over max_event_size()
};

}  // namespace m0::bus
