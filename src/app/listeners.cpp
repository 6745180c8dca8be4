// The listening sockets of a process: systemd's, the --workers parent's, or
// its own --listen and --admin-listen. Main thread, before the loops run (in
// the parent: before any fork).
#include "app/listeners.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>

#include "http/forwarded.hpp"

namespace m0::app {

namespace {

[[noreturn]] void die(const std::string& why) {
    std::fprintf(stderr, "m0serve: %s\n", why.c_str());
    std::exit(2);
}

// Whether the socket `fd` is bound to a loopback address or is a unix socket.
bool local_socket(int fd) {
    sockaddr_storage ss{};
    socklen_t len = sizeof ss;
    if (::getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) return false;
    if (ss.ss_family == AF_UNIX) return true;
    char buf[INET6_ADDRSTRLEN] = "";
    if (ss.ss_family == AF_INET)
        inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(&ss)->sin_addr, buf, sizeof buf);
    else if (ss.ss_family == AF_INET6)
        inet_ntop(AF_INET6, &reinterpret_cast<sockaddr_in6*>(&ss)->sin6_addr, buf, sizeof buf);
    return buf[0] && http::loopback_only(buf);
}

}  // namespace

// The listeners: the sockets systemd passed (named "admin": the admin
// listener; any other: a client one), or else every --listen and the
// --admin-listen. Under --workers the admin listener is worker 0's: /metrics
// is one worker's, and a publish reaches every worker through the shared bus.
void bind_listeners(const Options& o, int worker, server::Server& server) {
    std::string err;
    if (!o.systemd_fds.empty()) {
        for (const auto& [fd, name] : o.systemd_fds) {
            bool admin = name == "admin";
            if (admin && worker != 0) {
                ::close(fd);  // worker 0's: a stop refuses admin clients once it closes its own
                continue;
            }
            if (admin && o.server.admin_open && !local_socket(fd))
                die("socket activation: --admin-open needs the admin socket on loopback or a "
                    "unix socket");
            // A client socket named "plain" (FileDescriptorName=plain; the
            // --workers parent names --listen-plain's so) stays plain under TLS.
            if (!server.adopt_listener(fd, admin, err, name == "plain"))
                die("socket activation: " + err);
        }
        if (server.listening(false).empty())
            die("socket activation: every socket systemd passed is named admin; "
                "a client listener is needed");
        return;
    }
    for (const auto& l : o.listens) {
        bool ok = l.path.empty() ? server.listen(l.host, l.port, false, err, l.plain)
                                 : server.listen_unix(l.path, o.unix_socket, false, err);
        if (!ok) die(err);
    }
    if (worker == 0 && o.admin) {
        bool ok = o.admin->path.empty()
                      ? server.listen(o.admin->host, o.admin->port, true, err)
                      : server.listen_unix(o.admin->path, o.unix_socket, true, err);
        if (!ok) die("--admin-listen: " + err);
    }
}

std::vector<Sockets> bind_for_workers(Options& o, std::string& admin_path) {
    std::string err;
    std::vector<Sockets> own(static_cast<size_t>(o.workers));
    for (auto& set : own)
        for (const auto& l : o.listens) {
            int fd = server::bind_tcp_listener(l.host, l.port, true, err);  // unix: refused
            if (fd < 0) die(err);
            set.emplace_back(fd, l.plain ? "plain" : "");
        }
    if (o.admin) {
        int fd = o.admin->path.empty()
                     ? server::bind_tcp_listener(o.admin->host, o.admin->port, false, err)
                     : server::bind_unix_listener(o.admin->path, o.unix_socket, err);
        if (fd < 0) die("--admin-listen: " + err);
        for (auto& set : own) set.emplace_back(fd, "admin");
        admin_path = o.admin->path;
    }
    o.listeners_from_parent = true;
    return own;
}

}  // namespace m0::app
