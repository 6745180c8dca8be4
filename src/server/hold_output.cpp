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
// Lean holds: once a hold's head is out (the bufferevent's output empty),
// go_lean frees its bufferevent and its timer. A flush that finds a hold not
// yet lean (its head went into the output this turn, events were staged
// behind it: a replay, a reconnect storm) writes the head first and makes
// it lean there, so the events never queue in the bufferevent. One event
// watches the socket: EV_READ always (what the client sends is dropped, a
// bounded amount a turn; the end of the stream or an error closes), EV_WRITE
// with --write-timeout only while `out` keeps what the socket did not take:
// references to the shared bytes, out[0] from out_off. A flush sends from
// `staged` when `out` is empty, so `out` owns memory only under backpressure.
// A hold is then a Conn, one event, its HoldTable entry and its channels'
// entries: about 1 KB, where the bufferevent alone was about 900 bytes.
//
// TLS: a hold on a TLS connection is never lean and nothing is written to
// its socket but through its SSL (a byte sent around it would break the
// record stream). The SSL (its buffers released while idle) costs more than
// the bufferevent that going lean saves; README's TLS section has the
// figures. When its output is empty, a flush gathers the staged bytes (at
// most one record, kTlsDirectMax) and hands them to SSL_write itself, as the
// plain path sends them at once: no append to the output, no write event
// enabled and disabled (two epoll_ctl a delivery). What SSL_write does not
// take goes to the output and the OpenSSL bufferevent writes it when the
// socket is writable, as before. SSL_write that wants to be called again
// (the socket full, part of the record sent) keeps the record it made and
// must be given the same bytes again, at least as many: they are appended
// as one copied chain, which is the first thing the bufferevent hands
// SSL_write (libevent sets SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER, so the
// bytes may move); the staged bytes after them follow. Any other failure
// leaves the bytes in the output too, and the bufferevent's own write
// reports the error and the connection closes, as on the plain path. The
// thread's OpenSSL error queue is cleared before and after, so a failure
// here is never read as another connection's.
//
// Order: staged bytes go after whatever is already in the output (a hold's
// head the socket would not take, a stream's earlier bytes); when the
// output is not empty they are appended to it and the bufferevent writes
// them when the socket is writable. What the socket does not take is
// appended too: by reference (evbuffer_add_reference; its cleanup drops the
// reference) when at least kReferenceMin bytes, a copy otherwise (a
// reference costs a chain of its own, allocated, and an iovec; a small copy
// fills the last chain's free space): with libevent 2.1.12 a copy is the
// cheaper up to about 1 KiB, a reference from about 2 KiB (docs/BENCHMARK.md,
// "Fan-out").
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
#include <event2/bufferevent_ssl.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <algorithm>
#include <atomic>
#include <cerrno>

#include "loop/log.hpp"
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
// A TLS flush hands SSL_write at most one record's bytes itself (RFC 8446
// §5.1: 2^14); more goes through the output.
constexpr size_t kTlsDirectMax = 16384;

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

// One sendmsg of pieces[0] from `off` and those after it (at most kMaxIov),
// never blocking; the bytes sent, or -1 with errno set. `want`: the bytes
// offered.
ssize_t send_pieces(int fd, const std::vector<SharedBytes>& pieces, size_t off,
                    size_t* want = nullptr) {
    iovec iov[kMaxIov];
    const size_t n = std::min(pieces.size(), kMaxIov);
    size_t total = 0;
    for (size_t i = 0; i < n; ++i) {
        const size_t skip = i == 0 ? off : 0;
        iov[i] = {const_cast<char*>(pieces[i]->data() + skip), pieces[i]->size() - skip};
        total += iov[i].iov_len;
    }
    if (want) *want = total;
    msghdr msg{};
    msg.msg_iov = iov;
    msg.msg_iovlen = n;
    return ::sendmsg(fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
}

// A lean hold's `out` went from `before` pieces to `after`: they are counted
// with the outputs' references.
void count_kept(size_t before, size_t after) {
    if (after > before) output_refs.fetch_add(after - before);
    if (after < before) output_refs.fetch_sub(before - after);
}

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
    if (!c) return h2_write(slot, bytes);
    if (c->access) access_bytes(*c, bytes->size());
    if (c->staged.empty()) {
        if (flush_list_.empty()) schedule_flush();
        flush_list_.push_back(slot);
    }
    c->staged.push_back(bytes);
    c->staged_bytes += bytes->size();
    return output_length(*c) + c->staged_bytes;
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
    if (c.h2) {  // a stream wrote: the session takes its DATA
        if (c.phase == Phase::h2) h2_flush(c);
        return;
    }
    if (c.staged.empty()) return;
    if (!c.bev) {
        // Lean: behind what `out` holds already; the socket takes what it can
        // now (unless it is known full: EV_WRITE is armed), one sendmsg.
        const bool was_over = c.out_bytes + c.staged_bytes > cfg_.hold_buffer_limit;
        const size_t before = c.out.size();
        // Sent from `staged` when nothing waits ahead (`out` then owns no
        // memory: most holds, most of the time); a failure is left to `io`,
        // whose EV_WRITE reports it and closes.
        size_t sent = 0;
        if (c.out.empty())
            sent = static_cast<size_t>(std::max<ssize_t>(0, send_pieces(c.fd, c.staged, 0)));
        for (SharedBytes& b : c.staged) {
            if (sent >= b->size()) {
                sent -= b->size();
                continue;
            }
            if (c.out.empty()) c.out_off = sent;
            c.out_bytes += b->size() - sent;
            c.out.push_back(std::move(b));
            sent = 0;
        }
        c.staged.clear();
        c.staged_bytes = 0;
        if (!c.io_writing && before > 0) lean_send(c);
        count_kept(before, c.out.size());
        lean_watch(c);
        if (was_over && c.phase == Phase::holding && c.out_bytes <= cfg_.hold_buffer_limit)
            holds_.drained(c.slot, c.out_bytes, monotonic_seconds());
        return;
    }
    evbuffer* out = bufferevent_get_output(c.bev);
    size_t ahead = evbuffer_get_length(out);
    if (c.phase == Phase::holding && !c.tls) {
        // A hold not yet lean: its head went into the output this turn (or
        // went out, and the bufferevent has not said so yet). The head is
        // written now, and the hold goes lean before the staged events
        // leave: what the socket does not take then waits in the lean
        // output, 16 bytes a reference, where the bufferevent's output
        // would take an evbuffer chain of about 600 bytes for each (libevent
        // allocates at least 512 for a reference). A replay of 200 events
        // to each of 2000 holds reconnecting at once made 36 MB of chains.
        // A bufferevent keeps its output's start frozen (only it writes
        // from there): thawed for this write, as its own write does.
        evbuffer_unfreeze(out, 1);
        while (ahead > 0 && evbuffer_write(out, c.fd) > 0) ahead = evbuffer_get_length(out);
        evbuffer_freeze(out, 1);
        if (ahead == 0) {
            go_lean(c);
            flush_staged(c);
            return;
        }
    }
    const bool was_over = ahead + c.staged_bytes > cfg_.hold_buffer_limit;
    size_t sent = 0;
    if (ahead == 0 && !c.tls) {
        // Nothing ahead of them: straight to the socket, from the shared bytes.
        // EAGAIN: the output keeps it all. Another error: the output keeps it
        // too, and the bufferevent's own write reports the error (on_event).
        ssize_t r = send_pieces(c.fd, c.staged, 0);
        if (r > 0) sent = static_cast<size_t>(r);
    } else if (ahead == 0 && c.staged_bytes <= kTlsDirectMax) {
        sent = tls_send_now(c, out);
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

size_t Server::tls_send_now(Conn& c, evbuffer* out) {
    SSL* ssl = bufferevent_openssl_get_ssl(c.bev);
    if (!ssl || !SSL_is_init_finished(ssl)) return 0;
    tls_gather_.clear();
    for (const SharedBytes& b : c.staged) tls_gather_.append(b->data(), b->size());
    ERR_clear_error();
    const int r = SSL_write(ssl, tls_gather_.data(), static_cast<int>(tls_gather_.size()));
    if (r > 0) {  // one record: all of it
        ++tls_sent_now;
        return static_cast<size_t>(r);
    }
    const int e = SSL_get_error(ssl, r);
    ERR_clear_error();
    if (e != SSL_ERROR_WANT_WRITE && e != SSL_ERROR_WANT_READ) return 0;
    // The record SSL_write made waits for these bytes again: one chain.
    evbuffer_add(out, tls_gather_.data(), tls_gather_.size());
    ++tls_sent_later;
    return tls_gather_.size();
}

// ---- lean holds ---------------------------------------------------------

size_t Server::output_length(const Conn& c) {
    return c.bev ? evbuffer_get_length(bufferevent_get_output(c.bev)) : c.out_bytes;
}

void Server::drop_lean(Conn& c) {
    count_kept(c.out.size(), 0);
    c.out.clear();
    event_free(c.io);  // out of the poll set, then closed
    c.io = nullptr;
    ::close(c.fd);
}

void Server::go_lean(Conn& c) {
    // The bufferevent (its two evbuffers, two events, its callbacks) is most
    // of a hold's memory, and a hold reads nothing: one event on the socket
    // and the shared bytes the socket has not taken are enough. Detaching
    // the socket first takes its events out of the poll set now and keeps
    // the free from closing it.
    bufferevent_setfd(c.bev, -1);
    bufferevent_free(c.bev);
    c.bev = nullptr;
    if (c.timer) {
        event_free(c.timer);  // a hold has no timer running; closing makes one again
        c.timer = nullptr;
    }
    c.io = event_new(loop_.base(), c.fd, EV_READ | EV_PERSIST, on_io, &c);
    c.io_writing = false;
    event_add(c.io, nullptr);
}

bool Server::lean_send(Conn& c) {
    while (!c.out.empty()) {
        size_t want = 0;
        const ssize_t r = send_pieces(c.fd, c.out, c.out_off, &want);
        if (r < 0) {
            if (errno == EINTR) continue;
            return errno == EAGAIN || errno == EWOULDBLOCK;
        }
        size_t sent = static_cast<size_t>(r);
        c.out_bytes -= sent;
        size_t done = 0;  // pieces sent whole
        for (; done < c.out.size(); ++done) {
            const size_t left = c.out[done]->size() - (done == 0 ? c.out_off : 0);
            if (sent < left) break;
            sent -= left;
        }
        c.out_off = (done == 0 ? c.out_off : 0) + sent;
        c.out.erase(c.out.begin(), c.out.begin() + static_cast<long>(done));
        if (static_cast<size_t>(r) < want) break;  // the socket is full
    }
    if (c.out.empty()) {
        c.out_off = 0;
        std::vector<SharedBytes>().swap(c.out);  // owns no memory again
    }
    return true;
}

void Server::lean_watch(Conn& c) {
    // EV_WRITE, and --write-timeout, only while there is something to send.
    const bool want = !c.out.empty();
    if (want == c.io_writing) return;
    event_del(c.io);
    event_assign(c.io, loop_.base(), c.fd, EV_READ | EV_PERSIST | (want ? EV_WRITE : 0), on_io, &c);
    timeval wt = to_timeval(cfg_.write_timeout);
    event_add(c.io, want ? &wt : nullptr);
    c.io_writing = want;
}

void Server::lean_sent(Conn& c) {
    if (c.phase == Phase::holding && c.out_bytes <= cfg_.hold_buffer_limit)
        holds_.drained(c.slot, c.out_bytes + c.staged_bytes, monotonic_seconds());
    else if (c.phase == Phase::closing && c.out.empty())
        c.begin_linger();
}

void Server::on_io(evutil_socket_t fd, short what, void* arg) {
    auto& c = *static_cast<Conn*>(arg);
    Server& s = *c.server;
    if (what & EV_TIMEOUT) {
        // The socket took nothing for --write-timeout (the timeout is armed
        // only while there is something to send).
        M0_LOG(info, "write timeout: closing ", c.remote_addr, " slot ", to_string(c.slot));
        s.close_conn(c);
        return;
    }
    if ((what & EV_READ) && c.ws && c.ws->open && c.phase == Phase::holding) {
        // A WebSocket's frames go to wslay (ws_conn.cpp).
        const SlotRef slot = c.slot;
        s.ws_read(c);
        if (!s.find(slot)) return;
    } else if (what & EV_READ) {
        // Nothing a hold's client sends is read: dropped, a bounded amount per
        // turn. The end of the stream or an error: the client left.
        char sink[4096];
        for (int i = 0; i < 16; ++i) {
            const ssize_t r = ::recv(fd, sink, sizeof sink, MSG_DONTWAIT);
            if (r > 0) continue;
            if (r < 0 && errno == EINTR) continue;
            if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
            s.close_conn(c);
            return;
        }
    }
    if ((what & EV_WRITE) && !c.out.empty()) {
        const size_t before = c.out.size();
        const bool ok = s.lean_send(c);
        count_kept(before, c.out.size());
        if (!ok) {
            s.close_conn(c);
            return;
        }
        s.lean_watch(c);
        s.lean_sent(c);
    }
}

// ---- a hold's head, and its end ----------------------------------------------

void Server::finish_hold_head(Conn& c, http::Response& r) {
    if (c.cors && c.cors->preflight && holds_.has(c.slot)) {
        // The application answered a CORS preflight with a hold head (a
        // stream or a long-poll): the preflight's answer is the server's
        // (http::CorsAsk), and there is no hold.
        holds_.release(c.slot);
        c.keep_alive = false;
        c.send_whole(*c.cors->preflight);
        c.close_after_write();
        return;
    }
    if (c.poll && holds_.answers_once(c.slot)) {
        finish_poll(c, r);
        return;
    }
    c.keep_alive = false;
    if (!holds_.has(c.slot)) {
        M0_LOG(error, "hold completion for slot ", to_string(c.slot),
               " found no subscription (its h frame did not come first): closing");
        c.send_whole(r);
        c.close_after_write();
        return;
    }
    if (c.peer_eof) {  // the client left while the hold was decided
        close_conn(c);
        return;
    }
    if (const char* why = invalid_answer(r)) {
        holds_.release(c.slot);  // no stream: the subscription its h frame made goes
        c.refuse_answer(why);
        return;
    }
    // A WebSocket's 101 (its Origin was checked with its handshake), or a
    // stream's head, whose CORS fields are the server's: an ordinary
    // answer's are the application's.
    const bool ws = c.ws && is_websocket(holds_.transport(c.slot));
    if (!ws)
        cfg_.cors.apply(c.cors ? std::optional<std::string_view>(c.cors->origin) : std::nullopt,
                        r.headers);
    std::string head = ws ? ws_head(c, r) : c.head_text(r, "");
    evbuffer* out = bufferevent_get_output(c.bev);
    evbuffer_add(out, head.data(), head.size());
    if (c.access) {
        access_answer(c, r.status, head.size());
        c.access->rec.hold = !c.head_request;
    }
    if (c.head_request) {
        // RFC 9110 §9.3.2: HEAD is answered with the head alone, so there is no
        // stream to hold: the subscription the h frame made is released.
        holds_.release(c.slot);
        c.close_after_write();
        return;
    }
    evbuffer_add(out, r.body.data(), r.body.size());
    if (c.access) access_bytes(c, r.body.size());
    c.phase = Phase::holding;
    c.parser.reset();
    if (ws) {
        ws_open(c);
        metrics_.websockets.fetch_add(1);
    }
    // on_write reports when the backlog is back under the limit.
    bufferevent_setwatermark(c.bev, EV_WRITE, cfg_.hold_buffer_limit, 0);
    metrics_.holds_total.fetch_add(1);
    SlotRef slot = c.slot;
    if (!holds_.start(slot, monotonic_seconds())) return;  // a slow reader, closed
    if (shutting_down_) {
        drop_hold(slot);
        return;
    }
    // Frames the client sent behind its upgrade request, already read.
    if (Conn* w = ws ? find(slot) : nullptr) ws_read(*w);
}

void Server::drop_hold(SlotRef slot) {
    // A reconnect hint, spread so the clients do not all come back in the same second.
    std::uniform_int_distribution<uint64_t> spread(1000, 6000);
    holds_.drop(slot, spread(rng_));
}

size_t Server::close_channel(const std::string& channel) {
    std::vector<SlotRef> targets = holds_.holding(channel);
    for (SlotRef s : targets) drop_hold(s);
    return targets.size();
}

}  // namespace m0::server
