#include "http/server.hpp"

#include <arpa/inet.h>
#include <event2/buffer.h>
#include <netdb.h>
#include <netinet/in.h>
#include <openssl/crypto.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cassert>
#include <charconv>
#include <cstring>
#include <ctime>

#include "bus/names.hpp"
#include "hold/sse.hpp"
#include "http/json.hpp"
#include "loop/log.hpp"
#include "pool/pool.hpp"

namespace m0::http {

// Per-hold state: created by the h frame (sse_peer_frame), before the head.
struct Server::HoldState {
    uint64_t cursor = 0;
    std::vector<std::string> channels;
    bool head_written = false;
    std::vector<std::string> pending;  // events that arrived before the head
    bool wrote_since_tick = false;     // heartbeat only when idle
};

struct Server::Conn {
    Server* server = nullptr;
    SlotRef slot;
    bufferevent* bev = nullptr;
    event* timer = nullptr;
    bool admin = false;
    Phase phase = Phase::reading;
    RequestParser parser;
    bool in_process = false;  // inside process_input (no re-entry)
    bool keep_alive = true;
    bool head_request = false;
    int version_minor = 1;
    bool peer_eof = false;  // the client half-closed while a request was in flight
    bool chunked = false;   // the streaming body is chunk-framed
    std::shared_ptr<StreamState> stream;
    std::unique_ptr<HoldState> hold;
    std::string remote_addr;
    uint16_t remote_port = 0;

    explicit Conn(ParserLimits limits) : parser(limits) {}
};

namespace {
constexpr size_t kMaxBufferedInput = 1024 * 1024;  // pipelined bytes kept while busy
constexpr double kLingerSeconds = 2.0;
}  // namespace

Server::Server(Loop& loop, ServerConfig cfg, CompletionRing& ring, bus::BusChannel* bus,
               Metrics& metrics)
    : loop_(loop), cfg_(std::move(cfg)), ring_(ring), bus_(bus), metrics_(metrics) {
    // A peer that left makes writes fail with EPIPE, handled as an error on
    // that connection; the signal would end the whole process.
    ::signal(SIGPIPE, SIG_IGN);
    ring_watch_ =
        std::make_unique<FdWatcher>(loop_, ring_.fd(), [this] { on_completions_ready(); });
    if (bus_) {
        bus_watch_ = std::make_unique<FdWatcher>(loop_, bus_->fd(), [this] { on_bus_ready(); });
        heartbeat_timer_ = std::make_unique<Timer>(
            loop_, [this] { heartbeat(); }, true);
        heartbeat_timer_->start(cfg_.heartbeat);
    }
}

Server::~Server() {
    for (auto& s : slots_)
        if (s.conn) close_conn(*s.conn);
    if (listener_) evconnlistener_free(listener_);
    if (admin_listener_) evconnlistener_free(admin_listener_);
}

void Server::add_mount(std::string prefix, SubmitFn submit) {
    while (!prefix.empty() && prefix.back() == '/') prefix.pop_back();
    mounts_.push_back({std::move(prefix), std::move(submit)});
    std::stable_sort(mounts_.begin(), mounts_.end(), [](const auto& a, const auto& b) {
        return a.prefix.size() > b.prefix.size();
    });
}

namespace {
// After accept() fails for want of a file descriptor (or any other lasting
// reason), the listeners stay disabled this long: a listening socket with
// connections in its backlog stays readable, so retrying at once would spin.
constexpr double kAcceptPauseSeconds = 0.1;

// The port of a bound IPv4 or IPv6 socket.
uint16_t port_of(const sockaddr_storage& ss) {
    if (ss.ss_family == AF_INET6)
        return ntohs(reinterpret_cast<const sockaddr_in6*>(&ss)->sin6_port);
    return ntohs(reinterpret_cast<const sockaddr_in*>(&ss)->sin_port);
}
}  // namespace

bool Server::listen(const std::string& host_in, uint16_t port, bool admin, std::string& err) {
    // "127.0.0.1", "localhost", "::1" or "[::1]".
    std::string host = host_in;
    if (host.size() > 2 && host.front() == '[' && host.back() == ']')
        host = host.substr(1, host.size() - 2);
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
    addrinfo* res = nullptr;
    std::string service = std::to_string(port);
    if (int rc = getaddrinfo(host.c_str(), service.c_str(), &hints, &res); rc != 0 || !res) {
        err = "cannot resolve " + host_in + ": " + gai_strerror(rc);
        return false;
    }
    auto* l =
        evconnlistener_new_bind(loop_.base(), admin ? on_admin_accept : on_accept, this,
                                LEV_OPT_CLOSE_ON_FREE | LEV_OPT_REUSEABLE | LEV_OPT_CLOSE_ON_EXEC,
                                512, res->ai_addr, static_cast<int>(res->ai_addrlen));
    int saved = errno;
    freeaddrinfo(res);
    if (!l) {
        err = "cannot listen on " + host_in + ":" + std::to_string(port) + ": " +
              std::strerror(saved);
        return false;
    }
    evconnlistener_set_error_cb(l, on_accept_error);
    sockaddr_storage bound{};
    socklen_t len = sizeof bound;
    getsockname(evconnlistener_get_fd(l), reinterpret_cast<sockaddr*>(&bound), &len);
    if (admin) {
        admin_listener_ = l;
        admin_port_ = port_of(bound);
    } else {
        listener_ = l;
        port_ = port_of(bound);
        listen_host_ = host;
    }
    return true;
}

void Server::on_accept(evconnlistener*, evutil_socket_t fd, sockaddr* a, int, void* arg) {
    static_cast<Server*>(arg)->accept_fd(fd, a, false);
}
void Server::on_admin_accept(evconnlistener*, evutil_socket_t fd, sockaddr* a, int, void* arg) {
    static_cast<Server*>(arg)->accept_fd(fd, a, true);
}

void Server::on_accept_error(evconnlistener*, void* arg) {
    // libevent calls this right after accept() failed with an error it does
    // not retry by itself (not EAGAIN, EINTR or ECONNABORTED).
    int err = EVUTIL_SOCKET_ERROR();
    static_cast<Server*>(arg)->pause_accepting(err);
}

void Server::pause_accepting(int err) {
    metrics_.accept_paused.fetch_add(1);
    if (!accept_episode_) {
        accept_episode_ = true;
        if (err == EMFILE || err == ENFILE)
            M0_LOG(warn, "out of file descriptors: accepting paused");
        else
            M0_LOG(warn, "accept failed: ", std::strerror(err), ": accepting paused");
    }
    // Both listeners: the file descriptors are the process's, not one listener's.
    if (listener_) evconnlistener_disable(listener_);
    if (admin_listener_) evconnlistener_disable(admin_listener_);
    if (!accept_pause_)
        accept_pause_ = std::make_unique<Timer>(loop_, [this] { resume_accepting(); });
    accept_pause_->start(kAcceptPauseSeconds);
}

void Server::resume_accepting() {
    // After shutdown() the client listener stays closed; the admin one serves on.
    if (listener_ && !shutting_down_) evconnlistener_enable(listener_);
    if (admin_listener_) evconnlistener_enable(admin_listener_);
}

void Server::accept_fd(evutil_socket_t fd, sockaddr* addr, bool admin) {
    if (accept_episode_) {
        accept_episode_ = false;
        M0_LOG(info, "accepting resumed");
    }
    char buf[INET6_ADDRSTRLEN] = "";
    uint16_t port = 0;
    if (addr && addr->sa_family == AF_INET) {
        auto* in = reinterpret_cast<sockaddr_in*>(addr);
        inet_ntop(AF_INET, &in->sin_addr, buf, sizeof buf);
        port = ntohs(in->sin_port);
    } else if (addr && addr->sa_family == AF_INET6) {
        auto* in6 = reinterpret_cast<sockaddr_in6*>(addr);
        inet_ntop(AF_INET6, &in6->sin6_addr, buf, sizeof buf);
        port = ntohs(in6->sin6_port);
    }
    if (!admin && open_clients_ >= cfg_.max_connections) {
        // Over --max-connections: answer at once and close; the socket is fresh,
        // so the short answer fits its send buffer.
        metrics_.connections_refused.fetch_add(1);
        std::string msg =
            "HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain; charset=utf-8\r\n"
            "Date: " +
            date_header() + "\r\nServer: " + cfg_.server_header +
            "\r\nRetry-After: 1\r\nContent-Length: 21\r\nConnection: close\r\n\r\n"
            "too many connections\n";
        ssize_t ignored = ::send(fd, msg.data(), msg.size(), MSG_NOSIGNAL);
        (void)ignored;
        ::shutdown(fd, SHUT_WR);
        evutil_closesocket(fd);
        return;
    }
    adopt(fd, buf, port, admin);
}

SlotRef Server::alloc_slot() {
    uint32_t index;
    if (!free_slots_.empty()) {
        index = free_slots_.back();
        free_slots_.pop_back();
    } else {
        index = static_cast<uint32_t>(slots_.size());
        slots_.emplace_back();
    }
    return SlotRef{index, slots_[index].gen};
}

SlotRef Server::adopt(int fd, std::string remote_addr, uint16_t remote_port, bool admin) {
    evutil_make_socket_nonblocking(fd);
    SlotRef slot = alloc_slot();
    auto conn = std::make_unique<Conn>(cfg_.limits);
    Conn& c = *conn;
    c.server = this;
    c.slot = slot;
    c.admin = admin;
    c.remote_addr = std::move(remote_addr);
    c.remote_port = remote_port;
    c.bev = bufferevent_socket_new(loop_.base(), fd, BEV_OPT_CLOSE_ON_FREE);
    c.timer = event_new(loop_.base(), -1, 0, on_timer, &c);
    bufferevent_setcb(c.bev, on_read, on_write, on_event, &c);
    timeval wt = to_timeval(cfg_.write_timeout);
    bufferevent_set_timeouts(c.bev, nullptr, &wt);
    bufferevent_enable(c.bev, EV_READ | EV_WRITE);
    slots_[slot.index].conn = std::move(conn);
    ++open_;
    if (!admin) {
        ++open_clients_;
        metrics_.connections_open.fetch_add(1);
        metrics_.connections_total.fetch_add(1);
    }
    arm_timer(c, cfg_.header_timeout);
    return slot;
}

Server::Conn* Server::find(SlotRef s) const {
    if (s.index >= slots_.size()) return nullptr;
    const auto& e = slots_[s.index];
    if (e.gen != s.gen || !e.conn) return nullptr;
    return e.conn.get();
}

bool Server::holding(SlotRef s) const {
    Conn* c = find(s);
    return c && c->phase == Phase::holding;
}

void Server::arm_timer(Conn& c, double seconds) {
    event_del(c.timer);
    timeval tv = to_timeval(seconds);
    event_add(c.timer, &tv);
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
        case Phase::holding:
        case Phase::lingering:
        case Phase::closing:
            // Nothing more is read from a held or closing connection.
            evbuffer_drain(in, evbuffer_get_length(in));
            break;
        case Phase::waiting:
        case Phase::streaming:
            // Pipelined requests wait, bounded.
            if (evbuffer_get_length(in) > kMaxBufferedInput) bufferevent_disable(c.bev, EV_READ);
            break;
    }
}

void Server::process_input(Conn& c) {
    if (c.in_process) return;
    c.in_process = true;
    evbuffer* in = bufferevent_get_input(c.bev);
    SlotRef me = c.slot;
    while (c.phase == Phase::reading && evbuffer_get_length(in) > 0) {
        evbuffer_iovec vec;
        if (evbuffer_peek(in, -1, nullptr, &vec, 1) < 1) break;
        bool was_in_message = c.parser.in_message();
        auto res = c.parser.feed(static_cast<const char*>(vec.iov_base), vec.iov_len);
        evbuffer_drain(in, res.consumed);
        if (!was_in_message && c.parser.in_message()) arm_timer(c, cfg_.header_timeout);
        if (res.status == RequestParser::Status::error) {
            c.in_process = false;
            fail_request(c, res.error_status, res.error_reason);
            return;
        }
        if (res.status == RequestParser::Status::expect_continue) {
            // RFC 9110 §10.1.1: the client waits for 100 before sending the body.
            static const char cont[] = "HTTP/1.1 100 Continue\r\n\r\n";
            bufferevent_write(c.bev, cont, sizeof cont - 1);
            continue;
        }
        if (res.status == RequestParser::Status::complete) {
            event_del(c.timer);
            dispatch(c, c.parser.take());
            if (!find(me)) return;  // closed while dispatching
            continue;
        }
        if (res.consumed == 0) break;
    }
    c.in_process = false;
}

static const char* method_token(const std::string& m) { return m.c_str(); }

void Server::dispatch(Conn& c, Request req) {
    metrics_.requests_total.fetch_add(1);
    c.keep_alive = req.keep_alive && !shutting_down_;
    c.head_request = req.is_head();
    c.version_minor = req.version_minor;
    c.peer_eof = false;
    req.remote_addr = c.remote_addr;
    req.remote_port = c.remote_port;
    req.server_name = listen_host_.empty() ? "127.0.0.1" : listen_host_;
    req.server_port = c.admin ? admin_port_ : port_;
    M0_LOG(debug, method_token(req.method), " ", req.target, " slot ", to_string(c.slot));

    if (c.admin) {
        Response r = admin_handle(req);
        send_whole(c, r);
        finish_request(c);
        return;
    }
    const MountEntry* mount = nullptr;
    for (const auto& m : mounts_) {
        const std::string& p = m.prefix;
        if (p.empty() || (req.path.starts_with(p) &&
                          (req.path.size() == p.size() || req.path[p.size()] == '/'))) {
            mount = &m;
            break;
        }
    }
    if (!mount) {
        Response r = error_response(404, "no mount serves this path");
        send_whole(c, r);
        finish_request(c);
        return;
    }
    req.script_name = mount->prefix;
    req.path_info = percent_decode(std::string_view(req.path).substr(mount->prefix.size()), false);
    c.phase = Phase::waiting;
    if (!mount->submit(c.slot, std::move(req))) {
        c.phase = Phase::reading;
        c.keep_alive = false;
        Response r = error_response(503, "server is shutting down");
        send_whole(c, r);
        finish_request(c);
    }
}

Response Server::admin_handle(const Request& req) {
    if (req.path == "/metrics" && (req.method == "GET" || req.method == "HEAD")) {
        Response r;
        r.headers.add("Content-Type", "text/plain; version=0.0.4; charset=utf-8");
        r.body = metrics_.render(pools_, bus_);
        return r;
    }
    if (req.path == "/publish" || req.path == "/close") {
        if (req.method != "POST") {
            auto r = error_response(405, "use POST");
            r.headers.add("Allow", "POST");
            return r;
        }
        if (cfg_.admin_key.empty())
            return error_response(403, "the admin API needs --admin-key-file");
        auto auth = req.headers.get("Authorization");
        std::string want = "Bearer " + cfg_.admin_key;
        if (!auth || auth->size() != want.size() ||
            CRYPTO_memcmp(auth->data(), want.data(), want.size()) != 0) {
            auto r = error_response(401, "bad or missing bearer key");
            r.headers.add("WWW-Authenticate", "Bearer");
            return r;
        }
        if (!bus_) return error_response(503, "the admin API needs --realtime");
        std::map<std::string, std::string> fields;
        std::string err;
        if (!parse_flat_json(req.body, fields, err)) return error_response(400, err);
        if (!fields.count("channel")) return error_response(400, "missing channel");
        Response r;
        r.headers.add("Content-Type", "application/json");
        if (req.path == "/close") {
            auto e = bus::check_channel(fields["channel"]);
            if (e != bus::NameError::ok) return error_response(400, bus::reason(e));
            r.body = "{\"closed\": " + std::to_string(close_channel(fields["channel"])) + "}\n";
            return r;
        }
        auto res = bus_->publish(fields["channel"], fields["data"], fields["event"]);
        switch (res.error) {
            case bus::PublishError::ok:
                break;
            case bus::PublishError::bad_name:
                return error_response(400, bus::reason(res));
            case bus::PublishError::too_large:
                return error_response(413, bus::reason(res));
            case bus::PublishError::refused:
                return error_response(503, "the bus channel is full");
        }
        r.body = "{\"id\": " + std::to_string(res.id) + "}\n";
        return r;
    }
    return error_response(404, "admin serves /metrics, /publish and /close");
}

// ---- writing -------------------------------------------------------------

const std::string& Server::date_header() {
    time_t now = std::time(nullptr);
    if (now != date_time_) {
        date_time_ = now;
        tm g;
        gmtime_r(&now, &g);
        char buf[64];
        // RFC 9110 §5.6.7: IMF-fixdate.
        strftime(buf, sizeof buf, "%a, %d %b %Y %H:%M:%S GMT", &g);
        date_ = buf;
    }
    return date_;
}

std::string Server::head_text(const Conn& c, const Response& r, std::string_view framing) {
    std::string h;
    h.reserve(256);
    h.append("HTTP/1.1 ")
        .append(std::to_string(r.status))
        .append(" ")
        .append(reason_phrase(r.status));
    h.append("\r\n");
    bool has_server = false;
    for (const auto& [k, v] : r.headers.items) {
        // Framing and connection management belong to the server.
        if (iequals(k, "Content-Length") || iequals(k, "Transfer-Encoding") ||
            iequals(k, "Connection") || iequals(k, "Date") || iequals(k, "Keep-Alive"))
            continue;
        if (iequals(k, "Server")) has_server = true;
        h.append(k).append(": ").append(v).append("\r\n");
    }
    h.append("Date: ").append(date_header()).append("\r\n");
    if (!has_server) h.append("Server: ").append(cfg_.server_header).append("\r\n");
    h.append(framing);
    if (!c.keep_alive)
        h.append("Connection: close\r\n");
    else if (c.version_minor == 0)
        h.append("Connection: keep-alive\r\n");
    h.append("\r\n");
    return h;
}

static bool bodiless(int status) {
    return (status >= 100 && status < 200) || status == 204 || status == 304;
}

void Server::send_whole(Conn& c, Response& r) {
    std::string framing;
    if (!bodiless(r.status)) {
        size_t len = r.body.size();
        if (c.head_request) {
            // HEAD: the Content-Length the GET would have had (a malformed one is
            // ignored: nothing may throw on the loop thread).
            if (auto v = r.headers.get("Content-Length"))
                std::from_chars(v->data(), v->data() + v->size(), len);
        }
        framing = "Content-Length: " + std::to_string(len) + "\r\n";
    }
    std::string head = head_text(c, r, framing);
    evbuffer* out = bufferevent_get_output(c.bev);
    evbuffer_add(out, head.data(), head.size());
    if (!c.head_request && !bodiless(r.status)) evbuffer_add(out, r.body.data(), r.body.size());
}

void Server::start_stream(Conn& c, Response& r, std::shared_ptr<StreamState> st) {
    c.stream = std::move(st);
    c.phase = Phase::streaming;
    std::string framing;
    c.chunked = false;
    if (auto cl = r.headers.get("Content-Length")) {
        framing = "Content-Length: " + std::string(*cl) + "\r\n";
    } else if (c.version_minor >= 1 && !c.head_request) {
        framing = "Transfer-Encoding: chunked\r\n";
        c.chunked = true;
    } else {
        c.keep_alive = false;  // HTTP/1.0: the body ends when the connection does
    }
    std::string head = head_text(c, r, framing);
    evbuffer* out = bufferevent_get_output(c.bev);
    evbuffer_add(out, head.data(), head.size());
    if (!r.body.empty()) stream_chunk(c, r.body);
    bufferevent_setwatermark(c.bev, EV_WRITE, cfg_.stream_high_water / 2, 0);
}

void Server::stream_chunk(Conn& c, std::string& data) {
    evbuffer* out = bufferevent_get_output(c.bev);
    if (!data.empty() && !c.head_request) {
        if (c.chunked) {
            char size[32];
            int n = snprintf(size, sizeof size, "%zx\r\n", data.size());
            evbuffer_add(out, size, static_cast<size_t>(n));
            evbuffer_add(out, data.data(), data.size());
            evbuffer_add(out, "\r\n", 2);
        } else {
            evbuffer_add(out, data.data(), data.size());
        }
    }
    if (c.stream) c.stream->moved(data.size(), evbuffer_get_length(out));
}

void Server::end_stream(Conn& c, bool aborted) {
    bufferevent_setwatermark(c.bev, EV_WRITE, 0, 0);
    c.stream.reset();
    if (aborted) {
        // The body failed midway: a truncated body must not look complete.
        c.keep_alive = false;
        close_after_write(c);
        return;
    }
    if (c.chunked && !c.head_request) evbuffer_add(bufferevent_get_output(c.bev), "0\r\n\r\n", 5);
    finish_request(c);
}

void Server::finish_request(Conn& c) {
    c.phase = Phase::reading;
    if (!c.keep_alive || c.peer_eof || shutting_down_) {
        close_after_write(c);
        return;
    }
    bufferevent_enable(c.bev, EV_READ);
    arm_timer(c, cfg_.keepalive_timeout);
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
    event_del(c.timer);
    bufferevent_setwatermark(c.bev, EV_WRITE, 0, 0);
    if (evbuffer_get_length(bufferevent_get_output(c.bev)) == 0) {
        on_write(c.bev, &c);
        return;
    }
    // on_write fires once the output is flushed.
}

void Server::on_write(bufferevent*, void* arg) {
    auto& c = *static_cast<Conn*>(arg);
    Server& s = *c.server;
    size_t left = evbuffer_get_length(bufferevent_get_output(c.bev));
    if (c.phase == Phase::streaming && c.stream) {
        c.stream->drained(left);
        return;
    }
    if (c.phase == Phase::closing && left == 0) {
        // Lingering close: stop sending, read (and drop) what the client still
        // sends, so our answer is not destroyed by a reset.
        ::shutdown(bufferevent_getfd(c.bev), SHUT_WR);
        c.phase = Phase::lingering;
        bufferevent_enable(c.bev, EV_READ);
        s.arm_timer(c, kLingerSeconds);
    }
}

void Server::on_event(bufferevent*, short what, void* arg) {
    auto& c = *static_cast<Conn*>(arg);
    Server& s = *c.server;
    if ((what & BEV_EVENT_EOF) && !(what & BEV_EVENT_ERROR) && c.phase == Phase::waiting) {
        // A half-close while the request runs: answer, then close.
        c.peer_eof = true;
        return;
    }
    if (what & BEV_EVENT_TIMEOUT)
        M0_LOG(info, "write timeout: closing ", c.remote_addr, " slot ", to_string(c.slot));
    s.close_conn(c);
}

void Server::on_timer(evutil_socket_t, short, void* arg) {
    auto& c = *static_cast<Conn*>(arg);
    c.server->on_timeout(c);
}

void Server::on_timeout(Conn& c) {
    if (c.phase == Phase::lingering || c.phase == Phase::closing) {
        close_conn(c);
        return;
    }
    if (c.phase != Phase::reading) return;
    if (c.parser.in_message() || evbuffer_get_length(bufferevent_get_input(c.bev)) > 0) {
        fail_request(c, 408, "request not received in time");
        return;
    }
    close_conn(c);  // idle keep-alive, or a connection that never spoke
}

void Server::close_conn(Conn& c) {
    SlotRef slot = c.slot;
    if (c.hold) {
        subs_.unsubscribe_all(slot);
        metrics_.holds_open.fetch_sub(1);
        c.hold.reset();
    }
    holding_.erase(slot.index);
    if (c.stream) c.stream->cancel();
    event_free(c.timer);
    bufferevent_free(c.bev);
    auto& entry = slots_[slot.index];
    ++entry.gen;  // late frames and completions for this slot no longer match
    std::unique_ptr<Conn> dead = std::move(entry.conn);
    free_slots_.push_back(slot.index);
    --open_;
    if (!dead->admin) {
        --open_clients_;
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
    if (!c || c->phase == Phase::closing || c->phase == Phase::lingering) {
        metrics_.completions_dropped.fetch_add(1);
        if (comp.stream) comp.stream->cancel();
        return;
    }
    switch (comp.kind) {
        case Completion::Kind::response:
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

void Server::finish_hold_head(Conn& c, Response& r) {
    c.keep_alive = false;
    if (!c.hold) {
        M0_LOG(error, "hold completion for slot ", to_string(c.slot),
               " found no subscription (its h frame did not come first): closing");
        send_whole(c, r);
        close_after_write(c);
        return;
    }
    if (c.peer_eof) {  // the client left while the hold was decided
        close_conn(c);
        return;
    }
    std::string head = head_text(c, r, "");
    evbuffer* out = bufferevent_get_output(c.bev);
    evbuffer_add(out, head.data(), head.size());
    evbuffer_add(out, r.body.data(), r.body.size());
    c.phase = Phase::holding;
    c.hold->head_written = true;
    holding_.insert(c.slot.index);
    metrics_.holds_total.fetch_add(1);
    auto pending = std::move(c.hold->pending);
    for (const auto& ev : pending)
        if (!write_hold(c, ev)) return;
    if (shutting_down_) drop_hold(c);
}

void Server::drop_hold(Conn& c) {
    // A reconnect hint, spread so the clients do not all come back in the same second.
    std::uniform_int_distribution<uint64_t> spread(1000, 6000);
    std::string retry = sse::encode_retry(spread(rng_));
    evbuffer_add(bufferevent_get_output(c.bev), retry.data(), retry.size());
    if (c.hold) {
        subs_.unsubscribe_all(c.slot);  // nothing more is written after the hint
        c.hold->channels.clear();
    }
    holding_.erase(c.slot.index);
    close_after_write(c);
}

size_t Server::close_channel(const std::string& channel) {
    std::vector<SlotRef> targets = subs_.subscribers(channel);
    size_t n = 0;
    for (SlotRef s : targets) {
        Conn* c = find(s);
        if (!c || c->phase != Phase::holding) continue;
        drop_hold(*c);
        ++n;
    }
    return n;
}

void Server::on_bus_ready() {
    if (!bus_) return;
    std::deque<bus::Frame> frames;
    bus_->drain(frames);
    for (auto& f : frames) {
        if (auto* h = std::get_if<bus::HoldFrame>(&f))
            sse_peer_frame(*h);
        else
            fanout(std::get<bus::PublishFrame>(f));
    }
}

void Server::sse_peer_frame(bus::HoldFrame& f) {
    auto slot = bus::parse_reserved_stream_url(f.stream_url);
    Conn* c = slot ? find(*slot) : nullptr;
    if (!c || c->phase != Phase::waiting || c->hold) {
        // The client left (or the index was reused): nobody to hold.
        metrics_.frames_dropped.fetch_add(1);
        metrics_.holds_open.fetch_sub(1);
        return;
    }
    c->hold = std::make_unique<HoldState>();
    c->hold->cursor = f.cursor;
    c->hold->channels = std::move(f.channels);
    subs_.subscribe(*slot, c->hold->channels);
}

void Server::fanout(bus::PublishFrame& f) {
    const auto& subscribers = subs_.subscribers(f.channel);
    if (subscribers.empty()) return;
    const std::string bytes = sse::encode_event(f.id, f.event, f.data);
    // Writing may release a slow reader (and edit the list): iterate a copy.
    std::vector<SlotRef> targets = subscribers;
    for (SlotRef s : targets) {
        Conn* c = find(s);
        if (!c || !c->hold) continue;
        if (f.id <= c->hold->cursor) {
            metrics_.events_muted.fetch_add(1);
            continue;
        }
        if (!c->hold->head_written)
            c->hold->pending.push_back(bytes);
        else
            write_hold(*c, bytes);
    }
}

bool Server::write_hold(Conn& c, std::string_view bytes) {
    evbuffer* out = bufferevent_get_output(c.bev);
    evbuffer_add(out, bytes.data(), bytes.size());
    metrics_.events_delivered.fetch_add(1);
    c.hold->wrote_since_tick = true;
    if (evbuffer_get_length(out) > cfg_.hold_buffer_limit) {
        M0_LOG(info, "slow reader: hold on slot ", to_string(c.slot),
               " over --hold-buffer-limit, closed");
        metrics_.slow_readers_closed.fetch_add(1);
        close_conn(c);
        return false;
    }
    return true;
}

void Server::heartbeat() {
    std::vector<uint32_t> idx(holding_.begin(), holding_.end());
    for (uint32_t i : idx) {
        Conn* c = slots_[i].conn.get();
        if (!c || !c->hold || !c->hold->head_written) continue;
        if (c->hold->wrote_since_tick) {
            c->hold->wrote_since_tick = false;
            continue;
        }
        evbuffer* out = bufferevent_get_output(c->bev);
        evbuffer_add(out, sse::kHeartbeat.data(), sse::kHeartbeat.size());
        if (evbuffer_get_length(out) > cfg_.hold_buffer_limit) {
            metrics_.slow_readers_closed.fetch_add(1);
            close_conn(*c);
        }
    }
}

// ---- shutdown ------------------------------------------------------------

void Server::shutdown() {
    if (shutting_down_) return;
    shutting_down_ = true;
    if (listener_) evconnlistener_disable(listener_);
    M0_LOG(info, "shutting down: ", std::to_string(open_), " connections, ",
           std::to_string(holding_.size()), " holds");
    for (auto& e : slots_) {
        Conn* c = e.conn.get();
        if (!c || c->admin) continue;
        if (c->phase == Phase::holding) {
            drop_hold(*c);
        } else if (c->phase == Phase::reading && !c->parser.in_message() &&
                   evbuffer_get_length(bufferevent_get_input(c->bev)) == 0) {
            close_conn(*c);
        } else {
            c->keep_alive = false;
        }
    }
    grace_timer_ = std::make_unique<Timer>(loop_, [this] {
        M0_LOG(warn, "grace period over: closing ", std::to_string(open_), " connections");
        for (auto& e : slots_)
            if (e.conn) close_conn(*e.conn);
        loop_.exit();
    });
    grace_timer_->start(cfg_.grace);
    check_drained();
}

void Server::check_drained() {
    if (exited_) return;
    size_t client = 0;
    for (auto& e : slots_)
        if (e.conn && !e.conn->admin) ++client;
    if (client == 0) {
        exited_ = true;
        if (admin_listener_) {
            evconnlistener_free(admin_listener_);
            admin_listener_ = nullptr;
        }
        for (auto& e : slots_)
            if (e.conn) close_conn(*e.conn);
        loop_.exit();
    }
}

}  // namespace m0::http
