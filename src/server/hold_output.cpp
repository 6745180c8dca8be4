// Server, the hold table's output: how an event fanned out to many holds
// reaches their sockets. Loop thread only.
//
// DESIGN
// HoldTable::publish() encodes an event once (SharedBytes) and hands each
// subscriber a reference. write_shared() stages that reference on the
// connection (Conn::staged) and puts the connection on flush_list_; the first
// one of a loop turn activates flush_ev_, which libevent runs after the
// callbacks already active, so every event a connection is written in one
// turn (a drained bus queue holds many) leaves in one sendmsg, straight from
// the shared bytes: no copy into the output buffer, and no write event
// enabled and disabled on the socket (two epoll_ctl calls) per delivery.
// Coalescing (--hold-coalesce): a publisher that sends events one after the
// other (each publish a round trip) never has two in one turn, so each would
// cost every subscriber a sendmsg: the kernel's send is most of a delivery's
// cost. So a flush wanted within the window after the last one ended waits
// for the window's end, and what is staged meanwhile leaves in one sendmsg.
// An event after a quiet spell is flushed at its turn's end as before: the
// delay is at most the window, and only under a stream of events.
// Slices: a flush sends to kFlushSlice connections, then lets the loop poll
// its sockets and run what came (a hold's head behind busy Python threads
// must not wait for an event's fan-out to 10000 holds), then goes on.
//
// Order: staged bytes go after whatever is already in the output (a hold's
// head, an earlier event the socket did not take); when the output is not
// empty they are appended to it and the bufferevent writes them when the
// socket is writable. What the socket does not take is appended too: by
// reference (evbuffer_add_reference; its cleanup drops the reference) when
// at least kReferenceMin bytes, a copy otherwise (a reference costs a chain
// of its own, allocated, and an iovec; a small copy fills the last chain's
// free space). Measured with libevent 2.1.12, add then peek then drain: a
// copy is cheaper up to about 1 KiB (64 B: 22 ns against 50; 512 B: 33
// against 50), a reference from about 2 KiB (4 KiB: 47 ns against 116).
// The bufferevents are not thread-safe (no BEV_OPT_THREADSAFE): the cleanup
// runs on the loop thread, when the bytes are written or the connection freed.
//
// A flush that brings a connection from over --hold-buffer-limit back under
// it tells the table (drained()), as the bufferevent's own writes do
// (on_write), so a replay paced to the reader goes on.
//
// close_after_write(slot) flushes the connection's staged bytes first, so a
// retry hint and the close follow the events before them; close_conn drops
// them with the connection (the references go with Conn::staged).
#include <event2/buffer.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <algorithm>
#include <atomic>
#include <cerrno>

#include "server/conn.hpp"
#include "server/server.hpp"

namespace m0::server {

namespace {
// Staged bytes left over smaller than this are copied into the output, not
// referenced (see the DESIGN note for the measurement).
constexpr size_t kReferenceMin = 1024;
// At most this many staged pieces per sendmsg (Linux's IOV_MAX is 1024).
constexpr size_t kMaxIov = 64;
// Connections flushed before the loop looks at its other events again (a
// new connection, a hold's head, a request): at a few microseconds a
// sendmsg, a slice keeps them waiting well under a millisecond, where one
// event fanned out to 10000 holds would keep them waiting tens.
constexpr size_t kFlushSlice = 64;

std::atomic<size_t> output_refs{0};  // any thread reads: references the outputs hold

// A reference held by a connection's output until libevent lets the bytes go.
struct OutputRef {
    SharedBytes bytes;
    explicit OutputRef(SharedBytes b) : bytes(std::move(b)) { output_refs.fetch_add(1); }
    ~OutputRef() { output_refs.fetch_sub(1); }
    OutputRef(const OutputRef&) = delete;
    OutputRef& operator=(const OutputRef&) = delete;
};

void drop_output_ref(const void*, size_t, void* extra) { delete static_cast<OutputRef*>(extra); }

// Appends bytes[from..] to `out`: by reference when large enough, else copied.
void append(evbuffer* out, const SharedBytes& bytes, size_t from) {
    const char* data = bytes->data() + from;
    size_t len = bytes->size() - from;
    if (len >= kReferenceMin) {
        auto* ref = new OutputRef(bytes);
        if (evbuffer_add_reference(out, data, len, drop_output_ref, ref) == 0) return;
        delete ref;
    }
    evbuffer_add(out, data, len);
}
}  // namespace

size_t Server::output_references() { return output_refs.load(); }

size_t Server::write(SlotRef slot, std::string_view bytes) {
    // Heartbeats, keep-alives and retry hints: staged too, so they keep their
    // place behind the events staged before them.
    return write_shared(slot, std::make_shared<const std::string>(bytes));
}

size_t Server::write_shared(SlotRef slot, const SharedBytes& bytes) {
    Conn* c = find(slot);
    if (!c) return 0;
    if (c->access) access_bytes(*c, bytes->size());
    if (c->staged.empty()) {
        if (flush_list_.empty()) schedule_flush();
        flush_list_.push_back(slot);
    }
    c->staged.push_back(bytes);
    c->staged_bytes += bytes->size();
    return evbuffer_get_length(bufferevent_get_output(c->bev)) + c->staged_bytes;
}

void Server::schedule_flush() {
    // Right after a flush (a burst: events arriving one after the other), the
    // rest of --hold-coalesce passes first, and what is staged meanwhile
    // leaves together. Otherwise at the end of this turn.
    const double wait = last_flush_ + cfg_.hold_coalesce - monotonic_seconds();
    if (cfg_.hold_coalesce > 0 && wait > 0) {
        timeval tv = to_timeval(wait);
        event_add(flush_ev_, &tv);
        return;
    }
    event_active(flush_ev_, EV_WRITE, 0);
}

void Server::on_flush(evutil_socket_t, short, void* arg) {
    static_cast<Server*>(arg)->flush_staged();
}

void Server::flush_staged() {
    // A slot could be listed twice if a staged list were emptied without the
    // flush (close_after_write): find() and the empty check skip it. This
    // flush sends what was listed when it began; what is staged meanwhile on
    // a connection not yet sent goes with it, and a connection listed anew
    // waits for the next flush (and the coalescing window), behind the rest.
    if (flush_next_ == 0) flush_end_ = flush_list_.size();
    const size_t end = std::min(flush_end_, flush_next_ + kFlushSlice);
    for (; flush_next_ < end; ++flush_next_)
        if (Conn* c = find(flush_list_[flush_next_])) flush_staged(*c);
    if (on_flush_slice) on_flush_slice(flush_next_);
    if (flush_next_ < flush_end_) {
        // The rest after the loop has polled its sockets: a timer due at
        // once runs after the poll, where an active event would run before it.
        timeval now{0, 0};
        event_add(flush_ev_, &now);
        return;
    }
    flush_list_.erase(flush_list_.begin(), flush_list_.begin() + static_cast<long>(flush_end_));
    flush_next_ = flush_end_ = 0;
    if (cfg_.hold_coalesce > 0) last_flush_ = monotonic_seconds();
    if (!flush_list_.empty()) {
        // Listed during this flush: after the window, or (none) after the poll.
        timeval wait = to_timeval(cfg_.hold_coalesce);
        event_add(flush_ev_, &wait);
    }
}

void Server::flush_staged(Conn& c) {
    if (c.staged.empty()) return;
    evbuffer* out = bufferevent_get_output(c.bev);
    const size_t ahead = evbuffer_get_length(out);
    const bool was_over = ahead + c.staged_bytes > cfg_.hold_buffer_limit;
    size_t sent = 0;
    if (ahead == 0) {
        // Nothing ahead of them: straight to the socket, from the shared bytes.
        iovec iov[kMaxIov];
        size_t n = std::min(c.staged.size(), kMaxIov);
        for (size_t i = 0; i < n; ++i)
            iov[i] = {const_cast<char*>(c.staged[i]->data()), c.staged[i]->size()};
        msghdr msg{};
        msg.msg_iov = iov;
        msg.msg_iovlen = n;
        ssize_t r = ::sendmsg(bufferevent_getfd(c.bev), &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
        // EAGAIN: the output keeps it all. Another error: the output keeps it
        // too, and the bufferevent's own write reports the error (on_event).
        if (r > 0) sent = static_cast<size_t>(r);
    }
    for (const SharedBytes& b : c.staged) {
        if (sent >= b->size()) {
            sent -= b->size();
            continue;
        }
        append(out, b, sent);
        sent = 0;
    }
    c.staged.clear();
    c.staged_bytes = 0;
    // Back under the limit: pending events (a paced replay) continue. The
    // bufferevent reports this after its own writes (on_write), not this one;
    // under the limit throughout, the table held nothing back.
    size_t left = evbuffer_get_length(out);
    if (was_over && c.phase == Phase::holding && left <= cfg_.hold_buffer_limit)
        holds_.drained(c.slot, left, monotonic_seconds());
}

}  // namespace m0::server
