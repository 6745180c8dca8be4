#include "app/activation.hpp"

#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/un.h>

#include <cstddef>
#include <cstring>
#include <vector>

namespace m0::app {

namespace {

// A socket's bound address as comparable bytes: the family, the address and
// the port (TCP), or the path (unix).
std::string key_of(const sockaddr* sa, socklen_t len) {
    if (sa->sa_family == AF_INET) {
        auto* in = reinterpret_cast<const sockaddr_in*>(sa);
        return "4" + std::string(reinterpret_cast<const char*>(&in->sin_addr), 4) +
               std::to_string(ntohs(in->sin_port));
    }
    if (sa->sa_family == AF_INET6) {
        auto* in6 = reinterpret_cast<const sockaddr_in6*>(sa);
        return "6" + std::string(reinterpret_cast<const char*>(&in6->sin6_addr), 16) +
               std::to_string(ntohs(in6->sin6_port));
    }
    if (sa->sa_family == AF_UNIX && len > offsetof(sockaddr_un, sun_path)) {
        auto* un = reinterpret_cast<const sockaddr_un*>(sa);
        return "u" + std::string(un->sun_path, strnlen(un->sun_path, sizeof un->sun_path));
    }
    return "?";
}

std::string key_of_fd(int fd) {
    sockaddr_storage ss{};
    socklen_t len = sizeof ss;
    if (::getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) return "?";
    return key_of(reinterpret_cast<sockaddr*>(&ss), len);
}

// Every address a --listen value stands for (a name may resolve to several).
std::vector<std::string> keys_of(const ListenSpec& l) {
    if (!l.path.empty()) return {"u" + l.path};
    std::string host = l.host;
    if (host.size() > 2 && host.front() == '[' && host.back() == ']')
        host = host.substr(1, host.size() - 2);
    addrinfo hints{};
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* res = nullptr;
    std::vector<std::string> out;
    if (::getaddrinfo(host.c_str(), std::to_string(l.port).c_str(), &hints, &res) != 0) return out;
    for (addrinfo* a = res; a; a = a->ai_next) out.push_back(key_of(a->ai_addr, a->ai_addrlen));
    ::freeaddrinfo(res);
    return out;
}

// Whether one of the passed sockets of that kind (admin or not) is `l`.
bool covered(const Options& o, const ListenSpec& l, bool admin) {
    std::vector<std::string> want = keys_of(l);
    for (const auto& [fd, name] : o.systemd_fds) {
        if ((name == "admin") != admin) continue;
        std::string have = key_of_fd(fd);
        for (const auto& w : want)
            if (w == have) return true;
    }
    return false;
}

}  // namespace

std::string activation_conflict(const Options& o) {
    if (o.systemd_fds.empty()) return "";
    const std::string n = std::to_string(o.systemd_fds.size());
    if (o.listens_given)
        for (const auto& l : o.listens)
            if (!covered(o, l, false))
                return "socket activation: --listen " + l.text() + " is not one of the " + n +
                       " sockets systemd passed, which are the listeners: put it in the "
                       ".socket unit (ListenStream=) or drop --listen";
    if (o.admin && !covered(o, *o.admin, true)) {
        bool any = false;
        for (const auto& fd : o.systemd_fds) any = any || fd.second == "admin";
        if (!any)
            return "socket activation: --admin-listen " + o.admin->text() +
                   " would not be bound: systemd passed no socket named admin "
                   "(FileDescriptorName=admin in its .socket unit)";
        return "socket activation: --admin-listen " + o.admin->text() +
               " is not the socket systemd passed as admin: make them the same, or drop "
               "--admin-listen";
    }
    return "";
}

}  // namespace m0::app
