// m0serve: the command line, and the wiring of loop, pools, bus and mounts.
//
// Threads: the main thread parses flags, starts Python, imports the apps,
// then becomes the loop thread. The WSGI pool (--blocking-threads) and the
// mojo pool (--mojo-threads) reach the loop only through the completion ring
// and, with --realtime, the bus channel.
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "bus/channel.hpp"
#include "bus/redis_bus.hpp"
#include "grant/grant.hpp"
#include "loop/log.hpp"
#include "loop/loop.hpp"
#include "mojo/mojo_pool.hpp"
#include "proc/supervisor.hpp"
#include "server/server.hpp"
#include "wsgi/interpreter.hpp"
#include "wsgi/wsgi_pool.hpp"

namespace {

const char* kUsage =
    R"(usage: m0serve [options] [APP]

  APP                         a WSGI application at /, as gunicorn takes it:
                              module.path (its `application`) or module:callable;
                              the same as --mount /=module.path:application
  --listen HOST:PORT          where to serve (default 127.0.0.1:8000)
  --mount PREFIX=SPEC         repeatable; SPEC is module.path:callable (WSGI)
                              or a compiled-in mojo mount name (mojo)
  --blocking-threads N        WSGI pool threads (default 4)
  --mojo-threads N            mojo pool threads (default 2)
  --max-queued N              jobs waiting per pool; past it, 503 (default 1024)
  --chdir DIR                 change directory first; DIR (default: the current
                              directory) goes on sys.path
  --pythonpath DIR            repeatable; prepended to sys.path
  --log-level LEVEL           debug, info, warn, error (default info)
  --forwarded-allow-ips LIST  peers whose X-Forwarded-For / X-Forwarded-Proto set
                              REMOTE_ADDR and wsgi.url_scheme: addresses, CIDR
                              blocks, or * (default 127.0.0.1,::1; '' for none)
  --max-header-size BYTES     request head limit, 431 past it (default 16384)
  --max-headers N             header field lines per request, 431 past it (default 100)
  --max-body-size BYTES       request body limit, 413 past it (default 16777216)
  --header-timeout SECONDS    time to receive a request, 408 past it (default 10)
  --keepalive-timeout SECONDS idle keep-alive connections are closed (default 30)
  --write-timeout SECONDS     output that does not drain is cut (default 60)
  --request-timeout SECONDS   an application that has not answered is 504 (default 60)
  --max-connections N         past it, 503 and close (default: what the file
                              descriptor limit allows, at least --max-holds
                              with --realtime)
  --grace SECONDS             SIGTERM: time for in-flight requests (default 10)
  --workers N                 worker processes sharing the listeners (SO_REUSEPORT)
                              under a supervising parent (default 1: no parent);
                              with --realtime, needs --bus redis://...
  --realtime                  wire the bus channel: holds and publish
  --bus URL                   with --realtime: the bus. in-process (default), or
                              redis://HOST[:PORT][/DB] or redis+unix:///PATH[?db=N],
                              shared by every m0serve on that Redis
  --heartbeat SECONDS         comment heartbeat on idle holds (default 15)
  --hold-buffer-limit BYTES   a hold's unsent output limit (default 1048576)
  --hold-drain-timeout SECONDS
                              a hold over that limit this long is closed (default 5)
  --output-high-water BYTES   unsent output past which a connection gets no more:
                              streams wait, pipelined requests wait (default 262144)
  --max-event-size BYTES      larger events are refused at publish (default
                              262144, or a quarter of --hold-buffer-limit if
                              smaller); must be below --hold-buffer-limit
  --max-holds N               past it, a hold answer is 503 (default 10000)
  --max-hold-channels N       a hold naming more channels is 502 (default 64)
  --cors-origin ORIGIN        repeatable; a hold's head lets a page from ORIGIN
                              (scheme://host[:port]) read the stream, or any with *
  --cors-credentials          holds' heads add Access-Control-Allow-Credentials: true
  --history N                 events kept per channel for replay (default 64; 0: none)
  --history-seconds SECONDS   none kept longer (default 3600)
  --history-bytes BYTES       kept across all channels, oldest first out (default 67108864)
  --admin-listen HOST:PORT    admin listener: POST /publish, POST /close, GET /metrics
  --admin-key-file PATH       bearer key for admin POST /publish (or a JWT signed with it)
  --admin-open                admin POSTs need no key; only with a loopback --admin-listen
  --grant-key-file PATH       keys that verify grants (KID HEX per line)
  --check                     load everything (apps, keys, bus), bind the
                              listeners, print the configuration, exit 0 (or 2
                              with the reason) without serving
  --help, --version
)";

// How long start-up waits for Redis before serving without it.
constexpr double kRedisStartWait = 3.0;

[[noreturn]] void die(const std::string& why) {
    std::fprintf(stderr, "m0serve: %s\n", why.c_str());
    std::exit(2);
}

struct MountSpec {
    std::string prefix, spec;
    bool wsgi = false;
};

struct Options {
    std::string host = "127.0.0.1";
    uint16_t port = 8000;
    std::vector<MountSpec> mounts;
    size_t blocking_threads = 4, mojo_threads = 2;
    // Per pool. As many as the default --max-connections: each connection has
    // at most one request in a pool, so at the defaults no live client is
    // refused for the queue, while a raised --max-connections (or a lowered
    // bound) cannot let the queue, and the wait behind it, grow without end.
    size_t max_queued = 1024;
    std::string chdir;
    std::vector<std::string> pythonpath;
    m0::log::Level level = m0::log::Level::info;
    m0::server::ServerConfig server;
    bool realtime = false;
    std::optional<m0::bus::RedisUrl> redis;  // --bus redis://...; none: in process
    int workers = 1;                         // --workers: more than 1, a supervising parent
    int64_t max_holds = 10000;
    size_t max_hold_channels = 64;
    size_t max_event_size = 0;  // 0: not given, derived from --hold-buffer-limit
    m0::bus::HistoryLimits history;
    bool max_connections_given = false;
    bool check = false;  // --check
    std::string admin_host;
    uint16_t admin_port = 0;
    std::string admin_key_file, grant_key_file;
};

template <class T>
T parse_number(const std::string& flag, const std::string& v, T lo, T hi) {
    T n{};
    auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
    if (ec != std::errc() || p != v.data() + v.size() || n < lo || n > hi)
        die(flag + " wants a number from " + std::to_string(lo) + " to " + std::to_string(hi) +
            ", got '" + v + "'");
    return n;
}

double parse_seconds(const std::string& flag, const std::string& v) {
    char* end = nullptr;
    double d = std::strtod(v.c_str(), &end);
    if (v.empty() || *end != '\0' || !(d > 0) || d > 86400)
        die(flag + " wants seconds above 0 (at most 86400), got '" + v + "'");
    return d;
}

void parse_hostport(const std::string& flag, const std::string& v, std::string& host,
                    uint16_t& port) {
    size_t colon = v.rfind(':');
    if (colon == std::string::npos || colon == 0) die(flag + " wants HOST:PORT, got '" + v + "'");
    host = v.substr(0, colon);
    port = parse_number<uint16_t>(flag, v.substr(colon + 1), 0, 65535);
}

Options parse(int argc, char** argv) {
    Options o;
    std::optional<std::string> positional;    // APP
    std::string forwarded = "127.0.0.1,::1";  // gunicorn's default
    std::vector<std::string> cors_origins;    // --cors-origin
    bool cors_credentials = false;
    auto known_mojo = m0::mojo::mount_names();
    for (int i = 1; i < argc; ++i) {
        std::string a = argv[i];
        std::string v;
        size_t eq = a.find('=');
        if (a.starts_with("--") && eq != std::string::npos) {
            v = a.substr(eq + 1);
            a = a.substr(0, eq);
        }
        auto value = [&]() -> std::string {
            if (!v.empty() || a.size() < std::string(argv[i]).size()) return v;
            if (i + 1 >= argc) die(a + " needs a value");
            return argv[++i];
        };
        if (a == "--help" || a == "-h") {
            std::fputs(kUsage, stdout);
            std::exit(0);
        } else if (a == "--check") {
            o.check = true;
        } else if (a == "--version") {
            std::printf("m0serve %s\n", M0_VERSION);
            std::exit(0);
        } else if (a == "--listen") {
            parse_hostport(a, value(), o.host, o.port);
        } else if (a == "--mount") {
            std::string m = value();
            size_t e = m.find('=');
            if (e == std::string::npos || e == 0 || m[0] != '/' || e + 1 == m.size())
                die("--mount wants PREFIX=SPEC with PREFIX starting with '/', got '" + m + "'");
            MountSpec ms{m.substr(0, e), m.substr(e + 1), false};
            ms.wsgi = ms.spec.find(':') != std::string::npos;
            if (!ms.wsgi) {
                bool found = false;
                std::string names;
                for (const auto& n : known_mojo) {
                    found = found || n == ms.spec;
                    names += (names.empty() ? "" : ", ") + n;
                }
                if (!found)
                    die("--mount " + m + ": '" + ms.spec +
                        "' is neither module:callable nor a compiled-in mojo mount (" + names +
                        ")");
            }
            for (const auto& other : o.mounts)
                if (other.prefix == ms.prefix)
                    die("--mount: prefix " + ms.prefix + " is mounted twice");
            o.mounts.push_back(ms);
        } else if (a == "--blocking-threads") {
            o.blocking_threads = parse_number<size_t>(a, value(), 1, 1024);
        } else if (a == "--mojo-threads") {
            o.mojo_threads = parse_number<size_t>(a, value(), 1, 1024);
        } else if (a == "--max-queued") {
            o.max_queued = parse_number<size_t>(a, value(), 1, 10000000);
        } else if (a == "--chdir") {
            o.chdir = value();
        } else if (a == "--pythonpath") {
            o.pythonpath.push_back(value());
        } else if (a == "--forwarded-allow-ips") {
            forwarded = value();  // '' trusts none
        } else if (a == "--log-level") {
            std::string l = value();
            if (!m0::log::parse_level(l, o.level))
                die("--log-level wants debug, info, warn or error, got '" + l + "'");
        } else if (a == "--max-header-size") {
            o.server.limits.max_header = parse_number<size_t>(a, value(), 256, 1 << 24);
        } else if (a == "--max-headers") {
            o.server.limits.max_headers = parse_number<size_t>(a, value(), 1, 100000);
        } else if (a == "--max-body-size") {
            o.server.limits.max_body = parse_number<size_t>(a, value(), 0, size_t(1) << 40);
        } else if (a == "--header-timeout") {
            o.server.header_timeout = parse_seconds(a, value());
        } else if (a == "--keepalive-timeout") {
            o.server.keepalive_timeout = parse_seconds(a, value());
        } else if (a == "--write-timeout") {
            o.server.write_timeout = parse_seconds(a, value());
        } else if (a == "--request-timeout") {
            o.server.request_timeout = parse_seconds(a, value());
        } else if (a == "--max-connections") {
            o.server.max_connections = parse_number<size_t>(a, value(), 1, 1000000);
            o.max_connections_given = true;
        } else if (a == "--grace") {
            o.server.grace = parse_seconds(a, value());
        } else if (a == "--realtime") {
            o.realtime = true;
        } else if (a == "--workers") {
            o.workers = parse_number<int>(a, value(), 1, 64);
        } else if (a == "--bus") {
            std::string url = value(), err;
            if (url == "in-process") {
                o.redis.reset();
            } else if (!(o.redis = m0::bus::parse_redis_url(url, err))) {
                die(err);
            }
        } else if (a == "--heartbeat") {
            o.server.heartbeat = parse_seconds(a, value());
        } else if (a == "--hold-buffer-limit") {
            o.server.hold_buffer_limit = parse_number<size_t>(a, value(), 1024, size_t(1) << 32);
        } else if (a == "--hold-drain-timeout") {
            o.server.hold_drain_timeout = parse_seconds(a, value());
        } else if (a == "--output-high-water") {
            o.server.stream_high_water = parse_number<size_t>(a, value(), 4096, size_t(1) << 32);
        } else if (a == "--max-event-size") {
            o.max_event_size = parse_number<size_t>(a, value(), 1, size_t(1) << 32);
        } else if (a == "--history") {
            o.history.per_channel = parse_number<size_t>(a, value(), 0, 1000000);
        } else if (a == "--history-seconds") {
            o.history.max_age = parse_seconds(a, value());
        } else if (a == "--history-bytes") {
            o.history.max_bytes = parse_number<size_t>(a, value(), 0, size_t(1) << 40);
        } else if (a == "--max-holds") {
            o.max_holds = parse_number<int64_t>(a, value(), 0, 10000000);
        } else if (a == "--max-hold-channels") {
            o.max_hold_channels = parse_number<size_t>(a, value(), 1, 100000);
        } else if (a == "--admin-listen") {
            parse_hostport(a, value(), o.admin_host, o.admin_port);
        } else if (a == "--admin-key-file") {
            o.admin_key_file = value();
        } else if (a == "--admin-open") {
            o.server.admin_open = true;
        } else if (a == "--grant-key-file") {
            o.grant_key_file = value();
        } else if (a == "--cors-origin") {
            std::string origin = value(), err;
            if (!m0::http::CorsPolicy::make({origin}, false, err)) die("--cors-origin: " + err);
            cors_origins.push_back(origin);
        } else if (a == "--cors-credentials") {
            cors_credentials = true;
        } else if (!a.starts_with("-") && !a.empty()) {
            // gunicorn's positional APP: module (its `application`) or module:callable.
            if (positional) die("one APP only, got '" + *positional + "' and '" + a + "'");
            positional = a;
        } else {
            die("unknown option '" + std::string(argv[i]) + "' (see --help)");
        }
    }
    {
        std::string err;
        auto t = m0::http::TrustedProxies::parse(forwarded, err);
        if (!t) die("--forwarded-allow-ips: " + err);
        o.server.forwarded_allow = *t;
        auto cors = m0::http::CorsPolicy::make(cors_origins, cors_credentials, err);
        if (!cors) die("--cors-origin: " + err);
        o.server.cors = *cors;
    }
    if (positional) {
        MountSpec ms{"/", *positional, true};
        if (ms.spec.find(':') == std::string::npos) ms.spec += ":application";
        if (ms.spec.front() == ':' || ms.spec.back() == ':')
            die("APP wants module.path or module.path:callable, got '" + *positional + "'");
        for (const auto& other : o.mounts)
            if (other.prefix == "/")
                die("APP " + *positional + " is served at /, and --mount also mounts /");
        o.mounts.push_back(ms);
    }
    if (o.mounts.empty())
        die("nothing to serve: give an APP (module.path) or at least one --mount PREFIX=SPEC");
    if (o.server.admin_open) {
        if (o.admin_host.empty()) die("--admin-open needs --admin-listen");
        if (!o.admin_key_file.empty()) die("--admin-open and --admin-key-file exclude each other");
        if (!m0::http::loopback_only(o.admin_host))
            die("--admin-open needs a loopback --admin-listen (127.0.0.0/8 or ::1), got '" +
                o.admin_host + "'");
    }
    if (o.redis && !o.realtime) die("--bus " + o.redis->text + " needs --realtime");
    // Each worker has its own in-process bus: a hold would not hear another's publishes.
    if (o.workers > 1 && o.realtime && !o.redis)
        die("--workers " + std::to_string(o.workers) +
            " with --realtime needs a shared bus: --bus redis://HOST:PORT/DB");
    if (o.workers > 1 && o.port == 0)
        die("--workers needs a fixed --listen port (each worker binds it)");
    o.server.reuse_port = o.workers > 1;
    // One event must never fill a hold's buffer by itself.
    if (o.max_event_size == 0)
        o.max_event_size = std::min(m0::bus::kDefaultMaxEventSize, o.server.hold_buffer_limit / 4);
    else if (o.max_event_size >= o.server.hold_buffer_limit)
        die("--max-event-size " + std::to_string(o.max_event_size) +
            " must be below --hold-buffer-limit " + std::to_string(o.server.hold_buffer_limit));
    return o;
}

// The admin key of `path`; nullopt with `err` set when it cannot be read or
// is not one line of at least 16 characters.
std::optional<std::string> read_admin_key(const std::string& path, std::string& err) {
    std::ifstream f(path);
    if (!f) {
        err = "cannot read " + path;
        return std::nullopt;
    }
    std::stringstream ss;
    ss << f.rdbuf();
    std::string k = ss.str();
    while (!k.empty() && (k.back() == '\n' || k.back() == '\r' || k.back() == ' ')) k.pop_back();
    if (k.size() < 16 || k.find_first_of(" \t\r\n") != std::string::npos) {
        err = "the key must be one line of at least 16 characters";
        return std::nullopt;
    }
    return k;
}

// A path given relative to the caller's directory, made absolute before
// --chdir, so that SIGHUP reads the same file.
std::string absolute(const std::string& path) {
    if (path.empty() || path.front() == '/') return path;
    char cwd[4096];
    return getcwd(cwd, sizeof cwd) ? std::string(cwd) + "/" + path : path;
}

// File descriptors kept back from --max-connections: stdio, the event base,
// the eventfds of the completion ring and the bus, the listeners, admin
// connections, Python's imports and logs, and per pool thread a few for what
// its handlers open (a database connection, files).
rlim_t fd_reserve(const Options& o) {
    return 64 + 4 * static_cast<rlim_t>(o.blocking_threads + o.mojo_threads);
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

void on_signal(evutil_socket_t sig, short, void* arg) {
    auto* server = static_cast<m0::server::Server*>(arg);
    if (server->shutting_down()) {
        M0_LOG(warn, "second signal: stopping now");
        std::_Exit(sig == SIGINT ? 130 : 0);
    }
    M0_LOG(info, "signal ", sig == SIGINT ? "SIGINT" : "SIGTERM", ": stopping");
    server->shutdown();
}

// SIGHUP: the key files are read again. A file that no longer reads keeps
// the keys in use (logged), so a bad edit never stops grants or publishing.
struct Reload {
    const Options* o;
    m0::grant::SharedKeyRing* grant_keys;  // null without --grant-key-file
    m0::server::Server* server;
};

void on_sighup(evutil_socket_t, short, void* arg) {
    auto& r = *static_cast<Reload*>(arg);
    std::string err;
    if (r.grant_keys) {
        if (auto ring = m0::grant::KeyRing::load_file(r.o->grant_key_file, err)) {
            size_t n = ring->size();
            r.grant_keys->set(std::move(*ring));
            M0_LOG(info, "SIGHUP: --grant-key-file read again: ", std::to_string(n), " keys");
        } else {
            M0_LOG(error, "SIGHUP: --grant-key-file: ", err, "; the keys in use are kept");
        }
    }
    if (!r.o->admin_key_file.empty()) {
        if (auto k = read_admin_key(r.o->admin_key_file, err)) {
            r.server->set_admin_key(std::move(*k));
            M0_LOG(info, "SIGHUP: --admin-key-file read again");
        } else {
            M0_LOG(error, "SIGHUP: --admin-key-file: ", err, "; the key in use is kept");
        }
    }
}

std::string kib(size_t bytes) { return std::to_string(bytes / 1024) + " KiB"; }

std::string secs(double s) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%gs", s);
    return buf;
}

// The start-up block: what this process serves and with which limits, one
// line per part, so an operator reads the effective configuration in the log.
void log_configuration(const Options& o, const m0::server::Server& server) {
    std::string mounts;
    for (const auto& m : o.mounts)
        mounts += (mounts.empty() ? "" : ", ") + m.prefix + " -> " + m.spec +
                  (m.wsgi ? " (wsgi)" : " (mojo)");
    M0_LOG(info, "config: mounts ", mounts);
    M0_LOG(info, "config: ", std::to_string(o.workers), o.workers > 1 ? " workers" : " process",
           "; pools: wsgi ", std::to_string(o.blocking_threads), " threads, mojo ",
           std::to_string(o.mojo_threads), " threads, at most ", std::to_string(o.max_queued),
           " queued each");
    std::string admin = o.admin_host.empty()
                            ? "none"
                            : o.admin_host + ":" + std::to_string(server.bound_port(true)) +
                                  (o.server.admin_open          ? " (open: no key asked)"
                                   : o.server.admin_key.empty() ? " (no key: publish refused)"
                                                                : " (bearer key)");
    M0_LOG(info, "config: listeners: ", o.host, ":", std::to_string(server.bound_port(false)),
           "; admin ", admin, "; at most ", std::to_string(o.server.max_connections),
           " connections");
    M0_LOG(info, "config: requests: head ", kib(o.server.limits.max_header), " and ",
           std::to_string(o.server.limits.max_headers), " fields, body ",
           kib(o.server.limits.max_body), "; timeouts header ", secs(o.server.header_timeout),
           ", keep-alive ", secs(o.server.keepalive_timeout), ", write ",
           secs(o.server.write_timeout), ", request ", secs(o.server.request_timeout), ", grace ",
           secs(o.server.grace));
    if (!o.realtime) {
        M0_LOG(info, "config: realtime off (holds are answered as ordinary responses)");
        return;
    }
    M0_LOG(info, "config: realtime: ", o.redis ? "Redis bus " + o.redis->text : "in-process bus",
           "; history ", std::to_string(o.history.per_channel), " events per channel, ",
           secs(o.history.max_age), ", ", kib(o.history.max_bytes), "; heartbeat ",
           secs(o.server.heartbeat), "; at most ", std::to_string(o.max_holds), " holds of ",
           std::to_string(o.max_hold_channels), " channels; hold buffer ",
           kib(o.server.hold_buffer_limit), ", events up to ", kib(o.max_event_size));
    M0_LOG(info, "config: realtime: CORS on hold heads: ", o.server.cors.describe());
}

}  // namespace

static int serve(Options o, int worker);

int main(int argc, char** argv) {
    Options o = parse(argc, argv);
    m0::log::set_level(o.level);
    // --check loads and binds once, in this process, with no workers.
    if (o.workers > 1 && !o.check)
        return m0::proc::supervise(o.workers, [&o](int worker) { return serve(o, worker); });
    return serve(std::move(o), 0);
}

// One server process (the only one, or worker `worker` under --workers).
static int serve(Options o, int worker) {
    signal(SIGPIPE, SIG_IGN);
    size_connections(o, raise_fd_limit());
    // Key files are read before --chdir: relative paths mean the caller's directory.
    std::optional<m0::grant::SharedKeyRing> grant_keys;
    if (!o.grant_key_file.empty()) {
        std::string err;
        auto ring = m0::grant::KeyRing::load_file(o.grant_key_file, err);
        if (!ring) die("--grant-key-file: " + err);
        grant_keys.emplace(std::move(*ring));
    }
    o.grant_key_file = absolute(o.grant_key_file);
    o.admin_key_file = absolute(o.admin_key_file);
    if (!o.admin_key_file.empty()) {
        std::string err;
        auto k = read_admin_key(o.admin_key_file, err);
        if (!k) die("--admin-key-file: " + err);
        o.server.admin_key = *k;
    }

    if (!o.chdir.empty() && ::chdir(o.chdir.c_str()) != 0)
        die("--chdir " + o.chdir + ": " + std::strerror(errno));
    // As gunicorn does, the directory served from goes on sys.path: --chdir's,
    // else the current one, so `m0serve config.wsgi` imports from where it runs.
    char cwd[4096];
    if (getcwd(cwd, sizeof cwd)) o.chdir = cwd;

    m0::Loop loop;
    m0::CompletionRing ring;
    std::unique_ptr<m0::bus::Bus> bus;
    if (o.realtime && o.redis) {
        m0::bus::RedisBusOptions ro;
        ro.url = *o.redis;
        ro.max_event_size = o.max_event_size;
        ro.history = o.history.per_channel;
        auto redis = std::make_unique<m0::bus::RedisBus>(loop, ro);
        // Serving starts either way; publishes fail until Redis answers.
        if (!redis->start(kRedisStartWait))
            M0_LOG(warn, "redis bus ", o.redis->text, ": not reachable yet; serving anyway");
        bus = std::move(redis);
    } else if (o.realtime) {
        m0::bus::BusOptions bo;
        bo.max_event_size = o.max_event_size;
        // Ids keep increasing across a restart: the counter starts at the clock.
        bo.first_id = m0::bus::clock_seed();
        bo.history = o.history;
        bus = std::make_unique<m0::bus::BusChannel>(bo);
    }
    m0::Metrics metrics;
    m0::hold::Handoff handoff;
    handoff.ring = &ring;
    handoff.bus = bus.get();
    handoff.metrics = &metrics;
    handoff.max_holds = o.max_holds;
    handoff.max_channels = o.max_hold_channels;
    handoff.stream_high_water = o.server.stream_high_water;

    bool any_wsgi = false, any_mojo = false;
    for (const auto& m : o.mounts) (m.wsgi ? any_wsgi : any_mojo) = true;

    std::vector<PyObject*> apps(o.mounts.size(), nullptr);
    if (any_wsgi) {
        std::string err;
        m0::wsgi::PythonOptions po{o.pythonpath, o.chdir, M0_PYTHON_PACKAGE_DIR};
        if (const char* env = std::getenv("M0_PYTHON_PACKAGE_DIR")) po.package_dir = env;
        if (!m0::wsgi::start(po, bus.get(), err)) die(err);
        for (size_t i = 0; i < o.mounts.size(); ++i) {
            if (!o.mounts[i].wsgi) continue;
            apps[i] = m0::wsgi::load_app(o.mounts[i].spec, err);
            if (!apps[i]) die(err);
        }
        m0::wsgi::release_main_gil();
    }

    m0::mojo::MojoEnv env{grant_keys ? &*grant_keys : nullptr};
    std::unique_ptr<m0::wsgi::WsgiPool> wsgi_pool;
    std::unique_ptr<m0::mojo::MojoPool> mojo_pool;
    if (any_wsgi)
        wsgi_pool = std::make_unique<m0::wsgi::WsgiPool>(o.blocking_threads, handoff, o.max_queued);
    if (any_mojo)
        mojo_pool = std::make_unique<m0::mojo::MojoPool>(o.mojo_threads, handoff, o.max_queued);
    std::vector<std::unique_ptr<m0::mojo::Handler>> handlers;
    double grace_deadline = 0;

    {
        m0::server::Server server(loop, o.server, ring, bus.get(), metrics);
        if (wsgi_pool) server.add_pool(&wsgi_pool->pool());
        if (mojo_pool) server.add_pool(&mojo_pool->pool());
        for (size_t i = 0; i < o.mounts.size(); ++i) {
            if (o.mounts[i].wsgi) {
                PyObject* app = apps[i];
                auto* pool = wsgi_pool.get();
                server.add_mount(o.mounts[i].prefix,
                                 [pool, app](m0::SlotRef s, m0::http::Request&& r) {
                                     return pool->submit(app, s, std::move(r));
                                 });
            } else {
                handlers.push_back(m0::mojo::make_mount(o.mounts[i].spec, env));
                auto* handler = handlers.back().get();
                auto* pool = mojo_pool.get();
                server.add_mount(o.mounts[i].prefix,
                                 [pool, handler](m0::SlotRef s, m0::http::Request&& r) {
                                     return pool->submit(*handler, s, std::move(r));
                                 });
            }
        }
        std::string err;
        if (!server.listen(o.host, o.port, false, err)) die(err);
        // Under --workers the admin listener is worker 0's: /metrics is one
        // worker's, and a publish reaches every worker through the shared bus.
        if (worker == 0 && !o.admin_host.empty() &&
            !server.listen(o.admin_host, o.admin_port, true, err))
            die("--admin-listen: " + err);
        log_configuration(o, server);
        if (o.check) {
            // Everything loaded and bound: the configuration serves. Nothing
            // ran on the pools, so there is nothing to drain.
            std::printf("m0serve: configuration ok\n");
            std::fflush(nullptr);
            std::_Exit(0);
        }

        Reload reload{&o, grant_keys ? &*grant_keys : nullptr, &server};
        event* sighup = evsignal_new(loop.base(), SIGHUP, on_sighup, &reload);
        event_add(sighup, nullptr);
        event* sigterm = evsignal_new(loop.base(), SIGTERM, on_signal, &server);
        event* sigint = evsignal_new(loop.base(), SIGINT, on_signal, &server);
        event_add(sigterm, nullptr);
        event_add(sigint, nullptr);

        M0_LOG(info, "listening on ", o.host, ":", std::to_string(server.bound_port(false)),
               o.realtime ? " (realtime)" : "",
               o.workers > 1 ? " as worker " + std::to_string(worker) : "");
        if (worker == 0 && !o.admin_host.empty())
            M0_LOG(info, "admin listening on ", o.admin_host, ":",
                   std::to_string(server.bound_port(true)),
                   o.server.admin_open ? " (--admin-open: no key asked)" : "");
        loop.run();
        grace_deadline = server.shutting_down() ? server.shutdown_at() + o.server.grace
                                                : m0::monotonic_seconds();
        event_free(sigterm);
        event_free(sigint);
        event_free(sighup);
    }

    // The loop is done; what still runs on a pool thread may finish within
    // what is left of the grace period, not a moment past it.
    bool stuck = false;
    for (m0::Pool* p :
         {wsgi_pool ? &wsgi_pool->pool() : nullptr, mojo_pool ? &mojo_pool->pool() : nullptr}) {
        if (!p) continue;
        while (p->busy.load() > 0 && m0::monotonic_seconds() < grace_deadline)
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
        if (p->busy.load() > 0) stuck = true;
    }
    if (stuck) {
        M0_LOG(warn, "a pool thread is still busy after the grace period: exiting without joining");
        std::fflush(nullptr);
        std::_Exit(0);
    }
    mojo_pool.reset();
    wsgi_pool.reset();
    if (any_wsgi) {
        m0::wsgi::stop();
    }
    M0_LOG(info, "stopped");
    return 0;
}
