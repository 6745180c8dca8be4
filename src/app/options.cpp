// The command line's parser, driven by the flag table (flags.hpp). Main
// thread, before anything starts.
#include "app/options.hpp"

#include <algorithm>

#include "app/config_file.hpp"
#include "app/flags.hpp"
#include "http/forwarded.hpp"

namespace m0::app {

// The flags in `args` (args[0] is the program), by the flag table; then the
// checks that look at several flags at once.
// `origins`, when given, says for each of `args` where it came from
// ("FILE:LINE: key" for a --config key's, empty for the command line's): a
// bad value from the file is named by its file and line.
static Options parse_args(const std::vector<std::string>& args,
                          const std::vector<std::string>& known_mojo,
                          const std::vector<std::string>& origins = {}) {
    Parsing p{.known_mojo = known_mojo};
    Options& o = p.o;
    const Flag* app = nullptr;
    for (const Flag& f : flags())
        if (f.kind == Flag::positional) app = &f;
    for (size_t i = 1; i < args.size(); ++i) {
        std::string a = args[i];
        std::string v;
        size_t eq = a.find('=');
        if (a.starts_with("--") && eq != std::string::npos) {
            v = a.substr(eq + 1);
            a = a.substr(0, eq);
        }
        if (a == "-h") a = "--help";
        const Flag* f = a.starts_with("--") ? find_flag(std::string_view(a).substr(2)) : nullptr;
        const std::string& origin = i < origins.size() ? origins[i] : "";
        if (f && f->kind == Flag::toggle) {
            f->to.set(p, a, "");  // a switch ignores any =VALUE, as it always has
        } else if (f) {
            if (v.empty() && a.size() == args[i].size()) {
                if (i + 1 >= args.size()) fail(a + " needs a value");
                v = args[++i];
            }
            try {
                f->to.set(p, a, v);
            } catch (const OptionError& e) {
                if (origin.empty()) throw;
                // "FILE:LINE: key: why", the flag's name taken off the why.
                std::string why = e.what();
                if (why.starts_with(a + ": "))
                    why.erase(0, a.size() + 2);
                else if (why.starts_with(a + " "))
                    why.erase(0, a.size() + 1);
                fail(origin + ": " + why);
            }
        } else if (!a.starts_with("-") && !a.empty()) {
            app->to.set(p, "APP", a);
        } else {
            std::string near =
                a.starts_with("--") ? nearest_flag(std::string_view(a).substr(2), false) : "";
            fail("unknown option '" + args[i] + "' (" +
                 (near.empty() ? "" : "did you mean --" + near + "? ") + "see --help)");
        }
    }
    {
        std::string err;
        auto t = http::TrustedProxies::parse(p.forwarded, err);
        if (!t) fail("--forwarded-allow-ips: " + err);
        o.server.forwarded_allow = *t;
        auto cors = http::CorsPolicy::make(p.cors_origins, p.cors_credentials, err);
        if (!cors) fail("--cors-origin: " + err);
        o.server.cors = *cors;
        // RFC 6455 §10.2: WebSockets from the pages --ws-origin names, else
        // those --cors-origin lets read holds.
        auto ws =
            http::ws::OriginCheck::make(p.ws_origins.empty() ? p.cors_origins : p.ws_origins, err);
        if (!ws) fail("--ws-origin: " + err);
        o.server.ws.origins = *ws;
        // As --bus: a flag of holds means nothing without them.
        if (!p.cors_origins.empty() && !o.realtime)
            fail("--cors-origin " + p.cors_origins.front() +
                 " needs --realtime (it shapes hold heads only)");
    }
    if (const auto& positional = p.app) {
        MountSpec ms{"/", *positional, true, "APP " + *positional};
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
    o.listens_given = !o.listens.empty();
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
    if (o.certfile.empty() != o.keyfile.empty())
        fail("--certfile and --keyfile go together: give both, or neither");
    if (o.server.admin_tls && o.certfile.empty())
        fail("--admin-tls needs --certfile and --keyfile");
    if (o.server.admin_tls && (!o.admin || !o.admin->path.empty()))
        fail("--admin-tls needs a TCP --admin-listen (HOST:PORT)");
    if (o.server.max_body_total && o.server.max_body_total < o.server.limits.max_body)
        fail("--max-body-total " + std::to_string(o.server.max_body_total) +
             " is below --max-body-size " + std::to_string(o.server.limits.max_body) +
             ": a body of that size could never be read");
    if (o.redis && !o.realtime) fail("--bus " + o.redis->text + " needs --realtime");
    if (!o.server.ws.over_http.empty() && !o.realtime) fail("--ws-over-http needs --realtime");
    if (!o.bus_password_file.empty() && !o.redis)
        fail("--bus-password-file needs --bus redis://..., redis+unix:// or redis+sentinel://");
    if (!o.bus_password_file.empty() && o.redis->password_in_url)
        fail("--bus " + o.redis->text +
             " carries a password, and --bus-password-file too; "
             "give it once");
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
    if (o.max_requests > 0 && o.workers < 2)
        fail("--max-requests needs --workers 2 or more: a worker is replaced by its parent");
    if (o.max_requests_jitter > 0 && o.max_requests == 0)
        fail("--max-requests-jitter needs --max-requests");
    // One event must never fill a hold's buffer by itself.
    if (o.max_event_size == 0)
        o.max_event_size = std::min(bus::kDefaultMaxEventSize, o.server.hold_buffer_limit / 4);
    else if (o.max_event_size >= o.server.hold_buffer_limit)
        fail("--max-event-size " + std::to_string(o.max_event_size) +
             " must be below --hold-buffer-limit " + std::to_string(o.server.hold_buffer_limit));
    return o;
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
    std::vector<std::string> origins{""};
    std::vector<std::string> from_file = config_args(*config, cli, &origins);
    std::vector<std::string> args{cli.front()};
    args.insert(args.end(), from_file.begin(), from_file.end());
    args.insert(args.end(), cli.begin() + 1, cli.end());
    return parse_args(args, known_mojo, origins);
}

}  // namespace m0::app
