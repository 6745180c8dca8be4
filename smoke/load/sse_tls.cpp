// sse_load's TLS: the client contexts and OpenSSL bufferevents its https://
// streams use, and the handshake loop (--handshakes).
//
// The server's certificate is verified against --cafile, and the URL's IP
// address against its names. No session is kept or offered: every
// connection is a full handshake, as a first visit is, whatever tickets or
// session ids the server hands out. The handshake loop keeps --connecting
// connections in flight, each a handshake and one GET with `Connection:
// close` read to the server's close, and prints handshakes a second and the
// server's CPU a handshake. One thread, the run's loop.
#include <event2/buffer.h>
#include <event2/bufferevent_ssl.h>
#include <openssl/err.h>
#include <openssl/x509v3.h>

#include <cstdio>
#include <string>

#include "sse_load.hpp"

namespace sse {

SSL_CTX* tls_client_ctx(const std::string& cafile, std::string_view alpn) {
    SSL_CTX* ctx = SSL_CTX_new(TLS_client_method());
    if (!ctx) die("SSL_CTX_new failed");
    SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
    if (SSL_CTX_load_verify_locations(ctx, cafile.c_str(), nullptr) != 1)
        die("--cafile " + cafile + ": not a readable PEM certificate");
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, nullptr);
    SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
    SSL_CTX_set_mode(ctx, SSL_MODE_RELEASE_BUFFERS);  // the driver's memory at 10000 streams
    // RFC 7301 §3.1: protocol names, each behind its one-byte length.
    std::string wire(1, char(alpn.size()));
    wire += alpn;
    if (SSL_CTX_set_alpn_protos(ctx, reinterpret_cast<const unsigned char*>(wire.data()),
                                unsigned(wire.size())) != 0)
        die("SSL_CTX_set_alpn_protos failed");
    return ctx;
}

bufferevent* tls_bufferevent(event_base* base, int fd, SSL_CTX* ctx, const std::string& host) {
    SSL* ssl = SSL_new(ctx);
    if (!ssl) die("SSL_new failed");
    // The host is an IPv4 address (dial takes no other): the certificate must name it.
    if (X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), host.c_str()) != 1)
        die("not an IP address: '" + host + "'");
    bufferevent* bev = bufferevent_openssl_socket_new(base, fd, ssl, BUFFEREVENT_SSL_CONNECTING,
                                                      BEV_OPT_CLOSE_ON_FREE);
    if (!bev) die("bufferevent_openssl_socket_new failed");
    // A server that closes without close_notify ends the stream, not an error.
    bufferevent_openssl_set_allow_dirty_shutdown(bev, 1);
    return bev;
}

std::string tls_alpn(bufferevent* bev) {
    const unsigned char* p = nullptr;
    unsigned n = 0;
    if (SSL* ssl = bufferevent_openssl_get_ssl(bev)) SSL_get0_alpn_selected(ssl, &p, &n);
    return p ? std::string(reinterpret_cast<const char*>(p), n) : std::string();
}

namespace {

// The loop's counts (the run's thread).
struct Shakes {
    Run* run = nullptr;
    std::string request;
    int started = 0, done = 0, failed = 0, resumed = 0;
    int64_t t0 = 0, t_end = 0;
    std::string version, cipher;  // the first connection's
    std::string first_error;
} shakes;

// One connection of the loop: its status line, once read.
struct Shake {
    bufferevent* bev = nullptr;
    std::string status;
};

void shake_next();

void shake_end(Shake* s, bool ok) {
    (ok ? shakes.done : shakes.failed)++;
    bufferevent_free(s->bev);
    delete s;
    if (shakes.done + shakes.failed < shakes.run->o.handshakes) return shake_next();
    shakes.t_end = now_ns();
    event_base_loopbreak(shakes.run->base);
}

void on_shake_read(bufferevent* bev, void* arg) {
    auto* s = static_cast<Shake*>(arg);
    evbuffer* in = bufferevent_get_input(bev);
    char buf[16];
    if (s->status.size() < 12) {
        const int n = evbuffer_remove(in, buf, 12 - s->status.size());
        if (n > 0) s->status.append(buf, size_t(n));
    }
    evbuffer_drain(in, evbuffer_get_length(in));
}

void on_shake_event(bufferevent* bev, short what, void* arg) {
    auto* s = static_cast<Shake*>(arg);
    if (what & BEV_EVENT_CONNECTED) {
        SSL* ssl = bufferevent_openssl_get_ssl(bev);
        shakes.resumed += SSL_session_reused(ssl);
        if (shakes.version.empty()) {
            shakes.version = SSL_get_version(ssl);
            shakes.cipher = SSL_get_cipher_name(ssl);
        }
        bufferevent_write(bev, shakes.request.data(), shakes.request.size());
        return;
    }
    if ((what & BEV_EVENT_ERROR) && shakes.first_error.empty()) {
        const unsigned long e = bufferevent_get_openssl_error(bev);
        shakes.first_error = e ? ERR_reason_error_string(e) : "the connection failed";
    }
    // The server closes after its answer (Connection: close).
    shake_end(s, (what & BEV_EVENT_EOF) && s->status.rfind("HTTP/1.1 200", 0) == 0);
}

void shake_next() {
    Run& r = *shakes.run;
    if (shakes.started >= r.o.handshakes) return;
    auto* s = new Shake;
    s->bev = dial(r, r.stream, shakes.started % r.o.sources, r.tls_h1);
    shakes.started++;
    bufferevent_setcb(s->bev, on_shake_read, nullptr, on_shake_event, s);
    bufferevent_enable(s->bev, EV_READ);
}

}  // namespace

int run_handshakes(Run& r) {
    shakes.run = &r;
    shakes.request = "GET " + stream_path(r, 0) + " HTTP/1.1\r\nHost: " + r.stream.host +
                     "\r\nConnection: close\r\n\r\n";
    const double cpu_before = cpu_seconds(r.pids), own_before = own_cpu_seconds();
    shakes.t0 = now_ns();
    for (int i = 0; i < r.o.connecting; ++i) shake_next();
    event_base_dispatch(r.base);
    const double secs = double(shakes.t_end - shakes.t0) / 1e9;
    const double cpu = cpu_seconds(r.pids) - cpu_before, own = own_cpu_seconds() - own_before;
    std::printf(
        "{\"label\": \"%s\", \"handshakes\": %d, \"done\": %d, \"failed\": %d, \"resumed\": %d, "
        "\"seconds\": %.3f, \"handshakes_per_s\": %.1f, \"cpu_s\": %.3f, "
        "\"cpu_ms_per_handshake\": %.4f, \"driver_cpu_ms_per_handshake\": %.4f, "
        "\"tls_version\": \"%s\", \"cipher\": \"%s\", \"first_error\": \"%s\"}\n",
        r.o.label.c_str(), r.o.handshakes, shakes.done, shakes.failed, shakes.resumed, secs,
        secs > 0 ? shakes.done / secs : 0.0, cpu, shakes.done ? cpu / shakes.done * 1e3 : 0.0,
        shakes.done ? own / shakes.done * 1e3 : 0.0, shakes.version.c_str(), shakes.cipher.c_str(),
        shakes.first_error.c_str());
    return shakes.failed == 0 && shakes.resumed == 0 ? 0 : 1;
}

}  // namespace sse
