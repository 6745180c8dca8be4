// BusChannel: the loop's bus channel (hold_notify_fd): an MPSC queue of frames
// plus an eventfd, and the one shared event counter.
//
// DESIGN
// Pool threads (and the admin API on the loop) send two kinds of frame on it,
// in one FIFO order:
//   HoldFrame     the reserved "h" frame: a slot (as its reserved stream url),
//                 the cursor (Last-Event-ID), the channels, the worker;
//   PublishFrame  an event for a channel, with its id.
// publish() takes the next id from the counter inside the same critical
// section that enqueues the frame, so id order is queue order: every stream
// sees strictly increasing ids, and "published after a subscription" means
// exactly "queued after its h frame".
// The channel exists only with --realtime. A frame it will not take (queue
// full, closed) is refused, and the sender answers 503 rather than a head.
// Ownership: the queue and `counter_` under the queue's mutex; the loop thread
// is the only consumer.
#pragma once
#include <atomic>
#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include "bus/names.hpp"
#include "loop/notify_queue.hpp"

namespace m0::bus {

struct HoldFrame {
    std::string stream_url;  // reserved_stream_url(slot)
    uint64_t cursor = 0;     // ids <= cursor are muted for this hold
    std::vector<std::string> channels;
    std::string worker;
};

struct PublishFrame {
    uint64_t id = 0;
    std::string channel;
    std::string event;  // empty: no `event:` line
    std::string data;
};

using Frame = std::variant<HoldFrame, PublishFrame>;

struct PublishResult {
    uint64_t id = 0;  // 0 when refused
    NameError name_error = NameError::ok;
    bool refused = false;  // the channel is full or closed
    bool ok() const { return id != 0; }
};

class BusChannel {
  public:
    explicit BusChannel(size_t capacity = 65536) : queue_(capacity) {}

    // Any thread. Checks the names, then numbers and queues the event.
    PublishResult publish(std::string channel, std::string data, std::string event = {});
    // Any thread. Queues an h frame; false when refused (full or closed).
    bool send(HoldFrame frame);
    // Loop thread: takes every queued frame, in order.
    size_t drain(std::deque<Frame>& out) { return queue_.drain(out); }
    void close() { queue_.close(); }
    int fd() const { return queue_.fd(); }
    size_t queued() const { return queue_.size(); }
    std::deque<Frame> peek() const { return queue_.peek(); }
    // The last id handed out (0 before the first publish).
    uint64_t last_id() const { return last_id_.load(); }

    std::atomic<uint64_t> published{0};  // events accepted
    std::atomic<uint64_t> refused{0};    // frames the channel would not take

  private:
    NotifyQueue<Frame> queue_;
    uint64_t counter_ = 0;  // guarded by queue_'s mutex (taken inside push_with)
    std::atomic<uint64_t> last_id_{0};
};

}  // namespace m0::bus
