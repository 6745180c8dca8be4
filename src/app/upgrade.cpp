#include "app/upgrade.hpp"

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "loop/log.hpp"
#include "proc/systemd.hpp"

namespace m0::app {

UpgradeSignal::UpgradeSignal(server::LoopSet& loops, const Metrics& metrics)
    : loops_(loops), metrics_(metrics) {
    signal_ = evsignal_new(loops_[0].loop.base(), SIGUSR2, on_signal, this);
    event_add(signal_, nullptr);
}

UpgradeSignal::~UpgradeSignal() {
    event_free(signal_);
    if (ready_) event_free(ready_);
    if (up_.ready_fd >= 0) ::close(up_.ready_fd);
}

void UpgradeSignal::on_signal(evutil_socket_t, short, void* arg) {
    static_cast<UpgradeSignal*>(arg)->begin();
}

void UpgradeSignal::begin() {
    if (up_.pid > 0) {
        M0_LOG(warn, "SIGUSR2: an upgrade is under way (process ", std::to_string(up_.pid),
               "): ignored");
        return;
    }
    if (loops_[0].server->shutting_down()) {
        M0_LOG(warn, "SIGUSR2: shutting down: no upgrade");
        return;
    }
    // Every loop's listeners, each socket once: the loops of one port share
    // it, or each has its own (SO_REUSEPORT), and each is handed over, so no
    // connection queued on any of them is lost.
    std::vector<std::pair<int, std::string>> sockets;
    std::set<std::pair<dev_t, ino_t>> seen;
    for (size_t i = 0; i < loops_.size(); ++i)
        for (const auto& [fd, name] : loops_[i].server->listener_fds()) {
            struct stat st {};
            if (::fstat(fd, &st) != 0 || !seen.insert({st.st_dev, st.st_ino}).second) continue;
            sockets.emplace_back(fd, name);
        }
    std::string err;
    if (!proc::start_upgrade(sockets, up_, err)) {
        M0_LOG(error, "SIGUSR2: the upgrade did not start: ", err, "; still serving");
        return;
    }
    M0_LOG(info, "SIGUSR2: upgrade: process ", std::to_string(up_.pid), " started on ",
           std::to_string(sockets.size()), " sockets; serving until it does");
    ready_ = event_new(loops_[0].loop.base(), up_.ready_fd, EV_READ, on_ready, this);
    event_add(ready_, nullptr);
}

void UpgradeSignal::on_ready(evutil_socket_t fd, short, void* arg) {
    char c = 0;
    ssize_t n = ::read(fd, &c, 1);
    static_cast<UpgradeSignal*>(arg)->ended(n == 1);
}

void UpgradeSignal::ended(bool served) {
    event_free(ready_);
    ready_ = nullptr;
    ::close(up_.ready_fd);
    const int pid = up_.pid;
    up_ = proc::Upgrade{};
    if (!served) {
        // It closed the pipe without a word: it exited (or is exiting).
        std::string how = "its status unknown";
        for (int i = 0; i < 100; ++i) {
            int status = 0;
            if (::waitpid(pid, &status, WNOHANG) == pid) {
                how = WIFEXITED(status) ? "exit code " + std::to_string(WEXITSTATUS(status))
                                        : "signal " + std::to_string(WTERMSIG(status));
                break;
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(1));
        }
        M0_LOG(error, "upgrade: process ", std::to_string(pid), " ended before it served (", how,
               "; its log says why): still serving");
        return;
    }
    M0_LOG(info, "upgrade: process ", std::to_string(pid), " serves: draining");
    M0_LOG(info, "shutting down: ", std::to_string(metrics_.connections_open.load()),
           " connections, ", std::to_string(metrics_.holds_open.load()), " holds");
    loops_.on_every_loop([](server::Server& s) {
        s.leave_listener_files();  // the new process's now
        s.shutdown();
    });
}

}  // namespace m0::app
