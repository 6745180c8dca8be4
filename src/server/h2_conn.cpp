// Server, an HTTP/2 connection: how it starts (ALPN h2 after a TLS
// handshake, or the client preface on a plain listener), the nghttp2 session
// fed from its bufferevent's input and written to its output, its streams'
// births and deaths, its timers and its drain. Loop thread only.
//
// DESIGN
// nghttp2 (Debian's libnghttp2) does the framing, HPACK, flow control and
// the protocol's checks (RFC 9113 §8.2.2's connection-specific fields, a
// content-length that disagrees with the DATA, pseudo-headers), and its own
// flood guards: RST_STREAM by a token bucket (CVE-2023-44487: GOAWAY past
// it), CONTINUATION frames per header block (CVE-2024-27316), SETTINGS and
// PING ACKs queued for a peer that does not read, SETTINGS entries per
// frame. What it lacks is this server's: a bound on the RST_STREAMs the
// client makes the server send (MadeYouReset, CVE-2025-8671: a budget of
// --h2-max-stream-errors a connection, counted as each goes out, past it
// GOAWAY ENHANCE_YOUR_CALM; h2_stream_error); a header list is bounded as
// decoded (--max-header-size, --max-headers: 431; far past them the stream
// is reset, so a small HPACK block that decodes into a large list costs
// nothing kept), a body by --max-body-size (413), an answer that makes no
// progress for --write-timeout (a zero window held forever) is reset, and
// the hold rule for slow readers applies per stream (h2_stream.cpp).
// The session writes into the bufferevent's output while it holds less
// than kOutputMax: a connection that does not read stops taking frames, and
// --write-timeout ends it, as an HTTP/1.1 one.
#include "server/h2_conn.hpp"

#include <event2/buffer.h>
#include <event2/bufferevent_ssl.h>
#include <openssl/ssl.h>

#include <algorithm>
#include <cstring>

#include "loop/log.hpp"
#include "server/conn.hpp"

namespace m0::server {

namespace {
// The session takes no more frames while the connection's output holds this
// much (the socket's own buffer is behind it).
constexpr size_t kOutputMax = 64 * 1024;
// A header list this many times past the limits is reset, not answered 431.
constexpr size_t kHeaderResetFactor = 4;
}  // namespace

// nghttp2's callbacks, with access to the server (user_data: the Conn).
struct Server::H2Io {
    static Conn& conn(void* p) { return *static_cast<Conn*>(p); }

    static ssize_t send(nghttp2_session*, const uint8_t* data, size_t len, int, void* p) {
        evbuffer* out = bufferevent_get_output(conn(p).bev);
        if (evbuffer_get_length(out) >= kOutputMax) return NGHTTP2_ERR_WOULDBLOCK;
        evbuffer_add(out, data, len);
        return static_cast<ssize_t>(len);
    }

    static int begin_headers(nghttp2_session* s, const nghttp2_frame* f, void* p) {
        if (f->hd.type != NGHTTP2_HEADERS || f->headers.cat != NGHTTP2_HCAT_REQUEST) return 0;
        Conn& c = conn(p);
        c.server->h2_open_stream(c, f->hd.stream_id);
        (void)s;
        return 0;
    }

    static int header(nghttp2_session* s, const nghttp2_frame* f, const uint8_t* name,
                      size_t namelen, const uint8_t* value, size_t valuelen, uint8_t, void* p) {
        auto* st = static_cast<H2Stream*>(nghttp2_session_get_stream_user_data(s, f->hd.stream_id));
        if (!st || st->state != H2Stream::State::receiving) return 0;
        const http::ParserLimits& lim = conn(p).server->cfg_.limits;
        st->header_bytes += namelen + valuelen + 4;  // as "name: value\r\n"
        ++st->header_count;
        if (st->header_bytes > lim.max_header * kHeaderResetFactor ||
            st->header_count > lim.max_headers * kHeaderResetFactor) {
            // RST_STREAM: a bomb; one the client caused (its code is ours, INTERNAL_ERROR).
            if (!conn(p).server->h2_stream_error(conn(p))) return NGHTTP2_ERR_CALLBACK_FAILURE;
            return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
        }
        if (st->header_bytes > lim.max_header || st->header_count > lim.max_headers) {
            if (!st->refuse) st->refuse = 431;
            return 0;
        }
        std::string_view n(reinterpret_cast<const char*>(name), namelen);
        std::string_view v(reinterpret_cast<const char*>(value), valuelen);
        http::Request& r = *st->req;
        if (n == ":method")
            r.method = v;
        else if (n == ":path")
            r.target = v;
        else if (n == ":authority")
            r.headers.add("host", std::string(v));
        else if (n.starts_with(':'))
            return 0;  // :scheme (the connection says it), :protocol
        else if (n == "host" && r.headers.has("host"))
            return 0;  // RFC 9113 §8.3.1: :authority is the one kept
        else if (n == "cookie" && r.headers.has("cookie"))
            // RFC 9113 §8.2.3: crumbs are joined with "; " for HTTP/1.1's one field.
            for (auto& [k, val] : r.headers.items) {
                if (k != "cookie") continue;
                val.append("; ").append(v);
                break;
            }
        else
            r.headers.add(std::string(n), std::string(v));
        return 0;
    }

    static int frame_recv(nghttp2_session* s, const nghttp2_frame* f, void* p) {
        if (f->hd.type == NGHTTP2_RST_STREAM)
            conn(p).server->metrics_.h2_client_resets.fetch_add(1);
        if (f->hd.type != NGHTTP2_HEADERS && f->hd.type != NGHTTP2_DATA) return 0;
        auto* st = static_cast<H2Stream*>(nghttp2_session_get_stream_user_data(s, f->hd.stream_id));
        if (!st || st->state != H2Stream::State::receiving) return 0;
        Conn& c = conn(p);
        if (f->hd.type == NGHTTP2_HEADERS && !st->refuse && !c.server->h2_charge_body(*st, 0))
            st->refuse = 503;  // its declared content-length does not fit
        if (st->refuse) {
            c.server->h2_refuse(c, *st, st->refuse,
                                st->refuse == 431   ? "request header fields too large"
                                : st->refuse == 503 ? kBodyTotalReason
                                                    : "request body too large");
            return 0;
        }
        if (f->hd.flags & NGHTTP2_FLAG_END_STREAM) {
            c.server->h2_dispatch(c, *st);
        } else if (f->hd.type == NGHTTP2_HEADERS) {
            st->in_body = true;  // its head is in: --body-timeout from here
            st->born = monotonic_seconds();
        }
        return 0;
    }

    static int data_chunk(nghttp2_session* s, uint8_t, int32_t id, const uint8_t* data, size_t len,
                          void* p) {
        auto* st = static_cast<H2Stream*>(nghttp2_session_get_stream_user_data(s, id));
        if (!st || st->state != H2Stream::State::receiving || st->refuse) return 0;
        Conn& c = conn(p);
        if (st->req->body.size() + len > c.server->cfg_.limits.max_body) {
            st->refuse = 413;
            st->req->body.clear();
            return 0;
        }
        if (!c.server->h2_charge_body(*st, len)) {
            st->refuse = 503;
            st->req->body.clear();
            return 0;
        }
        st->req->body.append(reinterpret_cast<const char*>(data), len);
        if (len > 0) st->born = monotonic_seconds();  // progress: the pause starts again
        return 0;
    }

    static int frame_send(nghttp2_session* s, const nghttp2_frame* f, void* p) {
        const bool ended = (f->hd.type == NGHTTP2_DATA || f->hd.type == NGHTTP2_HEADERS) &&
                           (f->hd.flags & NGHTTP2_FLAG_END_STREAM);
        if (ended && nghttp2_session_get_stream_remote_close(s, f->hd.stream_id) == 0) {
            // A whole answer (a refusal: 408, 413, 431) while the client still
            // sends its request: RFC 9113 §8.1, RST_STREAM NO_ERROR so that
            // it stops, and the stream does not stay open on its word.
            nghttp2_submit_rst_stream(s, NGHTTP2_FLAG_NONE, f->hd.stream_id, NGHTTP2_NO_ERROR);
        }
        if (f->hd.type == NGHTTP2_DATA) {
            auto* st =
                static_cast<H2Stream*>(nghttp2_session_get_stream_user_data(s, f->hd.stream_id));
            if (!st || !(st->item_ending || ended)) return 0;
            // The item's last frame (nghttp2 has let the item go): what was
            // queued since, or the stream's end, goes in a new one.
            st->item = st->item_ending = false;
            if (!ended) conn(p).server->h2_submit_data(conn(p), *st);
            return 0;
        }
        // A RST_STREAM for the client's frames (PROTOCOL_ERROR, STREAM_CLOSED,
        // FLOW_CONTROL_ERROR, REFUSED_STREAM, ...): the library's, for a
        // stream error the client caused. CANCEL, INTERNAL_ERROR and NO_ERROR
        // are the server's own (a slow reader, a timeout, a failed answer, an
        // answer before the request's end; the HPACK bomb counts where it is
        // found).
        if (f->hd.type != NGHTTP2_RST_STREAM) return 0;
        const uint32_t code = f->rst_stream.error_code;
        if (code == NGHTTP2_CANCEL || code == NGHTTP2_INTERNAL_ERROR || code == NGHTTP2_NO_ERROR)
            return 0;
        Conn& c = conn(p);
        (void)c.server->h2_stream_error(c);  // its GOAWAY goes from h2_flush
        return 0;
    }

    static int stream_close(nghttp2_session*, int32_t id, uint32_t, void* p) {
        Conn& c = conn(p);
        c.server->h2_close_stream(c, id);
        return 0;
    }
};

bool Server::h2_preface(Conn& c) {
    // Prior knowledge (RFC 9113 §3.3) on a plain client connection, at its
    // first bytes only: a request line never begins with "PRI * HTTP/2.0".
    if (c.admin || c.tls || c.dispatched || c.parser->in_message()) return false;
    evbuffer* in = bufferevent_get_input(c.bev);
    const size_t have = std::min(evbuffer_get_length(in), kH2Preface.size());
    if (have == 0 || (c.peer_eof && have < kH2Preface.size())) return false;
    std::string first(have, '\0');
    evbuffer_copyout(in, first.data(), have);
    if (kH2Preface.substr(0, have) != first) return false;
    if (have == kH2Preface.size()) h2_start(c);
    return true;  // h2, or the rest of the preface is awaited
}

void Server::h2_start(Conn& c) {
    c.phase = Phase::h2;
    c.parser.reset();
    c.h2 = std::make_unique<H2State>();
    metrics_.h2_connections.fetch_add(1);
    nghttp2_session_callbacks* cb = nullptr;
    nghttp2_session_callbacks_new(&cb);
    nghttp2_session_callbacks_set_send_callback(cb, H2Io::send);
    nghttp2_session_callbacks_set_on_begin_headers_callback(cb, H2Io::begin_headers);
    nghttp2_session_callbacks_set_on_header_callback(cb, H2Io::header);
    nghttp2_session_callbacks_set_on_frame_recv_callback(cb, H2Io::frame_recv);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cb, H2Io::data_chunk);
    nghttp2_session_callbacks_set_on_stream_close_callback(cb, H2Io::stream_close);
    nghttp2_session_callbacks_set_on_frame_send_callback(cb, H2Io::frame_send);
    // The library's own defaults guard the floods (see DESIGN); streams past
    // SETTINGS_MAX_CONCURRENT_STREAMS it refuses (REFUSED_STREAM) from the
    // first frame on, before the client has acknowledged our SETTINGS.
    nghttp2_session_server_new(&c.h2->session, cb, &c);
    nghttp2_session_callbacks_del(cb);
    const nghttp2_settings_entry iv[] = {
        {NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, cfg_.h2_max_streams},
        {NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE, static_cast<uint32_t>(cfg_.limits.max_header)},
        {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, cfg_.h2_window},
    };
    nghttp2_submit_settings(c.h2->session, NGHTTP2_FLAG_NONE, iv, std::size(iv));
    // The connection's window (no setting carries it: a WINDOW_UPDATE does),
    // so that several uploads at once each keep their stream's pace. A body
    // is buffered whole whatever the windows (--max-body-size and
    // --max-body-total bound the memory), so they are a pace, not a bound.
    const auto window = std::min<uint64_t>(uint64_t(cfg_.h2_window) * kH2ConnectionWindows,
                                           NGHTTP2_MAX_WINDOW_SIZE);
    nghttp2_session_set_local_window_size(c.h2->session, NGHTTP2_FLAG_NONE, 0,
                                          static_cast<int32_t>(window));
    bufferevent_setwatermark(c.bev, EV_WRITE, kOutputMax / 2, 0);
    c.h2->idle_since = monotonic_seconds();
    h2_arm(c, c.h2->idle_since + cfg_.keepalive_timeout);
    M0_LOG(debug, "HTTP/2 on slot ", to_string(c.slot), c.tls ? " (TLS)" : " (prior knowledge)");
    h2_read(c);
}

bool Server::alpn_h2(const Conn& c) {
    const unsigned char* p = nullptr;
    unsigned len = 0;
    SSL_get0_alpn_selected(bufferevent_openssl_get_ssl(c.bev), &p, &len);
    return len == 2 && std::memcmp(p, "h2", 2) == 0;
}

void Server::h2_read(Conn& c) {
    evbuffer* in = bufferevent_get_input(c.bev);
    const SlotRef me = c.slot;
    while (evbuffer_get_length(in) > 0) {
        evbuffer_iovec vec;
        if (evbuffer_peek(in, -1, nullptr, &vec, 1) < 1) break;
        const ssize_t n = nghttp2_session_mem_recv(
            c.h2->session, static_cast<const uint8_t*>(vec.iov_base), vec.iov_len);
        if (!find(me)) return;
        if (n < 0) {
            M0_LOG(info, "HTTP/2 from ", c.remote_addr, " ended: ", nghttp2_strerror(int(n)));
            if (n == NGHTTP2_ERR_FLOODED) {
                // Its ACKs piled up unread: nothing more is written to it.
                close_conn(c);
                return;
            }
            // A fatal error (a CONTINUATION flood among them) queues no
            // GOAWAY of the library's: ours says why, then the close.
            evbuffer_drain(in, evbuffer_get_length(in));
            if (n == NGHTTP2_ERR_TOO_MANY_CONTINUATIONS) metrics_.h2_calm.fetch_add(1);
            nghttp2_session_terminate_session(c.h2->session,
                                              n == NGHTTP2_ERR_TOO_MANY_CONTINUATIONS || c.h2->calm
                                                  ? NGHTTP2_ENHANCE_YOUR_CALM
                                                  : NGHTTP2_PROTOCOL_ERROR);
            (void)nghttp2_session_send(c.h2->session);
            c.close_after_write();
            return;
        }
        evbuffer_drain(in, static_cast<size_t>(n));
    }
    h2_flush(c);
}

bool Server::h2_stream_error(Conn& c) {
    H2State& h = *c.h2;
    const double cap = cfg_.h2_max_stream_errors;
    const double now = monotonic_seconds();
    h.error_budget =
        h.error_budget < 0 ? cap : std::min(cap, h.error_budget + (now - h.error_at) * cap / 10);
    h.error_at = now;
    metrics_.h2_stream_errors.fetch_add(1);
    if (h.error_budget >= 1) {
        h.error_budget -= 1;
        return true;
    }
    if (!h.calm) {
        M0_LOG(info, "HTTP/2 from ", c.remote_addr,
               ": stream errors past --h2-max-stream-errors: GOAWAY ENHANCE_YOUR_CALM");
        metrics_.h2_calm.fetch_add(1);
    }
    h.calm = true;
    return false;
}

int Server::h2_send(Conn& c) {
    H2State& h = *c.h2;
    evbuffer* out = bufferevent_get_output(c.bev);
    // TLS (only OpenSSL writes its socket), or bytes already waiting: the
    // frames go behind them, through the send callback. So too while another
    // stream's answer is due from a pool: written from the output when the
    // socket is next writable, the answers that come meanwhile join the same
    // write (h2load -m 10: 67,500 requests/s through the output, 53,900
    // written at once).
    if (c.tls || evbuffer_get_length(out) != 0) return nghttp2_session_send(h.session);
    for (const auto& [id, st] : h.streams)
        if (st->state == H2Stream::State::waiting) return nghttp2_session_send(h.session);
    // As Conn::send_now does for an HTTP/1.1 answer: what the session has to
    // send leaves in one write, with no write event turned on and off around
    // it; what the socket does not take goes to the output.
    thread_local std::string frames;  // the loop thread's, reused
    frames.clear();
    while (frames.size() < kOutputMax) {
        const uint8_t* data = nullptr;
        const ssize_t n = nghttp2_session_mem_send(h.session, &data);
        if (n < 0) return static_cast<int>(n);
        if (n == 0) break;
        frames.append(reinterpret_cast<const char*>(data), static_cast<size_t>(n));
    }
    if (!frames.empty()) c.send_now(frames, {});
    // A bound's worth gathered: the rest as before, the output taking it.
    return frames.size() < kOutputMax ? 0 : nghttp2_session_send(h.session);
}

void Server::h2_flush(Conn& c) {
    H2State& h = *c.h2;
    h.flush_listed = false;
    if (c.phase != Phase::h2) return;
    if (h2_send(c) != 0) {
        close_conn(c);
        return;
    }
    if (h.calm && !h.going_away) {
        // Its stream errors ran past the budget: GOAWAY, nothing more read.
        h.going_away = true;
        evbuffer_drain(bufferevent_get_input(c.bev),
                       evbuffer_get_length(bufferevent_get_input(c.bev)));
        nghttp2_session_terminate_session(h.session, NGHTTP2_ENHANCE_YOUR_CALM);
        (void)nghttp2_session_send(h.session);
        c.close_after_write();
        return;
    }
    const SlotRef me = c.slot;
    // Holds whose backlog fell under the limit as DATA left: paced on.
    std::vector<SlotRef> drained;
    drained.swap(h.drained);
    for (SlotRef s : drained)
        if (H2Stream* st = find_stream(s)) holds_.drained(s, st->out_bytes, monotonic_seconds());
    if (!drained.empty()) {
        Conn* again = find(me);
        if (!again) return;
        if (h2_send(c) != 0) {
            close_conn(c);
            return;
        }
    }
    const bool done =
        !nghttp2_session_want_read(h.session) && !nghttp2_session_want_write(h.session);
    if (done || (h.going_away && h.streams.empty())) c.close_after_write();
}

void Server::h2_open_stream(Conn& c, int32_t id) {
    H2State& h = *c.h2;
    if (h.going_away) {
        nghttp2_submit_rst_stream(h.session, NGHTTP2_FLAG_NONE, id, NGHTTP2_REFUSED_STREAM);
        return;
    }
    metrics_.h2_streams.fetch_add(1);
    const SlotRef slot = alloc_slot();
    auto st = std::make_unique<H2Stream>();
    st->id = id;
    st->slot = slot;
    st->conn = c.slot;
    st->req = std::make_unique<http::Request>();
    st->req->version_major = 2;
    st->req->version_minor = 0;
    slots_[slot.index].stream = st.get();
    nghttp2_session_set_stream_user_data(h.session, id, st.get());
    st->born = monotonic_seconds();
    h2_arm(c, st->born + cfg_.header_timeout);
    h.streams.emplace(id, std::move(st));
}

void Server::h2_arm(Conn& c, double at) {
    H2State& h = *c.h2;
    const double now = monotonic_seconds();
    if (h.timer_at > now && h.timer_at <= at) return;
    h.timer_at = at;
    c.arm_timer(std::max(0.001, at - now));
}

size_t Server::h2_streams() const {
    size_t n = 0;
    for (const auto& e : slots_) n += e.stream ? 1 : 0;
    return n;
}

size_t Server::h2_data_items() const {
    size_t n = 0;
    for (const auto& e : slots_) n += e.stream && e.stream->item ? 1 : 0;
    return n;
}

H2Stream* Server::find_stream(SlotRef s) const {
    if (s.index >= slots_.size()) return nullptr;
    const auto& e = slots_[s.index];
    return e.gen == s.gen ? e.stream : nullptr;
}

void Server::h2_close_stream(Conn& c, int32_t id) {
    H2State& h = *c.h2;
    auto it = h.streams.find(id);
    if (it == h.streams.end()) return;
    std::unique_ptr<H2Stream> st = std::move(it->second);
    h.streams.erase(it);
    const SlotRef slot = st->slot;
    if (st->access) access_end(st->access, slot);  // before the hold's count goes
    holds_.release(slot);  // a RST_STREAM ends its hold as a closed socket does
    if (st->stream) st->stream->cancel();
    ring_.cancels.cancel(slot);  // a job still queued for it is not run
    auto& entry = slots_[slot.index];
    entry.stream = nullptr;
    ++entry.gen;
    free_slots_.push_back(slot.index);
    if (h.streams.empty()) h.idle_since = monotonic_seconds();
}

void Server::h2_close_streams(Conn& c) {
    std::vector<int32_t> ids;
    for (auto& [id, st] : c.h2->streams) ids.push_back(id);
    for (int32_t id : ids) h2_close_stream(c, id);
}

void Server::h2_tick(Conn& c) {
    H2State& h = *c.h2;
    const double now = monotonic_seconds();
    double next = now + cfg_.keepalive_timeout;
    if (h.streams.empty()) {
        if (now - h.idle_since >= cfg_.keepalive_timeout) {
            nghttp2_session_terminate_session(h.session, NGHTTP2_NO_ERROR);
            h2_flush(c);
            if (Conn* again = find(c.slot); again && again->phase == Phase::h2) close_conn(c);
            return;
        }
        next = h.idle_since + cfg_.keepalive_timeout;
    }
    std::vector<H2Stream*> due;
    for (auto& [id, st] : h.streams) {
        const double receive_by =
            st->born + (st->in_body ? cfg_.body_timeout : cfg_.header_timeout);
        if (st->state == H2Stream::State::receiving && now >= receive_by)
            due.push_back(st.get());
        else if (st->deadline > 0 && now >= st->deadline)
            due.push_back(st.get());
        else if (st->deadline > 0)
            next = std::min(next, st->deadline);
        else if (st->state == H2Stream::State::receiving)
            next = std::min(next, receive_by);
    }
    const SlotRef me = c.slot;
    for (H2Stream* st : due) h2_expire(c, *st);
    if (!find(me)) return;
    h.timer_at = 0;
    h2_arm(c, next);
    h2_flush(c);
}

void Server::h2_expire(Conn& c, H2Stream& st) {
    using S = H2Stream::State;
    switch (st.state) {
        case S::receiving:
            st.deadline = 0;
            h2_refuse(c, st, 408,
                      st.in_body ? "request body not received in time (nothing for --body-timeout)"
                                 : "request not received in time");
            return;
        case S::polling:
            st.deadline = 0;
            holds_.drop(st.slot, 0);  // the handler's own answer (h2_answer, null)
            return;
        case S::waiting:
            metrics_.requests_timed_out.fetch_add(1);
            ring_.cancels.cancel(st.slot);
            st.deadline = 0;
            h2_refuse(c, st, 504, "the application did not answer within --request-timeout");
            return;
        case S::answering:
        case S::holding:
        case S::closing:
            // No progress for --write-timeout (a window held closed), or a
            // slow reader's last bytes not taken: the stream goes, the
            // connection stays.
            M0_LOG(info, "HTTP/2 stream ", std::to_string(st.id), " of ", c.remote_addr,
                   " made no progress: reset");
            st.deadline = 0;
            nghttp2_submit_rst_stream(c.h2->session, NGHTTP2_FLAG_NONE, st.id, NGHTTP2_CANCEL);
            return;
    }
}

void Server::h2_shutdown(Conn& c) {
    H2State& h = *c.h2;
    if (h.going_away) return;
    h.going_away = true;
    // RFC 9113 §6.8: the streams begun are served; no new one is.
    nghttp2_submit_goaway(h.session, NGHTTP2_FLAG_NONE,
                          nghttp2_session_get_last_proc_stream_id(h.session), NGHTTP2_NO_ERROR,
                          nullptr, 0);
    std::vector<SlotRef> holding;
    for (auto& [id, st] : h.streams)
        if (st->state == H2Stream::State::holding || st->state == H2Stream::State::polling)
            holding.push_back(st->slot);
    for (SlotRef s : holding) drop_hold(s);  // each its retry hint, then END_STREAM
    h2_flush(c);
}

}  // namespace m0::server
