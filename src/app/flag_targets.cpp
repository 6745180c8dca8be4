// Where the flags' values go: the targets the flag table's rows are made of,
// and the flags whose checks are their own. Main thread, before anything
// starts.
#include <grp.h>
#include <pwd.h>

#include <cstdlib>

#include "app/flags.hpp"
#include "http/forwarded.hpp"

namespace m0::app {

void fail(const std::string& why) { throw OptionError(why); }

namespace {

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
                    uint16_t& port) {
    size_t colon = v.rfind(':');
    if (colon == std::string::npos) fail(flag + " wants HOST:PORT, got '" + v + "'");
    // `:PORT` is every IPv4 interface, as gunicorn's `--bind :PORT` is.
    host = colon == 0 ? "0.0.0.0" : v.substr(0, colon);
    port = parse_number<uint16_t>(flag, v.substr(colon + 1), 0, 65535);
}

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

}  // namespace

Target seconds(double& (*at)(Options&)) {
    Options defaults;
    return {[=](Parsing& p, const std::string& flag, const std::string& v) {
                at(p.o) = parse_seconds(flag, v);
            },
            shown_number(at(defaults))};
}

Target short_seconds(double& (*at)(Options&), double most, const char* most_text) {
    Options defaults;
    return {[=](Parsing& p, const std::string& flag, const std::string& v) {
                at(p.o) = parse_short_seconds(flag, v, most, most_text);
            },
            shown_number(at(defaults))};
}

Target text(std::string& (*at)(Options&)) {
    return {[=](Parsing& p, const std::string&, const std::string& v) { at(p.o) = v; }, ""};
}

Target append(std::vector<std::string>& (*at)(Options&)) {
    return {[=](Parsing& p, const std::string&, const std::string& v) { at(p.o).push_back(v); },
            ""};
}

Target on(bool& (*at)(Options&)) {
    return {[=](Parsing& p, const std::string&, const std::string&) { at(p.o) = true; }, "off"};
}

Target custom(Target::Set set, std::string shown) { return {std::move(set), std::move(shown)}; }

namespace set {

void app(Parsing& p, const std::string&, const std::string& a) {
    // gunicorn's positional APP: module (its `application`) or module:callable.
    if (p.app) fail("one APP only, got '" + *p.app + "' and '" + a + "'");
    p.app = a;
}

void listen(Parsing& p, const std::string& flag, const std::string& v) {
    p.o.listens.push_back(parse_listen(flag, v));
}

void listen_plain(Parsing& p, const std::string& flag, const std::string& v) {
    ListenSpec l = parse_listen(flag, v);
    if (!l.path.empty()) fail(flag + " wants HOST:PORT (a unix: --listen is never TLS)");
    l.plain = true;
    p.o.listens.push_back(l);
}

void admin_listen(Parsing& p, const std::string& flag, const std::string& v) {
    p.o.admin = parse_listen(flag, v);
}

void unix_mode(Parsing& p, const std::string&, const std::string& m) {
    char* end = nullptr;
    unsigned long mode = std::strtoul(m.c_str(), &end, 8);
    if (m.empty() || *end != '\0' || mode > 0777)
        fail("--unix-mode wants an octal mode such as 0660, got '" + m + "'");
    p.o.unix_socket.mode = static_cast<unsigned>(mode);
}

void unix_owner(Parsing& p, const std::string& flag, const std::string& v) {
    parse_owner(flag, v, p.o.unix_socket);
}

void virtualenv(Parsing& p, const std::string&, const std::string& v) {
    if (v.empty()) fail("--virtualenv wants a directory (a venv's)");
    p.o.virtualenv = v;
}

void mount(Parsing& p, const std::string&, const std::string& m) {
    size_t e = m.find('=');
    if (e == std::string::npos || e == 0 || m[0] != '/' || e + 1 == m.size())
        fail("--mount wants PREFIX=SPEC with PREFIX starting with '/', got '" + m + "'");
    MountSpec ms{m.substr(0, e), m.substr(e + 1), false, "--mount " + m};
    ms.wsgi = ms.spec.find(':') != std::string::npos;
    if (!ms.wsgi) {
        bool found = false;
        std::string names;
        for (const auto& n : p.known_mojo) {
            found = found || n == ms.spec;
            names += (names.empty() ? "" : ", ") + n;
        }
        if (!found)
            fail("--mount " + m + ": '" + ms.spec +
                 "' is neither module:callable nor a compiled-in mojo mount (" + names + ")");
    }
    for (const auto& other : p.o.mounts)
        if (other.prefix == ms.prefix) fail("--mount: prefix " + ms.prefix + " is mounted twice");
    p.o.mounts.push_back(ms);
}

void log_level(Parsing& p, const std::string&, const std::string& l) {
    if (!log::parse_level(l, p.o.level))
        fail("--log-level wants debug, info, warn or error, got '" + l + "'");
}

void access_log(Parsing& p, const std::string&, const std::string& v) {
    p.o.access_log = v;
    if (p.o.access_log.empty()) fail("--access-log wants a path or -");
}

void forwarded(Parsing& p, const std::string&, const std::string& v) {
    p.forwarded = v;  // '' trusts none; checked once every flag is read
}

void max_connections(Parsing& p, const std::string& flag, const std::string& v) {
    p.o.server.max_connections = parse_number<size_t>(flag, v, 1, 1000000);
    p.o.max_connections_given = true;
}

void bus(Parsing& p, const std::string&, const std::string& url) {
    std::string err;
    if (url == "in-process") {
        p.o.redis.reset();
    } else if (!(p.o.redis = bus::parse_redis_url(url, err))) {
        fail(err);
    }
}

void cors_origin(Parsing& p, const std::string&, const std::string& origin) {
    std::string err;
    if (!http::CorsPolicy::make({origin}, false, err)) fail("--cors-origin: " + err);
    p.cors_origins.push_back(origin);
}

void ws_origin(Parsing& p, const std::string&, const std::string& origin) {
    std::string err;
    if (!http::ws::OriginCheck::make({origin}, err)) fail("--ws-origin: " + err);
    p.ws_origins.push_back(origin);
}

void ws_over_http(Parsing& p, const std::string&, const std::string& prefix) {
    if (prefix.empty() || prefix[0] != '/' ||
        prefix.find_first_of(std::string_view("?# \t\r\n\0", 8)) != std::string::npos)
        fail("--ws-over-http wants a path prefix starting with '/', got '" + prefix + "'");
    p.o.server.ws.over_http.push_back(prefix);
}

void cors_credentials(Parsing& p, const std::string&, const std::string&) {
    p.cors_credentials = true;
}

void help(Parsing&, const std::string&, const std::string&) {
    std::fputs(usage().c_str(), stdout);
    std::exit(0);
}

void help_markdown(Parsing&, const std::string&, const std::string&) {
    std::fputs(flags_markdown().c_str(), stdout);
    std::exit(0);
}

void version(Parsing&, const std::string&, const std::string&) {
    std::printf("m0serve %s\n", M0_VERSION);
    std::exit(0);
}

void nothing(Parsing&, const std::string&, const std::string&) {}

}  // namespace set

}  // namespace m0::app
