// The --workers supervisor: a real parent forked by the test, real workers,
// real signals (SIGUSR1 sent on, SIGHUP rolling the workers, a worker asking
// for its replacement, SIGTERM stopping everyone with exit 0).
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

volatile sig_atomic_t g_usr1 = 0;
volatile sig_atomic_t g_term = 0;
volatile sig_atomic_t g_retire = 0;
int g_report = -1;  // the write end of the test's pipe, in each worker

void on_usr1(int) { g_usr1 = g_usr1 + 1; }
void on_term(int) { g_term = 1; }
void on_retire(int) { g_retire = 1; }

// The worker's code "on disk": a worker exits 2 at start (as die() does)
// while g_broken names a file that exists; worker g_ask_index asks for its
// replacement when it is the first to create g_asked.
std::string g_broken, g_asked;
int g_ask_index = -1;

// A worker: after `g_start_delay` µs (a worker importing its app), says it
// started ('a' + index) and tells the parent it serves; then one byte a
// SIGUSR1 ('0' + index); on the retire signal 'A' + index and exit 0; exits 0
// on SIGTERM; at most 20 s.
useconds_t g_start_delay = 0;
int worker(int index) {
    usleep(g_start_delay);
    if (!g_broken.empty() && access(g_broken.c_str(), F_OK) == 0) return 2;
    struct sigaction sa {};
    sigemptyset(&sa.sa_mask);
    sa.sa_handler = on_usr1;
    sigaction(SIGUSR1, &sa, nullptr);
    sa.sa_handler = on_term;
    sigaction(SIGTERM, &sa, nullptr);
    sa.sa_handler = on_retire;
    sigaction(m0::proc::kRetireSignal, &sa, nullptr);
    // As serve does: these come blocked, and are taken once handled.
    sigset_t handled;
    sigemptyset(&handled);
    for (int sig : {SIGHUP, SIGUSR1, m0::proc::kRetireSignal}) sigaddset(&handled, sig);
    sigprocmask(SIG_UNBLOCK, &handled, nullptr);
    char r = static_cast<char>('a' + index);
    if (write(g_report, &r, 1) != 1) return 3;
    m0::proc::tell_parent_ready();
    if (index == g_ask_index) {
        int fd = open(g_asked.c_str(), O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0600);
        if (fd >= 0) {
            close(fd);
            m0::proc::ask_replacement();
        }
    }
    int seen = 0;
    for (int i = 0; i < 2000 && !g_term && !g_retire; ++i) {
        for (; seen < g_usr1; ++seen) {
            char c = static_cast<char>('0' + index);
            if (write(g_report, &c, 1) != 1) return 3;
        }
        usleep(10000);
    }
    if (g_retire) {
        char c = static_cast<char>('A' + index);
        if (write(g_report, &c, 1) != 1) return 3;
    }
    return g_term || g_retire ? 0 : 4;
}

// A supervising parent of `workers` (forked by the test), in a process group
// of its own with its workers; `fds` gets the pipe the workers report on (the
// test's end in fds[0]).
pid_t start_parent(int workers, int fds[2]) {
    if (pipe2(fds, O_CLOEXEC) != 0) return -1;
    pid_t parent = fork();
    if (parent == 0) {
        setpgid(0, 0);
        close(fds[0]);
        g_report = fds[1];
        std::_Exit(m0::proc::supervise(workers, {}, worker));
    }
    if (parent > 0) setpgid(parent, parent);  // either side may run first
    close(fds[1]);
    return parent;
}

// Ends what a test started however it ends: a failed REQUIRE leaves the
// parent running, restarting workers that die writing to the closed pipe,
// for as long as the machine runs. SIGKILL to the whole group, then reaped.
struct Family {
    pid_t parent;
    int report;  // the test's end of the pipe
    ~Family() {
        if (parent > 0) {
            kill(-parent, SIGKILL);
            waitpid(parent, nullptr, 0);
        }
        if (report >= 0) close(report);
    }
};

// A temporary file name for this test run.
std::string temp_name(const char* what) {
    return "/tmp/m0-test-supervisor-" + std::to_string(getpid()) + "-" + what;
}

// Reads from `fd` until `want` bytes came or `ms` passed.
std::string read_bytes(int fd, size_t want, int ms = 10000) {
    std::string got;
    auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
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
    "supervisor: SIGUSR1 to the parent is sent on to every worker and the parent stays; SIGTERM "
    "stops them all, exit 0",
    "[proc][supervisor]") {
    int fds[2];
    g_start_delay = 1000 * 1000;
    pid_t parent = start_parent(2, fds);
    Family family{parent, fds[0]};
    g_start_delay = 0;
    REQUIRE(parent > 0);
    // A SIGUSR1 while the workers start (the parent takes signals at once; the
    // workers are a second from handling it): it waits for each, neither
    // killing a worker nor lost.
    usleep(300 * 1000);
    REQUIRE(kill(parent, SIGUSR1) == 0);
    std::string first = read_bytes(fds[0], 4);
    INFO("while starting, the workers said '" << first << "'");
    REQUIRE(first.size() == 4);
    CHECK(first.find('0') != std::string::npos);
    CHECK(first.find('1') != std::string::npos);
    for (int round = 1; round <= 2; ++round) {
        REQUIRE(kill(parent, SIGUSR1) == 0);
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
}

TEST_CASE(
    "supervisor: SIGHUP rolls the workers: each old one is retired only once its new one serves, "
    "one index after the other; a new one that cannot start ends the roll and the old ones serve "
    "on",
    "[proc][supervisor]") {
    int fds[2];
    g_broken = temp_name("broken");
    pid_t parent = start_parent(2, fds);
    Family family{parent, fds[0]};
    REQUIRE(parent > 0);
    std::string first = read_bytes(fds[0], 2);
    REQUIRE(first.size() == 2);
    g_start_delay = 200 * 1000;  // the new workers import for a while
    REQUIRE(kill(parent, SIGHUP) == 0);
    std::string got = read_bytes(fds[0], 4);
    INFO("during the roll the workers said '" << got << "'");
    REQUIRE(got.size() == 4);
    // New worker 0 started before old 0 retired, and new 1 only after new 0 served.
    CHECK(got.find('a') < got.find('A'));
    CHECK(got.find('b') < got.find('B'));
    CHECK(got.find('a') < got.find('b'));
    CHECK(read_bytes(fds[0], 1, 500).empty());  // nothing more: two workers serve
    // The new workers are the ones in place: they take SIGUSR1.
    REQUIRE(kill(parent, SIGUSR1) == 0);
    got = read_bytes(fds[0], 2);
    CHECK((got == "01" || got == "10"));

    // Broken code on disk: the roll's first new worker exits 2 before it
    // serves; the parent does not stop, and nobody is retired.
    int b = open(g_broken.c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
    REQUIRE(b >= 0);
    close(b);
    REQUIRE(kill(parent, SIGHUP) == 0);
    CHECK(read_bytes(fds[0], 1, 1500).empty());
    int status = 0;
    CHECK(waitpid(parent, &status, WNOHANG) == 0);
    REQUIRE(kill(parent, SIGUSR1) == 0);
    got = read_bytes(fds[0], 2);
    CHECK((got == "01" || got == "10"));  // the same two serve on
    unlink(g_broken.c_str());
    g_broken.clear();
    g_start_delay = 0;
    REQUIRE(kill(parent, SIGTERM) == 0);
    status = wait_exit(parent);
    CHECK(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0);
}

TEST_CASE(
    "supervisor: a worker that asks for its replacement (--max-requests) is retired once "
    "its new one serves; the other worker stays",
    "[proc][supervisor]") {
    int fds[2];
    g_ask_index = 1;
    g_asked = temp_name("asked");
    pid_t parent = start_parent(2, fds);
    Family family{parent, fds[0]};
    REQUIRE(parent > 0);
    // Both start; worker 1 asks; its new one starts, then the old one retires.
    std::string got = read_bytes(fds[0], 4);
    INFO("the workers said '" << got << "'");
    REQUIRE(got.size() == 4);
    CHECK(got.find('a') != std::string::npos);
    CHECK(got.find('A') == std::string::npos);
    size_t second_b = got.find('b', got.find('b') + 1);
    REQUIRE(second_b != std::string::npos);
    CHECK(second_b < got.find('B'));
    CHECK(read_bytes(fds[0], 1, 500).empty());  // once: the new worker 1 does not ask
    unlink(g_asked.c_str());
    g_ask_index = -1;
    REQUIRE(kill(parent, SIGTERM) == 0);
    int status = wait_exit(parent);
    CHECK(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0);
}
