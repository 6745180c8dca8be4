// Supervisor: --workers N. A small parent that forks N worker processes and
// supervises them.
//
// DESIGN
// The caller binds the listeners (app::bind_for_workers: one SO_REUSEPORT
// socket per worker index, or systemd's) and the parent forks before
// anything else starts (no interpreter, no loop, no threads: fork is safe).
// The parent keeps its copies of the sockets open while it runs, so a roll's
// new worker accepts on the socket the old one of its index leaves, and what
// is queued there is not lost. Then the parent only waits, on signals
// (sigwaitinfo, no handler):
//   - a worker that dies while the parent is not stopping is forked again
//     with the same index (at most one restart a second per index); one that
//     exits 2 (a start-up failure: an app that does not import) stops them
//     all, exit code 2;
//   - SIGTERM or SIGINT is sent on to every worker (but those being
//     retired, which drain already), the parent closes its own copies of
//     the listeners, and exits once all workers have, 0 when every one
//     exited 0;
//   - SIGUSR1 is sent on to every worker (each reads its keys again and
//     reopens its access log: logrotate's postrotate);
//   - SIGHUP rolls the workers (systemd's ExecReload, as gunicorn): for each
//     index in turn, a new worker is forked (it imports the code as it is
//     on disk now), and once it says it serves (ready_signal(), sent when its
//     loops are about to run) the old one of that index is sent kRetireSignal:
//     it drains as on SIGTERM (holds get their retry hint) and stops
//     accepting on the admin listener too. A new worker that exits before it
//     serves ends the roll: the old workers serve on;
//   - replace_signal() from a worker (past --max-requests) rolls that one index.
// A worker starts with SIGHUP, SIGUSR1 and kRetireSignal blocked: run()
// unblocks them once it handles them. A worker dies with its parent
// (PR_SET_PDEATHSIG). Workers share nothing but the listeners and the bus,
// which is why --realtime with several workers needs a shared bus.
// Threads: the parent has one; each worker is an ordinary m0serve process.
#pragma once
#include <signal.h>

#include <functional>
#include <vector>

namespace m0::proc {

// Worker to parent: "I serve" (queued, with the sender's pid).
inline int ready_signal() { return SIGRTMIN; }
// Worker to parent: "replace me" (--max-requests).
inline int replace_signal() { return SIGRTMIN + 1; }
// Parent to worker: drain and exit, your replacement serves.
constexpr int kRetireSignal = SIGUSR2;

// In the parent: runs `workers` children, each of which calls run(index)
// (index 0..workers-1) and exits with what it returns; returns the parent's
// exit code once they are stopped. `listeners`: the parent's own copies of
// the listening sockets, closed when it stops. Never returns in a child.
int supervise(int workers, const std::vector<int>& listeners,
              const std::function<int(int index)>& run);

// In a worker of supervise(): tells the parent it serves (a roll then
// retires the worker it replaces). Nothing outside a worker.
void tell_parent_ready();
// In a worker of supervise(): asks the parent for a graceful replacement.
// Nothing outside a worker.
void ask_replacement();
// Whether this process is a worker of supervise().
bool supervised();

}  // namespace m0::proc
