// systemd's protocols through libsystemd: socket activation (LISTEN_FDS) and
// sd_notify (READY, STOPPING, WATCHDOG, STATUS). Without systemd (no
// LISTEN_FDS, no NOTIFY_SOCKET) every call does nothing.
//
// Threads: systemd_sockets() on the main thread before any fork; the
// notifications from the loop thread (a watchdog ping from there proves the
// loop turns).
#pragma once
#include <string>
#include <utility>
#include <vector>

namespace m0::proc {

// The listening sockets systemd passed this process, each with its
// FileDescriptorName ("" when unnamed); the LISTEN_* variables are unset so
// no child takes them again. False with `err` set when they cannot be read.
bool systemd_sockets(std::vector<std::pair<int, std::string>>& out, std::string& err);

// READY=1 with a STATUS line.
void notify_ready(const std::string& status);
// STOPPING=1 with a STATUS line.
void notify_stopping(const std::string& status);
void notify_watchdog();
// The watchdog interval systemd asked for (WATCHDOG_USEC), in seconds; 0: none.
double watchdog_seconds();

}  // namespace m0::proc
