#include "app/fd_limit.hpp"

#include <algorithm>
#include <cstdint>
#include <string>

#include "loop/log.hpp"

namespace m0::app {

// File descriptors kept back from --max-connections: stdio, the listeners,
// admin connections, Python's imports and logs; per loop its event base,
// the eventfds of its completion ring, bus lane and inbox, and its own TCP
// listeners; and per pool thread a few for what its handlers open (a
// database connection, files). `o.loops` is resolved.
rlim_t fd_reserve(const Options& o) {
    return 64 + 8 * static_cast<rlim_t>(o.loops) +
           4 * static_cast<rlim_t>(o.blocking_threads + o.mojo_threads);
}

// Raises the soft RLIMIT_NOFILE to the hard limit (a refusal keeps the soft
// one). Returns the soft limit in force.
rlim_t raise_fd_limit() {
    rlimit rl{};
    if (::getrlimit(RLIMIT_NOFILE, &rl) != 0) return RLIM_INFINITY;
    if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < rl.rlim_max) {
        rlimit want = rl;
        want.rlim_cur = rl.rlim_max;
        if (::setrlimit(RLIMIT_NOFILE, &want) == 0) rl = want;
    }
    return rl.rlim_cur;
}

// Sizes --max-connections by the file descriptors the process may open: by
// default all of them but the reserve (and, with --realtime, never fewer than
// --max-holds: every hold is a connection); warns once when the chosen
// numbers need more descriptors than the limit gives. Past the limit the
// listener pauses on EMFILE rather than failing.
void size_connections(Options& o, rlim_t limit) {
    rlim_t reserve = fd_reserve(o);
    size_t room = limit == RLIM_INFINITY ? SIZE_MAX
                  : limit > reserve      ? static_cast<size_t>(limit - reserve)
                                         : 1;
    size_t holds = o.realtime ? static_cast<size_t>(o.max_holds) : 0;
    if (!o.max_connections_given) {
        o.server.max_connections = std::max(room, holds);
        if (holds > room)
            M0_LOG(warn, "--max-holds ", std::to_string(holds),
                   " needs more file descriptors than ", "the limit of ", std::to_string(limit),
                   " leaves (about ", std::to_string(room),
                   " connections): raise the hard limit (ulimit -Hn)");
    } else if (o.server.max_connections > room) {
        M0_LOG(warn, "--max-connections ", std::to_string(o.server.max_connections),
               " is more than the file descriptor limit of ", std::to_string(limit),
               " allows (about ", std::to_string(room), "): past it, accepting pauses");
    }
    M0_LOG(debug, "file descriptor limit ", std::to_string(limit), ": --max-connections ",
           std::to_string(o.server.max_connections));
}

}  // namespace m0::app
