// tls_floor: what OpenSSL alone keeps for one idle TLS connection on the
// server's side, the floor under the bench's memory a hold over TLS.
//
// DESIGN
// A server that terminates TLS with OpenSSL keeps an SSL for each open
// connection. This program makes the server's context as m0serve does
// (server/tls.cpp: TLS 1.2 and 1.3, session tickets, idle buffers released
// with SSL_MODE_RELEASE_BUFFERS; an ECDSA P-256 certificate made in memory),
// then opens --connections connections on AF_UNIX socket pairs (the kernel's
// buffers are not the process's memory), each a full handshake driven from
// both ends, one --bytes record from the server read by the client (and the
// client's reading of the server's session tickets), and keeps the server's
// SSL of each while the client's is freed. Its figures are malloc's bytes in
// use (mallinfo2) and the process's RSS, grown over the connections, per
// connection: no event loop, no buffers of a server's own, nothing but
// OpenSSL's state. Prints one JSON line.
//
//   build/tls_floor --connections 1000
#include <malloc.h>
#include <openssl/ec.h>
#include <openssl/evp.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

[[noreturn]] void die(const char* why) {
    std::fprintf(stderr, "tls_floor: %s\n", why);
    std::exit(2);
}

long rss_kib() {
    FILE* f = std::fopen("/proc/self/status", "r");
    if (!f) return 0;
    char line[256];
    long kib = 0;
    while (std::fgets(line, sizeof line, f))
        if (std::strncmp(line, "VmRSS:", 6) == 0) kib = std::strtol(line + 6, nullptr, 10);
    std::fclose(f);
    return kib;
}

// A self-signed ECDSA P-256 certificate and its key, for the server's context.
void certify(SSL_CTX* ctx) {
    EVP_PKEY* key = EVP_EC_gen("P-256");
    X509* cert = X509_new();
    if (!key || !cert) die("cannot make a key");
    ASN1_INTEGER_set(X509_get_serialNumber(cert), 1);
    X509_gmtime_adj(X509_getm_notBefore(cert), 0);
    X509_gmtime_adj(X509_getm_notAfter(cert), 86400);
    X509_set_pubkey(cert, key);
    X509_NAME* name = X509_get_subject_name(cert);
    X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
                               reinterpret_cast<const unsigned char*>("localhost"), -1, -1, 0);
    X509_set_issuer_name(cert, name);
    if (!X509_sign(cert, key, EVP_sha256()) || SSL_CTX_use_certificate(ctx, cert) != 1 ||
        SSL_CTX_use_PrivateKey(ctx, key) != 1)
        die("cannot use the certificate");
    X509_free(cert);
    EVP_PKEY_free(key);
}

// Steps both ends until each has done `step` (a handshake, a write, a read).
bool drive(SSL* a, SSL* b, int (*step_a)(SSL*), int (*step_b)(SSL*)) {
    bool done_a = false, done_b = false;
    for (int i = 0; i < 1000 && !(done_a && done_b); ++i) {
        if (!done_a) {
            int r = step_a(a);
            int e = SSL_get_error(a, r);
            if (r > 0)
                done_a = true;
            else if (e != SSL_ERROR_WANT_READ && e != SSL_ERROR_WANT_WRITE)
                return false;
        }
        if (!done_b) {
            int r = step_b(b);
            int e = SSL_get_error(b, r);
            if (r > 0)
                done_b = true;
            else if (e != SSL_ERROR_WANT_READ && e != SSL_ERROR_WANT_WRITE)
                return false;
        }
    }
    return done_a && done_b;
}

long record_bytes = 100;
std::string record;
int server_write(SSL* s) { return SSL_write(s, record.data(), int(record.size())); }
int client_read(SSL* s) {
    static char buf[16384];
    return SSL_read(s, buf, sizeof buf);
}

}  // namespace

int main(int argc, char** argv) {
    long n = 1000;
    bool release = true;
    for (int i = 1; i < argc; ++i) {
        std::string a = argv[i];
        if (a == "--help") {
            std::puts(
                "usage: tls_floor [--connections N] [--bytes B] [--keep-buffers]\n"
                "  N idle TLS connections' server SSLs kept (default 1000); each had a full\n"
                "  handshake and one B-byte record (default 100); --keep-buffers: without\n"
                "  SSL_MODE_RELEASE_BUFFERS. Prints malloc's bytes and RSS a connection.");
            return 0;
        }
        if (a == "--keep-buffers") {
            release = false;
            continue;
        }
        if (i + 1 >= argc) die("a flag wants a value (see --help)");
        long v = std::strtol(argv[++i], nullptr, 10);
        if (a == "--connections" && v >= 1 && v <= 100000)
            n = v;
        else if (a == "--bytes" && v >= 1 && v <= 16384)
            record_bytes = v;
        else
            die("unknown flag or value out of range (see --help)");
    }
    record.assign(size_t(record_bytes), 'x');
    SSL_CTX* sctx = SSL_CTX_new(TLS_server_method());
    SSL_CTX* cctx = SSL_CTX_new(TLS_client_method());
    if (!sctx || !cctx) die("SSL_CTX_new");
    SSL_CTX_set_min_proto_version(sctx, TLS1_2_VERSION);
    SSL_CTX_set_options(
        sctx, SSL_OP_NO_RENEGOTIATION | SSL_OP_NO_COMPRESSION | SSL_OP_CIPHER_SERVER_PREFERENCE);
    if (release) SSL_CTX_set_mode(sctx, SSL_MODE_RELEASE_BUFFERS);
    certify(sctx);

    // A first connection, kept out of the count: OpenSSL's one-time state
    // (providers, the context's caches) is not a connection's.
    std::vector<SSL*> kept;
    std::vector<int> fds;
    long rss0 = 0;
    size_t heap0 = 0;
    for (long i = 0; i <= n; ++i) {
        int sv[2];
        if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv) != 0) die("socketpair");
        SSL* s = SSL_new(sctx);
        SSL* c = SSL_new(cctx);
        SSL_set_fd(s, sv[0]);
        SSL_set_fd(c, sv[1]);
        SSL_set_accept_state(s);
        SSL_set_connect_state(c);
        if (!drive(s, c, SSL_do_handshake, SSL_do_handshake)) die("a handshake failed");
        if (!drive(s, c, server_write, client_read)) die("a record did not arrive");
        SSL_free(c);
        ::close(sv[1]);
        kept.push_back(s);
        fds.push_back(sv[0]);
        if (i == 0) {
            rss0 = rss_kib();
            heap0 = mallinfo2().uordblks;
        }
    }
    const long rss1 = rss_kib();
    const size_t heap1 = mallinfo2().uordblks;
    std::printf(
        "{\"label\": \"tls-floor\", \"connections\": %ld, \"release_buffers\": %s, "
        "\"protocol\": \"%s\", \"cipher\": \"%s\", \"heap_per_connection_bytes\": %.0f, "
        "\"rss_per_connection_bytes\": %.0f}\n",
        n, release ? "true" : "false", SSL_get_version(kept.back()),
        SSL_CIPHER_get_name(SSL_get_current_cipher(kept.back())), double(heap1 - heap0) / double(n),
        double(rss1 - rss0) * 1024.0 / double(n));
    for (SSL* s : kept) SSL_free(s);
    for (int fd : fds) ::close(fd);
    SSL_CTX_free(sctx);
    SSL_CTX_free(cctx);
    return 0;
}
