// TLS on a listener (tls.hpp, tls_accept.cpp): a real Server on a real Loop
// listening on loopback with a certificate the openssl CLI made in a
// temporary folder, and clients on real sockets: OpenSSL in non-blocking
// mode, driven between the loop's steps.
#include <fcntl.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <stdexcept>
#include <string>

#include "server/test_hold_rig.hpp"
#include "server/test_http_reply.hpp"
#include "server/test_rig.hpp"
#include "server/tls.hpp"

using namespace m0;
using namespace m0::server;
using m0::testing::connect_loopback;
using m0::testing::HoldRig;
using m0::testing::ServerRig;
using m0::testing::SocketClient;
using m0::testing::take_reply;
using namespace std::chrono_literals;

namespace {

// A temporary folder with self-signed certificates, removed at the end.
struct Certs {
    std::filesystem::path dir;
    Certs() {
        char tmpl[] = "/tmp/m0-test-tls-XXXXXX";
        if (!::mkdtemp(tmpl)) throw std::runtime_error("mkdtemp failed");
        dir = tmpl;
    }
    ~Certs() { std::filesystem::remove_all(dir); }
    std::string path(const std::string& name) const { return (dir / name).string(); }
    // NAME.pem and NAME.key, for localhost, with `serial`; false when openssl failed.
    bool make(const std::string& name, int serial) const {
        std::string cmd =
            "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes "
            "-days 2 -subj /CN=localhost -set_serial " +
            std::to_string(serial) + " -keyout " + path(name + ".key") + " -out " +
            path(name + ".pem") + " 2>/dev/null";
        return std::system(cmd.c_str()) == 0;
    }
};

// The serial of the certificate an SSL made from the context would present (0: none).
long serial_of(const TlsContext& ctx) {
    SSL* ssl = ctx.new_ssl();
    if (!ssl) return -1;
    X509* cert = SSL_get_certificate(ssl);
    long n = cert ? ASN1_INTEGER_get(X509_get_serialNumber(cert)) : 0;
    SSL_free(ssl);
    return n;
}

// A TLS client on a non-blocking loopback socket; each call does what it
// can without blocking, the test steps the loop between calls.
struct TlsClient {
    SSL_CTX* ctx = SSL_CTX_new(TLS_client_method());
    SSL* ssl = nullptr;
    int fd = -1;
    std::string in;
    bool eof = false;

    // With `resume`, the handshake offers that session (its ticket).
    explicit TlsClient(uint16_t port, SSL_SESSION* resume = nullptr) {
        fd = connect_loopback(port);
        ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
        ssl = SSL_new(ctx);
        SSL_set_fd(ssl, fd);
        if (resume) SSL_set_session(ssl, resume);
    }
    ~TlsClient() {
        SSL_free(ssl);
        SSL_CTX_free(ctx);
        if (fd >= 0) ::close(fd);
    }
    bool handshake() { return SSL_connect(ssl) == 1; }
    bool write(const std::string& s) {
        return SSL_write(ssl, s.data(), static_cast<int>(s.size())) == static_cast<int>(s.size());
    }
    void pump() {
        char buf[16384];
        for (;;) {
            int n = SSL_read(ssl, buf, sizeof buf);
            if (n > 0) {
                in.append(buf, static_cast<size_t>(n));
                continue;
            }
            int e = SSL_get_error(ssl, n);
            if (e != SSL_ERROR_WANT_READ && e != SSL_ERROR_WANT_WRITE) eof = true;
            return;
        }
    }
};

// A rig whose mount answers "ok", noting each request's scheme.
struct TlsRig : ServerRig {
    std::vector<std::string> schemes;
    explicit TlsRig(ServerConfig cfg) : ServerRig(std::move(cfg)) {
        server->add_mount("/", [this](SlotRef s, http::Request&& req) {
            schemes.push_back(req.scheme);
            http::Response r;
            r.status = 200;
            r.body = "ok\n";
            post(s, std::move(r));
            return Admission::queued;
        });
    }
};

// A config with TLS on, its certificate "a" made with `serial` (or made
// before: 0); with `keys`, its tickets sealed with keys from that ring.
ServerConfig tls_config(const Certs& certs, int serial,
                        std::shared_ptr<TicketKeyring> keys = nullptr) {
    if (serial) REQUIRE(certs.make("a", serial));
    std::string err;
    ServerConfig cfg;
    cfg.tls = keys ? TlsContext::load(certs.path("a.pem"), certs.path("a.key"), keys, err)
                   : TlsContext::load(certs.path("a.pem"), certs.path("a.key"), err);
    INFO(err);
    REQUIRE(cfg.tls);
    return cfg;
}

// Listens on a TLS port (127.0.0.1, any free port); its number.
uint16_t listen_tls(ServerRig& rig) {
    std::string err;
    REQUIRE(rig.server->listen("127.0.0.1", 0, false, err));
    return rig.server->bound_port(false);
}

constexpr char kGet[] = "GET /x HTTP/1.1\r\nHost: localhost\r\n\r\n";

// The server's end of the loopback connection `client` (an fd of this
// process whose peer is the client's address), or -1.
int peer_fd(int client) {
    sockaddr_storage mine{};
    socklen_t mine_len = sizeof mine;
    if (::getsockname(client, reinterpret_cast<sockaddr*>(&mine), &mine_len) != 0) return -1;
    for (const auto& e : std::filesystem::directory_iterator("/proc/self/fd")) {
        const int fd = std::stoi(e.path().filename().string());
        sockaddr_storage peer{};
        socklen_t len = sizeof peer;
        if (fd != client && ::getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &len) == 0 &&
            len == mine_len && std::memcmp(&peer, &mine, len) == 0)
            return fd;
    }
    return -1;
}

}  // namespace

TEST_CASE("tls: a handshake record opens with 0x16; a plain request does not", "[tls]") {
    CHECK(starts_tls(0x16));
    for (unsigned char c : std::string("GPHDOCT\r\n")) CHECK_FALSE(starts_tls(c));
}

TEST_CASE("tls: a bad file is refused with one line naming it", "[tls]") {
    Certs certs;
    REQUIRE(certs.make("a", 11));
    REQUIRE(certs.make("b", 12));
    std::string err;
    CHECK_FALSE(TlsContext::load(certs.path("none.pem"), certs.path("a.key"), err));
    CHECK(err.starts_with("--certfile " + certs.path("none.pem") + ": cannot read"));
    CHECK_FALSE(TlsContext::load(certs.path("a.pem"), certs.path("b.key"), err));
    CHECK(err == "--keyfile " + certs.path("b.key") + ": not the key of --certfile " +
                     certs.path("a.pem"));
    CHECK_FALSE(TlsContext::load(certs.path("a.key"), certs.path("a.key"), err));
    CHECK(err.starts_with("--certfile " + certs.path("a.key") + ": not a PEM certificate"));
    // A passphrase-protected key: refused, with no prompt (one would wait
    // on the terminal that runs the tests).
    const std::string enc = certs.path("enc.key");
    REQUIRE(std::system(("openssl pkey -in " + certs.path("a.key") +
                         " -aes256 -passout pass:secret -out " + enc + " 2>/dev/null")
                            .c_str()) == 0);
    CHECK_FALSE(TlsContext::load(certs.path("a.pem"), enc, err));
    CHECK(err.starts_with("--keyfile " + enc + ": an encrypted (passphrase-protected) key"));
}

TEST_CASE("tls: a reload takes the new certificate, and a bad file keeps the one in use", "[tls]") {
    Certs certs;
    REQUIRE(certs.make("a", 21));
    REQUIRE(certs.make("b", 22));
    REQUIRE(certs.make("c", 23));
    const std::string cert = certs.path("live.pem"), key = certs.path("live.key");
    using std::filesystem::copy_options;
    auto put = [&](const std::string& from_cert, const std::string& from_key) {
        std::filesystem::copy_file(from_cert, cert, copy_options::overwrite_existing);
        std::filesystem::copy_file(from_key, key, copy_options::overwrite_existing);
    };
    put(certs.path("a.pem"), certs.path("a.key"));
    std::string err;
    auto ctx = TlsContext::load(cert, key, err);
    REQUIRE(ctx);
    CHECK(serial_of(*ctx) == 21);
    SSL* before = ctx->new_ssl();  // a connection made before the reload
    put(certs.path("b.pem"), certs.path("b.key"));
    REQUIRE(ctx->reload(err));
    CHECK(serial_of(*ctx) == 22);
    CHECK(ASN1_INTEGER_get(X509_get_serialNumber(SSL_get_certificate(before))) == 21);
    SSL_free(before);
    put(certs.path("b.pem"), certs.path("c.key"));  // another certificate's key
    CHECK_FALSE(ctx->reload(err));
    CHECK(err == "--keyfile " + key + ": not the key of --certfile " + cert);
    CHECK(serial_of(*ctx) == 22);
    std::filesystem::remove(cert);
    CHECK_FALSE(ctx->reload(err));
    CHECK(serial_of(*ctx) == 22);
}

TEST_CASE(
    "tls: a request over TLS is served as https; a plain one on the TLS port is answered "
    "400 and the server serves on",
    "[tls][server]") {
    Certs certs;
    TlsRig rig(tls_config(certs, 31));
    const uint16_t port = listen_tls(rig);
    std::string err;
    REQUIRE(rig.server->listen("127.0.0.1", 0, false, err, true));  // --listen-plain
    const auto names = rig.server->listening(false);
    REQUIRE(names.size() == 2);
    CHECK(names[0].ends_with(" (TLS)"));
    CHECK_FALSE(names[1].ends_with(" (TLS)"));

    auto over_tls = [&] {
        TlsClient c(port);
        REQUIRE(rig.step_until([&] { return c.handshake(); }));
        REQUIRE(c.write(kGet));
        REQUIRE(rig.step_until([&] {
            c.pump();
            return c.in.find("ok\n") != std::string::npos;
        }));
        auto r = take_reply(c.in, false, false);
        REQUIRE(r);
        CHECK(r->status == 200);
    };
    over_tls();
    REQUIRE(rig.schemes.size() == 1);
    CHECK(rig.schemes[0] == "https");

    SocketClient plain(connect_loopback(port));
    REQUIRE(plain.send(kGet));
    REQUIRE(rig.step_until([&] {
        plain.pump();
        return plain.eof;
    }));
    auto r = take_reply(plain.in, false, true);
    REQUIRE(r);
    CHECK(r->status == 400);
    CHECK(r->body.find("plain HTTP request sent to a TLS port") != std::string::npos);
    CHECK(r->headers.get("Connection") == std::optional<std::string_view>("close"));
    CHECK(rig.schemes.size() == 1);  // not served

    over_tls();  // the server serves on
    CHECK(rig.schemes.back() == "https");
    CHECK(rig.metrics.tls_handshakes.load() == 2);
    CHECK(rig.metrics.tls_plain_refused.load() == 1);
    CHECK(rig.metrics.tls_handshakes_failed.load() == 0);
}

TEST_CASE(
    "tls: a client that sends nothing, or stalls in its handshake, is closed after "
    "tls_handshake_timeout",
    "[tls][server]") {
    Certs certs;
    ServerConfig cfg = tls_config(certs, 41);
    cfg.tls_handshake_timeout = 0.2;
    cfg.header_timeout = 30;  // not what closes them
    TlsRig rig(std::move(cfg));
    const uint16_t port = listen_tls(rig);
    SocketClient silent(connect_loopback(port));
    SocketClient stalled(connect_loopback(port));
    // A ClientHello's record header and the start of the message, no more.
    REQUIRE(stalled.send(std::string("\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03", 11)));
    for (SocketClient* c : {&silent, &stalled}) {
        CHECK(rig.step_until(
            [&] {
                c->pump();
                return c->eof;
            },
            3000ms));
    }
    CHECK(rig.step_until([&] { return rig.server->connections() == 0; }));
    CHECK(rig.schemes.empty());
    CHECK(rig.metrics.tls_handshakes_failed.load() == 2);  // one a peek, one a stalled handshake
    CHECK(rig.metrics.tls_handshakes.load() == 0);
}

TEST_CASE(
    "tls: a hold over TLS keeps its OpenSSL bufferevent: its events reach the client "
    "through OpenSSL, in order",
    "[tls][hold]") {
    Certs certs;
    HoldRig rig(tls_config(certs, 51));
    TlsClient c(listen_tls(rig));
    REQUIRE(rig.step_until([&] { return c.handshake(); }));
    REQUIRE(c.write("GET /native/hold?channel=c HTTP/1.1\r\nHost: h\r\n\r\n"));
    REQUIRE(rig.loop.run_until([&] { return rig.pool->pool().queued() == 1; }));
    REQUIRE(rig.pool->pool().run_next());
    auto got = [&](const std::string& want) {
        return rig.step_until([&] {
            c.pump();
            return c.in.find(want) != std::string::npos || c.eof;
        }) && c.in.find(want) != std::string::npos;
    };
    REQUIRE(got(": mojo hold\n\n"));
    CHECK(rig.server->holds() == 1);
    // Published after the head went out (the moment a plain hold goes
    // lean), then a second burst that the flush stages together.
    REQUIRE(rig.bus.publish("c", "one").ok());
    CHECK(got("data: one\n\n"));
    REQUIRE(rig.bus.publish("c", "two").ok());
    REQUIRE(rig.bus.publish("c", "three").ok());
    CHECK(got("data: three\n\n"));
    CHECK(c.in.find("data: two") < c.in.find("data: three"));
    CHECK_FALSE(c.eof);
    CHECK(rig.server->holds() == 1);
}

TEST_CASE(
    "tls: a hold's events go to SSL_write at once while its output is empty; a record the "
    "socket would not take waits in the output, and every event arrives whole and in order",
    "[tls][hold]") {
    Certs certs;
    ServerConfig cfg = tls_config(certs, 52);
    cfg.hold_buffer_limit = 16u << 20;  // the client reads late, not slowly: kept
    HoldRig rig(std::move(cfg));
    TlsClient c(listen_tls(rig));
    REQUIRE(rig.step_until([&] { return c.handshake(); }));
    // The server's end takes little: its socket fills within a few hundred KiB.
    const int server_fd = peer_fd(c.fd);
    REQUIRE(server_fd >= 0);
    const int small = 4096;
    REQUIRE(::setsockopt(server_fd, SOL_SOCKET, SO_SNDBUF, &small, sizeof small) == 0);
    REQUIRE(c.write("GET /native/hold?channel=c HTTP/1.1\r\nHost: h\r\n\r\n"));
    REQUIRE(rig.loop.run_until([&] { return rig.pool->pool().queued() == 1; }));
    REQUIRE(rig.pool->pool().run_next());
    REQUIRE(rig.step_until([&] {
        c.pump();
        return c.in.find(": mojo hold\n\n") != std::string::npos;
    }));
    // Events of 1500 bytes, one a flush.
    auto payload = [](int i) {
        std::string p = "e" + std::to_string(i) + ":";
        while (p.size() < 1500) p += static_cast<char>('a' + (i + p.size()) % 26);
        return p;
    };
    const int n = 300;
    size_t flushes = 0;
    rig.server->on_flush_slice = [&](size_t) { ++flushes; };
    for (int i = 0; i < n; ++i) {
        const size_t before = flushes;
        REQUIRE(rig.bus.publish("c", payload(i)).ok());
        REQUIRE(rig.step_until([&] { return flushes > before; }));
        // The first half fills the socket; in the second the client reads
        // now and then, so the socket takes more while records wait.
        if (i >= n / 2 && i % 2 == 1) c.pump();
    }
    INFO("SSL_write took " << rig.server->tls_sent_now << " flushes at once, "
                           << rig.server->tls_sent_later << " waited");
    CHECK(rig.server->tls_sent_now > 0);
    CHECK(rig.server->tls_sent_later > 0);  // a record waited for the socket
    // Read everything: each event whole, in order, once.
    REQUIRE(rig.step_until(
        [&] {
            c.pump();
            return c.in.find(payload(n - 1)) != std::string::npos || c.eof;
        },
        10000ms));
    size_t at = 0;
    for (int i = 0; i < n; ++i) {
        const std::string event = "data: " + payload(i) + "\n\n";
        const size_t next = c.in.find(event, at);
        INFO("event " << i);
        REQUIRE(next != std::string::npos);
        CHECK(c.in.find(event, next + 1) == std::string::npos);  // once
        at = next;
    }
    CHECK(c.in.find("data: ", at + 1) == std::string::npos);  // nothing after the last
    CHECK_FALSE(c.eof);
    // Drained: the next event goes to SSL_write at once again.
    const size_t now = rig.server->tls_sent_now;
    REQUIRE(rig.bus.publish("c", "after").ok());
    REQUIRE(rig.step_until([&] {
        c.pump();
        return c.in.find("data: after\n\n") != std::string::npos;
    }));
    CHECK(rig.server->tls_sent_now == now + 1);
    CHECK(rig.server->holds() == 1);
}

TEST_CASE(
    "tls: past max_connections a TLS listener closes a new connection without a byte; "
    "one waiting for its first byte counts",
    "[tls][server]") {
    Certs certs;
    ServerConfig cfg = tls_config(certs, 61);
    cfg.max_connections = 1;
    TlsRig rig(std::move(cfg));
    const uint16_t port = listen_tls(rig);
    SocketClient first(connect_loopback(port));  // says nothing yet: a peek
    SocketClient second(connect_loopback(port));
    CHECK(rig.step_until([&] {
        second.pump();
        return second.eof;
    }));
    CHECK(second.in.empty());
    CHECK(rig.metrics.connections_refused.load() == 1);
    first.pump();
    CHECK_FALSE(first.eof);
}

namespace {

// One GET over TLS to `rig` (its listener on `port`), offering `resume`;
// whether the server resumed that session. `*out` (when given) gets the
// session the server gave (its ticket read with the answer).
bool get_resumed(TlsRig& rig, uint16_t port, SSL_SESSION* resume, SSL_SESSION** out = nullptr) {
    TlsClient c(port, resume);
    REQUIRE(rig.step_until([&] { return c.handshake(); }));
    REQUIRE(c.write(kGet));
    REQUIRE(rig.step_until([&] {
        c.pump();
        return c.in.find("ok\n") != std::string::npos;
    }));
    if (out) *out = SSL_get1_session(c.ssl);
    const bool resumed = SSL_session_reused(c.ssl) == 1;
    // A close_notify: OpenSSL marks a session freed without one not resumable.
    SSL_shutdown(c.ssl);
    return resumed;
}

}  // namespace

TEST_CASE(
    "tls: a ticket from one context resumes on another loaded with the same keys (two "
    "workers), and after a reload; not where the keys differ",
    "[tls][server]") {
    Certs certs;
    REQUIRE(certs.make("a", 71));
    const auto keys = TicketKeyring::make(TicketKeyring::kDefaultPeriod);
    ServerConfig cfg = tls_config(certs, 0, keys);
    const std::shared_ptr<TlsContext> tls = cfg.tls;
    TlsRig first(std::move(cfg));
    TlsRig second(tls_config(certs, 0, keys));
    TlsRig other(tls_config(certs, 0));  // keys of its own
    const uint16_t p1 = listen_tls(first), p2 = listen_tls(second), p3 = listen_tls(other);

    SSL_SESSION* session = nullptr;
    CHECK_FALSE(get_resumed(first, p1, nullptr, &session));
    REQUIRE(session);
    CHECK(SSL_SESSION_has_ticket(session) == 1);
    CHECK(get_resumed(first, p1, session));
    CHECK(get_resumed(second, p2, session));  // another worker, the same keys
    CHECK_FALSE(get_resumed(other, p3, session));
    std::string err;
    REQUIRE(tls->reload(err));
    CHECK(get_resumed(first, p1, session));  // a reload keeps the keys
    SSL_SESSION_free(session);
    CHECK(first.metrics.tls_handshakes.load() == 3);
    CHECK(first.metrics.tls_resumed.load() == 2);
    CHECK(other.metrics.tls_resumed.load() == 0);
}

namespace {

// The clock the rotation tests' rings read (seconds since the epoch).
std::atomic<int64_t> g_now{0};
int64_t test_now() { return g_now.load(); }

// A ring of `period` seconds reading g_now, set to the wall clock.
std::shared_ptr<TicketKeyring> ring_on_test_clock(int64_t period) {
    g_now = TicketKeyring::wall_seconds();
    auto ring = TicketKeyring::make(period);
    ring->clock = test_now;
    return ring;
}

bool same_key(const TicketKeyring::Key& a, const TicketKeyring::Key& b) {
    return a.name == b.name && a.hmac == b.hmac && a.aes == b.aes;
}

}  // namespace

TEST_CASE(
    "tls tickets: each period seals with a new key; the previous one still opens, older ones "
    "never again; a clock set back keeps the keys; periods skipped keep no previous key",
    "[tls][tickets]") {
    const int64_t P = 100;
    auto ring = ring_on_test_clock(P);
    const int64_t t0 = g_now.load();
    const int64_t n0 = ring->at();
    CHECK(n0 == t0 / P);
    const TicketKeyring::Key k0 = ring->sealing(t0);
    CHECK(same_key(ring->sealing(t0 + (P - 1 - t0 % P)), k0));  // the period's last second
    TicketKeyring::Key out;
    CHECK(ring->opening(k0.name.data(), t0, out) == TicketKeyring::Found::current);
    CHECK(same_key(out, k0));

    const TicketKeyring::Key k1 = ring->sealing(t0 + P);
    CHECK(ring->at() == n0 + 1);
    CHECK_FALSE(same_key(k1, k0));
    CHECK(k1.name != k0.name);
    CHECK(ring->opening(k0.name.data(), t0 + P, out) == TicketKeyring::Found::previous);
    CHECK(same_key(out, k0));
    CHECK(ring->opening(k1.name.data(), t0 + P, out) == TicketKeyring::Found::current);
    // A clock set back: no step back, nothing forgotten or remade.
    CHECK(same_key(ring->sealing(t0), k1));
    CHECK(ring->at() == n0 + 1);

    ring->step(t0 + 2 * P);
    CHECK(ring->opening(k0.name.data(), t0 + 2 * P, out) == TicketKeyring::Found::none);
    CHECK(ring->opening(k1.name.data(), t0 + 2 * P, out) == TicketKeyring::Found::previous);
    // Five periods with nothing stepping: the key of two periods back is gone.
    const TicketKeyring::Key k2 = ring->sealing(t0 + 2 * P);
    ring->step(t0 + 7 * P);
    CHECK(ring->at() == n0 + 7);
    CHECK(ring->opening(k2.name.data(), t0 + 7 * P, out) == TicketKeyring::Found::none);
    CHECK(ring->opening(k1.name.data(), t0 + 7 * P, out) == TicketKeyring::Found::none);
    CHECK_FALSE(same_key(ring->sealing(t0 + 7 * P), k2));
}

TEST_CASE(
    "tls tickets: one ring for every process forked after it: a step one makes is the others' "
    "too",
    "[tls][tickets]") {
    const int64_t P = 100;
    auto ring = ring_on_test_clock(P);
    const int64_t t0 = g_now.load();
    const int64_t n0 = ring->at();
    pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        ring->step(t0 + P);  // a worker steps it
        ::_exit(0);
    }
    int status = 0;
    REQUIRE(::waitpid(pid, &status, 0) == pid);
    REQUIRE(WIFEXITED(status));
    CHECK(ring->at() == n0 + 1);
}

TEST_CASE(
    "tls tickets: a session resumes in its period and the next, by the keys rotating every period, "
    "and not two periods on",
    "[tls][tickets][server]") {
    Certs certs;
    const int64_t P = 100;
    auto keys = ring_on_test_clock(P);
    const int64_t t0 = g_now.load();
    TlsRig rig(tls_config(certs, 73, keys));
    const uint16_t port = listen_tls(rig);
    SSL_SESSION* session = nullptr;
    CHECK_FALSE(get_resumed(rig, port, nullptr, &session));
    REQUIRE(session);
    CHECK(get_resumed(rig, port, session));
    g_now = t0 + P;  // the next period: the key before still opens it
    CHECK(get_resumed(rig, port, session));
    g_now = t0 + 2 * P;
    CHECK_FALSE(get_resumed(rig, port, session));
    SSL_SESSION_free(session);
}
