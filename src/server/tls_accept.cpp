// Server, a TLS listener's new connection: its first byte, then its handshake.
// Loop thread only.
//
// DESIGN
// A connection accepted on a TLS listener is a TlsPeek first: one event on
// its socket, no Conn, no bufferevent, no SSL. When the client's first byte
// comes it is looked at without being read (MSG_PEEK):
// - a TLS handshake record (0x16): the socket becomes a Conn with an
//   OpenSSL bufferevent in its accepting state (adopt_conn), whose timer
//   gives the handshake what is left of --tls-handshake-timeout; the
//   handshake's end (BEV_EVENT_CONNECTED, Server::on_event) starts
//   --header-timeout as an accept does on a plain listener;
// - anything else is a plain HTTP request on a TLS port: it becomes a plain
//   Conn, answered 400 "plain HTTP request sent to a TLS port" (nginx's
//   words) by fail_request, which closes it after a lingering close;
// - the end of the stream, an error, or --tls-handshake-timeout with no
//   byte: the socket is closed.
// So a client that connects and never finishes its handshake costs a socket
// for the timeout, never a slot for ever. The metrics count completed
// handshakes (and those resumed), connections that closed before one
// completed (a peek's too), and plain requests refused; the admin
// listener's are not counted, as its connections are not. A peek counts against
// --max-connections as a connection does; a drain waits for it (it ends
// within the timeout) as for a connection accepted before the listener closed.
#include <event2/bufferevent_ssl.h>
#include <openssl/ssl.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>

#include "loop/log.hpp"
#include "server/conn.hpp"
#include "server/tls.hpp"

namespace m0::server {

void Server::start_tls(const Listener& l, int fd, std::string remote_addr, uint16_t remote_port) {
    evutil_make_socket_nonblocking(fd);
    auto p = std::make_unique<TlsPeek>();
    p->server = this;
    p->fd = fd;
    p->via = &l;
    p->remote_addr = std::move(remote_addr);
    p->remote_port = remote_port;
    p->deadline = monotonic_seconds() + cfg_.tls_handshake_timeout;
    p->ev = event_new(loop_.base(), fd, EV_READ, on_peek, p.get());
    timeval tv = to_timeval(cfg_.tls_handshake_timeout);
    event_add(p->ev, &tv);
    if (!l.admin) open_clients_->fetch_add(1);
    peeks_[fd] = std::move(p);
}

void Server::end_peek(TlsPeek& p, bool close_fd) {
    if (!p.via->admin) open_clients_->fetch_sub(1);
    if (close_fd && !p.via->admin) metrics_.tls_handshakes_failed.fetch_add(1);
    event_free(p.ev);
    if (close_fd) evutil_closesocket(p.fd);
    peeks_.erase(p.fd);  // `p` is gone
    if (shutting_down_) check_drained();
}

void Server::close_peeks() {
    for (auto& [fd, p] : peeks_) {
        if (!p->via->admin) open_clients_->fetch_sub(1);
        event_free(p->ev);
        evutil_closesocket(fd);
    }
    peeks_.clear();
}

void Server::on_peek(evutil_socket_t fd, short what, void* arg) {
    auto& p = *static_cast<TlsPeek*>(arg);
    Server& s = *p.server;
    if (what & EV_TIMEOUT) {
        M0_LOG(debug, "TLS client ", p.remote_addr, " sent nothing within --tls-handshake-timeout");
        s.end_peek(p, true);
        return;
    }
    unsigned char first = 0;
    const ssize_t r = ::recv(fd, &first, 1, MSG_PEEK | MSG_DONTWAIT);
    if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
        timeval tv = to_timeval(std::max(0.0, p.deadline - monotonic_seconds()));
        event_add(p.ev, &tv);
        return;
    }
    if (r <= 0) {  // gone before it said anything
        s.end_peek(p, true);
        return;
    }
    const Listener* via = p.via;
    const std::string addr = p.remote_addr;
    const uint16_t port = p.remote_port;
    const double left = std::max(0.001, p.deadline - monotonic_seconds());
    s.end_peek(p, false);
    if (!starts_tls(first)) {
        // A plain HTTP client on a TLS port: told so in plain HTTP, as
        // nginx tells it, then closed; the request is not served.
        SlotRef slot = s.adopt_conn(fd, addr, port, via->admin, nullptr, s.cfg_.header_timeout);
        if (!via->admin) s.metrics_.tls_plain_refused.fetch_add(1);
        if (Conn* c = s.find(slot)) {
            c->via = via;
            c->fail_request(400, "plain HTTP request sent to a TLS port");
        }
        return;
    }
    ssl_st* ssl = s.cfg_.tls->new_ssl(!via->admin);
    if (!ssl) {
        M0_LOG(error, "TLS: no SSL for ", addr, " (out of memory?): closing");
        evutil_closesocket(fd);
        return;
    }
    SlotRef slot = s.adopt_conn(fd, addr, port, via->admin, ssl, left);
    if (Conn* c = s.find(slot)) c->via = via;
}

void Server::tls_connected(Conn& c) {
    c.tls_pending = false;
    if (!c.admin) {
        metrics_.tls_handshakes.fetch_add(1);
        if (SSL_session_reused(bufferevent_openssl_get_ssl(c.bev)) == 1)
            metrics_.tls_resumed.fetch_add(1);
    }
    // ALPN chose h2: the connection speaks HTTP/2 from here (h2_conn.cpp).
    if (c.phase == Phase::reading && !c.admin && alpn_h2(c)) {
        h2_start(c);
        return;
    }
    // From now on the connection has --header-timeout for its first
    // request, as a plain one from its accept.
    if (c.phase == Phase::reading && !c.parser->in_message()) c.arm_timer(cfg_.header_timeout);
}

}  // namespace m0::server
