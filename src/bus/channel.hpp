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
// An event larger than max_event_size() (--max-event-size) is refused before
// it is numbered: its size is the bytes one hold is written for it (the SSE
// encoding, its id counted at 20 digits). main() keeps the limit below
// --hold-buffer-limit, so no single event can fill a reader's buffer.
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

// Frames the channel holds before it refuses (a 503).
inline constexpr size_t kDefaultQueueCapacity = 65536;
// 256 KiB: a quarter of the default --hold-buffer-limit.
inline constexpr size_t kDefaultMaxEventSize = 256 * 1024;

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

class BusChannel {
  public:
    explicit BusChannel(size_t capacity = kDefaultQueueCapacity,
                        size_t max_event_size = kDefaultMaxEventSize)
        : queue_(capacity), max_event_size_(max_event_size) {}

    // Any thread. Checks the names, then the size, then numbers and queues
    // the event.
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
    size_t max_event_size() const { return max_event_size_; }

    std::atomic<uint64_t> published{0};  // events accepted
    std::atomic<uint64_t> refused{0};    // frames the channel would not take
    std::atomic<uint64_t> too_large{0};  // events over max_event_size()

  private:
    NotifyQueue<Frame> queue_;
    const size_t max_event_size_;  // immutable after construction: any thread
    uint64_t counter_ = 0;         // guarded by queue_'s mutex (taken inside push_with)
    std::atomic<uint64_t> last_id_{0};
};

}  // namespace m0::bus
