#include "server/server.hpp"

#include <event2/buffer.h>
#include <event2/bufferevent_ssl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <signal.h>
#include <sys/socket.h>

#include <algorithm>

#include "loop/log.hpp"
#include "server/conn.hpp"

namespace m0::server {

using namespace m0::http;

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
    if (!cfg_.body_budget) cfg_.body_budget = std::make_shared<http::BodyBudget>(cfg_.body_total());
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

void Server::tag_slots(uint32_t loop) { first_gen_ = (loop << 24) | 1; }

void Server::add_mount(std::string prefix, SubmitFn submit, bool preflights) {
    while (!prefix.empty() && prefix.back() == '/') prefix.pop_back();
    auto& mounts = routes_.mounts;
    mounts.push_back({std::move(prefix), std::move(submit), preflights});
    std::stable_sort(mounts.begin(), mounts.end(), [](const auto& a, const auto& b) {
        return a.prefix.size() > b.prefix.size();
    });
}

uint64_t ServerConfig::body_total() const {
    return max_body_total ? max_body_total : std::max<uint64_t>(kMaxBodyTotal, limits.max_body);
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
    bufferevent_setcb(c.bev, Conn::on_read, Conn::on_write, Conn::on_event, &c);
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
    c.arm_timer(first_timeout);
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

void Server::dispatch(Conn& c, Request req) {
    metrics_.requests_total.fetch_add(1);
    c.keep_alive = req.keep_alive && !shutting_down_;
    c.dispatched = true;
    c.head_request = req.is_head();
    c.version_minor = static_cast<uint8_t>(req.version_minor);
    prepare_request(c, req);
    if (access_log_) access_begin(c, req);
    c.cors = cfg_.cors.ask(req);
    M0_LOG(debug, req.method, " ", req.target, " slot ", to_string(c.slot));

    const Routes& routes = routes_for(c);
    // RFC 6455 §4.2.1: checked here, before any pool sees it.
    if (routes.websocket && http::ws::asks_upgrade(req) && !ws_handshake(c, req)) return;
    const MountEntry* mount = route(routes, req);
    if (!mount) {
        Response r = error_response(404, "no mount serves this path");
        c.send_whole(r);
        c.finish_request();
        return;
    }
    if (c.ws && over_http(req)) {
        woh_start(c, std::move(req), mount->submit);
        return;
    }
    if (answers_preflight(*mount, c.cors.get())) {
        c.send_whole(*c.cors->preflight);
        c.finish_request();
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
    a->arm_timer(cfg_.request_timeout);
}

bool Server::answers_preflight(const MountEntry& mount, const http::CorsAsk* asked) const {
    return mount.preflights && asked && asked->preflight;
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
    c.send_whole(r);
    c.finish_request();
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

void Server::close_conn(Conn& c) {
    SlotRef slot = c.slot;
    if (c.h2) h2_close_streams(c);
    if (c.access) access_end(c);  // before the hold's count goes
    if (c.tls_pending && !c.admin) metrics_.tls_handshakes_failed.fetch_add(1);
    holds_.release(slot);
    if (c.stream) c.stream->cancel();
    if (c.ws && c.ws->woh && c.ws->woh->opened) {
        // A WebSocket-over-HTTP view that accepted hears every event it was
        // sent (a CLOSE in flight when the close handshake ended the
        // connection runs), and then that the client went.
        woh_gone(c);
    } else {
        ring_.cancels.cancel(slot);  // a job still queued for this client is not run
    }
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
                c->send_file(comp.response, *comp.file);
                break;
            }
            c->send_whole(comp.response);
            c->finish_request();
            break;
        case Completion::Kind::head:
            c->start_stream(comp.response, comp.stream);
            break;
        case Completion::Kind::chunk:
            c->stream_chunk(comp.data);
            break;
        case Completion::Kind::end:
            c->end_stream(comp.aborted);
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
    c->close_after_write();
    // A reader that does not take its last bytes is not waited for long.
    if (c->phase == Phase::closing) c->arm_timer(cfg_.hold_drain_timeout);
}

}  // namespace m0::server
