// The --workers supervisor: a real parent forked by the test, real workers,
// real signals (SIGHUP sent on, SIGTERM stopping everyone with exit 0).
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>

#include "proc/supervisor.hpp"

namespace {

volatile sig_atomic_t g_hup = 0;
volatile sig_atomic_t g_term = 0;
int g_report = -1;  // the write end of the test's pipe, in each worker

void on_hup(int) { g_hup = g_hup + 1; }
void on_term(int) { g_term = 1; }

// A worker: after `g_start_delay` µs (a worker importing its app), says
// "ready" then one byte a SIGHUP ('0' + index), and exits 0 on SIGTERM; at
// most 20 s.
useconds_t g_start_delay = 0;
int worker(int index) {
    usleep(g_start_delay);
    struct sigaction sa {};
    sigemptyset(&sa.sa_mask);
    sa.sa_handler = on_hup;
    sigaction(SIGHUP, &sa, nullptr);
    sa.sa_handler = on_term;
    sigaction(SIGTERM, &sa, nullptr);
    // As serve does: SIGHUP comes blocked, and is taken once handled.
    sigset_t hup;
    sigemptyset(&hup);
    sigaddset(&hup, SIGHUP);
    sigprocmask(SIG_UNBLOCK, &hup, nullptr);
    char r = static_cast<char>('a' + index);
    if (write(g_report, &r, 1) != 1) return 3;
    int seen = 0;
    for (int i = 0; i < 2000 && !g_term; ++i) {
        for (; seen < g_hup; ++seen) {
            char c = static_cast<char>('0' + index);
            if (write(g_report, &c, 1) != 1) return 3;
        }
        usleep(10000);
    }
    return g_term ? 0 : 4;
}

// Reads from `fd` until `want` bytes came or 10 s passed.
std::string read_bytes(int fd, size_t want) {
    std::string got;
    auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (got.size() < want && std::chrono::steady_clock::now() < until) {
        pollfd p{fd, POLLIN, 0};
        if (poll(&p, 1, 100) <= 0) continue;
        char buf[64];
        ssize_t n = read(fd, buf, sizeof buf);
        if (n <= 0) break;
        got.append(buf, static_cast<size_t>(n));
    }
    return got;
}

// The supervising parent's exit status, waited for up to 10 s; -1 if it runs on.
int wait_exit(pid_t pid) {
    for (int i = 0; i < 1000; ++i) {
        int status = 0;
        if (waitpid(pid, &status, WNOHANG) == pid) return status;
        usleep(10000);
    }
    kill(pid, SIGKILL);
    waitpid(pid, nullptr, 0);
    return -1;
}

}  // namespace

TEST_CASE(
    "supervisor: SIGHUP to the parent is sent on to every worker and the parent stays; SIGTERM "
    "stops them all, exit 0",
    "[proc][supervisor]") {
    int fds[2];
    REQUIRE(pipe2(fds, O_CLOEXEC) == 0);
    pid_t parent = fork();
    REQUIRE(parent >= 0);
    if (parent == 0) {
        close(fds[0]);
        g_report = fds[1];
        g_start_delay = 1000 * 1000;
        std::_Exit(m0::proc::supervise(2, worker));
    }
    close(fds[1]);
    // A SIGHUP while the workers start (the parent takes signals at once; the
    // workers are a second from handling SIGHUP): it waits for each, neither
    // killing a worker nor lost.
    usleep(300 * 1000);
    REQUIRE(kill(parent, SIGHUP) == 0);
    std::string first = read_bytes(fds[0], 4);
    INFO("while starting, the workers said '" << first << "'");
    REQUIRE(first.size() == 4);
    CHECK(first.find('0') != std::string::npos);
    CHECK(first.find('1') != std::string::npos);
    for (int round = 1; round <= 2; ++round) {
        REQUIRE(kill(parent, SIGHUP) == 0);
        std::string got = read_bytes(fds[0], 2);
        INFO("round " << round << ": the workers said '" << got << "'");
        CHECK(got.size() == 2);
        CHECK(got.find('0') != std::string::npos);
        CHECK(got.find('1') != std::string::npos);
        int status = 0;
        CHECK(waitpid(parent, &status, WNOHANG) == 0);  // the parent is still there
    }
    REQUIRE(kill(parent, SIGTERM) == 0);
    int status = wait_exit(parent);
    CHECK(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0);
    close(fds[0]);
}
