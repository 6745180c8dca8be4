#include "proc/systemd.hpp"

#include <systemd/sd-daemon.h>

#include <cstdlib>
#include <cstring>

namespace m0::proc {

bool systemd_sockets(std::vector<std::pair<int, std::string>>& out, std::string& err) {
    char** names = nullptr;
    int n = sd_listen_fds_with_names(1, &names);
    if (n < 0) {
        err = std::string("LISTEN_FDS: ") + std::strerror(-n);
        return false;
    }
    for (int i = 0; i < n; ++i) {
        std::string name = names && names[i] ? names[i] : "";
        // systemd names an unnamed socket "unknown".
        out.emplace_back(SD_LISTEN_FDS_START + i, name == "unknown" ? "" : name);
    }
    if (names) {
        for (int i = 0; names[i]; ++i) std::free(names[i]);
        std::free(names);
    }
    return true;
}

void notify_ready(const std::string& status) {
    sd_notify(0, ("READY=1\nSTATUS=" + status).c_str());
}

void notify_stopping(const std::string& status) {
    sd_notify(0, ("STOPPING=1\nSTATUS=" + status).c_str());
}

void notify_watchdog() { sd_notify(0, "WATCHDOG=1"); }

double watchdog_seconds() {
    uint64_t usec = 0;
    return sd_watchdog_enabled(0, &usec) > 0 ? static_cast<double>(usec) / 1e6 : 0;
}

}  // namespace m0::proc
