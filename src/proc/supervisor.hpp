// Supervisor: --workers N. A small parent that forks N worker processes, each
// serving the same listeners (SO_REUSEPORT: the kernel spreads connections
// over them), and supervises them.
//
// DESIGN
// The parent forks before anything else starts (no interpreter, no loop, no
// threads: fork is safe), then only waits: a worker that dies while the
// parent is not stopping is forked again with the same index (at most one
// restart a second per index); a worker that exits 2 (a start-up failure:
// a port in use, an app that does not import) stops them all, exit code 2;
// SIGTERM or SIGINT is sent on to every worker, and the parent exits once
// all have, 0 when every one exited 0; SIGHUP is sent on to every worker
// (each reloads its keys and reopens its access log), the parent stays. A
// worker starts with SIGHUP blocked: run() unblocks it once it handles it. A worker dies with its
// parent (PR_SET_PDEATHSIG). Workers share nothing but the listeners and the bus, which is why
// --realtime with several workers needs a shared bus. Threads: the parent has one; each worker is
// an ordinary m0serve process.
#pragma once
#include <functional>

namespace m0::proc {

// In the parent: runs `workers` children, each of which calls run(index)
// (index 0..workers-1) and exits with what it returns; returns the parent's
// exit code once they are stopped. Never returns in a child.
int supervise(int workers, const std::function<int(int index)>& run);

}  // namespace m0::proc
