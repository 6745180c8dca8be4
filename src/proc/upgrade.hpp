// The binary upgrade of one process (no --workers): on SIGUSR2 the running
// m0serve starts its binary again, from the path it was started from (so a
// binary replaced there is the new one), with the same arguments, handing it
// its listening sockets as systemd's socket activation does (LISTEN_FDS,
// LISTEN_FDNAMES); the new process binds nothing, so no connection queued on
// a socket is lost. Once the new process serves, it says so on a pipe, and
// the old one drains as on SIGTERM (holds get their retry: hint and come back
// to the new one). A new process that exits before it serves (a binary that
// does not start, an application that does not import) ends the upgrade: the
// old one keeps serving, and says why. nginx's binary upgrade and gunicorn's
// USR2, in one step.
//
// Threads: remember_command() on the main thread at start; start_upgrade()
// and tell_upgrader_ready() on loop 0's thread.
#pragma once
#include <string>
#include <utility>
#include <vector>

namespace m0::proc {

// At start: the binary's path (/proc/self/exe as it resolves now) and the
// arguments, which an upgrade runs again.
void remember_command(int argc, char** argv);

// This process was started by an upgrade: its sockets are the old process's
// (read as socket activation), which it does not check against --listen.
bool upgrading();

// The new process serves: tells the old one (once; nothing without an
// upgrade), and names itself systemd's main process (NotifyAccess=all).
void tell_upgrader_ready();

struct Upgrade {
    int pid = -1;       // the new process
    int ready_fd = -1;  // one byte when it serves; EOF when it exited first
};

// Starts the new process with `sockets` (fd, FileDescriptorName: "admin" for
// the admin listener). False with `err` when it could not be started.
bool start_upgrade(const std::vector<std::pair<int, std::string>>& sockets, Upgrade& out,
                   std::string& err);

}  // namespace m0::proc
