#include "bus/history.hpp"

#include <algorithm>

namespace m0::bus {

void History::append(const PublishFrame& f, double now) {
    if (limits_.per_channel == 0) return;
    auto kept = std::make_shared<Kept>();
    kept->at = now;
    if (f.encoded() && !kept_whole(f)) {
        // A replay writes only the event's forms (shared with the live
        // fan-out): its text is not kept twice (the transports read it back
        // from them, Codec). A raw event with a format is kept whole: its
        // forms alone do not say what it is.
        kept->frame.id = f.id;
        kept->frame.channel = f.channel;
        kept->frame.raw = f.raw;
        kept->frame.forms = f.forms;
    } else {
        kept->frame = f;
    }
    // What it keeps alive: the frame, and the bytes its holds are written.
    const PublishFrame& k = kept->frame;
    kept->bytes = k.channel.size() + k.event.size() + k.data.size() + sizeof(Kept);
    for (const auto& b : k.forms)
        if (b) kept->bytes += b->size();
    Channel& ch = channels_[f.channel];
    ch.events.push_back(kept);
    order_.push_back(kept);
    ++live_;
    bytes_ += kept->bytes;
    while (ch.events.size() > limits_.per_channel) evict_front(f.channel, ch);
    while (bytes_ > limits_.max_bytes && live_ > 0) evict_oldest();
    evict_expired(now);
}

void History::evict_front(const std::string& name, Channel& ch) {
    auto& kept = ch.events.front();
    ch.evicted_max = std::max(ch.evicted_max, kept->frame.id);
    kept->evicted = true;
    kept->frame = PublishFrame{};  // the stale entry in order_ keeps no data
    bytes_ -= kept->bytes;
    --live_;
    ++evictions_;
    ch.events.pop_front();
    if (ch.events.empty()) {
        // Forgotten, but its mark stays: in the floor every unknown channel shares.
        dropped_floor_ = std::max(dropped_floor_, ch.evicted_max);
        channels_.erase(name);  // `name` may live in `ch`: nothing touches either after
        return;
    }
    // Compaction: stale entries never outnumber the live ones for long.
    if (order_.size() > 64 && order_.size() > 2 * live_) {
        std::deque<std::shared_ptr<Kept>> live;
        for (auto& k : order_)
            if (!k->evicted) live.push_back(std::move(k));
        order_.swap(live);
    }
}

void History::evict_oldest() {
    while (!order_.empty() && order_.front()->evicted) order_.pop_front();
    if (order_.empty()) return;
    std::string name = order_.front()->frame.channel;
    auto it = channels_.find(name);
    if (it != channels_.end()) evict_front(name, it->second);
    while (!order_.empty() && order_.front()->evicted) order_.pop_front();
}

void History::evict_expired(double now) {
    for (;;) {
        while (!order_.empty() && order_.front()->evicted) order_.pop_front();
        if (order_.empty() || now - order_.front()->at <= limits_.max_age) return;
        evict_oldest();
    }
}

uint64_t History::mark(const std::string& channel) const {
    auto it = channels_.find(channel);
    return it == channels_.end() ? dropped_floor_ : it->second.evicted_max;
}

Replay History::replay(const std::vector<std::string>& channels, uint64_t after, uint64_t upto,
                       double now) {
    evict_expired(now);
    Replay r;
    std::vector<std::string> names = channels;
    std::sort(names.begin(), names.end());
    names.erase(std::unique(names.begin(), names.end()), names.end());
    for (const auto& name : names) {
        if (mark(name) > after) r.gap = true;
        auto it = channels_.find(name);
        if (it == channels_.end()) continue;
        for (const auto& k : it->second.events) {
            if (r.oldest == 0 || k->frame.id < r.oldest) r.oldest = k->frame.id;
            if (k->frame.id > after && k->frame.id <= upto) r.events.push_back(k->frame);
        }
    }
    // Merged across channels: one stream, ids increasing.
    std::sort(r.events.begin(), r.events.end(),
              [](const PublishFrame& a, const PublishFrame& b) { return a.id < b.id; });
    return r;
}

}  // namespace m0::bus
