// send_floor: what the kernel alone charges a server for one delivery on
// loopback TCP, the floor under the bench's steady CPU a million deliveries.
//
// DESIGN
// The bench's steady rows (smoke/bench.py) send each event to holds/channels
// connections, one write a connection, at a rate where nothing coalesces;
// almost all of a server's CPU there is the kernel's TCP send, and on
// loopback the receiver's side of it, run in the sender's context. This
// program does that and nothing else: --holds TCP connections on 127.0.0.1
// (accepted here, the client ends in a child process that reads them all with
// epoll and discards what it reads, as a load driver would), then --rate
// events a second for --seconds, each one `send` of --bytes bytes to each
// connection of its channel (connections round robin over --channels). No
// parsing, no event loop library, no allocation on the way: its CPU a
// delivery (the sending process's CPU time over the sends) is the lowest a
// server that writes each delivery can have. Prints one JSON line.
//
//   build/send_floor --holds 1000 --channels 10 --rate 20 --seconds 10
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>
#include <vector>

namespace {

[[noreturn]] void die(const std::string& why) {
    std::fprintf(stderr, "send_floor: %s: %s\n", why.c_str(), std::strerror(errno));
    std::exit(2);
}

// This process's CPU time, to the nanosecond (the kernel's own account, the
// one /proc's utime and stime are read from for the servers).
double cpu_seconds() {
    timespec ts{};
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return double(ts.tv_sec) + double(ts.tv_nsec) / 1e9;
}

double now_s() {
    timespec ts{};
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return double(ts.tv_sec) + double(ts.tv_nsec) / 1e9;
}

long arg(int argc, char** argv, const char* name, long dflt, long lo, long hi) {
    for (int i = 1; i + 1 < argc; i += 2)
        if (std::strcmp(argv[i], name) == 0) {
            char* end = nullptr;
            long v = std::strtol(argv[i + 1], &end, 10);
            if (!end || *end || v < lo || v > hi) {
                std::fprintf(stderr, "send_floor: %s takes %ld..%ld\n", name, lo, hi);
                std::exit(2);
            }
            return v;
        }
    return dflt;
}

// The child: reads every connection until each is closed, then exits.
[[noreturn]] void reader(const std::vector<int>& fds) {
    int ep = epoll_create1(0);
    if (ep < 0) die("epoll_create1");
    for (int fd : fds) {
        epoll_event ev{};
        ev.events = EPOLLIN;
        ev.data.fd = fd;
        if (epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) != 0) die("epoll_ctl");
    }
    size_t open = fds.size();
    std::vector<epoll_event> ready(256);
    char buf[65536];
    while (open > 0) {
        int n = epoll_wait(ep, ready.data(), int(ready.size()), 30000);
        if (n <= 0) _exit(n == 0 ? 3 : 2);
        for (int i = 0; i < n; ++i) {
            ssize_t got = read(ready[size_t(i)].data.fd, buf, sizeof buf);
            if (got == 0) {
                close(ready[size_t(i)].data.fd);
                --open;
            }
        }
    }
    _exit(0);
}

}  // namespace

int main(int argc, char** argv) {
    for (int i = 1; i < argc; ++i)
        if (std::strcmp(argv[i], "--help") == 0) {
            std::puts(
                "usage: send_floor [--holds N] [--channels K] [--rate R] [--seconds S] [--bytes "
                "B]\n"
                "  each of R events a second for S seconds is one send of B bytes to each of\n"
                "  the N/K loopback TCP connections of its channel; prints this process's\n"
                "  CPU a delivery (defaults: 1000, 10, 20, 10, 90)");
            return 0;
        }
    const long holds = arg(argc, argv, "--holds", 1000, 1, 19000);
    const long channels = arg(argc, argv, "--channels", 10, 1, holds);
    const long rate = arg(argc, argv, "--rate", 20, 1, 100000);
    const long seconds = arg(argc, argv, "--seconds", 10, 1, 3600);
    const long bytes = arg(argc, argv, "--bytes", 90, 1, 65536);

    rlimit l{};
    if (getrlimit(RLIMIT_NOFILE, &l) == 0 && l.rlim_cur < l.rlim_max) {
        l.rlim_cur = l.rlim_max;
        setrlimit(RLIMIT_NOFILE, &l);
    }
    int lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof addr;
    if (lfd < 0 || bind(lfd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
        listen(lfd, 4096) != 0 || getsockname(lfd, reinterpret_cast<sockaddr*>(&addr), &len) != 0)
        die("listen on 127.0.0.1");
    timeval patience{30, 0};  // a child that failed to connect stops the accepts
    setsockopt(lfd, SOL_SOCKET, SO_RCVTIMEO, &patience, sizeof patience);
    // The child connects and reads; this process accepts and sends: each
    // keeps only its own ends (the fd limit is per process).
    pid_t child = fork();
    if (child < 0) die("fork");
    if (child == 0) {
        close(lfd);
        std::vector<int> clients;
        for (long i = 0; i < holds; ++i) {
            int c = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
            if (c < 0 || connect(c, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0)
                die("connect");
            clients.push_back(c);
        }
        reader(clients);
    }
    std::vector<int> servers;
    for (long i = 0; i < holds; ++i) {
        int s = accept4(lfd, nullptr, nullptr, SOCK_CLOEXEC);
        if (s < 0) die("accept");
        int one = 1;  // as a server's holds have it
        setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        servers.push_back(s);
    }
    close(lfd);

    const std::string frame(size_t(bytes), 'x');
    const long events = rate * seconds;
    long deliveries = 0, short_sends = 0;
    const double cpu0 = cpu_seconds(), t0 = now_s();
    for (long e = 0; e < events; ++e) {
        const double due = t0 + double(e) / double(rate);
        for (double left = due - now_s(); left > 0; left = due - now_s()) {
            timespec ts{time_t(left), long((left - double(time_t(left))) * 1e9)};
            nanosleep(&ts, nullptr);
        }
        for (long h = e % channels; h < holds; h += channels) {
            ssize_t n = send(servers[size_t(h)], frame.data(), frame.size(), MSG_NOSIGNAL);
            if (n != ssize_t(frame.size())) ++short_sends;
            ++deliveries;
        }
    }
    const double cpu = cpu_seconds() - cpu0, wall = now_s() - t0;
    for (int s : servers) close(s);
    int status = 0;
    waitpid(child, &status, 0);
    std::printf(
        "{\"label\": \"send-floor\", \"holds\": %ld, \"channels\": %ld, \"events\": %ld, "
        "\"deliveries\": %ld, \"short_sends\": %ld, \"bytes\": %ld, \"seconds\": %.3f, "
        "\"cpu_s\": %.4f, \"cpu_s_per_1m\": %.3f, \"reader_exit\": %d}\n",
        holds, channels, events, deliveries, short_sends, bytes, wall, cpu,
        deliveries ? cpu / double(deliveries) * 1e6 : 0.0,
        WIFEXITED(status) ? WEXITSTATUS(status) : -1);
    return short_sends == 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 1;
}
