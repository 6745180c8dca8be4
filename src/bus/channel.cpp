#include "bus/channel.hpp"

#include <chrono>
#include <cstdint>
#include <cstdlib>

#include "loop/loop.hpp"

namespace m0::bus {

uint64_t clock_seed() {
    auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                  std::chrono::system_clock::now().time_since_epoch())
                  .count();
    return static_cast<uint64_t>(ms) * 1000;
}

// Loop i's view of the bus: its own queue, the hub's everything else.
class BusChannel::Lane final : public Bus {
  public:
    Lane(BusChannel& hub, size_t index) : hub_(hub), index_(index) {}
    PublishResult publish(std::string channel, std::string data, std::string event,
                          bool raw) override {
        return hub_.publish(std::move(channel), std::move(data), std::move(event), raw);
    }
    BatchResult publish_batch(std::vector<PublishEvent> events) override {
        return hub_.publish_batch(std::move(events));
    }
    uint64_t position() const override { return hub_.position(); }
    bool send(HoldFrame frame) override { return hub_.send_on(index_, std::move(frame)); }
    size_t drain(std::deque<Frame>& out) override { return hub_.queues_[index_]->drain(out); }
    int fd() const override { return hub_.queues_[index_]->fd(); }
    void replay_later(const std::vector<std::string>& channels, uint64_t after, uint64_t upto,
                      ReplayDone done) override {
        done(hub_.replay(channels, after, upto));
    }
    size_t max_event_size() const override { return hub_.max_event_size(); }
    const Codec& codec() const override { return hub_.codec(); }
    HistoryStats history_stats() const override { return hub_.history_stats(); }

  private:
    BusChannel& hub_;
    const size_t index_;
};

BusChannel::BusChannel(BusOptions o, size_t lanes)
    : capacity_(o.capacity),
      max_event_size_(o.max_event_size),
      codec_(o.codec),
      first_id_(o.first_id),
      counter_(o.first_id),
      last_id_(o.first_id),
      history_(o.history) {
    if (lanes == 0) lanes = 1;
    for (size_t i = 0; i < lanes; ++i) {
        queues_.push_back(std::make_unique<NotifyQueue<Frame>>(o.capacity));
        if (i > 0) views_.push_back(std::make_unique<Lane>(*this, i));
    }
}

BusChannel::~BusChannel() = default;

Bus& BusChannel::lane(size_t i) { return i == 0 ? static_cast<Bus&>(*this) : *views_.at(i - 1); }

void BusChannel::close() {
    std::lock_guard lock(mu_);
    closed_ = true;
    for (auto& q : queues_) q->close();
}

PublishResult BusChannel::publish(std::string channel, std::string data, std::string event,
                                  bool raw) {
    // A batch of one: the same checks, lock and pushes.
    std::vector<PublishEvent> one;
    one.push_back({std::move(channel), std::move(data), std::move(event), raw});
    BatchResult b = publish_batch(std::move(one));
    if (!b.ok()) return b.error;
    PublishResult r;
    r.id = b.ids.front();
    return r;
}

BatchResult BusChannel::publish_batch(std::vector<PublishEvent> events) {
    BatchResult b = check_batch(events, max_event_size_, codec_);
    if (!b.ok()) {
        if (b.error.error == PublishError::too_large) too_large.fetch_add(1);
        return b;
    }
    const size_t n = events.size();
    if (n == 0) return b;
    const double now = monotonic_seconds();
    std::vector<PublishFrame> frames;
    frames.reserve(n);
    {
        // Numbered, kept and pushed onto every lane inside one hold of the
        // hub's lock: the id order is every lane's order and the history's,
        // and a batch is consecutive in it. Only a lane's own loop takes from
        // it meanwhile, so a lane with room now still has room at the push.
        std::lock_guard lock(mu_);
        bool room = !closed_;
        for (size_t i = 0; room && i < queues_.size(); ++i)
            room = queues_[i]->size() + n <= capacity_;
        if (room) {
            for (auto& e : events) {
                PublishFrame f{++counter_, std::move(e.channel), std::move(e.event),
                               std::move(e.data), e.raw};
                // Encoded once for every loop, the history and every replay of it.
                if (codec_.encode) codec_.encode(f);
                b.ids.push_back(f.id);
                frames.push_back(std::move(f));
            }
            last_id_.store(counter_);
            {
                std::lock_guard hist(hist_mu_);
                for (const auto& f : frames) history_.append(f, now);
            }
            for (size_t i = 0; i < queues_.size(); ++i) {
                const bool last = i + 1 == queues_.size();
                // The last lane takes the frames; the others copies.
                auto frame = [&](size_t k) {
                    return last ? Frame{std::move(frames[k])} : Frame{frames[k]};
                };
                // The whole batch in one push: a loop draining meanwhile sees
                // all of it or none, and is woken once.
                bool ok = queues_[i]->push_many(n, frame);
                if (!ok) std::abort();  // unreachable: room was checked under the hub's lock
            }
        }
    }
    if (b.ids.empty()) {
        b.error.error = PublishError::refused;
        refused.fetch_add(1);
        return b;
    }
    published.fetch_add(n);
    return b;
}

bool BusChannel::send_on(size_t lane, HoldFrame frame) {
    bool ok = false;
    {
        std::lock_guard lock(mu_);
        // Under the hub's lock: every id up to here is on this lane before this frame.
        frame.upto = counter_;
        ok = !closed_ && queues_[lane]->push_with([&] { return Frame{std::move(frame)}; });
    }
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
