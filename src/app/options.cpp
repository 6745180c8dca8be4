// The command line's parser. Main thread, before anything starts.
#include "app/options.hpp"

#include <grp.h>
#include <pwd.h>

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <cstdlib>

#include "app/config_file.hpp"
#include "http/forwarded.hpp"

namespace m0::app {

const char* const kUsage =
    R"(usage: m0serve [options] [APP]

  APP                         a WSGI application at /, as gunicorn takes it:
                              module.path (its `application`) or module:callable;
                              the same as --mount /=module.path:application
  --listen HOST:PORT|unix:PATH
                              where to serve; repeatable (default 127.0.0.1:8000)
  --unix-mode OCTAL           a unix: listener's file mode (default 0660)
  --unix-owner USER[:GROUP]   a unix: listener's file owner (default: the process's)
  --mount PREFIX=SPEC         repeatable; SPEC is module.path:callable (WSGI)
                              or a compiled-in mojo mount name (mojo)
  --blocking-threads N        WSGI pool threads (default 4)
  --mojo-threads N            mojo pool threads (default 2)
  --mojo-in-loop              the loop thread that read a request runs it in
                              place when its mojo mount declares itself quick
                              (no hand-off to the mojo pool and back)
  --max-queued N              jobs waiting per pool; past it, 503 (default 1024)
  --chdir DIR                 change directory first; DIR (default: the current
                              directory) goes on sys.path
  --pythonpath DIR            repeatable; prepended to sys.path
  --virtualenv DIR            the project's virtualenv (python3 -m venv): Python
                              runs as its bin/python3 (default: VIRTUAL_ENV)
  --python-switch-interval SECONDS
                              how long a Python thread runs before one waiting
                              for the GIL may take it (sys.setswitchinterval),
                              0 to 1; 0: Python's own 0.005 (default 0.02)
  --log-level LEVEL           debug, info, warn, error (default info)
  --access-log PATH           one line per request, combined log format plus
                              request time (and a hold's duration and events);
                              - for standard output; reopened on SIGHUP (default off)
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
  --loops N                   event loop threads per process (default: the cores
                              this process may run on, divided by --workers; 1
                              with --bus redis://, which spreads with --workers)
  --realtime                  wire the bus channel: holds and publish
  --bus URL                   with --realtime: the bus. in-process (default), or
                              redis://HOST[:PORT][/DB] or redis+unix:///PATH[?db=N],
                              shared by every m0serve on that Redis
  --heartbeat SECONDS         comment heartbeat on idle holds (default 15)
  --hold-buffer-limit BYTES   a hold's unsent output limit (default 1048576)
  --hold-drain-timeout SECONDS
                              a hold over that limit this long is closed (default 5)
  --hold-coalesce SECONDS     a hold flush this soon after the last one waits
                              for the rest of it, so events close together
                              leave in one send (default 0.001; 0: never)
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
  --admin-listen HOST:PORT|unix:PATH
                              admin listener: POST /publish, POST /close, GET /metrics
  --admin-key-file PATH       bearer key for admin POST /publish (or a JWT signed with it)
  --admin-open                admin POSTs need no key; only with a loopback --admin-listen
  --grant-key-file PATH       keys that verify grants (KID HEX per line)
  --check                     load everything (apps, keys, bus), bind the
                              listeners, print the configuration, exit 0 (or 2
                              with the reason) without serving
  --config FILE               a TOML file whose keys are these flags' names
                              (flags given here win); see README
  --help, --version
)";

namespace {

[[noreturn]] void fail(const std::string& why) { throw OptionError(why); }

template <class T>
T parse_number(const std::string& flag, const std::string& v, T lo, T hi) {
    T n{};
    auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
    if (ec != std::errc() || p != v.data() + v.size() || n < lo || n > hi)
        fail(flag + " wants a number from " + std::to_string(lo) + " to " + std::to_string(hi) +
             ", got '" + v + "'");
    return n;
}

double parse_seconds(const std::string& flag, const std::string& v) {
    char* end = nullptr;
    double d = std::strtod(v.c_str(), &end);
    if (v.empty() || *end != '\0' || !(d > 0) || d > 86400)
        fail(flag + " wants seconds above 0 (at most 86400), got '" + v + "'");
    return d;
}

// Seconds from 0 (off) to `most`, written `most_text` in the message.
double parse_short_seconds(const std::string& flag, const std::string& v, double most,
                           const char* most_text) {
    char* end = nullptr;
    double d = std::strtod(v.c_str(), &end);
    if (v.empty() || *end != '\0' || !(d >= 0) || d > most)
        fail(flag + " wants seconds from 0 to " + most_text + ", got '" + v + "'");
    return d;
}

void parse_hostport(const std::string& flag, const std::string& v, std::string& host,
                    uint16_t& port);

ListenSpec parse_listen(const std::string& flag, const std::string& v) {
    ListenSpec l;
    if (v.starts_with("unix:")) {
        l.path = v.substr(5);
        if (l.path.empty() || l.path.size() > 107)
            fail(flag + " unix:PATH wants a path of 1 to 107 bytes, got '" + v + "'");
        return l;
    }
    parse_hostport(flag, v, l.host, l.port);
    return l;
}

// USER[:GROUP], names or numbers, looked up now.
void parse_owner(const std::string& flag, const std::string& v, server::UnixSocketOptions& u) {
    size_t colon = v.find(':');
    std::string user = v.substr(0, colon);
    std::string grp = colon == std::string::npos ? "" : v.substr(colon + 1);
    if (user.empty() && grp.empty()) fail(flag + " wants USER[:GROUP], got '" + v + "'");
    if (!user.empty()) {
        if (const ::passwd* pw = ::getpwnam(user.c_str())) {
            u.uid = static_cast<int>(pw->pw_uid);
            if (grp.empty()) u.gid = static_cast<int>(pw->pw_gid);
        } else if (user.find_first_not_of("0123456789") == std::string::npos) {
            u.uid = parse_number<int>(flag, user, 0, 1 << 30);
        } else {
            fail(flag + ": no user '" + user + "'");
        }
    }
    if (!grp.empty()) {
        if (const ::group* gr = ::getgrnam(grp.c_str()))
            u.gid = static_cast<int>(gr->gr_gid);
        else if (grp.find_first_not_of("0123456789") == std::string::npos)
            u.gid = parse_number<int>(flag, grp, 0, 1 << 30);
        else
            fail(flag + ": no group '" + grp + "'");
    }
}

void parse_hostport(const std::string& flag, const std::string& v, std::string& host,
                    uint16_t& port) {
    size_t colon = v.rfind(':');
    if (colon == std::string::npos || colon == 0) fail(flag + " wants HOST:PORT, got '" + v + "'");
    host = v.substr(0, colon);
    port = parse_number<uint16_t>(flag, v.substr(colon + 1), 0, 65535);
}

}  // namespace

static Options parse_args(const std::vector<std::string>& args,
                          const std::vector<std::string>& known_mojo) {
    Options o;
    o.server.hold_coalesce = 0.001;           // the binary's default (ServerConfig's: off)
    std::optional<std::string> positional;    // APP
    std::string forwarded = "127.0.0.1,::1";  // gunicorn's default
    std::vector<std::string> cors_origins;    // --cors-origin
    bool cors_credentials = false;
    for (size_t i = 1; i < args.size(); ++i) {
        std::string a = args[i];
        std::string v;
        size_t eq = a.find('=');
        if (a.starts_with("--") && eq != std::string::npos) {
            v = a.substr(eq + 1);
            a = a.substr(0, eq);
        }
        auto value = [&]() -> std::string {
            if (!v.empty() || a.size() < args[i].size()) return v;
            if (i + 1 >= args.size()) fail(a + " needs a value");
            return args[++i];
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
            o.listens.push_back(parse_listen(a, value()));
        } else if (a == "--unix-mode") {
            std::string m = value();
            char* end = nullptr;
            unsigned long mode = std::strtoul(m.c_str(), &end, 8);
            if (m.empty() || *end != '\0' || mode > 0777)
                fail("--unix-mode wants an octal mode such as 0660, got '" + m + "'");
            o.unix_socket.mode = static_cast<unsigned>(mode);
        } else if (a == "--unix-owner") {
            parse_owner(a, value(), o.unix_socket);
        } else if (a == "--mount") {
            std::string m = value();
            size_t e = m.find('=');
            if (e == std::string::npos || e == 0 || m[0] != '/' || e + 1 == m.size())
                fail("--mount wants PREFIX=SPEC with PREFIX starting with '/', got '" + m + "'");
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
                    fail("--mount " + m + ": '" + ms.spec +
                         "' is neither module:callable nor a compiled-in mojo mount (" + names +
                         ")");
            }
            for (const auto& other : o.mounts)
                if (other.prefix == ms.prefix)
                    fail("--mount: prefix " + ms.prefix + " is mounted twice");
            o.mounts.push_back(ms);
        } else if (a == "--blocking-threads") {
            o.blocking_threads = parse_number<size_t>(a, value(), 1, 1024);
        } else if (a == "--mojo-threads") {
            o.mojo_threads = parse_number<size_t>(a, value(), 1, 1024);
        } else if (a == "--mojo-in-loop") {
            o.mojo_in_loop = true;
        } else if (a == "--max-queued") {
            o.max_queued = parse_number<size_t>(a, value(), 1, 10000000);
        } else if (a == "--chdir") {
            o.chdir = value();
        } else if (a == "--pythonpath") {
            o.pythonpath.push_back(value());
        } else if (a == "--virtualenv") {
            o.virtualenv = value();
            if (o.virtualenv.empty()) fail("--virtualenv wants a directory (a venv's)");
        } else if (a == "--forwarded-allow-ips") {
            forwarded = value();  // '' trusts none
        } else if (a == "--access-log") {
            o.access_log = value();
            if (o.access_log.empty()) fail("--access-log wants a path or -");
        } else if (a == "--log-level") {
            std::string l = value();
            if (!log::parse_level(l, o.level))
                fail("--log-level wants debug, info, warn or error, got '" + l + "'");
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
        } else if (a == "--loops") {
            o.loops = parse_number<int>(a, value(), 1, 256);
        } else if (a == "--workers") {
            o.workers = parse_number<int>(a, value(), 1, 64);
        } else if (a == "--bus") {
            std::string url = value(), err;
            if (url == "in-process") {
                o.redis.reset();
            } else if (!(o.redis = bus::parse_redis_url(url, err))) {
                fail(err);
            }
        } else if (a == "--heartbeat") {
            o.server.heartbeat = parse_seconds(a, value());
        } else if (a == "--hold-buffer-limit") {
            o.server.hold_buffer_limit = parse_number<size_t>(a, value(), 1024, size_t(1) << 32);
        } else if (a == "--hold-drain-timeout") {
            o.server.hold_drain_timeout = parse_seconds(a, value());
        } else if (a == "--python-switch-interval") {
            o.python_switch_interval = parse_short_seconds(a, value(), 1, "1");
        } else if (a == "--hold-coalesce") {
            o.server.hold_coalesce = parse_short_seconds(a, value(), 0.1, "0.1");
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
            o.admin = parse_listen(a, value());
        } else if (a == "--admin-key-file") {
            o.admin_key_file = value();
        } else if (a == "--admin-open") {
            o.server.admin_open = true;
        } else if (a == "--grant-key-file") {
            o.grant_key_file = value();
        } else if (a == "--cors-origin") {
            std::string origin = value(), err;
            if (!http::CorsPolicy::make({origin}, false, err)) fail("--cors-origin: " + err);
            cors_origins.push_back(origin);
        } else if (a == "--cors-credentials") {
            cors_credentials = true;
        } else if (!a.starts_with("-") && !a.empty()) {
            // gunicorn's positional APP: module (its `application`) or module:callable.
            if (positional) fail("one APP only, got '" + *positional + "' and '" + a + "'");
            positional = a;
        } else {
            fail("unknown option '" + args[i] + "' (see --help)");
        }
    }
    {
        std::string err;
        auto t = http::TrustedProxies::parse(forwarded, err);
        if (!t) fail("--forwarded-allow-ips: " + err);
        o.server.forwarded_allow = *t;
        auto cors = http::CorsPolicy::make(cors_origins, cors_credentials, err);
        if (!cors) fail("--cors-origin: " + err);
        o.server.cors = *cors;
    }
    if (positional) {
        MountSpec ms{"/", *positional, true};
        if (ms.spec.find(':') == std::string::npos) ms.spec += ":application";
        if (ms.spec.front() == ':' || ms.spec.back() == ':')
            fail("APP wants module.path or module.path:callable, got '" + *positional + "'");
        for (const auto& other : o.mounts)
            if (other.prefix == "/")
                fail("APP " + *positional + " is served at /, and --mount also mounts /");
        o.mounts.push_back(ms);
    }
    if (o.mounts.empty())
        fail("nothing to serve: give an APP (module.path) or at least one --mount PREFIX=SPEC");
    if (o.listens.empty()) o.listens.push_back({"127.0.0.1", 8000, ""});
    if (o.server.admin_open) {
        if (!o.admin) fail("--admin-open needs --admin-listen");
        if (!o.admin_key_file.empty()) fail("--admin-open and --admin-key-file exclude each other");
        // A unix socket is local, and its mode says who may connect.
        if (o.admin->path.empty() && !http::loopback_only(o.admin->host))
            fail(
                "--admin-open needs a loopback or unix: --admin-listen (127.0.0.0/8 or ::1), "
                "got '" +
                o.admin->host + "'");
    }
    if (o.redis && !o.realtime) fail("--bus " + o.redis->text + " needs --realtime");
    // A process is one Redis subscriber; the cores are spread with --workers.
    if (o.redis && o.loops > 1)
        fail("--loops " + std::to_string(o.loops) + " with --bus " + o.redis->text +
             ": a process on Redis runs one loop; use --workers N for more cores");
    // Each worker has its own in-process bus: a hold would not hear another's publishes.
    if (o.workers > 1 && o.realtime && !o.redis)
        fail("--workers " + std::to_string(o.workers) +
             " with --realtime needs a shared bus: --bus redis://HOST:PORT/DB");
    for (const auto& l : o.listens) {
        if (o.workers > 1 && l.path.empty() && l.port == 0)
            fail("--workers needs a fixed --listen port (each worker binds it)");
        if (o.workers > 1 && !l.path.empty())
            fail("--workers cannot share --listen " + l.text() +
                 " (a unix socket is bound once); use TCP or systemd socket activation");
    }
    o.server.reuse_port = o.workers > 1;
    // One event must never fill a hold's buffer by itself.
    if (o.max_event_size == 0)
        o.max_event_size = std::min(bus::kDefaultMaxEventSize, o.server.hold_buffer_limit / 4);
    else if (o.max_event_size >= o.server.hold_buffer_limit)
        fail("--max-event-size " + std::to_string(o.max_event_size) +
             " must be below --hold-buffer-limit " + std::to_string(o.server.hold_buffer_limit));
    return o;
}

const std::vector<Flag>& flags() {
    // Every flag parse_args takes but --help, --version, --check and --config
    // (test_options checks this list against the parser and the usage text).
    static const std::vector<Flag> table{
        {"listen", Flag::list},
        {"unix-mode", Flag::value},
        {"unix-owner", Flag::value},
        {"mount", Flag::list},
        {"blocking-threads", Flag::value},
        {"mojo-threads", Flag::value},
        {"mojo-in-loop", Flag::toggle},
        {"max-queued", Flag::value},
        {"chdir", Flag::value},
        {"pythonpath", Flag::list},
        {"virtualenv", Flag::value},
        {"python-switch-interval", Flag::value},
        {"log-level", Flag::value},
        {"access-log", Flag::value},
        {"forwarded-allow-ips", Flag::value},
        {"max-header-size", Flag::value},
        {"max-headers", Flag::value},
        {"max-body-size", Flag::value},
        {"header-timeout", Flag::value},
        {"keepalive-timeout", Flag::value},
        {"write-timeout", Flag::value},
        {"request-timeout", Flag::value},
        {"max-connections", Flag::value},
        {"grace", Flag::value},
        {"workers", Flag::value},
        {"loops", Flag::value},
        {"realtime", Flag::toggle},
        {"bus", Flag::value},
        {"heartbeat", Flag::value},
        {"hold-buffer-limit", Flag::value},
        {"hold-drain-timeout", Flag::value},
        {"hold-coalesce", Flag::value},
        {"output-high-water", Flag::value},
        {"max-event-size", Flag::value},
        {"max-holds", Flag::value},
        {"max-hold-channels", Flag::value},
        {"cors-origin", Flag::list},
        {"cors-credentials", Flag::toggle},
        {"history", Flag::value},
        {"history-seconds", Flag::value},
        {"history-bytes", Flag::value},
        {"admin-listen", Flag::value},
        {"admin-key-file", Flag::value},
        {"admin-open", Flag::toggle},
        {"grant-key-file", Flag::value},
    };
    return table;
}

const Flag* find_flag(std::string_view name) {
    for (const auto& f : flags())
        if (f.name == name) return &f;
    return nullptr;
}

Options parse_options(int argc, char** argv, const std::vector<std::string>& known_mojo) {
    std::vector<std::string> cli(argv, argv + argc);
    // --config FILE: its keys come first, so every flag given here wins.
    std::optional<std::string> config;
    for (size_t i = 1; i < cli.size(); ++i) {
        if (cli[i] == "--config" || cli[i].starts_with("--config=")) {
            if (config) fail("--config is given twice");
            if (cli[i] == "--config") {
                if (i + 1 >= cli.size()) fail("--config needs a value");
                config = cli[i + 1];
                cli.erase(cli.begin() + static_cast<long>(i),
                          cli.begin() + static_cast<long>(i) + 2);
            } else {
                config = cli[i].substr(9);
                cli.erase(cli.begin() + static_cast<long>(i));
            }
            --i;
        } else if (cli[i] == "--") {
            break;
        }
    }
    if (!config) return parse_args(cli, known_mojo);
    std::vector<std::string> from_file = config_args(*config, cli);
    std::vector<std::string> args{cli.front()};
    args.insert(args.end(), from_file.begin(), from_file.end());
    args.insert(args.end(), cli.begin() + 1, cli.end());
    return parse_args(args, known_mojo);
}

}  // namespace m0::app
