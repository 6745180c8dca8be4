// The file descriptors a server process may open, and --max-connections
// sized by them. Main thread, at start.
#pragma once
#include <sys/resource.h>

#include "app/options.hpp"

namespace m0::app {

// File descriptors kept back from --max-connections (`o.loops` resolved).
rlim_t fd_reserve(const Options& o);
// Raises the soft RLIMIT_NOFILE to the hard limit; the soft limit in force.
rlim_t raise_fd_limit();
// --max-connections by the descriptors `limit` leaves (see fd_limit.cpp).
void size_connections(Options& o, rlim_t limit);

}  // namespace m0::app
