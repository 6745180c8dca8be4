#include "server/server.hpp"

#include <event2/buffer.h>
#include <event2/bufferevent_ssl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <signal.h>
#include <sys/socket.h>

#include "loop/log.hpp"
#include "server/conn.hpp"

namespace m0::server {

using namespace m0::http;

namespace {
constexpr size_t kMaxBufferedInput = 1024 * 1024;  // pipelined bytes kept while busy
constexpr double kLingerSeconds = 2.0;
}  // namespace

Server::Server(Loop& loop, ServerConfig cfg, CompletionRing& ring, bus::Bus* bus, Metrics& metrics)
    : loop_(loop),
      cfg_(std::move(cfg)),
      ring_(ring),
      bus_(bus),
      metrics_(metrics),
      holds_(*this, HoldConfig{cfg_.hold_buffer_limit, cfg_.hold_drain_timeout}, metrics),
      admin_(cfg_.admin_key, cfg_.admin_open, metrics, bus,
             [this](const std::string& channel, const AdminApi::Closed& done) {
                 done(close_channel(channel));
             }) {
    std::string unused;
    trust_all_ = *http::TrustedProxies::parse("*", unused);
    // A peer that left makes writes fail with EPIPE, handled as an error on
    // that connection; the signal would end the whole process.
    ::signal(SIGPIPE, SIG_IGN);
    admin_.set_batch_max(cfg_.publish_batch_max);
    admin_routes_.mounts.push_back(
        {"", [this](SlotRef slot, Request&& req) { return serve_admin(slot, std::move(req)); }});
    admin_routes_.websocket = false;
    flush_ev_ = event_new(loop_.base(), -1, 0, on_flush, this);
    ring_watch_ =
        std::make_unique<FdWatcher>(loop_, ring_.fd(), [this] { on_completions_ready(); });
    if (bus_) {
        bus_watch_ = std::make_unique<FdWatcher>(loop_, bus_->fd(), [this] { on_bus_ready(); });
        bus_->attach({[this] { resync_holds(); },
                      [this](const std::string& channel) {
                          return !holds_.subscriptions().subscribers(channel).empty();
                      }});
        heartbeat_timer_ = std::make_unique<Timer>(
            loop_, [this] { holds_.heartbeat(monotonic_seconds()); }, true);
        heartbeat_timer_->start(cfg_.heartbeat);
        // Holds with a Grip-Keep-Alive interval of their own, to the second.
        keepalive_timer_ = std::make_unique<Timer>(
            loop_, [this] { holds_.keepalive(monotonic_seconds()); }, true);
        keepalive_timer_->start(1.0);
        ws_timer_ = std::make_unique<Timer>(loop_, [this] { ws_tick(); });
    }
}

Server::~Server() {
    for (auto& s : slots_)
        if (s.conn) close_conn(*s.conn);
    close_peeks();
    close_listeners(false);
    close_listeners(true);
    event_free(flush_ev_);
}

void Server::add_mount(std::string prefix, SubmitFn submit) {
    while (!prefix.empty() && prefix.back() == '/') prefix.pop_back();
    auto& mounts = routes_.mounts;
    mounts.push_back({std::move(prefix), std::move(submit)});
    std::stable_sort(mounts.begin(), mounts.end(), [](const auto& a, const auto& b) {
        return a.prefix.size() > b.prefix.size();
    });
}

SlotRef Server::alloc_slot() {
    uint32_t index;
    if (!free_slots_.empty()) {
        index = free_slots_.back();
        free_slots_.pop_back();
    } else {
        index = static_cast<uint32_t>(slots_.size());
        slots_.emplace_back().gen = first_gen_;
    }
    return SlotRef{index, slots_[index].gen};
}

SlotRef Server::adopt(int fd, std::string remote_addr, uint16_t remote_port, bool admin) {
    return adopt_conn(fd, std::move(remote_addr), remote_port, admin, nullptr, cfg_.header_timeout);
}

SlotRef Server::adopt_conn(int fd, std::string remote_addr, uint16_t remote_port, bool admin,
                           ssl_st* ssl, double first_timeout) {
    evutil_make_socket_nonblocking(fd);
    SlotRef slot = alloc_slot();
    auto conn = std::make_unique<Conn>(cfg_.limits);
    Conn& c = *conn;
    c.server = this;
    c.slot = slot;
    c.admin = admin;
    c.remote_addr = std::move(remote_addr);
    c.remote_port = remote_port;
    c.fd = fd;
    if (ssl) {
        // The handshake runs as the bufferevent reads; BEV_EVENT_CONNECTED
        // says it is done (on_event). Freeing the bufferevent frees the SSL
        // and closes the socket.
        c.tls = c.tls_pending = true;
        c.bev = bufferevent_openssl_socket_new(loop_.base(), fd, ssl, BUFFEREVENT_SSL_ACCEPTING,
                                               BEV_OPT_CLOSE_ON_FREE);
        // A client that closes its socket without close_notify has ended its
        // stream (an EOF, as on a plain connection), not failed.
        if (c.bev) bufferevent_openssl_set_allow_dirty_shutdown(c.bev, 1);
    } else {
        c.bev = bufferevent_socket_new(loop_.base(), fd, BEV_OPT_CLOSE_ON_FREE);
    }
    bufferevent_setcb(c.bev, on_read, on_write, on_event, &c);
    timeval wt = to_timeval(cfg_.write_timeout);
    bufferevent_set_timeouts(c.bev, nullptr, &wt);
    bufferevent_enable(c.bev, EV_READ | EV_WRITE);
    slots_[slot.index].conn = std::move(conn);
    ++open_;
    if (!admin) {
        open_clients_->fetch_add(1);
        metrics_.connections_open.fetch_add(1);
        metrics_.connections_total.fetch_add(1);
    }
    arm_timer(c, first_timeout);
    return slot;
}

Server::Conn* Server::find(SlotRef s) const {
    if (s.index >= slots_.size()) return nullptr;
    const auto& e = slots_[s.index];
    if (e.gen != s.gen || !e.conn) return nullptr;
    return e.conn.get();
}

size_t Server::unread(SlotRef s) const {
    Conn* c = find(s);
    return c && c->bev ? evbuffer_get_length(bufferevent_get_input(c->bev)) : 0;
}

size_t Server::unsent(SlotRef s) const {
    Conn* c = find(s);
    return c ? output_length(*c) + c->staged_bytes : 0;
}

bool Server::holding(SlotRef s) const {
    Conn* c = find(s);
    return c && c->phase == Phase::holding;
}

bool Server::parsing(SlotRef s) const {
    const Conn* c = find(s);
    return c && c->parser != nullptr;
}

bool Server::lean(SlotRef s) const {
    const Conn* c = find(s);
    return c && c->phase == Phase::holding && !c->bev;
}

void Server::arm_timer(Conn& c, double seconds) {
    if (c.timer)
        event_del(c.timer);
    else
        c.timer = event_new(loop_.base(), -1, 0, on_timer, &c);
    timeval tv = to_timeval(seconds);
    event_add(c.timer, &tv);
}

void Server::disarm_timer(Conn& c) {
    if (c.timer) event_del(c.timer);
}

// ---- reading -------------------------------------------------------------

void Server::on_read(bufferevent*, void* arg) {
    auto& c = *static_cast<Conn*>(arg);
    Server& s = *c.server;
    evbuffer* in = bufferevent_get_input(c.bev);
    switch (c.phase) {
        case Phase::reading:
            s.process_input(c);
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

bool Server::output_full(const Conn& c) const {
    return evbuffer_get_length(bufferevent_get_output(c.bev)) > cfg_.stream_high_water;
}

void Server::process_input(Conn& c) {
    if (c.in_process) return;
    c.in_process = true;
    evbuffer* in = bufferevent_get_input(c.bev);
    SlotRef me = c.slot;
    if (h2_preface(c)) {
        c.in_process = false;
        return;
    }
    while (c.phase == Phase::reading && evbuffer_get_length(in) > 0) {
        if (!c.parser->in_message() && output_full(c)) {
            // Read backpressure: a client that pipelines and does not read its
            // answers gets no more of them parsed until its output drains (on_write);
            // memory per connection stays bounded whatever it sends.
            c.read_paused = true;
            bufferevent_disable(c.bev, EV_READ);
            bufferevent_setwatermark(c.bev, EV_WRITE, cfg_.stream_high_water / 2, 0);
            break;
        }
        evbuffer_iovec vec;
        if (evbuffer_peek(in, -1, nullptr, &vec, 1) < 1) break;
        bool was_in_message = c.parser->in_message();
        auto res = c.parser->feed(static_cast<const char*>(vec.iov_base), vec.iov_len);
        evbuffer_drain(in, res.consumed);
        if (!was_in_message && c.parser->in_message()) arm_timer(c, cfg_.header_timeout);
        if (res.status == RequestParser::Status::error) {
            c.in_process = false;
            fail_request(c, res.error_status, res.error_reason);
            return;
        }
        if (res.status == RequestParser::Status::expect_continue) {
            // RFC 9110 §10.1.1: the client waits for 100 before sending the body.
            static constexpr char kContinue[] = "HTTP/1.1 100 Continue\r\n\r\n";
            bufferevent_write(c.bev, kContinue, sizeof kContinue - 1);
            continue;
        }
        if (res.status == RequestParser::Status::complete) {
            disarm_timer(c);
            dispatch(c, c.parser->take());
            if (!find(me)) return;  // closed while dispatching
            continue;
        }
        if (res.consumed == 0) break;
    }
    c.in_process = false;
    // A client that half-closed sends nothing more: once what it sent is
    // answered (or only part of a request is left), the connection ends.
    if (c.peer_eof && c.phase == Phase::reading && !c.read_paused) {
        close_after_write(c);
        return;
    }
    if (c.phase == Phase::reading || c.phase == Phase::waiting || c.phase == Phase::polling ||
        c.phase == Phase::streaming)
        resume_reading(c);
}

void Server::resume_reading(Conn& c) {
    // Reading stops while the output is over the high-water mark (read_paused)
    // and while pipelined input waits over kMaxBufferedInput; it resumes only
    // when both are under, so neither buffer grows with what the client sends.
    if (c.peer_eof || c.read_paused ||
        evbuffer_get_length(bufferevent_get_input(c.bev)) > kMaxBufferedInput)
        return;
    bufferevent_enable(c.bev, EV_READ);
}

void Server::dispatch(Conn& c, Request req) {
    metrics_.requests_total.fetch_add(1);
    c.keep_alive = req.keep_alive && !shutting_down_;
    c.dispatched = true;
    c.head_request = req.is_head();
    c.version_minor = static_cast<uint8_t>(req.version_minor);
    prepare_request(c, req);
    if (access_log_) access_begin(c, req);
    c.origin.reset();
    if (auto o = req.headers.get("Origin"); o && cfg_.cors.enabled())
        c.origin = std::make_unique<std::string>(*o);
    M0_LOG(debug, req.method, " ", req.target, " slot ", to_string(c.slot));

    const Routes& routes = routes_for(c);
    // RFC 6455 §4.2.1: checked here, before any pool sees it.
    if (routes.websocket && http::ws::asks_upgrade(req) && !ws_handshake(c, req)) return;
    const MountEntry* mount = route(routes, req);
    if (!mount) {
        Response r = error_response(404, "no mount serves this path");
        send_whole(c, r);
        finish_request(c);
        return;
    }
    if (c.ws && over_http(req)) {
        woh_start(c, std::move(req), mount->submit);
        return;
    }
    c.phase = Phase::waiting;
    const SlotRef slot = c.slot;
    const Admission admitted = mount->submit(slot, std::move(req));
    // A mount on the loop (the admin API) may have answered already, and the
    // connection may be gone with its answer written.
    Conn* a = find(slot);
    if (!a) return;
    if (admitted != Admission::queued) {
        refuse_admission(*a, admitted == Admission::full);
        return;
    }
    if (a->phase != Phase::waiting) return;
    // --request-timeout: the application's answer (or hold decision) is due by then.
    a->deadline = monotonic_seconds() + cfg_.request_timeout;
    arm_timer(*a, cfg_.request_timeout);
}

const Server::Routes& Server::routes_for(const Conn& c) const {
    return c.admin ? admin_routes_ : routes_;
}

Admission Server::serve_admin(SlotRef slot, Request&& req) {
    admin_.handle(req, [this, slot](Response r) {
        Completion comp;
        comp.slot = slot;
        comp.response = std::move(r);
        handle_completion(comp);
    });
    return Admission::queued;
}

void Server::refuse_admission(Conn& c, bool full) {
    c.phase = Phase::reading;
    c.keep_alive = false;
    Response r = error_response(503, full ? "too many queued requests" : "server is shutting down");
    if (full) r.headers.add("Retry-After", "1");
    send_whole(c, r);
    finish_request(c);
}

void Server::prepare_request(const Conn& c, Request& req) {
    req.remote_addr = c.remote_addr;
    req.remote_port = c.remote_port;
    // PEP 3333: wsgi.url_scheme "https" when the request came over TLS (a
    // trusted proxy's X-Forwarded-Proto, below, may still say otherwise).
    if (c.tls) req.scheme = "https";
    // SERVER_NAME and SERVER_PORT: the listener's; a unix socket's are
    // localhost and 80, as gunicorn gives them.
    const bool unix_peer = c.via && !c.via->path.empty();
    req.server_name = !c.via ? "127.0.0.1" : unix_peer ? "localhost" : c.via->host;
    req.server_port = !c.via ? 0 : unix_peer ? 80 : c.via->port;
    // A peer on a unix socket is a local process the socket's mode let in: a
    // proxy in front, trusted as gunicorn trusts it.
    if (!c.admin) http::apply_forwarded(req, unix_peer ? trust_all_ : cfg_.forwarded_allow);
}

const Server::MountEntry* Server::route(const Routes& routes, Request& req) const {
    for (const auto& m : routes.mounts) {
        const std::string& p = m.prefix;
        if (p.empty() || (req.path.starts_with(p) &&
                          (req.path.size() == p.size() || req.path[p.size()] == '/'))) {
            req.script_name = p;
            req.path_info = percent_decode(std::string_view(req.path).substr(p.size()), false);
            return &m;
        }
    }
    return nullptr;
}

void Server::finish_request(Conn& c) {
    if (c.access) access_end(c);
    c.phase = Phase::reading;
    if (!c.keep_alive || shutting_down_) {
        close_after_write(c);
        return;
    }
    // The connection is idle only once its answer has drained: the keep-alive
    // timer starts in on_write, and until then --write-timeout bounds the
    // answer as time without progress.
    disarm_timer(c);
    c.idle_on_drain = evbuffer_get_length(bufferevent_get_output(c.bev)) > 0;
    if (!c.idle_on_drain) arm_timer(c, cfg_.keepalive_timeout);
    resume_reading(c);
    // Pipelined requests already buffered: parse the next (deferred if we are
    // inside process_input, which continues its own loop).
    process_input(c);
}

void Server::fail_request(Conn& c, int status, std::string_view reason) {
    M0_LOG(info, "request from ", c.remote_addr, " refused ", std::to_string(status), ": ", reason);
    c.keep_alive = false;
    c.head_request = false;
    c.version_minor = 1;
    Response r = error_response(status, reason);
    send_whole(c, r);
    close_after_write(c);
}

void Server::close_after_write(Conn& c) {
    c.phase = Phase::closing;
    disarm_timer(c);
    if (!c.bev) {
        // Lean: lean_sent begins the linger once `out` is sent.
        if (c.out.empty()) begin_linger(c);
        return;
    }
    bufferevent_setwatermark(c.bev, EV_WRITE, 0, 0);
    if (evbuffer_get_length(bufferevent_get_output(c.bev)) == 0) {
        on_write(c.bev, &c);
        return;
    }
    // on_write fires once the output is flushed.
}

void Server::begin_linger(Conn& c) {
    // Lingering close: stop sending, read (and drop) what the client still
    // sends, so our answer is not destroyed by a reset.
    // RFC 8446 §6.1: a TLS connection's end is its close_notify alert,
    // written before the TCP FIN (the output is empty: nothing is behind it).
    if (c.tls && c.bev) (void)SSL_shutdown(bufferevent_openssl_get_ssl(c.bev));
    ::shutdown(c.fd, SHUT_WR);
    c.phase = Phase::lingering;
    if (c.bev) bufferevent_enable(c.bev, EV_READ);  // a lean hold's `io` reads already
    // A WebSocket's close handshake: the client answers our close frame and
    // FIN with its own close (RFC 6455 §7.1.1), within --ws-close-timeout.
    arm_timer(c, c.ws ? cfg_.ws.close_timeout : kLingerSeconds);
}

void Server::on_write(bufferevent*, void* arg) {
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
            s.resume_reading(c);
            s.process_input(c);
            return;
        }
        // Drained: from now on the connection is idle (or reading a request,
        // whose own header timer is running).
        if (left == 0 && c.idle_on_drain) {
            c.idle_on_drain = false;
            if (!c.read_paused && !c.parser->in_message()) s.arm_timer(c, s.cfg_.keepalive_timeout);
        }
        return;
    }
    if (c.phase == Phase::closing && left == 0) s.begin_linger(c);
}

void Server::on_event(bufferevent*, short what, void* arg) {
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
                s.probe_departure(c);
                return;
            case Phase::streaming:
                c.peer_eof = true;
                return;
            case Phase::reading:
                c.peer_eof = true;
                s.process_input(c);
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

void Server::on_timer(evutil_socket_t, short, void* arg) {
    auto& c = *static_cast<Conn*>(arg);
    c.server->on_timeout(c);
}

void Server::probe_departure(Conn& c) {
    // A FIN while a request waits for its pool is a half-close (the client
    // still reads) or a departure (it closed the socket); TCP tells them
    // apart only when data reaches the client: a closed socket answers with a
    // reset. An HTTP/1.1 client must take an interim 1xx it did not ask for
    // (RFC 9110 §15.2), so 100 Continue is the probe; an HTTP/1.0 client may
    // not be sent one (ibid.), and its request runs. A departed client's
    // queued job is then cancelled by close_conn, not run.
    if (c.version_minor < 1) return;
    static constexpr char kProbe[] = "HTTP/1.1 100 Continue\r\n\r\n";
    bufferevent_write(c.bev, kProbe, sizeof kProbe - 1);
    arm_timer(c, std::min(kProbeSeconds, c.deadline - monotonic_seconds()));
}

bool Server::peer_reset(const Conn& c) {
    // After a FIN, recv() reports only the end of the stream; the reset shows
    // as the socket's pending error, or as a TCP socket that has closed.
    const int fd = c.fd;
    int err = 0;
    socklen_t len = sizeof err;
    if (::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) == 0 && err != 0) return true;
    tcp_info info{};
    len = sizeof info;
    return ::getsockopt(fd, IPPROTO_TCP, TCP_INFO, &info, &len) == 0 &&
           info.tcpi_state == TCP_CLOSE;
}

void Server::on_timeout(Conn& c) {
    if (c.phase == Phase::h2) {
        h2_tick(c);
        return;
    }
    if (c.phase == Phase::lingering || c.phase == Phase::closing) {
        close_conn(c);
        return;
    }
    if (c.phase == Phase::waiting || c.phase == Phase::polling) {
        const double now = monotonic_seconds();
        if (now >= c.deadline && c.phase == Phase::polling) {
            poll_timed_out(c);
            return;
        }
        if (now >= c.deadline) {
            // The job may still run; its late answer finds the slot closing and
            // is dropped, never written to another client.
            metrics_.requests_timed_out.fetch_add(1);
            ring_.cancels.cancel(c.slot);  // not yet taken: it will not run at all
            fail_request(c, 504, "the application did not answer within --request-timeout");
            return;
        }
        // The departure probe: a reset means nobody is left to answer.
        if (c.peer_eof && peer_reset(c)) {
            M0_LOG(debug, "client of slot ", to_string(c.slot), " left while its request waited");
            close_conn(c);
            return;
        }
        arm_timer(c, c.peer_eof ? std::min(kProbeSeconds, c.deadline - now) : c.deadline - now);
        return;
    }
    if (c.phase != Phase::reading) return;
    if (c.parser->in_message() || evbuffer_get_length(bufferevent_get_input(c.bev)) > 0) {
        fail_request(c, 408, "request not received in time");
        return;
    }
    close_conn(c);  // idle keep-alive, or a connection that never spoke
}

void Server::close_conn(Conn& c) {
    SlotRef slot = c.slot;
    if (c.h2) h2_close_streams(c);
    if (c.access) access_end(c);  // before the hold's count goes
    if (c.tls_pending && !c.admin) metrics_.tls_handshakes_failed.fetch_add(1);
    holds_.release(slot);
    if (c.stream) c.stream->cancel();
    ring_.cancels.cancel(slot);          // a job still queued for this client is not run
    if (c.ws && c.ws->woh) woh_gone(c);  // its view hears it went
    if (c.timer) event_free(c.timer);
    if (c.bev) {
        bufferevent_free(c.bev);  // closes the socket
    } else {
        drop_lean(c);
    }
    auto& entry = slots_[slot.index];
    ++entry.gen;  // late frames and completions for this slot no longer match
    std::unique_ptr<Conn> dead = std::move(entry.conn);
    free_slots_.push_back(slot.index);
    --open_;
    if (!dead->admin) {
        open_clients_->fetch_sub(1);
        metrics_.connections_open.fetch_sub(1);
    }
    dead.reset();
    if (shutting_down_) check_drained();
}

// ---- completions and the bus --------------------------------------------

void Server::on_completions_ready() {
    std::deque<Completion> items;
    ring_.drain(items);
    for (auto& comp : items) handle_completion(comp);
}

void Server::handle_completion(Completion& comp) {
    Conn* c = find(comp.slot);
    if (H2Stream* st = c ? nullptr : find_stream(comp.slot)) {
        h2_completion(*st, comp);
        return;
    }
    if (!c || c->phase == Phase::closing || c->phase == Phase::lingering) {
        metrics_.completions_dropped.fetch_add(1);
        if (comp.stream) comp.stream->cancel();
        return;
    }
    if (c->ws && c->ws->woh) {
        woh_answer(*c, comp);  // the view's answer to WebSocket events
        return;
    }
    switch (comp.kind) {
        case Completion::Kind::response:
            if (comp.file) {
                send_file(*c, comp.response, *comp.file);
                break;
            }
            send_whole(*c, comp.response);
            finish_request(*c);
            break;
        case Completion::Kind::head:
            start_stream(*c, comp.response, comp.stream);
            break;
        case Completion::Kind::chunk:
            stream_chunk(*c, comp.data);
            break;
        case Completion::Kind::end:
            end_stream(*c, comp.aborted);
            break;
        case Completion::Kind::hold:
            // Drain the bus channel before finishing a streaming head: the h frame
            // was queued before this completion, so after the drain the slot is
            // subscribed, and the head goes out ahead of any event.
            if (bus_) on_bus_ready();
            if ((c = find(comp.slot)) != nullptr) finish_hold_head(*c, comp.response);
            break;
    }
}

// ---- HoldSink: how the hold table reaches connections -----------------------

// write() and write_shared() are in hold_output.cpp.

size_t Server::backlog(SlotRef slot) const {
    if (const H2Stream* st = find_stream(slot)) return st->out_bytes;
    return unsent(slot);
}

void Server::close_after_write(SlotRef slot) {
    Conn* c = find(slot);
    if (!c) {
        h2_close_after_write(slot);
        return;
    }
    flush_staged(*c);  // what the table wrote goes first
    ws_quiet(*c);      // a WebSocket's close frame was the last
    close_after_write(*c);
    // A reader that does not take its last bytes is not waited for long.
    if (c->phase == Phase::closing) arm_timer(*c, cfg_.hold_drain_timeout);
}

}  // namespace m0::server
