// One server process: the wiring of loop, pools, bus and mounts from the
// options, and the command line's entry point.
//
// Threads: the main thread parses the options, starts Python, imports the
// apps, then becomes the loop thread. The WSGI pool (--blocking-threads) and
// the mojo pool (--mojo-threads) reach the loop only through the completion
// ring and, with --realtime, the bus channel.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sched.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <memory>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "app/activation.hpp"
#include "app/app.hpp"
#include "app/fd_limit.hpp"
#include "app/listeners.hpp"
#include "app/options.hpp"
#include "app/stop_signals.hpp"
#include "app/upgrade.hpp"
#include "bus/channel.hpp"
#include "bus/redis_bus.hpp"
#include "grant/grant.hpp"
#include "http/forwarded.hpp"
#include "http/websocket.hpp"
#include "loop/inbox.hpp"
#include "loop/log.hpp"
#include "loop/loop.hpp"
#include "mojo/mojo_pool.hpp"
#include "mojo/registry.hpp"
#include "proc/supervisor.hpp"
#include "proc/systemd.hpp"
#include "server/access_log.hpp"
#include "server/codec.hpp"
#include "server/loop_set.hpp"
#include "server/server.hpp"
#include "server/tls.hpp"
#include "wsgi/django_check.hpp"
#include "wsgi/interpreter.hpp"
#include "wsgi/virtualenv.hpp"
#include "wsgi/wsgi_pool.hpp"

namespace m0::app {

namespace {

// How long start-up waits for Redis before serving without it.
constexpr double kRedisStartWait = 3.0;

[[noreturn]] void die(const std::string& why) {
    std::fprintf(stderr, "%s: %s\n", log::prefix().c_str(), why.c_str());
    std::exit(2);
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

// --loops by default: the cores this process may run on (its CPU affinity),
// shared among the --workers, at least 1.
int default_loops(int workers) {
    cpu_set_t set;
    CPU_ZERO(&set);
    int cores = ::sched_getaffinity(0, sizeof set, &set) == 0
                    ? CPU_COUNT(&set)
                    : static_cast<int>(std::thread::hardware_concurrency());
    return std::max(1, cores / std::max(1, workers));
}

// SIGHUP (without --workers) and SIGUSR1: the key files and the TLS
// certificate are read again, the access log reopened. A file that no longer reads keeps
// the keys in use (logged), so a bad edit never stops grants or publishing.
struct Reload {
    const Options* o;
    m0::grant::SharedKeyRing* grant_keys;  // null without --grant-key-file
    m0::server::LoopSet* loops;            // each loop's access log is reopened (logrotate)
};

void on_sighup(evutil_socket_t sig, short, void* arg) {
    auto& r = *static_cast<Reload*>(arg);
    const std::string name = sig == SIGUSR1 ? "SIGUSR1" : "SIGHUP";
    std::string err;
    if (r.grant_keys) {
        if (auto ring = m0::grant::KeyRing::load_file(r.o->grant_key_file, err)) {
            size_t n = ring->size();
            r.grant_keys->set(std::move(*ring));
            M0_LOG(info, name, ": --grant-key-file read again: ", std::to_string(n), " keys");
        } else {
            M0_LOG(error, name, ": --grant-key-file: ", err, "; the keys in use are kept");
        }
    }
    if (!r.o->access_log.empty() && r.o->access_log != "-") {
        // Each loop reopens its own; the first logs once every loop has.
        auto left = std::make_shared<std::atomic<size_t>>(r.loops->size());
        auto failed = std::make_shared<std::atomic<bool>>(false);
        m0::server::LoopUnit* first = &(*r.loops)[0];
        for (size_t i = 0; i < r.loops->size(); ++i) {
            m0::server::LoopUnit* unit = &(*r.loops)[i];
            auto reopen = [unit, first, left, failed, name] {
                std::string why;
                if (!unit->access_log.reopen(why)) {
                    failed->store(true);
                    M0_LOG(error, name, ": --access-log: ", why, "; the file in use is kept");
                }
                if (left->fetch_sub(1) == 1 && !failed->load())
                    (void)first->inbox.post(
                        [name] { M0_LOG(info, name, ": --access-log reopened"); });
            };
            if (i == 0)
                reopen();
            else
                (void)unit->inbox.post(reopen);
        }
    }
    if (r.o->server.tls) {
        // For new connections; open ones keep the certificate they began with.
        if (r.o->server.tls->reload(err))
            M0_LOG(info, name, ": --certfile and --keyfile read again (new connections)");
        else
            M0_LOG(error, name, ": ", err, "; the certificate in use is kept");
    }
    if (!r.o->admin_key_file.empty()) {
        if (auto k = read_admin_key(r.o->admin_key_file, err)) {
            (*r.loops)[0].server->set_admin_key(std::move(*k));
            M0_LOG(info, name, ": --admin-key-file read again");
        } else {
            M0_LOG(error, name, ": --admin-key-file: ", err, "; the key in use is kept");
        }
    }
}

// --max-requests-jitter: a number in [0, most], drawn once per worker, so
// that workers started together are not all replaced at the same moment.
uint64_t jitter(int64_t most) {
    if (most <= 0) return 0;
    std::random_device rd;
    return std::uniform_int_distribution<uint64_t>(0, static_cast<uint64_t>(most))(rd);
}

std::string kib(size_t bytes) { return std::to_string(bytes / 1024) + " KiB"; }

std::string secs(double s) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%gs", s);
    return buf;
}

// The project's virtualenv, checked before any worker starts: which one, and
// which of --virtualenv and VIRTUAL_ENV named it.
struct VenvUse {
    m0::wsgi::VirtualenvChoice choice;
    std::optional<m0::wsgi::Virtualenv> venv;  // none: Debian's /usr/bin/python3 as it is
};

// --virtualenv, else VIRTUAL_ENV, when there is Python to run: a folder that
// is not a venv, or one made for another Python, ends start-up (exit 2).
VenvUse check_virtualenv(const Options& o) {
    VenvUse use;
    bool any_wsgi = false;
    for (const auto& m : o.mounts) any_wsgi = any_wsgi || m.wsgi;
    if (!any_wsgi) return use;
    use.choice = m0::wsgi::choose_virtualenv(o.virtualenv, std::getenv("VIRTUAL_ENV"));
    if (use.choice.dir.empty()) return use;
    std::string err;
    use.venv =
        m0::wsgi::read_virtualenv(absolute(use.choice.dir), m0::wsgi::embedded_version(), err);
    if (!use.venv) die(use.choice.from + " " + use.choice.dir + " " + err);
    return use;
}

// The start-up block: what this process serves and with which limits, one
// line per part, so an operator reads the effective configuration in the log.
void log_configuration(const Options& o, size_t loops, const m0::server::Server& server,
                       const std::string& package_dir, const VenvUse& venv) {
    std::string mounts;
    bool any_wsgi = false;
    for (const auto& m : o.mounts) {
        mounts += (mounts.empty() ? "" : ", ") + m.prefix + " -> " + m.spec +
                  (m.wsgi ? " (wsgi)" : " (mojo)");
        any_wsgi = any_wsgi || m.wsgi;
    }
    M0_LOG(info, "config: mounts ", mounts);
    if (any_wsgi) {
        M0_LOG(info, "config: python package m0 from ", package_dir);
        if (venv.venv)
            M0_LOG(
                info, "config: python virtualenv ", venv.venv->dir, " (from ", venv.choice.from,
                venv.choice.unused.empty() ? "" : "; VIRTUAL_ENV " + venv.choice.unused + " unused",
                "), system site-packages ", venv.venv->system_site ? "included" : "excluded");
        else
            M0_LOG(info, "config: python virtualenv none (no --virtualenv, no VIRTUAL_ENV)");
        char interval[32];
        std::snprintf(interval, sizeof interval, "%g s", o.python_switch_interval);
        M0_LOG(info, "config: python switch interval ",
               o.python_switch_interval > 0 ? interval : "Python's own");
    }
    M0_LOG(info, "config: ", std::to_string(o.workers), o.workers > 1 ? " workers" : " process",
           ", ", std::to_string(loops), loops > 1 ? " loops" : " loop", "; pools: wsgi ",
           std::to_string(o.blocking_threads), " threads, mojo ", std::to_string(o.mojo_threads),
           " threads, at most ", std::to_string(o.max_queued), " queued each");
    auto joined = [](const std::vector<std::string>& v) {
        std::string out;
        for (const auto& s : v) out += (out.empty() ? "" : ", ") + s;
        return out;
    };
    std::string admin = server.listening(true).empty()
                            ? "none"
                            : joined(server.listening(true)) +
                                  (o.server.admin_open          ? " (open: no key asked)"
                                   : o.server.admin_key.empty() ? " (no key: publish refused)"
                                                                : " (bearer key)");
    M0_LOG(info, "config: listeners: ", joined(server.listening(false)),
           o.systemd_fds.empty()     ? ""
           : o.listeners_from_parent ? " (bound by the --workers parent)"
           : proc::upgrading()       ? " (handed over by the process this one upgrades)"
                                     : " (from systemd)",
           "; admin ", admin, "; at most ", std::to_string(o.server.max_connections),
           " connections");
    M0_LOG(info, "config: access log ", o.access_log.empty() ? "off" : o.access_log);
    M0_LOG(info, "config: requests: head ", kib(o.server.limits.max_header), " and ",
           std::to_string(o.server.limits.max_headers), " fields, body ",
           kib(o.server.limits.max_body), " (", kib(o.server.body_total()),
           " in all); timeouts header ", secs(o.server.header_timeout), ", body pause ",
           secs(o.server.body_timeout), ", keep-alive ", secs(o.server.keepalive_timeout),
           ", write ", secs(o.server.write_timeout), ", request ", secs(o.server.request_timeout),
           ", grace ", secs(o.server.grace));
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

// The folder holding the `m0` Python package: M0_PYTHON_PACKAGE_DIR from the
// environment; else, when this program runs as PREFIX/bin/NAME (an installed
// m0serve), PREFIX/share/m0serve/python if the package is there; else
// `built_in`, the folder the program was compiled to look in.
std::string find_package_dir(std::string built_in) {
    if (const char* env = std::getenv("M0_PYTHON_PACKAGE_DIR")) return env;
    char exe[4096];
    ssize_t n = ::readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0) return built_in;
    std::string path(exe, static_cast<size_t>(n));
    std::string bin = path.substr(0, path.rfind('/'));  // PREFIX/bin, or not
    constexpr std::string_view kBin = "/bin";
    if (bin.size() <= kBin.size() || bin.compare(bin.size() - kBin.size(), kBin.size(), kBin) != 0)
        return built_in;
    std::string installed = bin.substr(0, bin.size() - kBin.size()) + "/share/m0serve/python";
    return ::access((installed + "/m0/__init__.py").c_str(), R_OK) == 0 ? installed : built_in;
}

// One server process (the only one, or worker `worker` under --workers),
// making its mojo mounts from `registry` and finding the `m0` Python package
// in `package_dir`.
int serve(Options o, int worker, const m0::mojo::Registry& registry, const std::string& package_dir,
          const VenvUse& venv) {
    signal(SIGPIPE, SIG_IGN);
    catch_stop_while_starting();
    // A worker's lines say which worker wrote them (--check forks none).
    if (o.workers > 1 && !o.check) log::set_worker(worker);
    // --loops by default: one per core (shared by the workers); one on Redis.
    if (o.loops == 0) o.loops = o.redis ? 1 : default_loops(o.workers);
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
    if (o.access_log != "-") o.access_log = absolute(o.access_log);
    if (!o.access_log.empty()) {
        // Tried here, before the app loads, so a bad path fails at once; each
        // loop opens its own below.
        m0::server::AccessLog probe;
        std::string err;
        if (!probe.open(o.access_log, err)) die("--access-log: " + err);
    }
    if (!o.bus_password_file.empty()) {
        std::string err;
        if (!m0::bus::read_redis_password(*o.redis, o.bus_password_file, err))
            die("--bus-password-file: " + err);
    }
    o.admin_key_file = absolute(o.admin_key_file);
    if (!o.admin_key_file.empty()) {
        std::string err;
        auto k = read_admin_key(o.admin_key_file, err);
        if (!k) die("--admin-key-file: " + err);
        o.server.admin_key = *k;
    }
    if (!o.certfile.empty()) {
        std::string err;
        o.certfile = absolute(o.certfile);
        o.keyfile = absolute(o.keyfile);
        o.server.tls = m0::server::TlsContext::load(o.certfile, o.keyfile, o.tls_tickets, err);
        if (!o.server.tls) die(err);
    }

    if (!o.chdir.empty() && ::chdir(o.chdir.c_str()) != 0)
        die("--chdir " + o.chdir + ": " + std::strerror(errno));
    // As gunicorn does, the directory served from goes on sys.path: --chdir's,
    // else the current one, so `m0serve config.wsgi` imports from where it runs.
    char cwd[4096];
    if (getcwd(cwd, sizeof cwd)) o.chdir = cwd;

    // The loops (--loops): unit 0 runs on this thread, the others on their own.
    const size_t nloops = static_cast<size_t>(o.loops);
    o.server.reuse_port = o.server.reuse_port || nloops > 1;
    std::unique_ptr<m0::bus::BusChannel> hub;  // the in-process bus: one lane per loop
    m0::server::LoopSet loops(nloops);
    if (o.realtime && o.redis) {
        // One loop (options.cpp): the process is one Redis subscriber.
        m0::bus::RedisBusOptions ro;
        ro.url = *o.redis;
        ro.max_event_size = o.max_event_size;
        ro.codec = m0::server::codec();
        ro.history = o.history.per_channel;
        auto redis = std::make_unique<m0::bus::RedisBus>(loops[0].loop, ro);
        // Serving starts either way; publishes fail until Redis answers.
        if (!redis->start(kRedisStartWait)) {
            // A Redis that refuses this client (a wrong password) will not
            // change its mind: a start-up error. One not there yet is waited for.
            if (!redis->refusal().empty())
                die("redis bus " + o.redis->text + ": " + redis->refusal() +
                    " (see the user and password in --bus, or --bus-password-file)");
            M0_LOG(warn, "redis bus ", o.redis->text, ": not reachable yet; serving anyway");
        }
        loops[0].own_bus = std::move(redis);
        loops[0].bus = loops[0].own_bus.get();
    } else if (o.realtime) {
        m0::bus::BusOptions bo;
        bo.max_event_size = o.max_event_size;
        bo.codec = m0::server::codec();
        // Ids keep increasing across a restart: the counter starts at the clock.
        bo.first_id = m0::bus::clock_seed();
        bo.history = o.history;
        hub = std::make_unique<m0::bus::BusChannel>(bo, nloops);
        for (size_t i = 0; i < nloops; ++i) loops[i].bus = &hub->lane(i);
    }
    m0::Metrics metrics;
    metrics.holds_open.set_limit(o.max_holds);
    for (size_t i = 0; i < nloops; ++i) {
        m0::hold::Handoff& h = loops[i].handoff;
        h.ring = &loops[i].ring;
        h.bus = loops[i].bus;
        h.metrics = &metrics;
        h.max_channels = o.max_hold_channels;
        h.stream_high_water = o.server.stream_high_water;
    }
    m0::bus::Bus* bus = loops[0].bus;  // publishes from Python and the admin API

    bool any_wsgi = false, any_mojo = false;
    for (const auto& m : o.mounts) (m.wsgi ? any_wsgi : any_mojo) = true;

    std::vector<PyObject*> apps(o.mounts.size(), nullptr);
    if (any_wsgi) {
        std::string err;
        m0::wsgi::PythonOptions po{o.pythonpath, o.chdir, package_dir, o.python_switch_interval,
                                   venv.venv ? venv.venv->python : ""};
        if (!m0::wsgi::start(po, bus, err)) die(err);
        for (size_t i = 0; i < o.mounts.size(); ++i) {
            if (!o.mounts[i].wsgi) continue;
            apps[i] = m0::wsgi::load_app(o.mounts[i].spec, err, o.mounts[i].given);
            if (!apps[i]) die(err);
        }
        // Django imports the URLconf at the first request: --check asks now.
        if (o.check && m0::wsgi::check_django(err) == m0::wsgi::DjangoCheck::failed) die(err);
        m0::wsgi::release_main_gil();
    }

    m0::mojo::MojoEnv env{grant_keys ? &*grant_keys : nullptr};
    std::unique_ptr<m0::wsgi::WsgiPool> wsgi_pool;
    std::unique_ptr<m0::mojo::MojoPool> mojo_pool;
    if (any_wsgi)
        wsgi_pool = std::make_unique<m0::wsgi::WsgiPool>(o.blocking_threads, loops[0].handoff,
                                                         o.max_queued);
    if (any_mojo)
        mojo_pool =
            std::make_unique<m0::mojo::MojoPool>(o.mojo_threads, loops[0].handoff, o.max_queued);
    std::vector<std::unique_ptr<m0::mojo::Handler>> handlers;
    for (const auto& m : o.mounts) {
        handlers.push_back(m.wsgi ? nullptr : registry.make(m.spec, env));
        // A mount's native WebSocket routes are served as --ws-over-http ones.
        if (handlers.back() && o.realtime)
            for (const auto& p : handlers.back()->ws_paths())
                o.server.ws.over_http.push_back((m.prefix == "/" ? "" : m.prefix) + p);
    }
    double grace_deadline = 0;

    {
        // One budget of buffered request bodies for the process's loops.
        o.server.body_budget = std::make_shared<m0::http::BodyBudget>(o.server.body_total());
        for (size_t u = 0; u < nloops; ++u) {
            m0::server::LoopUnit& unit = loops[u];
            unit.server = std::make_unique<m0::server::Server>(unit.loop, o.server, unit.ring,
                                                               unit.bus, metrics);
            auto& server = *unit.server;
            if (!o.access_log.empty()) {
                std::string err;
                if (!unit.access_log.open(o.access_log, err)) die("--access-log: " + err);
                server.set_access_log(&unit.access_log);
            }
            if (wsgi_pool) server.add_pool(&wsgi_pool->pool());
            if (mojo_pool) server.add_pool(&mojo_pool->pool());
            const m0::hold::Handoff* via = &unit.handoff;
            for (size_t i = 0; i < o.mounts.size(); ++i) {
                if (o.mounts[i].wsgi) {
                    PyObject* app = apps[i];
                    auto* pool = wsgi_pool.get();
                    server.add_mount(o.mounts[i].prefix,
                                     [pool, app, via](m0::SlotRef s, m0::http::Request&& r) {
                                         return pool->submit(app, s, std::move(r), via);
                                     });
                } else {
                    auto* handler = handlers[i].get();
                    auto* pool = mojo_pool.get();
                    const bool here = handler->quick() && o.mojo_in_loop;
                    // A mojo mount's CORS preflights are the server's (add_mount).
                    server.add_mount(
                        o.mounts[i].prefix,
                        [pool, handler, via, here, u](m0::SlotRef s, m0::http::Request&& r) {
                            return here ? pool->run_here(*handler, s, std::move(r), via, u)
                                        : pool->submit(*handler, s, std::move(r), via);
                        },
                        true);
                }
            }
        }
        m0::server::Server& server = *loops[0].server;
        bind_listeners(o, worker, server);
        if (std::string err; !loops.join(err)) die("--loops: " + err);
        log_configuration(o, nloops, server, package_dir, venv);
        if (o.check) {
            // Everything loaded and bound: the configuration serves. Nothing
            // ran on the pools, so there is nothing to drain.
            std::printf("m0serve: configuration ok\n");
            std::fflush(nullptr);
            std::_Exit(0);
        }

        Reload reload{&o, grant_keys ? &*grant_keys : nullptr, &loops};
        event* sighup = evsignal_new(loops[0].loop.base(), SIGHUP, on_sighup, &reload);
        event* sigusr1 = evsignal_new(loops[0].loop.base(), SIGUSR1, on_sighup, &reload);
        event_add(sighup, nullptr);
        event_add(sigusr1, nullptr);
        Stopping stopping{&loops, &metrics};
        event* sigterm = evsignal_new(loops[0].loop.base(), SIGTERM, on_stop_signal, &stopping);
        event* sigint = evsignal_new(loops[0].loop.base(), SIGINT, on_stop_signal, &stopping);
        event_add(sigterm, nullptr);
        event_add(sigint, nullptr);
        // One that came while starting is taken at the loop's first turn.
        if (int sig = stop_while_starting())
            event_active(sig == SIGINT ? sigint : sigterm, EV_SIGNAL, 1);
        // A worker of --workers: its parent retires it once a roll's
        // replacement serves. Not in one process (the signal's default stays).
        event* retire = nullptr;
        if (proc::supervised()) {
            retire =
                evsignal_new(loops[0].loop.base(), proc::kRetireSignal, on_stop_signal, &stopping);
            event_add(retire, nullptr);
        }
        // A worker of --workers starts with these blocked (proc::supervise):
        // one sent while it started is taken now. The threads started before
        // keep them blocked, so they come to this one.
        sigset_t handled;
        sigemptyset(&handled);
        for (int sig : {SIGHUP, SIGUSR1, proc::kRetireSignal}) sigaddset(&handled, sig);
        pthread_sigmask(SIG_UNBLOCK, &handled, nullptr);
        // One process: SIGUSR2 upgrades the binary (with --workers the
        // parent's roll replaces the workers instead).
        std::unique_ptr<UpgradeSignal> upgrade;
        if (!proc::supervised()) upgrade = std::make_unique<UpgradeSignal>(loops, metrics);

        for (const auto& l : server.listening(false))
            M0_LOG(info, "listening on ", l, o.realtime ? " (realtime)" : "",
                   o.workers > 1 ? " as worker " + std::to_string(worker) : "",
                   nloops > 1 ? " on " + std::to_string(nloops) + " loops" : "");
        for (const auto& l : server.listening(true))
            M0_LOG(info, "admin listening on ", l,
                   o.server.admin_open ? " (--admin-open: no key asked)" : "");
        // systemd: ready once every listener accepts; the watchdog is pinged
        // from the first loop while every loop turns.
        if (worker == 0)
            proc::notify_ready(
                "serving on " + server.listening(false).front() +
                (o.workers > 1 ? " with " + std::to_string(o.workers) + " workers" : ""));
        // --workers: the parent may now retire the worker this one replaces;
        // an upgrade: the old process may now drain.
        proc::tell_parent_ready();
        proc::tell_upgrader_ready();
        // --max-requests: past its count (plus its jitter), the worker asks
        // the parent for a graceful replacement, once; counted on loop 0's
        // thread ten times a second from the shared counters.
        std::unique_ptr<Timer> max_requests;
        if (o.max_requests > 0) {
            uint64_t limit = static_cast<uint64_t>(o.max_requests) + jitter(o.max_requests_jitter);
            M0_LOG(debug, "--max-requests: replaced after ", std::to_string(limit), " requests");
            max_requests = std::make_unique<Timer>(
                loops[0].loop,
                [&metrics, &loops, &max_requests, limit] {
                    if (metrics.requests_total.load() < limit || loops[0].server->shutting_down())
                        return;
                    M0_LOG(info, "--max-requests: ", std::to_string(limit),
                           " requests served: asking for a replacement");
                    proc::ask_replacement();
                    max_requests->stop();
                },
                true);
            max_requests->start(0.1);
        }
        // The TLS ticket keys step on time with no handshake to step them.
        std::unique_ptr<Timer> tickets;
        if (o.tls_tickets) {
            tickets = std::make_unique<Timer>(
                loops[0].loop, [&o] { o.tls_tickets->step(o.tls_tickets->clock()); }, true);
            tickets->start(std::min<double>(static_cast<double>(o.tls_ticket_rotation), 60));
        }
        std::unique_ptr<Timer> watchdog;
        if (double every = proc::watchdog_seconds(); every > 0) {
            // Pinged while every loop turns: one stuck loop stops the pings.
            loops.watch_turns(every / 4);
            watchdog = std::make_unique<Timer>(
                loops[0].loop,
                [&loops, every] {
                    if (loops.all_turned(every / 2)) proc::notify_watchdog();
                },
                true);
            watchdog->start(every / 2);
        }
        loops.run();
        grace_deadline = m0::monotonic_seconds();
        for (size_t u = 0; u < nloops; ++u)
            if (loops[u].server->shutting_down())
                grace_deadline =
                    std::max(grace_deadline, loops[u].server->shutdown_at() + o.server.grace);
        event_free(sigterm);
        event_free(sigint);
        event_free(sighup);
        event_free(sigusr1);
        if (retire) event_free(retire);
        upgrade.reset();
        watchdog.reset();
        tickets.reset();
        max_requests.reset();
        loops.close_servers();
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

}  // namespace

int run(int argc, char** argv, const mojo::Registry& mounts, std::string python_package_dir) {
    // Before the options: a program that could not tell its mounts apart
    // must not start, whatever its command line.
    if (!mounts.duplicates().empty())
        die("mojo mount name '" + mounts.duplicates().front() +
            "' is registered twice: each mount type needs a name of its own");
    Options o;
    try {
        o = parse_options(argc, argv, mounts.names());
    } catch (const OptionError& e) {
        die(e.what());
    }
    log::set_level(o.level);
    proc::remember_command(argc, argv);
    // Socket activation is read before any fork: LISTEN_PID names this process.
    if (std::string err; !proc::systemd_sockets(o.systemd_fds, err)) die(err);
    // An upgrade's sockets are the old process's own, bound from these flags
    // (a port 0 among them is now a port).
    if (std::string why = activation_conflict(o); !why.empty() && !proc::upgrading()) die(why);
    if (!o.systemd_fds.empty() && o.check) o.systemd_fds.clear();  // --check binds its own
    std::string package_dir = find_package_dir(std::move(python_package_dir));
    const VenvUse venv = check_virtualenv(o);
    // Before anything binds: with SO_REUSEPORT (several loops or workers) a
    // port another process serves would be joined, not refused.
    if (o.systemd_fds.empty())
        for (const auto& l : o.listens)
            if (std::string err; l.path.empty() && !server::check_port_free(l.host, l.port, err))
                die(err);
    // OpenSSL's SHA-1 for WebSocket handshakes, loaded before any fork: the
    // workers share it, and the first WebSocket does not grow the server.
    if (o.realtime) http::ws::prepare();
    // Made here, before any fork: every worker seals TLS tickets with them.
    if (!o.certfile.empty()) o.tls_tickets = server::TicketKeyring::make(o.tls_ticket_rotation);
    // --check loads and binds once, in this process, with no workers.
    if (o.workers > 1 && !o.check) {
        std::vector<int> listeners;
        std::string admin_path;  // a unix admin socket's file, removed at exit
        // Each worker index's own sockets (none: systemd's, shared by all).
        std::vector<Sockets> own;
        if (o.systemd_fds.empty()) own = bind_for_workers(o, admin_path);
        for (const auto& set : own)
            for (const auto& [fd, name] : set)
                if (name != "admin" || &set == &own.front()) listeners.push_back(fd);
        for (const auto& fd_name : o.systemd_fds) listeners.push_back(fd_name.first);
        int rc = proc::supervise(o.workers, listeners, [&](int worker) {
            Options mine = o;
            if (!own.empty()) {
                // Its index's sockets; the other indexes' are not its to hold open.
                mine.systemd_fds = own[static_cast<size_t>(worker)];
                for (size_t i = 0; i < own.size(); ++i)
                    for (const auto& [fd, name] : own[i])
                        if (i != static_cast<size_t>(worker) && name != "admin") ::close(fd);
            }
            return serve(std::move(mine), worker, mounts, package_dir, venv);
        });
        if (!admin_path.empty()) ::unlink(admin_path.c_str());
        return rc;
    }
    return serve(std::move(o), 0, mounts, package_dir, venv);
}

}  // namespace m0::app
