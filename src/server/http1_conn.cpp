// Server::Conn's HTTP/1.1 state machine: a connection's reading, parsing,
// backpressure, keep-alive, half-close, timeouts and closing handshake, one
// job in one file. It hands a parsed request to the server's router
// (Server::dispatch) and gives its slot back through Server::close_conn; the
// answer's bytes are written by writer.cpp, a hold's by hold_output.cpp,
// HTTP/2's and WebSocket's framing by their own files. Loop thread only.
#include <event2/buffer.h>
#include <event2/bufferevent_ssl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <sys/socket.h>

#include "loop/log.hpp"
#include "server/conn.hpp"

namespace m0::server {

using namespace m0::http;

namespace {
constexpr size_t kMaxBufferedInput = 1024 * 1024;  // pipelined bytes kept while busy
constexpr double kLingerSeconds = 2.0;
}  // namespace

void Server::Conn::arm_timer(double seconds) {
    if (timer)
        event_del(timer);
    else
        timer = event_new(server->loop_.base(), -1, 0, on_timer, this);
    timeval tv = to_timeval(seconds);
    event_add(timer, &tv);
}

void Server::Conn::disarm_timer() {
    if (timer) event_del(timer);
}

// ---- reading -------------------------------------------------------------

void Server::Conn::on_read(bufferevent*, void* arg) {
    auto& c = *static_cast<Conn*>(arg);
    Server& s = *c.server;
    evbuffer* in = bufferevent_get_input(c.bev);
    switch (c.phase) {
        case Phase::reading:
            c.process_input();
            break;
        case Phase::h2:
            s.h2_read(c);
            break;
        case Phase::holding:
            if (c.ws) {
                s.ws_read(c);  // a WebSocket's frames
                break;
            }
            [[fallthrough]];
        case Phase::lingering:
        case Phase::closing:
            // Nothing more is read from a held or closing connection.
            evbuffer_drain(in, evbuffer_get_length(in));
            break;
        case Phase::waiting:
        case Phase::polling:
        case Phase::streaming:
            // Pipelined requests wait, bounded.
            if (evbuffer_get_length(in) > kMaxBufferedInput) bufferevent_disable(c.bev, EV_READ);
            break;
    }
}

bool Server::Conn::output_full() const {
    return evbuffer_get_length(bufferevent_get_output(bev)) > server->cfg_.stream_high_water;
}

void Server::Conn::process_input() {
    if (in_process) return;
    in_process = true;
    Server& s = *server;
    evbuffer* in = bufferevent_get_input(bev);
    const SlotRef me = slot;
    if (s.h2_preface(*this)) {
        in_process = false;
        return;
    }
    while (phase == Phase::reading && evbuffer_get_length(in) > 0) {
        if (!parser->in_message() && output_full()) {
            // Read backpressure: a client that pipelines and does not read its
            // answers gets no more of them parsed until its output drains (on_write);
            // memory per connection stays bounded whatever it sends.
            read_paused = true;
            bufferevent_disable(bev, EV_READ);
            bufferevent_setwatermark(bev, EV_WRITE, s.cfg_.stream_high_water / 2, 0);
            break;
        }
        evbuffer_iovec vec;
        if (evbuffer_peek(in, -1, nullptr, &vec, 1) < 1) break;
        bool was_in_message = parser->in_message();
        const bool was_in_body = parser->head_done();
        auto res = parser->feed(static_cast<const char*>(vec.iov_base), vec.iov_len);
        evbuffer_drain(in, res.consumed);
        if (!was_in_message && parser->in_message()) arm_timer(s.cfg_.header_timeout);
        // Its head in: the body may take as long as it needs, each pause in
        // it at most --body-timeout (an upload on a slow link is not cut at
        // --header-timeout; a body that stops is).
        if (parser->head_done() && (!was_in_body || res.consumed > 0))
            arm_timer(s.cfg_.body_timeout);
        if (res.status == RequestParser::Status::error) {
            in_process = false;
            fail_request(res.error_status, res.error_reason);
            return;
        }
        // The body's bytes as they become known (its Content-Length at the
        // head, before any 100 Continue), within --max-body-total.
        if ((parser->head_done() || res.status == RequestParser::Status::complete) &&
            !charge_body()) {
            in_process = false;
            s.metrics_.bodies_refused.fetch_add(1);
            fail_request(503, kBodyTotalReason, true);
            return;
        }
        if (res.status == RequestParser::Status::expect_continue) {
            // RFC 9110 §10.1.1: the client waits for 100 before sending the body.
            static constexpr char kContinue[] = "HTTP/1.1 100 Continue\r\n\r\n";
            bufferevent_write(bev, kContinue, sizeof kContinue - 1);
            continue;
        }
        if (res.status == RequestParser::Status::complete) {
            disarm_timer();
            s.dispatch(*this, parser->take());
            if (!s.find(me)) return;  // closed while dispatching: `this` is gone
            continue;
        }
        if (res.consumed == 0) break;
    }
    in_process = false;
    // A client that half-closed sends nothing more: once what it sent is
    // answered (or only part of a request is left), the connection ends.
    if (peer_eof && phase == Phase::reading && !read_paused) {
        close_after_write();
        return;
    }
    if (phase == Phase::reading || phase == Phase::waiting || phase == Phase::polling ||
        phase == Phase::streaming)
        resume_reading();
}

void Server::Conn::resume_reading() {
    // Reading stops while the output is over the high-water mark (read_paused)
    // and while pipelined input waits over kMaxBufferedInput; it resumes only
    // when both are under, so neither buffer grows with what the client sends.
    if (peer_eof || read_paused ||
        evbuffer_get_length(bufferevent_get_input(bev)) > kMaxBufferedInput)
        return;
    bufferevent_enable(bev, EV_READ);
}

// ---- the end of a request, and of the connection --------------------------

void Server::Conn::finish_request() {
    Server& s = *server;
    if (access) s.access_end(*this);
    phase = Phase::reading;
    if (!keep_alive || s.shutting_down_) {
        close_after_write();
        return;
    }
    // The connection is idle only once its answer has drained: the keep-alive
    // timer starts in on_write, and until then --write-timeout bounds the
    // answer as time without progress.
    disarm_timer();
    idle_on_drain = evbuffer_get_length(bufferevent_get_output(bev)) > 0;
    if (!idle_on_drain) arm_timer(s.cfg_.keepalive_timeout);
    resume_reading();
    // Pipelined requests already buffered: parse the next (deferred if we are
    // inside process_input, which continues its own loop).
    process_input();
}

bool Server::Conn::charge_body() {
    const size_t declared = parser->body_declared();
    const size_t read = parser->body_read();
    if (declared == 0 && read == 0) return true;
    auto& charge = parser->body_charge();
    if (!charge) charge = std::make_shared<http::BodyCharge>(server->cfg_.body_budget);
    return charge->could_reach(declared) && charge->reach(read);
}

void Server::Conn::fail_request(int status, std::string_view reason, bool retry) {
    M0_LOG(info, "request from ", remote_addr, " refused ", std::to_string(status), ": ", reason);
    if (parser) parser->drop_message();  // not kept through the lingering close
    keep_alive = false;
    head_request = false;
    version_minor = 1;
    Response r = error_response(status, reason);
    if (retry) r.headers.add("Retry-After", "1");
    send_whole(r);
    close_after_write();
}

void Server::Conn::close_after_write() {
    phase = Phase::closing;
    disarm_timer();
    if (!bev) {
        // Lean: lean_sent begins the linger once `out` is sent.
        if (out.empty()) begin_linger();
        return;
    }
    bufferevent_setwatermark(bev, EV_WRITE, 0, 0);
    if (evbuffer_get_length(bufferevent_get_output(bev)) == 0) {
        on_write(bev, this);
        return;
    }
    // on_write fires once the output is flushed.
}

void Server::Conn::begin_linger() {
    // Lingering close: stop sending, read (and drop) what the client still
    // sends, so our answer is not destroyed by a reset.
    // RFC 8446 §6.1: a TLS connection's end is its close_notify alert,
    // written before the TCP FIN (the output is empty: nothing is behind it).
    if (tls && bev) (void)SSL_shutdown(bufferevent_openssl_get_ssl(bev));
    ::shutdown(fd, SHUT_WR);
    phase = Phase::lingering;
    if (bev) bufferevent_enable(bev, EV_READ);  // a lean hold's `io` reads already
    // A WebSocket's close handshake: the client answers our close frame and
    // FIN with its own close (RFC 6455 §7.1.1), within --ws-close-timeout.
    arm_timer(ws ? server->cfg_.ws.close_timeout : kLingerSeconds);
}

void Server::Conn::on_write(bufferevent*, void* arg) {
    auto& c = *static_cast<Conn*>(arg);
    Server& s = *c.server;
    if (c.phase == Phase::h2) {  // the session's frames waited for room
        s.h2_flush(c);
        return;
    }
    size_t left = evbuffer_get_length(bufferevent_get_output(c.bev));
    if (c.phase == Phase::streaming && c.stream) {
        c.stream->drained(left);
        return;
    }
    if (c.phase == Phase::holding) {
        const SlotRef slot = c.slot;
        s.holds_.drained(slot, left + c.staged_bytes, monotonic_seconds());
        // The head (and any backlog) is out: the hold goes lean.
        // A TLS hold keeps its bufferevent: only OpenSSL writes its socket.
        Conn* h = s.find(slot);
        if (h && h->phase == Phase::holding && h->bev && !h->tls &&
            evbuffer_get_length(bufferevent_get_output(h->bev)) == 0)
            s.go_lean(*h);
        return;
    }
    if (c.phase == Phase::reading) {
        if (c.read_paused && left <= s.cfg_.stream_high_water / 2) {
            c.read_paused = false;
            bufferevent_setwatermark(c.bev, EV_WRITE, 0, 0);
            c.resume_reading();
            c.process_input();
            return;
        }
        // Drained: from now on the connection is idle (or reading a request,
        // whose own header timer is running).
        if (left == 0 && c.idle_on_drain) {
            c.idle_on_drain = false;
            if (!c.read_paused && !c.parser->in_message()) c.arm_timer(s.cfg_.keepalive_timeout);
        }
        return;
    }
    if (c.phase == Phase::closing && left == 0) c.begin_linger();
}

void Server::Conn::on_event(bufferevent*, short what, void* arg) {
    auto& c = *static_cast<Conn*>(arg);
    Server& s = *c.server;
    if (what & BEV_EVENT_CONNECTED) {
        s.tls_connected(c);
        return;
    }
    if (c.tls && (what & BEV_EVENT_ERROR) && !c.dispatched) {
        char why[256] = "the connection failed";
        if (unsigned long e = bufferevent_get_openssl_error(c.bev))
            ERR_error_string_n(e, why, sizeof why);
        M0_LOG(debug, "TLS handshake with ", c.remote_addr, " failed: ", why);
    }
    if ((what & BEV_EVENT_EOF) && !(what & BEV_EVENT_ERROR)) {
        // A half-close: every request the client sent before it is answered,
        // then the connection closes.
        switch (c.phase) {
            case Phase::waiting:
            case Phase::polling:
                c.peer_eof = true;
                c.probe_departure();
                return;
            case Phase::streaming:
                c.peer_eof = true;
                return;
            case Phase::reading:
                c.peer_eof = true;
                c.process_input();
                return;
            case Phase::h2:  // RFC 9113 §5.1: a stream ends by its frames, not by a FIN
            case Phase::holding:
            case Phase::closing:
            case Phase::lingering:
                break;
        }
    }
    if (what & BEV_EVENT_TIMEOUT)
        M0_LOG(info, "write timeout: closing ", c.remote_addr, " slot ", to_string(c.slot));
    s.close_conn(c);
}

// ---- timers --------------------------------------------------------------

void Server::Conn::on_timer(evutil_socket_t, short, void* arg) {
    static_cast<Conn*>(arg)->on_timeout();
}

void Server::Conn::probe_departure() {
    // A FIN while a request waits for its pool is a half-close (the client
    // still reads) or a departure (it closed the socket); TCP tells them
    // apart only when data reaches the client: a closed socket answers with a
    // reset. An HTTP/1.1 client must take an interim 1xx it did not ask for
    // (RFC 9110 §15.2), so 100 Continue is the probe; an HTTP/1.0 client may
    // not be sent one (ibid.), and its request runs. A departed client's
    // queued job is then cancelled by close_conn, not run.
    if (version_minor < 1) return;
    static constexpr char kProbe[] = "HTTP/1.1 100 Continue\r\n\r\n";
    bufferevent_write(bev, kProbe, sizeof kProbe - 1);
    arm_timer(std::min(kProbeSeconds, deadline - monotonic_seconds()));
}

bool Server::Conn::peer_reset() const {
    // After a FIN, recv() reports only the end of the stream; the reset shows
    // as the socket's pending error, or as a TCP socket that has closed.
    int err = 0;
    socklen_t len = sizeof err;
    if (::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) == 0 && err != 0) return true;
    tcp_info info{};
    len = sizeof info;
    return ::getsockopt(fd, IPPROTO_TCP, TCP_INFO, &info, &len) == 0 &&
           info.tcpi_state == TCP_CLOSE;
}

void Server::Conn::on_timeout() {
    Server& s = *server;
    if (phase == Phase::h2) {
        s.h2_tick(*this);
        return;
    }
    if (phase == Phase::lingering || phase == Phase::closing) {
        s.close_conn(*this);
        return;
    }
    if (phase == Phase::waiting || phase == Phase::polling) {
        const double now = monotonic_seconds();
        if (now >= deadline && phase == Phase::polling) {
            s.poll_timed_out(*this);
            return;
        }
        if (now >= deadline) {
            // The job may still run; its late answer finds the slot closing and
            // is dropped, never written to another client.
            s.metrics_.requests_timed_out.fetch_add(1);
            s.ring_.cancels.cancel(slot);  // not yet taken: it will not run at all
            fail_request(504, "the application did not answer within --request-timeout");
            return;
        }
        // The departure probe: a reset means nobody is left to answer.
        if (peer_eof && peer_reset()) {
            M0_LOG(debug, "client of slot ", to_string(slot), " left while its request waited");
            s.close_conn(*this);
            return;
        }
        arm_timer(peer_eof ? std::min(kProbeSeconds, deadline - now) : deadline - now);
        return;
    }
    if (phase != Phase::reading) return;
    if (parser->head_done()) {
        fail_request(408, "request body not received in time (nothing for --body-timeout)");
        return;
    }
    if (parser->in_message() || evbuffer_get_length(bufferevent_get_input(bev)) > 0) {
        fail_request(408, "request not received in time");
        return;
    }
    s.close_conn(*this);  // idle keep-alive, or a connection that never spoke
}

}  // namespace m0::server
