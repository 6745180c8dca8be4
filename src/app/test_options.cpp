#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "app/activation.hpp"
#include "app/flags.hpp"

using m0::app::OptionError;
using m0::app::Options;

namespace {

const std::vector<std::string> kMojo{"mojo"};

Options parse(std::vector<std::string> args) {
    std::string name = "m0serve";
    std::vector<char*> argv{name.data()};
    for (auto& a : args) argv.push_back(a.data());
    return m0::app::parse_options(static_cast<int>(argv.size()), argv.data(), kMojo);
}

std::string error_of(std::vector<std::string> args) {
    try {
        parse(std::move(args));
    } catch (const OptionError& e) {
        return e.what();
    }
    return "(no error)";
}

}  // namespace

TEST_CASE("options: a positional APP is the WSGI application at /", "[app][options]") {
    auto o = parse({"config.wsgi", "--mount", "/native=mojo"});
    REQUIRE(o.mounts.size() == 2);
    CHECK(o.mounts[0].prefix == "/native");
    CHECK_FALSE(o.mounts[0].wsgi);
    CHECK(o.mounts[1].prefix == "/");
    CHECK(o.mounts[1].spec == "config.wsgi:application");
    CHECK(o.mounts[1].wsgi);
    CHECK(parse({"pkg.app:make"}).mounts[0].spec == "pkg.app:make");
}

TEST_CASE("options: --flag=value and --flag value are the same", "[app][options]") {
    auto a = parse({"app", "--blocking-threads=8", "--listen", "127.0.0.1:9000"});
    auto b = parse({"app", "--blocking-threads", "8", "--listen=127.0.0.1:9000"});
    CHECK(a.blocking_threads == 8);
    CHECK(b.blocking_threads == 8);
    REQUIRE(a.listens.size() == 1);
    REQUIRE(b.listens.size() == 1);
    CHECK(a.listens[0].port == 9000);
    CHECK(b.listens[0].port == 9000);
}

TEST_CASE("options: --listen repeats, takes unix:PATH, and defaults to 127.0.0.1:8000",
          "[app][options]") {
    auto d = parse({"app"});
    REQUIRE(d.listens.size() == 1);
    CHECK(d.listens[0].text() == "127.0.0.1:8000");
    auto o = parse({"app", "--listen", "[::1]:9001", "--listen", "unix:/run/m0/m0.sock",
                    "--unix-mode", "0600", "--unix-owner", "0:0", "--admin-listen",
                    "unix:/run/m0/admin.sock", "--admin-open"});
    REQUIRE(o.listens.size() == 2);
    CHECK(o.listens[0].host == "[::1]");
    CHECK(o.listens[0].port == 9001);
    CHECK(o.listens[1].path == "/run/m0/m0.sock");
    CHECK(o.listens[1].text() == "unix:/run/m0/m0.sock");
    CHECK(o.unix_socket.mode == 0600);
    CHECK(o.unix_socket.uid == 0);
    CHECK(o.unix_socket.gid == 0);
    REQUIRE(o.admin);
    CHECK(o.admin->path == "/run/m0/admin.sock");  // --admin-open: a unix socket is local
    CHECK(parse({"app", "--unix-owner", "root"}).unix_socket.gid == 0);
}

TEST_CASE("options: bad input is one line naming the flag", "[app][options]") {
    CHECK(error_of({"app", "--bogus"}) == "unknown option '--bogus' (see --help)");
    CHECK(error_of({"app", "--cors-origin", "http://a.test"}) ==
          "--cors-origin http://a.test needs --realtime (it shapes hold heads only)");
    CHECK(error_of({"app", "--blocking-threads", "0"}) ==
          "--blocking-threads wants a number from 1 to 1024, got '0'");
    CHECK(error_of({"app", "--listen"}) == "--listen needs a value");
    CHECK(error_of({}).starts_with("nothing to serve"));
    CHECK(error_of({"a", "b"}) == "one APP only, got 'a' and 'b'");
    CHECK(error_of({"--mount", "/=nosuch"}).find("neither module:callable") != std::string::npos);
    CHECK(error_of({"app", "--admin-open"}) == "--admin-open needs --admin-listen");
    CHECK(error_of({"app", "--admin-open", "--admin-listen", "0.0.0.0:9"})
              .starts_with("--admin-open needs a loopback or unix: --admin-listen"));
    CHECK(error_of({"app", "--listen", "unix:"}).starts_with("--listen unix:PATH wants a path"));
    CHECK(error_of({"app", "--unix-mode", "0999"}) ==
          "--unix-mode wants an octal mode such as 0660, got '0999'");
    CHECK(error_of({"app", "--unix-owner", "no-such-user-m0"}) ==
          "--unix-owner: no user 'no-such-user-m0'");
    CHECK(error_of({"app", "--unix-owner", "root:no-such-group-m0"}) ==
          "--unix-owner: no group 'no-such-group-m0'");
    CHECK(error_of({"app", "--workers", "2", "--listen", "unix:/tmp/x.sock"})
              .starts_with("--workers cannot share --listen unix:/tmp/x.sock"));
    CHECK(error_of({"app", "--bus", "redis://127.0.0.1:6379"}).ends_with("needs --realtime"));
    CHECK(error_of({"app", "--realtime", "--workers", "2"}).find("needs a shared bus") !=
          std::string::npos);
}

namespace {

// A TOML file with `text`, removed when the test ends.
struct TempToml {
    std::string path;
    explicit TempToml(const std::string& text) {
        char tmpl[] = "/tmp/m0-config-XXXXXX";
        int fd = ::mkstemp(tmpl);
        REQUIRE(fd >= 0);
        REQUIRE(::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size()));
        ::close(fd);
        path = tmpl;
    }
    ~TempToml() { ::unlink(path.c_str()); }
};

}  // namespace

TEST_CASE("options: every row of the flag table is a flag the parser, --help and --config know",
          "[app][options][config]") {
    std::set<std::string> table, keys;
    for (const auto& f : m0::app::flags()) {
        if (f.kind == m0::app::Flag::positional) continue;
        table.insert(std::string(f.name));
        CHECK(m0::app::find_flag(f.name) == &f);
        if (f.cli_only) continue;
        keys.insert(std::string(f.name));
        // The parser takes it (a bad value, not an unknown flag).
        std::string flag = "--" + std::string(f.name);
        std::vector<std::string> args{"app", flag};
        if (f.kind != m0::app::Flag::toggle) args.push_back("1");
        INFO(flag);
        CHECK_FALSE(error_of(args).starts_with("unknown option"));
    }
    // --help names exactly those.
    std::set<std::string> usage;
    std::string text = m0::app::usage();
    for (size_t at = text.find("\n  --"); at != std::string::npos;
         at = text.find("\n  --", at + 1)) {
        size_t end = text.find_first_of(" ,\n", at + 5);
        usage.insert(text.substr(at + 5, end - at - 5));
    }
    CHECK(usage == table);
    // The config file's keys are the rows but the command line's own.
    for (const char* only : {"check", "config", "help", "help-markdown", "version"})
        CHECK(keys.count(only) == 0);
    CHECK(keys.count("realtime") == 1);
    CHECK(keys.size() + 5 == table.size());
}

TEST_CASE("options: --help's text is the flag table's, defaults read from the Options",
          "[app][options]") {
    std::string text = m0::app::usage();
    CHECK(text.starts_with("usage: m0serve [options] [APP]\n\n  APP  "));
    CHECK(text.find("\n  --blocking-threads N        WSGI pool threads (default 4)\n") !=
          std::string::npos);
    CHECK(text.find("(default 0.001; 0: never)") != std::string::npos);
    CHECK(text.find("(default 127.0.0.1,::1; '' for none)") != std::string::npos);
    // A flag too long for its column has its text on the next line.
    CHECK(
        text.find("\n  --hold-drain-timeout SECONDS\n                              a hold over") !=
        std::string::npos);
    CHECK(text.find("{default}") == std::string::npos);
    CHECK(text.find("(default `") == std::string::npos);  // Markdown's backticks taken off
}

TEST_CASE(
    "options: the README's flag table is the one the flag table makes (make readme-flags "
    "writes it)",
    "[app][options][readme]") {
    std::ifstream in(M0_SOURCE_DIR "/README.md");
    REQUIRE(in);
    std::stringstream whole;
    whole << in.rdbuf();
    const std::string readme = whole.str();
    const std::string open = "<!-- flags: made by `make readme-flags`", close = "<!-- /flags -->";
    size_t from = readme.find(open);
    REQUIRE(from != std::string::npos);
    from = readme.find('\n', from) + 1;
    size_t to = readme.find(close, from);
    REQUIRE(to != std::string::npos);
    INFO("the README's flag table is not the flag table's: run `make readme-flags`");
    CHECK(readme.substr(from, to - from) == m0::app::flags_markdown());
}

TEST_CASE("options: --config FILE: keys are flags, the command line wins",
          "[app][options][config]") {
    TempToml file(R"(# m0serve.toml
app = "config.wsgi"
listen = ["127.0.0.1:9000", "unix:/run/m0/http.sock"]
blocking_threads = 8
mojo-threads = 3
mojo-in-loop = true
realtime = true
admin-open = false
heartbeat = 0.5
pythonpath = "/srv/lib"
mount = ["/native=mojo"]
)");
    auto o = parse({"--config", file.path});
    CHECK(o.blocking_threads == 8);
    CHECK(o.mojo_threads == 3);
    CHECK(o.mojo_in_loop);
    CHECK_FALSE(parse({"app"}).mojo_in_loop);
    CHECK(parse({"app", "--mojo-in-loop"}).mojo_in_loop);
    CHECK(o.realtime);
    CHECK_FALSE(o.server.admin_open);
    CHECK(o.server.heartbeat == 0.5);
    REQUIRE(o.listens.size() == 2);
    CHECK(o.listens[1].path == "/run/m0/http.sock");
    CHECK(o.pythonpath == std::vector<std::string>{"/srv/lib"});
    REQUIRE(o.mounts.size() == 2);
    CHECK(o.mounts[1].spec == "config.wsgi:application");

    // A value flag on the command line wins; a repeatable one replaces the
    // file's list; an APP replaces the file's app.
    auto w = parse({"--config=" + file.path, "--blocking-threads", "2", "--listen",
                    "127.0.0.1:7000", "other.wsgi"});
    CHECK(w.blocking_threads == 2);
    REQUIRE(w.listens.size() == 1);
    CHECK(w.listens[0].port == 7000);
    CHECK(w.mounts.back().spec == "other.wsgi:application");
}

TEST_CASE(
    "options: --config FILE: an unknown key, a wrong type or bad TOML is one line with "
    "the file and line",
    "[app][options][config]") {
    TempToml unknown("app = \"a.wsgi\"\n\nblocking_thread = 8\n");
    CHECK(error_of({"--config", unknown.path}) ==
          unknown.path +
              ":3: 'blocking_thread' is not a flag m0serve knows (did you mean "
              "'blocking-threads'? see --help)");
    TempToml toggle("app = \"a.wsgi\"\nrealtime = \"yes\"\n");
    CHECK(error_of({"--config", toggle.path}) ==
          toggle.path + ":2: 'realtime' wants true or false");
    TempToml value("app = \"a.wsgi\"\nblocking-threads = [1, 2]\n");
    CHECK(error_of({"--config", value.path}) ==
          value.path + ":2: 'blocking-threads' wants a string or a number");
    TempToml list("app = \"a.wsgi\"\nlisten = [8000]\n");
    CHECK(error_of({"--config", list.path}) ==
          list.path + ":2: 'listen' wants a string or an array of strings");
    TempToml only("app = \"a.wsgi\"\ncheck = true\n");
    CHECK(error_of({"--config", only.path}) ==
          only.path + ":2: 'check' is a command-line flag only");
    // A bad value is named by its file, line and key as written.
    TempToml flagvalue("app = \"a.wsgi\"\n\nblocking_threads = 0\n");
    CHECK(error_of({"--config", flagvalue.path}) ==
          flagvalue.path + ":3: blocking_threads: wants a number from 1 to 1024, got '0'");
    TempToml listvalue("app = \"a.wsgi\"\nmount = [\"/a=mojo\", \"nope\"]\n");
    CHECK(error_of({"--config", listvalue.path})
              .starts_with(listvalue.path + ":2: mount: wants PREFIX=SPEC"));
    TempToml colon("app = \"a.wsgi\"\nunix-owner = \"root:no-such-group-m0\"\n");
    CHECK(error_of({"--config", colon.path}) ==
          colon.path + ":2: unix-owner: no group 'no-such-group-m0'");
    // A bad value on the command line: the flag's own line, no file.
    TempToml fine("app = \"a.wsgi\"\nblocking_threads = 8\n");
    CHECK(error_of({"--config", fine.path, "--blocking-threads", "2000"}) ==
          "--blocking-threads wants a number from 1 to 1024, got '2000'");
    TempToml syntax("app = \"a.wsgi\"\nlisten = [\n");
    CHECK(error_of({"--config", syntax.path}).starts_with("--config " + syntax.path + ":"));
    CHECK(error_of({"--config", "/nonexistent/m0serve.toml"})
              .starts_with("--config /nonexistent/m0serve.toml"));
    CHECK(error_of({"--config"}) == "--config needs a value");
}

TEST_CASE("options: --loops takes 1 to 256, defaults to the cores (0 here), and not with Redis",
          "[app][options]") {
    CHECK(parse({"app"}).loops == 0);  // serve() resolves it: cores / --workers
    CHECK(parse({"app", "--loops", "3"}).loops == 3);
    CHECK(error_of({"app", "--loops", "0"}).find("--loops") != std::string::npos);
    CHECK(error_of({"app", "--loops", "257"}).find("--loops") != std::string::npos);
    CHECK(error_of({"app", "--loops", "two"}).find("--loops") != std::string::npos);
    std::string redis =
        error_of({"app", "--realtime", "--bus", "redis://127.0.0.1:6379/0", "--loops", "2"});
    CHECK(redis.find("--workers") != std::string::npos);
    CHECK(parse({"app", "--realtime", "--bus", "redis://127.0.0.1:6379/0", "--loops", "1"}).loops ==
          1);
}

TEST_CASE(
    "options: --max-body-total is 256 MiB, or --max-body-size when that is larger; given, it is "
    "not below --max-body-size",
    "[app][options]") {
    CHECK(parse({"app"}).server.body_total() == uint64_t(256) << 20);
    // A configuration that raised --max-body-size before the total existed still starts.
    CHECK(parse({"app", "--max-body-size", "300000000"}).server.body_total() == 300000000);
    CHECK(parse({"app", "--max-body-total", "1073741824"}).server.body_total() == uint64_t(1)
                                                                                      << 30);
    CHECK(parse({"app", "--max-body-total", "16777216"}).server.body_total() == 16777216);
    CHECK(error_of({"app", "--max-body-total", "1000000"}) ==
          "--max-body-total 1000000 is below --max-body-size 16777216: a body of that size could "
          "never be read");
    CHECK(
        error_of({"app", "--max-body-total", "0"}).starts_with("--max-body-total wants a number"));
}

TEST_CASE("options: --python-switch-interval takes 0 to 1 seconds, 0.02 by default",
          "[app][options]") {
    CHECK(parse({"app"}).python_switch_interval == 0.02);
    CHECK(parse({"app", "--python-switch-interval", "0"}).python_switch_interval == 0);
    CHECK(parse({"app", "--python-switch-interval", "0.05"}).python_switch_interval == 0.05);
    for (const char* bad : {"1.5", "-0.01", "soon", ""})
        CHECK(error_of({"app", "--python-switch-interval", bad}).find("--python-switch-interval") !=
              std::string::npos);
}

TEST_CASE("options: --hold-coalesce takes 0 to 0.1 seconds, 0.001 by default", "[app][options]") {
    CHECK(parse({"app"}).server.hold_coalesce == 0.001);
    CHECK(parse({"app", "--hold-coalesce", "0"}).server.hold_coalesce == 0);
    CHECK(parse({"app", "--hold-coalesce", "0.005"}).server.hold_coalesce == 0.005);
    CHECK(error_of({"app", "--hold-coalesce", "0.2"}).find("--hold-coalesce") != std::string::npos);
    CHECK(error_of({"app", "--hold-coalesce", "-1"}).find("--hold-coalesce") != std::string::npos);
    CHECK(error_of({"app", "--hold-coalesce", "soon"}).find("--hold-coalesce") !=
          std::string::npos);
}

TEST_CASE("options: the defaults are the modules' own, written once", "[app][options]") {
    auto o = parse({"app"});
    const m0::hold::Handoff handoff;
    CHECK(o.max_holds == m0::hold::kMaxHolds);
    CHECK(o.max_hold_channels == handoff.max_channels);
    CHECK(o.server.stream_high_water == handoff.stream_high_water);
    CHECK(o.server.hold_coalesce == m0::server::kHoldCoalesce);
    CHECK(o.max_queued == m0::server::ServerConfig{}.max_connections);
    CHECK(m0::bus::RedisBusOptions{}.max_event_size == m0::bus::kDefaultMaxEventSize);
    CHECK(m0::bus::RedisBusOptions{}.history == o.history.per_channel);
    // And --help and the README show them.
    CHECK(m0::app::find_flag("max-holds")->default_shown() == "10000");
    CHECK(m0::app::find_flag("hold-coalesce")->default_shown() == "0.001");
}

TEST_CASE("options: --virtualenv DIR is kept as given, also as a config key; empty is refused",
          "[app][options]") {
    CHECK(parse({"app", "--virtualenv", "venv"}).virtualenv == "venv");
    CHECK(parse({"app"}).virtualenv.empty());  // VIRTUAL_ENV is read at start-up, not here
    CHECK(error_of({"app", "--virtualenv="}) == "--virtualenv wants a directory (a venv's)");
    TempToml file("app = \"a.wsgi\"\nvirtualenv = \"/srv/venv\"\n");
    CHECK(parse({"--config", file.path}).virtualenv == "/srv/venv");
}

TEST_CASE("options: --config FILE: one flag in both spellings is refused, naming both lines",
          "[app][options][config]") {
    TempToml both("app = \"a.wsgi\"\nmax_holds = 3\nrealtime = true\nmax-holds = 4\n");
    CHECK(error_of({"--config", both.path}) ==
          both.path + ":4: 'max-holds' is given twice: also as 'max_holds' on line 2 (keep one)");
    TempToml one("app = \"a.wsgi\"\nmax_holds = 3\n");
    CHECK(parse({"--config", one.path}).max_holds == 3);
}

TEST_CASE("options: a near-miss flag or key names the flag it is nearest to", "[app][options]") {
    CHECK(error_of({"app", "--bind", ":8000"}) ==
          "unknown option '--bind' (did you mean --listen? see --help)");
    CHECK(error_of({"app", "--bind=:8000"}) ==
          "unknown option '--bind=:8000' (did you mean --listen? see --help)");
    CHECK(error_of({"app", "--worker", "2"}) ==
          "unknown option '--worker' (did you mean --workers? see --help)");
    CHECK(error_of({"app", "--max-hold", "5"}) ==
          "unknown option '--max-hold' (did you mean --max-holds? see --help)");
    CHECK(error_of({"app", "--threads", "8"}).find("did you mean --blocking-threads?") !=
          std::string::npos);
    CHECK(error_of({"app", "--realtim"}).find("did you mean --realtime?") != std::string::npos);
    CHECK(error_of({"app", "--admin-key", "k"}).find("did you mean --admin-key-file?") !=
          std::string::npos);
    CHECK(error_of({"app", "--frobnicate"}) == "unknown option '--frobnicate' (see --help)");
    CHECK(m0::app::nearest_flag("max_holds_", false) == "max-holds");
    CHECK(m0::app::nearest_flag("chek", false) == "check");
    CHECK(m0::app::nearest_flag("chek", true) != "check");  // not a config key
    TempToml bind("app = \"a.wsgi\"\nbind = \"127.0.0.1:8000\"\n");
    CHECK(error_of({"--config", bind.path}) ==
          bind.path + ":2: 'bind' is not a flag m0serve knows (did you mean 'listen'? see --help)");
    TempToml thread("app = \"a.wsgi\"\nblocking_thread = 8\n");
    CHECK(error_of({"--config", thread.path}).find("did you mean 'blocking-threads'?") !=
          std::string::npos);
}

TEST_CASE("options: --listen :PORT is every IPv4 interface, as gunicorn's --bind :PORT",
          "[app][options]") {
    auto o = parse({"app", "--listen", ":8000", "--admin-listen", ":8001"});
    REQUIRE(o.listens.size() == 1);
    CHECK(o.listens[0].host == "0.0.0.0");
    CHECK(o.listens[0].port == 8000);
    CHECK(o.listens_given);
    REQUIRE(o.admin);
    CHECK(o.admin->text() == "0.0.0.0:8001");
    CHECK_FALSE(parse({"app"}).listens_given);
    CHECK(error_of({"app", "--listen", "8000"}) == "--listen wants HOST:PORT, got '8000'");
    CHECK(error_of({"app", "--listen", ":"}).starts_with("--listen wants a number"));
    // Still no key-less admin port on every interface.
    CHECK(error_of({"app", "--admin-listen", ":8001", "--admin-open"})
              .starts_with("--admin-open needs a loopback or unix: --admin-listen"));
}

namespace {

// A TCP socket bound to 127.0.0.1 on a free port, as systemd passes one.
struct Bound {
    int fd = -1;
    uint16_t port = 0;
    Bound() {
        fd = ::socket(AF_INET, SOCK_STREAM, 0);
        REQUIRE(fd >= 0);
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
        socklen_t len = sizeof a;
        REQUIRE(::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0);
        port = ntohs(a.sin_port);
    }
    ~Bound() { ::close(fd); }
    std::string addr() const { return "127.0.0.1:" + std::to_string(port); }
};

}  // namespace

TEST_CASE(
    "options: under socket activation a --listen or --admin-listen the passed sockets do not "
    "cover is refused, not dropped",
    "[app][options][systemd]") {
    Bound http, admin, other;
    auto activated = [&](std::vector<std::string> args, bool with_admin) {
        Options o = parse(std::move(args));
        o.systemd_fds = {{http.fd, "http"}};
        if (with_admin) o.systemd_fds.push_back({admin.fd, "admin"});
        return m0::app::activation_conflict(o);
    };
    // No flags, or flags naming the passed sockets: served as systemd says.
    CHECK(activated({"app"}, true).empty());
    CHECK(
        activated({"app", "--listen", http.addr(), "--admin-listen", admin.addr()}, true).empty());
    CHECK(activated({"app", "--listen", "localhost:" + std::to_string(http.port)}, false).empty());
    // A --listen systemd did not pass.
    std::string why = activated({"app", "--listen", other.addr()}, true);
    CHECK(why.starts_with("socket activation: --listen " + other.addr() + " is not one of the 2 "));
    CHECK(why.find("ListenStream=") != std::string::npos);
    // --admin-listen with no socket named admin: publishing would stop.
    why = activated({"app", "--admin-listen", admin.addr()}, false);
    CHECK(why == "socket activation: --admin-listen " + admin.addr() +
                     " would not be bound: systemd passed no socket named admin "
                     "(FileDescriptorName=admin in its .socket unit)");
    // --admin-listen naming another address than the passed admin socket.
    why = activated({"app", "--admin-listen", other.addr()}, true);
    CHECK(why.starts_with("socket activation: --admin-listen " + other.addr() +
                          " is not the socket systemd passed as admin"));
    // The admin socket's address given as --listen is not a client listener.
    CHECK_FALSE(activated({"app", "--listen", admin.addr()}, true).empty());
    // Without socket activation nothing is refused.
    CHECK(m0::app::activation_conflict(parse({"app", "--listen", other.addr()})).empty());
}

TEST_CASE("options: --certfile and --keyfile go together; --listen-plain and --admin-tls",
          "[app][options][tls]") {
    CHECK(error_of({"app", "--certfile", "c.pem"}) ==
          "--certfile and --keyfile go together: give both, or neither");
    CHECK(error_of({"app", "--keyfile", "k.pem"}) ==
          "--certfile and --keyfile go together: give both, or neither");
    CHECK(error_of({"app", "--admin-tls", "--admin-listen", "127.0.0.1:9"}) ==
          "--admin-tls needs --certfile and --keyfile");
    CHECK(error_of({"app", "--certfile", "c", "--keyfile", "k", "--admin-tls"}) ==
          "--admin-tls needs a TCP --admin-listen (HOST:PORT)");
    CHECK(error_of({"app", "--listen-plain", "unix:/tmp/x.sock"}) ==
          "--listen-plain wants HOST:PORT (a unix: --listen is never TLS)");
    CHECK(error_of({"app", "--tls-handshake-timeout", "0"}) ==
          "--tls-handshake-timeout wants seconds above 0 (at most 86400), got '0'");
    auto o = parse({"app", "--certfile", "c.pem", "--keyfile", "k.pem", "--listen", ":8443",
                    "--listen-plain", "127.0.0.1:8080"});
    CHECK(o.certfile == "c.pem");
    CHECK(o.keyfile == "k.pem");
    REQUIRE(o.listens.size() == 2);
    CHECK_FALSE(o.listens[0].plain);
    CHECK(o.listens[1].plain);
    CHECK(o.listens[1].port == 8080);
    CHECK(o.server.tls_handshake_timeout == 10);
    CHECK_FALSE(o.server.admin_tls);
}
