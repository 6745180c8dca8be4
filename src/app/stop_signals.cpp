#include "app/stop_signals.hpp"

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <string>

#include "loop/log.hpp"
#include "pool/metrics.hpp"
#include "proc/supervisor.hpp"
#include "proc/systemd.hpp"
#include "server/loop_set.hpp"
#include "server/server.hpp"

namespace m0::app {
namespace {

// Written by the handler (any thread the signal lands on), read by the main
// thread once the loop's handlers replaced it: an atomic, not a volatile
// sig_atomic_t, because the threads differ (a lock-free atomic is safe in a
// handler).
std::atomic<int> g_signal{0};
static_assert(std::atomic<int>::is_always_lock_free);

void on_signal(int sig) {
    if (g_signal.load()) {
        static const char kSaid[] = "m0serve: second signal while starting: stopping now\n";
        [[maybe_unused]] ssize_t n = ::write(2, kSaid, sizeof kSaid - 1);
        std::_Exit(sig == SIGINT ? 130 : 0);
    }
    g_signal.store(sig);
}

}  // namespace

void on_stop_signal(evutil_socket_t sig, short, void* arg) {
    auto& stopping = *static_cast<Stopping*>(arg);
    auto& loops = *stopping.loops;
    if (sig == proc::kRetireSignal) {
        // --workers: a roll replaced this worker (its replacement serves on
        // the same sockets). It drains as on SIGTERM, and leaves the admin
        // listener to the replacement: a probe asks the one that stays.
        if (loops[0].server->shutting_down()) return;
        M0_LOG(info, "retired by the parent: draining");
        loops.on_every_loop([](m0::server::Server& s) { s.shutdown(); });
        loops[0].server->close_admin_listeners();
        return;
    }
    if (loops[0].server->shutting_down()) {
        M0_LOG(warn, "second signal: stopping now");
        std::_Exit(sig == SIGINT ? 130 : 0);
    }
    M0_LOG(info, "signal ", sig == SIGINT ? "SIGINT" : "SIGTERM", ": stopping");
    // Once for the process (each loop says its own part at debug).
    M0_LOG(info, "shutting down: ", std::to_string(stopping.metrics->connections_open.load()),
           " connections, ", std::to_string(stopping.metrics->holds_open.load()), " holds");
    proc::notify_stopping(sig == SIGINT ? "SIGINT: stopping" : "SIGTERM: stopping");
    loops.on_every_loop([](m0::server::Server& s) { s.shutdown(); });
}

void catch_stop_while_starting() {
    struct sigaction sa {};
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    for (int sig : {SIGTERM, SIGINT}) ::sigaction(sig, &sa, nullptr);
}

int stop_while_starting() { return g_signal.load(); }

}  // namespace m0::app
