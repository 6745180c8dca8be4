// HoldTable: the loop side of holds. Loop thread only.
//
// DESIGN
// open() is the h frame's effect: a hold for a slot whose answer is still
// being decided, subscribed to its channels. The server calls it while it
// drains its bus channel, which it does BEFORE it writes a hold's head, so the
// subscription exists before the head. start() marks the head written and
// writes the events that reached the hold before it (they wait in `pending`,
// never ahead of the head). publish() encodes an event once and writes it to
// every subscriber whose cursor is below its id (Last-Event-ID: ids at or
// below the cursor are muted). heartbeat() writes a comment to each hold that
// wrote nothing since the last tick. drop() ends a hold with a retry hint
// (a WebSocket: a close frame).
//
// Slow readers: after every write the hold's backlog (bytes queued, not yet
// on the socket) is checked. A reader is slow when its backlog stays over
// buffer_limit for drain_timeout, or passes twice the limit (memory stays
// bounded); one large event that the reader takes promptly is not slowness.
// A slow reader is dropped like any hold that ends: a retry hint (it comes
// back with its Last-Event-ID and is replayed from history), then the sink
// closes the slot once that drains, within --hold-drain-timeout.
//
// The replay: open() takes it with the h frame (the in-process bus answers
// at once). A shared bus answers after a round trip: open_awaiting() opens
// the hold `replaying`, and live events that reach it meanwhile wait,
// unwritten, behind where the replay goes; replayed() puts the replay there,
// drops the waiting live events at or below its `upto` (the replay has them)
// and mutes them from then on. begin_resync() (after the bus was down) puts a
// hold back into that state, to be replayed from the last id it queued.
//
// Fan-out cost: an event is encoded once into SharedBytes, and every
// hold's pending queue and every connection's output holds a reference to
// those bytes, never a copy (HoldSink::write_shared). The in-process bus
// has it encoded where it numbers it (the server's codec, codec.hpp,
// PublishFrame::forms): every loop, the
// history, and so every replay of it share the same bytes; a frame from a
// shared bus comes without them and publish() encodes it once per loop (a
// reconnect storm's replays took a fifth of the CPU and under a quarter of
// the memory they did when each encoded its events: docs/BENCHMARK.md,
// "Replays share the event's bytes"). It iterates the channel's subscriber
// list itself, not a copy: a write that drops a slow reader (or releases a
// hold) defers the unsubscribe to the end of the loop (unsub_later_), so the
// list does not change under the iteration.
//
// Transports: the table encodes nothing itself. Each hold names its
// transport (subscriber.hpp), whose Subscriber makes the bytes of an event, a
// reset, the end and the heartbeat (SSE: sse_subscriber.cpp), once an event
// for every hold of that transport. A long-poll (Transport::response, GRIP's
// Grip-Hold: response) is not a stream: it keeps only the first event after
// its cursor (first_, the replay's ahead of a live one) and, once its head
// may go (start) and its replay is in, is answered with it through
// HoldSink::answer, which ends it; drop() answers it with the handler's own
// answer (its timeout, a close, the shutdown).
//
// The table reaches connections only through HoldSink (write bytes to a slot,
// close it, end it after its output drains, answer it), so fan-out,
// heartbeats and the slow-reader rule are unit-tested without sockets
// (test_holds.cpp).
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "bus/frames.hpp"
#include "bus/history.hpp"
#include "bus/subscriptions.hpp"
#include "loop/slot.hpp"
#include "pool/metrics.hpp"
#include "server/subscriber.hpp"

namespace m0::server {

struct HoldConfig {
    size_t buffer_limit = 1024 * 1024;  // --hold-buffer-limit
    double drain_timeout = 5;           // --hold-drain-timeout
};

// What the table needs of the connections (the server implements it).
class HoldSink {
  public:
    virtual ~HoldSink() = default;
    // Appends `bytes` to the slot's output; returns its backlog afterwards.
    virtual size_t write(SlotRef slot, std::string_view bytes) = 0;
    // The same for an event shared by many slots: the sink keeps a reference
    // until the socket took the bytes (the server copies none of them); this
    // default copies.
    virtual size_t write_shared(SlotRef slot, const SharedBytes& bytes) {
        return write(slot, *bytes);
    }
    // The slot's backlog: bytes written to it and not yet on its socket.
    virtual size_t backlog(SlotRef slot) const = 0;
    // Closes the slot once what was written has drained (after a retry hint),
    // within a bound; the server then calls HoldTable::release.
    virtual void close_after_write(SlotRef slot) = 0;
    // A long-poll (Transport::response) is answered: with `event`, its first,
    // or, null, with the handler's own answer (its timeout, a close, the
    // shutdown). The hold is over (unsubscribed); the server answers the
    // request and calls HoldTable::release.
    virtual void answer(SlotRef slot, const bus::PublishFrame* event) = 0;
};

class HoldTable {
  public:
    HoldTable(HoldSink& sink, HoldConfig cfg, Metrics& metrics);
    HoldTable(const HoldTable&) = delete;
    HoldTable& operator=(const HoldTable&) = delete;

    // The h frame: `slot` is held on `channels`, muting live ids <= cursor.
    // `replay` (from the bus's history) is written first, after an m0-reset
    // event when `reset_from` is not 0: the stream has a gap, and delivers
    // from that id on.
    // `keepalive` (GRIP's Grip-Keep-Alive) replaces the comment heartbeat.
    // `transport`: how it is written to (subscriber.hpp).
    void open(SlotRef slot, uint64_t cursor, std::vector<std::string> channels,
              const bus::Replay& replay = {}, uint64_t reset_from = 0,
              bus::KeepAlive keepalive = {}, Transport transport = Transport::stream);
    // The h frame of a hold whose replay comes later (replayed()).
    void open_awaiting(SlotRef slot, uint64_t cursor, std::vector<std::string> channels,
                       bus::KeepAlive keepalive = {}, Transport transport = Transport::stream);
    // The slot's hold is a long-poll (Transport::response).
    bool answers_once(SlotRef slot) const {
        const Hold* h = find(slot);
        return h && subscriber(h->transport).answers_once();
    }
    // The replay of a hold opened awaiting it (or being resynced): written
    // ahead of the live events that came meanwhile, after an m0-reset when
    // `reset_from` is not 0. False when writing closed the slot; true too when
    // the slot awaits no replay (a late answer is ignored).
    // `ask` (from ask_replay) names which request this answers: an answer to
    // one asked before the latest is ignored (0: whichever, the only one).
    bool replayed(SlotRef slot, const bus::Replay& replay, uint64_t reset_from, double now,
                  uint16_t ask = 0);
    // A replay is asked for the slot's hold: its number, which the answer
    // brings to replayed(); 0 when the slot holds nothing.
    uint16_t ask_replay(SlotRef slot);
    // The bus was down: the hold awaits a replay after `after` (the last id
    // it queued) on `channels`. False when the slot holds nothing.
    bool begin_resync(SlotRef slot, uint64_t& after, std::vector<std::string>& channels);
    bool has(SlotRef slot) const { return find(slot) != nullptr; }
    // The slot's hold is subscribed (to its channels, or none yet).
    bool subscribed(SlotRef slot) const {
        const Hold* h = find(slot);
        return h && h->joined;
    }
    // Events written to the slot's hold so far (0 without one).
    uint64_t delivered(SlotRef slot) const {
        const Hold* h = find(slot);
        return h ? h->delivered : 0;
    }
    // The head is written: the events that waited for it follow. False when
    // writing them closed the slot (a slow reader).
    bool start(SlotRef slot, double now);
    // Fans one event out to its channel's holds.
    void publish(const bus::PublishFrame& f, double now);
    // A comment line (or its keep-alive bytes) to every started hold idle
    // since the last tick, but those with a keep-alive interval of their own.
    void heartbeat(double now);
    // Holds with a keep-alive interval of their own (KeepAlive::every): their
    // bytes to each that wrote nothing for that long. The server calls it
    // every second.
    void keepalive(double now);
    // The slot's backlog went down to `backlog` bytes, at or under the limit
    // (the server's write callback): pending events continue.
    void drained(SlotRef slot, size_t backlog, double now);
    // A retry hint (`retry_ms`), then no more events; the sink closes the slot
    // after the hint drains. Returns false if `slot` holds nothing started.
    bool drop(SlotRef slot, uint64_t retry_ms, EndWhy why = EndWhy::leaving);
    // No more events for the slot's hold, and nothing written: its transport
    // ends it (a WebSocket's close handshake). The hold is kept until release().
    void stop(SlotRef slot);
    // The channels of the slot's hold (none without one).
    std::vector<std::string> channels(SlotRef slot) const {
        const Hold* h = find(slot);
        return h ? h->channels : std::vector<std::string>{};
    }
    // The slot's hold hears `channels` from now on (a WebSocket-over-HTTP
    // view's subscribe and unsubscribe). Not inside publish().
    void set_channels(SlotRef slot, std::vector<std::string> channels);
    // The slot's hold's transport (stream when it holds nothing).
    Transport transport(SlotRef slot) const {
        const Hold* h = find(slot);
        return h ? h->transport : Transport::stream;
    }
    // The started holds on `channel` (in no set order).
    std::vector<SlotRef> holding(const std::string& channel) const;
    // Every started hold that is not dropped.
    std::vector<SlotRef> holding() const;
    // Every hold not dropped, started or not (a resync replays them all).
    std::vector<SlotRef> open_slots() const;
    // Forgets the slot's hold and subscriptions (the connection closed).
    void release(SlotRef slot);

    size_t size() const { return holds_.size(); }
    const bus::Subscriptions& subscriptions() const { return subs_; }

  private:
    struct Pending {
        uint64_t id = 0;    // 0: a control event
        SharedBytes bytes;  // shared with every hold the event is queued to
        bool live = false;  // counted in pending_live
    };
    // A hold's pending events, first in first out: a vector read from `head_`.
    // Empty, it owns no memory (most holds, most of the time; a std::deque
    // allocates about 600 bytes as it is constructed). Loop thread.
    class PendingQueue {
      public:
        bool empty() const { return head_ == v_.size(); }
        size_t size() const { return v_.size() - head_; }
        Pending& front() { return v_[head_]; }
        void push_back(Pending p) { v_.push_back(std::move(p)); }
        void pop_front();
        std::vector<Pending>::iterator begin() { return v_.begin() + std::ptrdiff_t(head_); }
        std::vector<Pending>::iterator end() { return v_.end(); }
        // Keeps the first `n` events.
        void truncate(size_t n) { v_.erase(begin() + std::ptrdiff_t(n), v_.end()); }

      private:
        std::vector<Pending> v_;
        size_t head_ = 0;  // v_[..head_) were taken
    };
    // A hold is this one record: its subscriptions (the Member it is: the
    // channels' lists point at it, so publish() reaches each hold without a
    // lookup), its cursor, its replay and its queue; the socket side is its
    // connection's (HoldSink). Every hold keeps one: the small fields
    // together, the rare ones behind a pointer. Held in holds_, whose nodes
    // do not move.
    struct Hold : bus::Member {
        // Awaiting its replay: pending[replay_mark..] are live events that
        // wait behind it, unwritten.
        bool replaying = false;
        bool started = false;           // the head is written
        bool dropped = false;           // a retry hint was sent: nothing more
        bool wrote_since_tick = false;  // heartbeat only when idle
        // Released while publish() iterated a list that may point at it:
        // kept, unfound, until the iteration ends (erase_later_).
        bool released = false;
        Transport transport = Transport::stream;
        // Replays asked for it (a resync asks again while an earlier read is
        // on its way): only the latest one's answer is applied, for it reads
        // from the same start up to a later instant. Compared for equality
        // only, so its wrapping is harmless.
        uint16_t asked = 0;  // beside the flags: in their padding
        std::vector<std::string> channels;
        uint64_t cursor = 0;   // live ids at or below it are muted
        uint64_t last_id = 0;  // the highest id queued to it, or where it started
        size_t replay_mark = 0;
        uint64_t replay_after = 0;  // the replay asked for ids above this
        double over_since = 0;      // behind (see behind()) since; 0: it is not
        // Events not yet written, in order: the replay and whatever arrived
        // before the head, then live events that came while those still
        // waited. They are written as the backlog drains under the limit, so
        // a large replay paces itself to the reader instead of filling memory.
        PendingQueue pending;
        size_t pending_live = 0;  // bytes of live events among them (the slow-reader bound)
        // Grip-Keep-Alive; null (most holds): the comment every --heartbeat.
        std::unique_ptr<bus::KeepAlive> keepalive;
        double every() const { return keepalive ? keepalive->every : 0; }
        std::string_view keepalive_bytes() const {
            return keepalive ? std::string_view(keepalive->bytes) : std::string_view();
        }
        double last_write = 0;   // keepalive.every > 0: when it was last written to
        uint64_t delivered = 0;  // events written to it (the access log's events=)
    };
    Hold* find(SlotRef slot);
    const Hold* find(SlotRef slot) const;
    // Writes to a started hold and applies the slow-reader rule; false when the
    // slot was closed.
    bool write(Hold& h, const SharedBytes& bytes, double now);
    // Unsubscribes the hold, or, inside publish()'s loop over a subscriber
    // list, at its end.
    void unsubscribe(Hold& h);
    // Writes pending events while the backlog is under the limit.
    bool flush(Hold& h, double now);
    bool check_backlog(Hold& h, size_t backlog, double now);
    // A long-poll: `f` is a candidate for its answer (the lowest id wins);
    // answered at once when its head may go.
    void offer(Hold& h, const bus::PublishFrame& f);
    // Answers a started long-poll with its first event, if it has one.
    void answer_if_ready(Hold& h);
    // Ends a long-poll with `event` (null: the handler's own answer).
    void answer(Hold& h, const bus::PublishFrame* event);
    // The pending events that may be written now (not those behind a replay).
    static size_t writable(const Hold& h) { return h.replaying ? h.replay_mark : h.pending.size(); }

    HoldSink& sink_;
    HoldConfig cfg_;
    Metrics& metrics_;
    bus::Subscriptions subs_;
    std::unordered_map<uint32_t, Hold> holds_;  // by slot index
    // Long-polls only, by slot index: the first event each may be answered
    // with, kept while its head or its replay is still to come. Loop thread.
    std::unordered_map<uint32_t, bus::PublishFrame> first_;
    bool publishing_ = false;           // loop thread: publish() iterates a subscriber list
    std::vector<Hold*> unsub_later_;    // loop thread: unsubscribes deferred by publish()
    std::vector<SlotRef> erase_later_;  // loop thread: releases deferred by publish()
    size_t own_keepalive_ =
        0;  // loop thread: holds with keepalive.every > 0 (keepalive() skips if 0)
};

}  // namespace m0::server
