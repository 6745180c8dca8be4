// Accepting connections: the listeners (client and admin; TCP, unix
// sockets, sockets handed over by systemd), and the refusal past
// --max-connections. Loop thread.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>

#include "loop/log.hpp"
#include "server/conn.hpp"

namespace m0::server {

namespace {
// After accept() fails for want of a file descriptor (or any other lasting
// reason), the listeners stay disabled this long: a listening socket with
// connections in its backlog stays readable, so retrying at once would spin.
constexpr double kAcceptPauseSeconds = 0.1;
constexpr int kBacklog = 512;

// The port of a bound IPv4 or IPv6 socket.
uint16_t port_of(const sockaddr_storage& ss) {
    if (ss.ss_family == AF_INET6)
        return ntohs(reinterpret_cast<const sockaddr_in6*>(&ss)->sin6_port);
    return ntohs(reinterpret_cast<const sockaddr_in*>(&ss)->sin_port);
}

std::string host_of(const sockaddr_storage& ss) {
    char buf[INET6_ADDRSTRLEN] = "";
    if (ss.ss_family == AF_INET6)
        inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(&ss)->sin6_addr, buf,
                  sizeof buf);
    else if (ss.ss_family == AF_INET)
        inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(&ss)->sin_addr, buf, sizeof buf);
    return buf;
}

struct AddrinfoFree {
    void operator()(addrinfo* a) const { freeaddrinfo(a); }
};
using Addrinfo = std::unique_ptr<addrinfo, AddrinfoFree>;

// `host_in` ("127.0.0.1", "localhost", "::1" or "[::1]") and `port` as the
// address to bind (the first getaddrinfo gives); `host` gets the name
// without brackets. Null with `err` set when it does not resolve.
Addrinfo resolve(const std::string& host_in, uint16_t port, std::string& host, std::string& err) {
    host = host_in;
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
        if (res) freeaddrinfo(res);
        return nullptr;
    }
    return Addrinfo(res);
}

// Whether something accepts on the unix socket at `addr`.
bool unix_socket_live(const sockaddr_un& addr) {
    int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return true;  // cannot tell: do not remove it
    bool live = ::connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) == 0 ||
                errno != ECONNREFUSED;
    ::close(fd);
    return live;
}
}  // namespace

std::string Server::Listener::name() const {
    if (!path.empty()) return "unix:" + path;
    return (host.find(':') != std::string::npos ? "[" + host + "]" : host) + ":" +
           std::to_string(port);
}

bool Server::add_listener(std::unique_ptr<Listener> l, int fd, std::string& err) {
    l->server = this;
    evutil_make_socket_nonblocking(fd);
    l->ev = evconnlistener_new(loop_.base(), on_accept, l.get(),
                               LEV_OPT_CLOSE_ON_FREE | LEV_OPT_CLOSE_ON_EXEC, -1, fd);
    if (!l->ev) {
        err = "cannot accept on " + l->name() + ": " + std::strerror(errno);
        ::close(fd);
        return false;
    }
    evconnlistener_set_error_cb(l->ev, on_accept_error);
    listeners_.push_back(std::move(l));
    return true;
}

bool check_port_free(const std::string& host_in, uint16_t port, std::string& err) {
    std::string host;
    auto res = resolve(host_in, port, host, err);
    if (!res) return false;
    int fd = ::socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        err = "cannot listen on " + host_in + ":" + std::to_string(port) + ": " +
              std::strerror(errno);
        return false;
    }
    int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    bool free = ::bind(fd, res->ai_addr, res->ai_addrlen) == 0;
    int saved = errno;
    ::close(fd);
    if (!free)
        err = "cannot listen on " + host_in + ":" + std::to_string(port) + ": " +
              std::strerror(saved) +
              (saved == EADDRINUSE ? " (another process listens on it)" : "");
    return free;
}

bool Server::tls_for(bool admin, bool plain) const {
    return cfg_.tls && !plain && (!admin || cfg_.admin_tls);
}

bool Server::listen(const std::string& host_in, uint16_t port, bool admin, std::string& err,
                    bool plain) {
    std::string host;
    auto res = resolve(host_in, port, host, err);
    if (!res) return false;
    // The admin listener is bound once, by one loop of one process: never
    // SO_REUSEPORT, which would let another process share its port.
    const bool reuse_port = cfg_.reuse_port && !admin;
    auto* ev =
        evconnlistener_new_bind(loop_.base(), on_accept, nullptr,
                                LEV_OPT_CLOSE_ON_FREE | LEV_OPT_REUSEABLE | LEV_OPT_CLOSE_ON_EXEC |
                                    (reuse_port ? LEV_OPT_REUSEABLE_PORT : 0),
                                kBacklog, res->ai_addr, static_cast<int>(res->ai_addrlen));
    int saved = errno;
    res.reset();
    if (!ev) {
        err = "cannot listen on " + host_in + ":" + std::to_string(port) + ": " +
              std::strerror(saved);
        return false;
    }
    auto l = std::make_unique<Listener>();
    l->server = this;
    l->ev = ev;
    l->admin = admin;
    l->host = host;
    l->reuse_port = reuse_port;
    l->tls = tls_for(admin, plain);
    sockaddr_storage bound{};
    socklen_t len = sizeof bound;
    getsockname(evconnlistener_get_fd(ev), reinterpret_cast<sockaddr*>(&bound), &len);
    l->port = port_of(bound);
    evconnlistener_set_cb(ev, on_accept, l.get());
    evconnlistener_set_error_cb(ev, on_accept_error);
    listeners_.push_back(std::move(l));
    return true;
}

int bind_unix_listener(const std::string& path, const UnixSocketOptions& opts, std::string& err) {
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    if (path.empty() || path.size() >= sizeof addr.sun_path) {
        err = "unix socket path must be 1 to " + std::to_string(sizeof addr.sun_path - 1) +
              " bytes: '" + path + "'";
        return -1;
    }
    std::memcpy(addr.sun_path, path.data(), path.size());
    struct stat st {};
    if (::lstat(path.c_str(), &st) == 0) {
        if (!S_ISSOCK(st.st_mode)) {
            err = "cannot listen on unix:" + path + ": the file exists and is not a socket";
            return -1;
        }
        if (unix_socket_live(addr)) {
            err = "cannot listen on unix:" + path + ": another process accepts on it";
            return -1;
        }
        ::unlink(path.c_str());  // stale: left by a process that is gone
    }
    int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    auto fail = [&](const char* what) {
        err = "cannot listen on unix:" + path + ": " + what + ": " + std::strerror(errno);
        if (fd >= 0) ::close(fd);
        return -1;
    };
    if (fd < 0) return fail("socket");
    if (::bind(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0) return fail("bind");
    // Mode and owner before listen(): nobody connects under the umask's mode.
    if (::chmod(path.c_str(), opts.mode) != 0) return fail("chmod");
    if ((opts.uid >= 0 || opts.gid >= 0) &&
        ::chown(path.c_str(), static_cast<uid_t>(opts.uid), static_cast<gid_t>(opts.gid)) != 0)
        return fail("chown");
    if (::listen(fd, kBacklog) != 0) return fail("listen");
    return fd;
}

int bind_tcp_listener(const std::string& host_in, uint16_t port, bool reuse_port,
                      std::string& err) {
    std::string host;
    auto res = resolve(host_in, port, host, err);
    if (!res) return -1;
    int fd = ::socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int one = 1;
    // As evconnlistener_new_bind does for Server::listen: SO_REUSEADDR (a
    // port left in TIME_WAIT binds) and SO_KEEPALIVE (accepted sockets inherit it).
    if (fd < 0 || ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0 ||
        ::setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof one) != 0 ||
        (reuse_port && ::setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one) != 0) ||
        ::bind(fd, res->ai_addr, res->ai_addrlen) != 0 || ::listen(fd, kBacklog) != 0) {
        err = "cannot listen on " + host_in + ":" + std::to_string(port) + ": " +
              std::strerror(errno);
        if (fd >= 0) ::close(fd);
        return -1;
    }
    return fd;
}

bool Server::listen_unix(const std::string& path, const UnixSocketOptions& opts, bool admin,
                         std::string& err) {
    int fd = bind_unix_listener(path, opts, err);
    if (fd < 0) return false;
    struct stat st {};
    auto l = std::make_unique<Listener>();
    l->admin = admin;
    l->path = path;
    l->own_file = true;
    if (::stat(path.c_str(), &st) == 0) l->inode = st.st_ino;
    return add_listener(std::move(l), fd, err);
}

bool Server::adopt_listener(int fd, bool admin, std::string& err, bool plain) {
    sockaddr_storage bound{};
    socklen_t len = sizeof bound;
    int type = 0, listening = 0;
    socklen_t tl = sizeof type, ll = sizeof listening;
    if (::getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &len) != 0 ||
        ::getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &tl) != 0 ||
        ::getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &ll) != 0 || type != SOCK_STREAM ||
        !listening) {
        err = "file descriptor " + std::to_string(fd) + " is not a listening stream socket";
        return false;
    }
    auto l = std::make_unique<Listener>();
    l->admin = admin;
    if (bound.ss_family == AF_UNIX) {
        const auto* un = reinterpret_cast<const sockaddr_un*>(&bound);
        l->path = un->sun_path[0] ? std::string(un->sun_path) : std::string("@");
    } else {
        l->host = host_of(bound);
        l->port = port_of(bound);
        l->tls = tls_for(admin, plain);
    }
    return add_listener(std::move(l), fd, err);  // the file stays systemd's
}

bool Server::join(Server& first, std::string& err) {
    open_clients_ = first.open_clients_;
    accept_episode_ = first.accept_episode_;
    for (const auto& l : first.listeners_) {
        if (l->admin || !l->ev) continue;
        if (l->reuse_port && cfg_.reuse_port) {
            if (!listen(l->host, l->port, false, err, !l->tls)) return false;
            continue;
        }
        int fd = ::fcntl(evconnlistener_get_fd(l->ev), F_DUPFD_CLOEXEC, 0);
        if (fd < 0) {
            err = "cannot share " + l->name() + ": " + std::strerror(errno);
            return false;
        }
        if (!adopt_listener(fd, false, err, !l->tls)) return false;  // the duplicate is closed
    }
    return true;
}

uint16_t Server::bound_port(bool admin) const {
    for (const auto& l : listeners_)
        if (l->admin == admin && l->path.empty()) return l->port;
    return 0;
}

std::vector<std::string> Server::listening(bool admin) const {
    std::vector<std::string> out;
    for (const auto& l : listeners_)
        if (l->admin == admin) out.push_back(l->name() + (l->tls ? " (TLS)" : ""));
    return out;
}

std::vector<std::pair<int, std::string>> Server::listener_fds() const {
    std::vector<std::pair<int, std::string>> out;
    for (const auto& l : listeners_) {
        if (!l->ev) continue;
        const bool plain = cfg_.tls && l->path.empty() && !l->tls;
        out.emplace_back(evconnlistener_get_fd(l->ev), l->admin ? "admin"
                                                       : plain  ? "plain"
                                                                : "http");
    }
    return out;
}

void Server::leave_listener_files() {
    for (auto& l : listeners_) l->own_file = false;
}

void Server::close_listeners(bool admin) {
    for (auto& l : listeners_) {
        if (l->admin != admin || !l->ev) continue;
        evconnlistener_free(l->ev);
        l->ev = nullptr;
        struct stat st {};
        // Only the file this listener bound: another process may have replaced it.
        if (l->own_file && ::lstat(l->path.c_str(), &st) == 0 && st.st_ino == l->inode)
            ::unlink(l->path.c_str());
    }
}

void Server::accept_backlog() {
    for (auto& l : listeners_) {
        if (l->admin || !l->ev) continue;
        // As libevent's own accept: the listener does not block, and one
        // pass empties what is queued (new arrivals race the close either
        // way). A loop sharing the socket finds it empty.
        const evutil_socket_t lfd = evconnlistener_get_fd(l->ev);
        for (;;) {
            sockaddr_storage ss{};
            socklen_t len = sizeof ss;
            int fd = ::accept4(lfd, reinterpret_cast<sockaddr*>(&ss), &len,
                               SOCK_NONBLOCK | SOCK_CLOEXEC);
            if (fd < 0) break;  // empty, or what the listener's own accept would meet
            accept_fd(*l, fd, reinterpret_cast<sockaddr*>(&ss));
        }
    }
}

void Server::on_accept(evconnlistener*, evutil_socket_t fd, sockaddr* a, int, void* arg) {
    auto* l = static_cast<Listener*>(arg);
    l->server->accept_fd(*l, fd, a);
}

void Server::on_accept_error(evconnlistener*, void* arg) {
    // libevent calls this right after accept() failed with an error it does
    // not retry by itself (not EAGAIN, EINTR or ECONNABORTED).
    int err = EVUTIL_SOCKET_ERROR();
    static_cast<Listener*>(arg)->server->pause_accepting(err);
}

void Server::pause_accepting(int err) {
    metrics_.accept_paused.fetch_add(1);
    if (!accept_episode_->exchange(true)) {
        if (err == EMFILE || err == ENFILE)
            M0_LOG(warn, "out of file descriptors: accepting paused");
        else
            M0_LOG(warn, "accept failed: ", std::strerror(err), ": accepting paused");
    }
    // Every listener: the file descriptors are the process's, not one listener's.
    for (auto& l : listeners_)
        if (l->ev) evconnlistener_disable(l->ev);
    if (!accept_pause_)
        accept_pause_ = std::make_unique<Timer>(loop_, [this] { resume_accepting(); });
    accept_pause_->start(kAcceptPauseSeconds);
}

void Server::resume_accepting() {
    // After shutdown() the client listeners are closed (ev null); the admin ones serve on.
    for (auto& l : listeners_)
        if (l->ev) evconnlistener_enable(l->ev);
}

void Server::accept_fd(Listener& l, evutil_socket_t fd, sockaddr* addr) {
    if (accept_episode_->load(std::memory_order_relaxed) && accept_episode_->exchange(false))
        M0_LOG(info, "accepting resumed");
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
    // Across loops the count is read, not reserved: two loops accepting at
    // the same moment may pass the limit by one connection each.
    if (!l.admin && open_clients_->load() >= cfg_.max_connections) {
        if (l.tls) {
            // No plain answer can reach a TLS client: it sees the close.
            metrics_.connections_refused.fetch_add(1);
            evutil_closesocket(fd);
            return;
        }
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
    if (l.path.empty()) {
        // TCP (a client's or the admin's): with Nagle on, a write waits while
        // an earlier one is unacknowledged, and a client that sent a request
        // a moment before delays its ACK (40 ms). A streamed answer's first
        // chunk after its head, on a keep-alive connection, came 43 ms late;
        // an admin publisher pipelining its POSTs got 1,100 answers a second.
        // Every answer is written whole where it can be, so no write is
        // smaller for it.
        int one = 1;
        ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    }
    if (l.tls) {
        start_tls(l, fd, buf, port);
        return;
    }
    SlotRef slot = adopt(fd, buf, port, l.admin);
    if (Conn* c = find(slot)) c->via = &l;
}

}  // namespace m0::server
