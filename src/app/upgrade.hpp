// SIGUSR2 in one process (no --workers): the binary upgrade of
// proc/upgrade.hpp, wired to the loops. Loop 0's thread: the signal and the
// new process's word arrive there.
#pragma once
#include <event2/event.h>

#include "pool/metrics.hpp"
#include "proc/upgrade.hpp"
#include "server/loop_set.hpp"

namespace m0::app {

class UpgradeSignal {
  public:
    UpgradeSignal(server::LoopSet& loops, const Metrics& metrics);
    ~UpgradeSignal();
    UpgradeSignal(const UpgradeSignal&) = delete;
    UpgradeSignal& operator=(const UpgradeSignal&) = delete;

  private:
    static void on_signal(evutil_socket_t, short, void*);
    static void on_ready(evutil_socket_t, short, void*);
    void begin();
    void ended(bool served);

    server::LoopSet& loops_;
    const Metrics& metrics_;
    event* signal_ = nullptr;  // SIGUSR2
    event* ready_ = nullptr;   // the pipe from the new process, while one starts
    proc::Upgrade up_;         // loop 0's thread: the upgrade under way (pid -1: none)
};

}  // namespace m0::app
