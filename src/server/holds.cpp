#include "server/holds.hpp"

#include <algorithm>
#include <iterator>

#include "loop/log.hpp"

namespace m0::server {

namespace {
constexpr uint64_t kSlowReaderRetryMs = 1000;  // the retry hint a slow reader is sent
}  // namespace

HoldTable::HoldTable(HoldSink& sink, HoldConfig cfg, Metrics& metrics)
    : sink_(sink), cfg_(cfg), metrics_(metrics) {}

void HoldTable::PendingQueue::pop_front() {
    v_[head_] = Pending{};  // its share of the bytes goes now
    if (++head_ == v_.size()) {
        head_ = 0;
        if (v_.capacity() > 64)
            std::vector<Pending>().swap(v_);  // a replay's room is not kept
        else
            v_.clear();
    } else if (head_ >= 64 && head_ * 2 >= v_.size()) {
        // Never empty for long (a reader kept just behind): drop the taken
        // half, so the vector does not grow with what was written.
        v_.erase(v_.begin(), v_.begin() + std::ptrdiff_t(head_));
        head_ = 0;
    }
}

HoldTable::Hold* HoldTable::find(SlotRef slot) {
    auto it = holds_.find(slot.index);
    return it != holds_.end() && it->second.slot == slot && !it->second.released ? &it->second
                                                                                 : nullptr;
}

const HoldTable::Hold* HoldTable::find(SlotRef slot) const {
    auto it = holds_.find(slot.index);
    return it != holds_.end() && it->second.slot == slot && !it->second.released ? &it->second
                                                                                 : nullptr;
}

void HoldTable::open(SlotRef slot, uint64_t cursor, std::vector<std::string> channels,
                     const bus::Replay& replay, uint64_t reset_from, bus::KeepAlive keepalive,
                     Transport transport) {
    open_awaiting(slot, cursor, std::move(channels), std::move(keepalive), transport);
    replayed(slot, replay, reset_from, 0);
}

void HoldTable::open_awaiting(SlotRef slot, uint64_t cursor, std::vector<std::string> channels,
                              bus::KeepAlive keepalive, Transport transport) {
    auto [it, fresh] = holds_.try_emplace(slot.index);
    Hold& h = it->second;
    if (!fresh) {
        // The slot's earlier hold (the index's earlier connection, or this
        // one's hold opened again): its record is made anew.
        subs_.unsubscribe_all(h);
        if (h.every() > 0) --own_keepalive_;
        h = Hold{};
    }
    first_.erase(slot.index);
    h.slot = slot;
    h.transport = transport;
    h.cursor = cursor;
    if (keepalive.every > 0 || !keepalive.bytes.empty())
        h.keepalive = std::make_unique<bus::KeepAlive>(std::move(keepalive));
    if (h.every() > 0) ++own_keepalive_;
    h.last_id = cursor;
    h.replaying = true;
    h.replay_after = cursor;
    subs_.subscribe(h, channels);
    h.channels = std::move(channels);
}

bool HoldTable::replayed(SlotRef slot, const bus::Replay& replay, uint64_t reset_from, double now,
                         uint16_t ask) {
    Hold* h = find(slot);
    if (!h || !h->replaying || h->dropped) return true;
    // An older read than the latest asked: it may end before events this
    // process dropped (a full local queue), which the latest one has.
    if (ask != 0 && ask != h->asked) return true;
    const Subscriber& sub = subscriber(h->transport);
    if (sub.answers_once()) {
        // A long-poll takes the first event after its cursor: the replay's
        // come before any live one that waited (a gap is not reported: the
        // answer is the oldest event history still has).
        for (const auto& f : replay.events) {
            if (f.id <= h->replay_after || !sub.carries(f)) continue;
            first_.insert_or_assign(slot.index, f);
            break;
        }
        h->cursor = std::max(h->cursor, replay.upto);
        h->last_id = std::max(h->last_id, replay.upto);
        h->replaying = false;
        answer_if_ready(*h);
        return true;
    }
    // The live events that came while the replay was read wait behind it.
    std::vector<Pending> live(
        std::make_move_iterator(h->pending.begin() + static_cast<std::ptrdiff_t>(h->replay_mark)),
        std::make_move_iterator(h->pending.end()));
    h->pending.truncate(h->replay_mark);
    for (const auto& p : live)
        if (p.live) h->pending_live -= std::min(h->pending_live, p.bytes->size());
    // Before any live event (they queue behind these until the head is out).
    if (reset_from != 0) {
        h->pending.push_back({0, sub.reset(reset_from), false});
        metrics_.resets_sent.fetch_add(1);
    }
    for (const auto& f : replay.events) {
        if (f.id <= h->replay_after) continue;  // queued before a resync began
        SharedBytes bytes = sub.carries(f) ? sub.event(f) : nullptr;
        if (!bytes) continue;  // nothing of it for this transport
        h->pending.push_back({f.id, std::move(bytes), false});
        h->last_id = std::max(h->last_id, f.id);
        metrics_.events_replayed.fetch_add(1);
    }
    // The replay holds every event up to its upto: a live copy is a duplicate.
    for (auto& p : live) {
        if (p.id != 0 && p.id <= replay.upto) {
            metrics_.events_muted.fetch_add(1);
            continue;
        }
        if (p.live) h->pending_live += p.bytes->size();
        h->pending.push_back(std::move(p));
    }
    h->cursor = std::max(h->cursor, replay.upto);
    h->last_id = std::max(h->last_id, replay.upto);
    h->replaying = false;
    if (!h->started) return true;
    return flush(*h, now);
}

uint16_t HoldTable::ask_replay(SlotRef slot) {
    Hold* h = find(slot);
    return h ? ++h->asked : 0;
}

bool HoldTable::begin_resync(SlotRef slot, uint64_t& after, std::vector<std::string>& channels) {
    Hold* h = find(slot);
    if (!h || h->dropped) return false;
    if (!h->replaying) {
        h->replaying = true;
        h->replay_mark = h->pending.size();
        h->replay_after = h->last_id;
    }
    after = h->replay_after;
    channels = h->channels;
    return true;
}

bool HoldTable::start(SlotRef slot, double now) {
    Hold* h = find(slot);
    if (!h) return false;
    h->started = true;
    if (subscriber(h->transport).answers_once()) {
        answer_if_ready(*h);
        return true;
    }
    h->last_write = now;
    h->pending_live = 0;  // what waited for the head is paced like the replay
    return flush(*h, now);
}

bool HoldTable::flush(Hold& h, double now) {
    size_t backlog = sink_.backlog(h.slot);
    while (writable(h) > 0 && backlog <= cfg_.buffer_limit) {
        const Pending& ev = h.pending.front();
        backlog = sink_.write_shared(h.slot, ev.bytes);
        h.last_write = now;
        if (ev.live) h.pending_live -= std::min(h.pending_live, ev.bytes->size());
        metrics_.events_delivered.fetch_add(1);
        ++h.delivered;
        h.wrote_since_tick = true;
        h.pending.pop_front();
        if (h.replaying) --h.replay_mark;
    }
    return check_backlog(h, backlog, now);
}

void HoldTable::publish(const bus::PublishFrame& f, double now) {
    const auto& subscribers = subs_.subscribers(f.channel);
    if (subscribers.empty()) return;
    // Encoded once a transport, when the first hold of it is written; every
    // subscriber of that transport gets a reference to the same bytes.
    SharedBytes by_transport[kTransports];
    bool encoded[kTransports] = {};
    // A write may drop a slow reader: its unsubscribe waits for the loop's end
    // (unsubscribe()), so the list is iterated as it is, not copied.
    publishing_ = true;
    for (bus::Member* m : subscribers) {
        // Each hold is the member the list points at (no lookup); one
        // released meanwhile is kept, marked, until the loop's end.
        Hold* h = static_cast<Hold*>(m);
        if (h->released || h->dropped) continue;
        const SlotRef s = h->slot;
        if (f.id <= h->cursor) {
            metrics_.events_muted.fetch_add(1);
            continue;
        }
        const Subscriber& sub = subscriber(h->transport);
        if (sub.answers_once()) {
            if (sub.carries(f)) offer(*h, f);
            continue;
        }
        const auto t = static_cast<size_t>(h->transport);
        if (!encoded[t]) {
            by_transport[t] = sub.carries(f) ? sub.event(f) : nullptr;
            encoded[t] = true;
        }
        const SharedBytes& bytes = by_transport[t];
        if (!bytes) continue;  // nothing of it for this transport
        h->last_id = std::max(h->last_id, f.id);
        if (!h->started || !h->pending.empty() || h->replaying) {
            // Behind the head, or behind a replay still being read or paced out.
            h->pending.push_back({f.id, bytes, h->started});
            if (h->started) {
                h->pending_live += bytes->size();
                check_backlog(*h, sink_.backlog(s), now);
            }
        } else {
            write(*h, bytes, now);
        }
    }
    publishing_ = false;
    for (Hold* h : unsub_later_) subs_.unsubscribe_all(*h);
    unsub_later_.clear();
    for (SlotRef s : erase_later_) {
        auto it = holds_.find(s.index);
        if (it != holds_.end() && it->second.slot == s && it->second.released) holds_.erase(it);
    }
    erase_later_.clear();
}

void HoldTable::unsubscribe(Hold& h) {
    if (publishing_)
        unsub_later_.push_back(&h);
    else
        subs_.unsubscribe_all(h);
}

bool HoldTable::write(Hold& h, const SharedBytes& bytes, double now) {
    size_t backlog = sink_.write_shared(h.slot, bytes);
    h.last_write = now;
    metrics_.events_delivered.fetch_add(1);
    ++h.delivered;
    h.wrote_since_tick = true;
    return check_backlog(h, backlog, now);
}

bool HoldTable::check_backlog(Hold& h, size_t backlog, double now) {
    // Behind: the backlog is over the limit, or events still wait to be written
    // (not those waiting for a replay the bus has yet to answer).
    if (backlog <= cfg_.buffer_limit && writable(h) == 0) {
        h.over_since = 0;
        return true;
    }
    if (h.over_since == 0) h.over_since = now;
    if (backlog <= 2 * cfg_.buffer_limit && h.pending_live <= 2 * cfg_.buffer_limit &&
        now - h.over_since < cfg_.drain_timeout)
        return true;
    SlotRef slot = h.slot;
    M0_LOG(info, "slow reader: hold on slot ", to_string(slot), " kept ", std::to_string(backlog),
           " bytes unsent over --hold-buffer-limit, closed");
    metrics_.slow_readers_closed.fetch_add(1);
    // A retry hint, then the end: the client reconnects with its Last-Event-ID
    // and history replays what it missed. Slowness costs a reconnect, not an event.
    drop(slot, kSlowReaderRetryMs, EndWhy::slow);
    return false;
}

void HoldTable::offer(Hold& h, const bus::PublishFrame& f) {
    h.last_id = std::max(h.last_id, f.id);
    // Live events come in id order: the first one kept is the lowest.
    first_.try_emplace(h.slot.index, f);
    answer_if_ready(h);
}

void HoldTable::answer_if_ready(Hold& h) {
    if (!h.started || h.replaying || h.dropped) return;
    auto it = first_.find(h.slot.index);
    if (it == first_.end()) return;
    bus::PublishFrame f = std::move(it->second);
    first_.erase(it);
    metrics_.events_delivered.fetch_add(1);
    ++h.delivered;
    answer(h, &f);
}

void HoldTable::answer(Hold& h, const bus::PublishFrame* event) {
    h.dropped = true;
    SlotRef slot = h.slot;
    unsubscribe(h);
    sink_.answer(slot, event);  // may release the hold: `h` is not used after
}

void HoldTable::heartbeat(double now) {
    for (SlotRef s : holding()) {
        Hold* h = find(s);
        if (!h || h->every() > 0 || subscriber(h->transport).answers_once()) continue;
        if (h->wrote_since_tick || writable(*h) > 0) {
            h->wrote_since_tick = false;
            check_backlog(*h, sink_.backlog(s), now);
            continue;
        }
        // The comment is one buffer shared by every hold, like an event.
        size_t backlog = h->keepalive_bytes().empty()
                             ? sink_.write_shared(s, subscriber(h->transport).heartbeat())
                             : sink_.write(s, h->keepalive_bytes());
        check_backlog(*h, backlog, now);
    }
}

void HoldTable::keepalive(double now) {
    if (own_keepalive_ == 0) return;
    for (SlotRef s : holding()) {
        Hold* h = find(s);
        if (!h || h->every() <= 0 || writable(*h) > 0 || now - h->last_write < h->every()) continue;
        h->last_write = now;
        check_backlog(*h,
                      h->keepalive_bytes().empty()
                          ? sink_.write_shared(s, subscriber(h->transport).heartbeat())
                          : sink_.write(s, h->keepalive_bytes()),
                      now);
    }
}

void HoldTable::drained(SlotRef slot, size_t backlog, double now) {
    Hold* h = find(slot);
    if (!h || !h->started || h->dropped || backlog > cfg_.buffer_limit) return;
    if (writable(*h) == 0) {
        h->over_since = 0;
        return;
    }
    flush(*h, now);
}

bool HoldTable::drop(SlotRef slot, uint64_t retry_ms, EndWhy why) {
    Hold* h = find(slot);
    if (!h || !h->started || h->dropped) return false;
    const Subscriber& sub = subscriber(h->transport);
    if (sub.answers_once()) {
        first_.erase(slot.index);
        answer(*h, nullptr);  // a long-poll ends with the handler's own answer
        return true;
    }
    h->dropped = true;
    unsubscribe(*h);  // nothing more is written after the hint
    sink_.write(slot, sub.end(retry_ms, why));
    sink_.close_after_write(slot);
    return true;
}

void HoldTable::stop(SlotRef slot) {
    Hold* h = find(slot);
    if (!h || h->dropped) return;
    h->dropped = true;
    unsubscribe(*h);
}

std::vector<SlotRef> HoldTable::holding(const std::string& channel) const {
    std::vector<SlotRef> out;
    for (const bus::Member* m : subs_.subscribers(channel)) {
        const auto* h = static_cast<const Hold*>(m);
        if (h->started && !h->dropped && !h->released) out.push_back(h->slot);
    }
    return out;
}

std::vector<SlotRef> HoldTable::open_slots() const {
    std::vector<SlotRef> out;
    out.reserve(holds_.size());
    for (const auto& [index, h] : holds_)
        if (!h.dropped && !h.released) out.push_back(h.slot);
    return out;
}

std::vector<SlotRef> HoldTable::holding() const {
    std::vector<SlotRef> out;
    out.reserve(holds_.size());
    for (const auto& [index, h] : holds_)
        if (h.started && !h.dropped && !h.released) out.push_back(h.slot);
    return out;
}

void HoldTable::set_channels(SlotRef slot, std::vector<std::string> channels) {
    Hold* h = find(slot);
    if (!h) return;
    subs_.unsubscribe_all(*h);
    subs_.subscribe(*h, channels);
    h->channels = std::move(channels);
}

void HoldTable::release(SlotRef slot) {
    Hold* h = find(slot);
    if (!h) return;
    unsubscribe(*h);
    first_.erase(slot.index);
    if (h->every() > 0) --own_keepalive_;
    metrics_.holds_open.release();
    if (publishing_) {
        // A list publish() iterates may point at it: erased at its end.
        h->released = true;
        erase_later_.push_back(slot);
        return;
    }
    holds_.erase(slot.index);
}

}  // namespace m0::server
