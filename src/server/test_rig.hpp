// The test rig shared by test_server, test_hold_loop and other server tests
// (the hold-order property builds its own, with several loops): a real
// Server on a real Loop with its two queues, clients on
// socketpairs whose other end the server adopts, and the loop stepped by the
// test (never a bare sleep). No assertions here: helpers answer, the test
// (Catch2 or RapidCheck) asserts.
#pragma once
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "bus/channel.hpp"
#include "server/codec.hpp"
#include "server/server.hpp"

namespace m0::testing {

// The client end of a connection.
struct SocketClient {
    int fd = -1;
    // The server's end (the server owns it): a test may shrink its send
    // buffer, so that the socket takes little at once.
    int server_fd = -1;
    SlotRef slot;
    std::string in;  // received, not yet taken
    bool eof = false;

    explicit SocketClient(int f) : fd(f) {
        int fl = ::fcntl(fd, F_GETFL);
        ::fcntl(fd, F_SETFL, fl | O_NONBLOCK);
    }
    ~SocketClient() {
        if (fd >= 0) ::close(fd);
    }
    SocketClient(const SocketClient&) = delete;
    SocketClient& operator=(const SocketClient&) = delete;

    // Small writes: they fit the socket buffer at once. False on an error.
    bool send(std::string_view s) {
        size_t off = 0;
        while (off < s.size()) {
            ssize_t n = ::send(fd, s.data() + off, s.size() - off, MSG_NOSIGNAL);
            if (n <= 0) return false;
            off += size_t(n);
        }
        return true;
    }
    // Reads whatever arrived, without blocking.
    void pump() {
        char buf[65536];
        for (;;) {
            ssize_t n = ::recv(fd, buf, sizeof buf, MSG_DONTWAIT);
            if (n > 0) {
                in.append(buf, size_t(n));
                continue;
            }
            if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) eof = true;
            break;
        }
    }
    void close() {
        ::close(fd);
        fd = -1;
    }
};

// A blocking TCP connection to 127.0.0.1:port (the kernel completes it from
// the listen backlog); -1 on failure.
inline int connect_loopback(uint16_t port) {
    int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return -1;
    sockaddr_in sin{};
    sin.sin_family = AF_INET;
    sin.sin_port = htons(port);
    sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(fd, reinterpret_cast<sockaddr*>(&sin), sizeof sin) != 0) {
        ::close(fd);
        return -1;
    }
    return fd;
}

// A Server on a Loop. With `realtime`, the server has the bus channel.
struct ServerRig {
    Loop loop;
    CompletionRing ring;
    Metrics metrics;
    bus::BusChannel bus;
    std::unique_ptr<server::Server> server;

    // The server's codec on `o`, as the binary gives its bus (serve.cpp).
    static bus::BusOptions served(bus::BusOptions o) {
        o.codec = server::codec();
        return o;
    }

    explicit ServerRig(server::ServerConfig cfg = {}, bool realtime = false,
                       bus::BusOptions bus_options = {})
        : bus(served(bus_options)) {
        // A write to a closed peer must be an error return, not a signal.
        std::signal(SIGPIPE, SIG_IGN);
        server = std::make_unique<server::Server>(loop, std::move(cfg), ring,
                                                  realtime ? &bus : nullptr, metrics);
    }
    virtual ~ServerRig() { server.reset(); }
    ServerRig(const ServerRig&) = delete;
    ServerRig& operator=(const ServerRig&) = delete;

    // Posts a whole response for `s` on the completion ring, as a pool would.
    void post(SlotRef s, http::Response r) {
        post_kind(s, Completion::Kind::response, nullptr, std::move(r));
    }
    // Posts a completion of any kind (a streamed head, chunk or end, a hold).
    void post_kind(SlotRef s, Completion::Kind kind, std::shared_ptr<StreamState> st,
                   http::Response r = {}, std::string data = {}, bool aborted = false) {
        Completion c;
        c.kind = kind;
        c.slot = s;
        c.response = std::move(r);
        c.data = std::move(data);
        c.aborted = aborted;
        c.stream = std::move(st);
        ring.push(std::move(c));
    }
    // A client whose socketpair end the server adopts; null if socketpair failed.
    std::unique_ptr<SocketClient> connect(bool admin = false) {
        int sv[2];
        if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) return nullptr;
        auto c = std::make_unique<SocketClient>(sv[1]);
        c->server_fd = sv[0];
        c->slot = server->adopt(sv[0], "127.0.0.1", 1, admin);
        return c;
    }
    bool step_until(const std::function<bool()>& done,
                    std::chrono::milliseconds t = std::chrono::milliseconds(3000)) {
        return loop.run_until(done, t);
    }
    // Steps until `want` is in what `c` read (true), or the time is up.
    bool read_until(SocketClient& c, std::string_view want,
                    std::chrono::milliseconds t = std::chrono::milliseconds(3000)) {
        return step_until(
            [&] {
                c.pump();
                return c.in.find(want) != std::string::npos;
            },
            t);
    }
    bool wait_eof(SocketClient& c, std::chrono::milliseconds t = std::chrono::milliseconds(3000)) {
        return step_until(
            [&] {
                c.pump();
                return c.eof;
            },
            t);
    }
};

}  // namespace m0::testing
