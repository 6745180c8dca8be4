#include "bus/channel.hpp"

#include <chrono>
#include <cstdint>

#include "loop/loop.hpp"

namespace m0::bus {

uint64_t clock_seed() {
    auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                  std::chrono::system_clock::now().time_since_epoch())
                  .count();
    return static_cast<uint64_t>(ms) * 1000;
}

BusChannel::BusChannel(BusOptions o)
    : queue_(o.capacity),
      max_event_size_(o.max_event_size),
      first_id_(o.first_id),
      counter_(o.first_id),
      last_id_(o.first_id),
      history_(o.history) {}

PublishResult BusChannel::publish(std::string channel, std::string data, std::string event,
                                  bool raw) {
    if (raw) event.clear();  // written as it is: a name would appear nowhere
    PublishResult r = check_publish(channel, event, data, max_event_size_, raw);
    if (r.error == PublishError::too_large) too_large.fetch_add(1);
    if (!r.ok()) return r;
    uint64_t id = 0;
    const double now = monotonic_seconds();
    bool ok = queue_.push_with([&] {
        // Under the queue lock: the id order is the queue order and the history order.
        id = ++counter_;
        last_id_.store(id);
        PublishFrame f{id, std::move(channel), std::move(event), std::move(data), raw};
        {
            std::lock_guard lock(hist_mu_);
            history_.append(f, now);
        }
        return Frame{std::move(f)};
    });
    if (!ok) {
        r.error = PublishError::refused;
        refused.fetch_add(1);
        return r;
    }
    published.fetch_add(1);
    r.id = id;
    return r;
}

bool BusChannel::send(HoldFrame frame) {
    bool ok = queue_.push_with([&] {
        // Under the queue lock: every id up to here is queued before this frame.
        frame.upto = counter_;
        return Frame{std::move(frame)};
    });
    if (!ok) refused.fetch_add(1);
    return ok;
}

Replay BusChannel::replay(const std::vector<std::string>& channels, uint64_t after, uint64_t upto) {
    Replay r;
    {
        std::lock_guard lock(hist_mu_);
        r = history_.replay(channels, after, upto, monotonic_seconds());
    }
    // A cursor at or below where this bus began (a restart) names events it
    // never had.
    if (after != 0 && after < first_id_) r.gap = true;
    // With no history kept nothing marks what was missed: any id published
    // after the start may have been on these channels.
    if (history_.limits().per_channel == 0 && after < upto) r.gap = true;
    r.upto = upto;
    return r;
}

Bus::HistoryStats BusChannel::history_stats() const {
    std::lock_guard lock(hist_mu_);
    return {history_.events(), history_.bytes(), history_.evictions()};
}

}  // namespace m0::bus
