// Accepting connections: the listeners (client and admin), and the refusal
// past --max-connections. Loop thread.
#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "loop/log.hpp"
#include "server/conn.hpp"

namespace m0::server {

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
                                LEV_OPT_CLOSE_ON_FREE | LEV_OPT_REUSEABLE | LEV_OPT_CLOSE_ON_EXEC |
                                    (cfg_.reuse_port ? LEV_OPT_REUSEABLE_PORT : 0),
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
    // After shutdown() the client listener is closed; the admin one serves on.
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

}  // namespace m0::server
