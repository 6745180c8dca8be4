// History: each channel's recent events, so a hold can be replayed what it
// missed. Not thread-safe: the bus that owns it calls it under its own lock.
//
// DESIGN
// Events are appended in id order (the bus appends inside the critical
// section that numbers them). Three bounds, whichever binds first:
//   per channel   at most `per_channel` events (--history);
//   age           none older than `max_age` seconds (--history-seconds);
//   bytes         at most `max_bytes` across every channel (--history-bytes),
//                 the oldest events anywhere going first.
// An evicted event leaves a mark: the highest id evicted from its channel.
// A cursor below that mark has a gap the history cannot fill (replay says
// so, and the stream sends m0-reset). A channel whose every event is gone is
// forgotten; its mark is folded into one floor that then applies to every
// channel not in the table (conservative: a reset too many, never a gap
// unsaid).
#pragma once
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "bus/frames.hpp"

namespace m0::bus {

struct HistoryLimits {
    size_t per_channel = 64;              // --history; 0 keeps nothing
    double max_age = 3600;                // --history-seconds
    size_t max_bytes = 64 * 1024 * 1024;  // --history-bytes
};

// What a hold is replayed, merged across its channels in id order.
struct Replay {
    // ids in (after, upto]. An event that came with its forms (PublishFrame::
    // forms, made by the bus's codec) is kept and replayed as its id,
    // channel, raw flag and forms only: `event` and `data` are empty (the
    // transports read them back from the forms); but a raw event with a
    // format (kept_whole) is kept whole, for its forms do not say what it is.
    std::vector<PublishFrame> events;
    bool gap = false;     // some event after `after` is no longer kept
    uint64_t oldest = 0;  // the lowest id kept on those channels (0: none)
    // Every id up to here was looked at: a live event at or below it is in
    // `events` already (or lost to the gap this replay reports).
    uint64_t upto = 0;
};

class History {
  public:
    explicit History(HistoryLimits limits = {}) : limits_(limits) {}

    // Keeps `f` (its id above every kept id), published at `now` (seconds).
    void append(const PublishFrame& f, double now);
    // The kept events of `channels` with ids in (after, upto], merged in id
    // order; gap when an event of theirs with an id above `after` was evicted.
    Replay replay(const std::vector<std::string>& channels, uint64_t after, uint64_t upto,
                  double now);

    size_t events() const { return live_; }
    size_t bytes() const { return bytes_; }
    uint64_t evictions() const { return evictions_; }
    const HistoryLimits& limits() const { return limits_; }

  private:
    struct Kept {
        PublishFrame frame;
        double at = 0;
        size_t bytes = 0;
        bool evicted = false;  // gone from its channel; its entry in order_ is stale
    };
    struct Channel {
        std::deque<std::shared_ptr<Kept>> events;  // id order
        uint64_t evicted_max = 0;                  // highest id evicted here
    };
    // Evicts the front of `ch` (named `name`), the oldest it keeps.
    void evict_front(const std::string& name, Channel& ch);
    // The oldest kept event anywhere.
    void evict_oldest();
    void evict_expired(double now);
    uint64_t mark(const std::string& channel) const;

    HistoryLimits limits_;
    std::unordered_map<std::string, Channel> channels_;
    // Every event in id order, for the byte and age bounds; an entry whose
    // event left its channel (per-channel bound) is stale, and the deque is
    // compacted when the stale outnumber the live, so it stays O(kept).
    std::deque<std::shared_ptr<Kept>> order_;
    size_t live_ = 0;
    size_t bytes_ = 0;
    uint64_t dropped_floor_ = 0;  // marks of channels no longer in the table
    uint64_t evictions_ = 0;
};

}  // namespace m0::bus
