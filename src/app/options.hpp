// The command line: the options every flag sets, and their parser (the
// flags themselves are rows of the flag table, flags.hpp).
//
// Threads: the main thread, before anything else starts.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "bus/history.hpp"
#include "bus/redis_bus.hpp"
#include "hold/hold.hpp"
#include "loop/log.hpp"
#include "server/server.hpp"
#include "server/tls.hpp"

namespace m0::app {

// A bad flag or combination: one line, the caller exits 2 with it.
class OptionError : public std::runtime_error {
  public:
    using std::runtime_error::runtime_error;
};

struct MountSpec {
    std::string prefix, spec;
    bool wsgi = false;
    std::string given;  // as the user wrote it, for messages: "APP config.wsgi"; empty: --mount
};

// Where to listen: HOST:PORT, or unix:PATH.
struct ListenSpec {
    std::string host;  // TCP
    uint16_t port = 0;
    std::string path;    // unix socket; set: not TCP
    bool plain = false;  // --listen-plain: no TLS even with --certfile
    std::string text() const {
        return path.empty() ? host + ":" + std::to_string(port) : "unix:" + path;
    }
};

struct Options {
    std::vector<ListenSpec> listens;        // --listen, repeatable; none given: 127.0.0.1:8000
    bool listens_given = false;             // a --listen was given (not the default)
    std::optional<ListenSpec> admin;        // --admin-listen
    server::UnixSocketOptions unix_socket;  // --unix-mode, --unix-owner
    // Sockets systemd passed (LISTEN_FDS): fd and its FileDescriptorName; when
    // any, they are the listeners and --listen / --admin-listen are not bound.
    std::vector<std::pair<int, std::string>> systemd_fds;
    // The sockets in systemd_fds were bound by the --workers parent (not systemd).
    bool listeners_from_parent = false;
    std::vector<MountSpec> mounts;
    size_t blocking_threads = 4, mojo_threads = 2;
    // --mojo-in-loop: a quick mount's requests run on the loop that read them.
    bool mojo_in_loop = false;
    // Per pool. As many as the default --max-connections: each connection has
    // at most one request in a pool, so at the defaults no live client is
    // refused for the queue, while a raised --max-connections (or a lowered
    // bound) cannot let the queue, and the wait behind it, grow without end.
    size_t max_queued = server::ServerConfig{}.max_connections;
    std::string chdir;
    std::vector<std::string> pythonpath;
    std::string virtualenv;  // --virtualenv DIR; empty: VIRTUAL_ENV's, if any
    // --python-switch-interval: sys.setswitchinterval before the apps load;
    // 0 leaves Python's own (0.005).
    double python_switch_interval = 0.02;
    log::Level level = log::Level::info;
    server::ServerConfig server{.hold_coalesce = server::kHoldCoalesce};
    bool realtime = false;
    std::optional<bus::RedisUrl> redis;  // --bus redis://...; none: in process
    int workers = 1;                     // --workers: more than 1, a supervising parent
    // --max-requests: a worker past this many requests is replaced by a roll
    // (0: never); --max-requests-jitter: up to this many more, drawn per worker.
    int64_t max_requests = 0, max_requests_jitter = 0;
    // --loops: event loop threads in each process; 0 (not given): the cores
    // this process may run on divided by --workers, at least 1.
    int loops = 0;
    int64_t max_holds = hold::kMaxHolds;
    size_t max_hold_channels = hold::kMaxChannels;
    size_t max_event_size = 0;  // 0: not given, derived from --hold-buffer-limit
    bus::HistoryLimits history;
    bool max_connections_given = false;
    bool check = false;  // --check
    std::string admin_key_file, grant_key_file;
    std::string bus_password_file;  // --bus-password-file: the Redis password's file
    std::string access_log;         // --access-log: a path, "-" for standard output; empty: off
    std::string certfile, keyfile;  // --certfile, --keyfile: TLS (both or neither)
    // --tls-ticket-rotation: seconds a session ticket key seals tickets.
    int64_t tls_ticket_rotation = server::TicketKeyring::kDefaultPeriod;
    // Not a flag: the session ticket keys, made by the process that read the
    // flags (before --workers forks), shared by every worker
    // (server/tls_tickets.hpp). Set with certfile.
    std::shared_ptr<server::TicketKeyring> tls_tickets;
};

// Parses argv[1..argc), after the keys of --config FILE when given, by the
// flag table (flags.hpp). `mojo_names` are the compiled-in mojo mounts a
// --mount may name. --help, --help-markdown and --version print and exit 0;
// anything wrong throws OptionError.
Options parse_options(int argc, char** argv, const std::vector<std::string>& mojo_names);

}  // namespace m0::app
