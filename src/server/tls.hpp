// TLS on the listeners (--certfile, --keyfile): the server's certificate and
// key as one OpenSSL context, swapped whole when they are read again.
//
// DESIGN
// A TlsContext holds the SSL_CTX that new connections are made from. Every
// loop thread calls new_ssl() as it accepts; the main loop's SIGHUP (or a
// worker's SIGUSR1) calls reload(). The current context is one pointer
// under `mu_`: reload() builds a complete new context (certificate chain,
// key, their match checked) outside the lock and swaps it in only when
// everything loaded, so a bad file keeps the one in use. An SSL takes its own
// reference on its context (SSL_new), so a connection accepted before a
// reload keeps the certificate it was made with until it closes.
//
// The context: TLS 1.2 and 1.3 only; for 1.2 the ECDHE AEAD suites
// (Mozilla's "intermediate"), 1.3's own defaults; no renegotiation, no
// compression; ALPN offers http/1.1 alone (h2 joins once HTTP/2 is served:
// offering it first would break clients that pick it); idle read and write
// buffers released (SSL_MODE_RELEASE_BUFFERS), which most of a held
// connection's TLS memory is.
//
// Resumption: by session tickets (RFC 5077, TLS 1.3's NewSessionTicket) and
// by the server's session cache (TLS 1.2 session ids; per context). The
// tickets are sealed with keys from one TicketKeyring (tls_tickets.hpp),
// made by the process that reads the flags before --workers forks and
// shared with every worker, and every worker a roll or a restart forks
// later: a client resumes whichever worker the kernel hands its connection
// to; a reload keeps the ring, so a renewed certificate does not cost every
// client a full handshake. The keys rotate every --tls-ticket-rotation
// seconds, a session lives as long, and they are new with each start or
// binary upgrade.
#pragma once
#include <array>
#include <memory>
#include <mutex>
#include <string>

#include "server/tls_tickets.hpp"

struct ssl_st;
struct ssl_ctx_st;

namespace m0::server {

// The first byte of a TLS connection: a handshake record (RFC 8446 §5.1:
// ContentType handshake(22)). A plain HTTP request starts with a method's letter.
inline constexpr unsigned char kTlsHandshakeByte = 0x16;

// Whether `first`, the first byte a client sent on a TLS listener, can begin
// a TLS handshake. Any thread.
inline bool starts_tls(unsigned char first) { return first == kTlsHandshakeByte; }

class TlsContext {
  public:
    // The context of `certfile` (PEM: the certificate, then its chain) and
    // `keyfile` (PEM). Null with `err` set to one line naming the file when
    // one cannot be read or the key is not the certificate's. Any thread.
    // Its tickets are sealed with keys from `tickets` (the other form makes
    // a ring of its own, rotating hourly), and so are those of every context
    // a reload makes.
    static std::shared_ptr<TlsContext> load(const std::string& certfile, const std::string& keyfile,
                                            std::string& err);
    static std::shared_ptr<TlsContext> load(const std::string& certfile, const std::string& keyfile,
                                            std::shared_ptr<TicketKeyring> tickets,
                                            std::string& err);
    ~TlsContext();
    TlsContext(const TlsContext&) = delete;
    TlsContext& operator=(const TlsContext&) = delete;

    // Reads the two files again; new connections get the new context. False
    // with `err` set (one line naming the file) when they do not load: the
    // context in use is kept. Any thread.
    bool reload(std::string& err);
    // A new server-side SSL from the current context; null when OpenSSL
    // cannot make one (out of memory). Without `h2`, its ALPN offers
    // http/1.1 alone (the admin listener speaks no HTTP/2). Any thread.
    ssl_st* new_ssl(bool h2 = true) const;
    const std::string& certfile() const { return certfile_; }
    const std::string& keyfile() const { return keyfile_; }

  private:
    TlsContext(std::string certfile, std::string keyfile, std::shared_ptr<TicketKeyring> tickets,
               ssl_ctx_st* ctx);
    const std::string certfile_, keyfile_;
    // Set at load, kept by reload; its contexts' ticket callback reads it.
    const std::shared_ptr<TicketKeyring> tickets_;
    mutable std::mutex mu_;
    ssl_ctx_st* ctx_;  // under mu_: the context new connections are made from
};

}  // namespace m0::server
