// The listening sockets of a process. Main thread, before the loops run.
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "app/options.hpp"
#include "server/server.hpp"

namespace m0::app {

// The listeners: the sockets systemd or the --workers parent passed (named
// "admin": the admin listener, worker 0's; any other: a client one), or
// else every --listen and the --admin-listen. Exits 2 with one line when
// one cannot serve.
void bind_listeners(const Options& o, int worker, server::Server& server);

// A process's listening sockets: each with its name ("admin": the admin one).
using Sockets = std::vector<std::pair<int, std::string>>;

// --workers: the parent binds, before it forks, each --listen once per
// worker index (SO_REUSEPORT: the kernel spreads connections over the
// indexes) and the --admin-listen once; returns each index's sockets (the
// admin one in every set: bind_listeners keeps it in worker 0 only). A
// worker and the one a roll replaces it with accept on the same sockets, so
// what is queued on them when the old one stops accepting is the new one's.
// `admin_path` gets a unix admin socket's path (the parent removes it at
// exit). Exits 2 with one line when one cannot be bound.
std::vector<Sockets> bind_for_workers(Options& o, std::string& admin_path);

}  // namespace m0::app
