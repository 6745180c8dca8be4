// BusChannel: the in-process bus, the default. An MPSC queue of frames plus
// an eventfd (the loop's bus channel, hold_notify_fd), the one shared event
// counter, and the channels' history.
//
// DESIGN
// Pool threads (and the admin API on the loop) send two kinds of frame on it,
// in one FIFO order:
//   HoldFrame     the reserved "h" frame: a slot (as its reserved stream url),
//                 the cursor (Last-Event-ID), the start position, the channels;
//   PublishFrame  an event for a channel, with its id.
// publish() takes the next id from the counter, keeps the event in history
// and queues it inside one critical section (the queue's lock), so id order
// is queue order and history order; send() stamps an h frame with the last
// id queued before it inside the same lock. A hold is replayed from history
// up to that stamp and hears later events live: no gap, no duplicate.
// Ids: the counter starts at `first_id` (main seeds it from the clock, unix
// milliseconds x 1000, so ids keep increasing across a restart; tests start
// at 0). A cursor below that start, but not 0, predates this bus: a
// gap (m0-reset).
// The channel exists only with --realtime. A frame it will not take (queue
// full, closed) is refused, and the sender answers 503 rather than a head.
// An event larger than max_event_size() (--max-event-size) is refused before
// it is numbered: its size is the bytes one hold is written for it (the SSE
// encoding, its id counted at 20 digits). main() keeps the limit below
// --hold-buffer-limit, so no single event can fill a reader's buffer.
// Several loops (--loops N): the bus has one lane per loop, each a queue
// plus eventfd that only its loop drains. The counter and the history are
// the hub's, one for the process. publish() numbers the event and pushes it
// onto EVERY lane inside the hub's lock, so each lane holds every event in
// id order; send() stamps an h frame and pushes it onto ITS OWN lane (the
// loop that owns the slot) inside the same lock, so on every lane an h frame
// follows exactly the events numbered at or below its stamp. Drain-before-
// head then holds per loop, as with one. A publish is refused whole (no lane
// gets it) when any lane is full. Lane 0 is this object; lane(i) is loop i's.
// Ownership: `counter_`, and the order of pushes onto the lanes, under `mu_`
// (each lane's queue has its own lock inside it, taken under `mu_` by
// producers and alone by its loop's drain); `history_` under hist_mu_ (taken
// inside mu_ by publish, alone by a loop's replay). Each lane's loop thread
// is its only consumer.
#pragma once
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "bus/bus.hpp"
#include "loop/notify_queue.hpp"

namespace m0::bus {

// Frames the channel holds before it refuses (a 503).
inline constexpr size_t kDefaultQueueCapacity = 65536;

struct BusOptions {
    size_t capacity = kDefaultQueueCapacity;
    size_t max_event_size = kDefaultMaxEventSize;
    uint64_t first_id = 0;  // the counter's start: the first event is first_id + 1
    HistoryLimits history;
    Codec codec;  // the server's (server/codec.hpp); none: events carry no forms
};

// The first id of a bus started now: unix milliseconds x 1000 (below 2^53,
// so JavaScript reads it exactly; 1000 ids a millisecond before a restart
// could reuse one).
uint64_t clock_seed();

class BusChannel final : public Bus {
  public:
    // `lanes`: one per loop thread (at least 1).
    explicit BusChannel(BusOptions options = {}, size_t lanes = 1);
    ~BusChannel() override;
    BusChannel(const BusChannel&) = delete;
    BusChannel& operator=(const BusChannel&) = delete;

    PublishResult publish(std::string channel, std::string data, std::string event = {},
                          bool raw = false) override;
    // Every event under one hold of the hub's lock: consecutive ids, pushed
    // onto each lane in one push (one wake-up of each loop), refused whole
    // when a lane has no room for all of them.
    BatchResult publish_batch(std::vector<PublishEvent> events) override;
    uint64_t position() const override { return last_id_.load(); }
    // Lane 0's: the h frame goes onto lane 0.
    bool send(HoldFrame frame) override { return send_on(0, std::move(frame)); }
    size_t drain(std::deque<Frame>& out) override { return queues_[0]->drain(out); }
    int fd() const override { return queues_[0]->fd(); }
    // What a hold on `channels` after `after` is replayed, up to `upto`.
    Replay replay(const std::vector<std::string>& channels, uint64_t after, uint64_t upto);
    // replay(), handed to `done` at once.
    void replay_later(const std::vector<std::string>& channels, uint64_t after, uint64_t upto,
                      ReplayDone done) override {
        done(replay(channels, after, upto));
    }
    size_t max_event_size() const override { return max_event_size_; }
    const Codec& codec() const override { return codec_; }
    HistoryStats history_stats() const override;

    // Loop i's view of the bus (lane 0: this object): its send() queues the
    // h frame on lane i, its drain() and fd() are lane i's; publish,
    // position, replay and the limits are the hub's. The counters
    // (published, refused, too_large) are kept on this object only.
    Bus& lane(size_t i);
    size_t lanes() const { return queues_.size(); }

    // Every lane refuses from now on.
    void close();
    size_t queued(size_t lane = 0) const { return queues_[lane]->size(); }
    std::deque<Frame> peek(size_t lane = 0) const { return queues_[lane]->peek(); }
    // Tests only: `fn` runs on the publishing thread each time a push onto
    // lane `lane` lets that lane's lock go (NotifyQueue::released). Set it
    // before anything publishes.
    void on_lane_released(size_t lane, std::function<void()> fn) {
        queues_[lane]->released = std::move(fn);
    }
    // The last id handed out (first_id before the first publish).
    uint64_t last_id() const { return last_id_.load(); }
    uint64_t first_id() const { return first_id_; }

  private:
    class Lane;
    // Stamps `frame` and queues it on lane `lane`; false when refused.
    bool send_on(size_t lane, HoldFrame frame);

    // One queue per lane, fixed at construction; each consumed by its loop.
    std::vector<std::unique_ptr<NotifyQueue<Frame>>> queues_;
    std::vector<std::unique_ptr<Lane>> views_;  // lanes 1.., immutable after construction
    const size_t capacity_;                     // each lane's bound
    const size_t max_event_size_;               // immutable after construction: any thread
    const Codec codec_;                         // immutable after construction: any thread
    const uint64_t first_id_;                   // immutable after construction: any thread
    std::mutex mu_;                             // the hub's lock
    uint64_t counter_;                          // guarded by mu_
    bool closed_ = false;                       // guarded by mu_
    std::atomic<uint64_t> last_id_;
    mutable std::mutex hist_mu_;  // taken inside mu_ by publish; alone by a loop's replay
    History history_;             // guarded by hist_mu_
};

}  // namespace m0::bus
