// The flag table's TLS rows (flags.cpp has the rest and says how a row is
// read). Main thread only, before anything else starts.
#include "app/flags.hpp"

namespace m0::app {

// clang-format off
#define AT(field) +[](Options& o) -> auto& { return o.field; }
// clang-format on

std::vector<Flag> with_tls_rows(std::vector<Flag> rows) {
    std::vector<Flag> tls{
        {
            .name = "certfile",
            .kind = Flag::value,
            .metavar = "PATH",
            .shown = "none",
            .help = "TLS: the certificate (PEM, then its chain); with\n"
                    "--keyfile, every TCP --listen serves HTTPS",
            .doc = "TLS on every TCP `--listen` (gunicorn's name): the server's certificate, PEM, "
                   "followed by its chain. With `--keyfile`, both or neither; a file that does "
                   "not read, or a key that is not the certificate's, is a start-up error naming "
                   "the file. TLS 1.2 and 1.3 only, ALPN `http/1.1`, resumption by tickets and a "
                   "session cache. SIGHUP (SIGUSR1 under `--workers`) reads both again for new "
                   "connections (see TLS)",
            .to = text(AT(certfile)),
        },
        {
            .name = "keyfile",
            .kind = Flag::value,
            .metavar = "PATH",
            .shown = "none",
            .help = "TLS: the certificate's private key (PEM)",
            .doc =
                "the private key of `--certfile` (PEM, unencrypted: a passphrase-protected key is "
                "refused at start, no passphrase asked)",
            .to = text(AT(keyfile)),
        },
        {
            .name = "listen-plain",
            .kind = Flag::list,
            .metavar = "HOST:PORT",
            .shown = "none",
            .help = "a listener that stays plain HTTP with --certfile\n"
                    "(a local health check, a proxy); repeatable",
            .doc = "repeatable; a TCP listener as `--listen` gives, that stays plain HTTP when "
                   "`--certfile` puts TLS on the others (a local health check, a proxy in "
                   "front). A `unix:` listener is always plain",
            .to = custom(set::listen_plain),
        },
        {
            .name = "tls-handshake-timeout",
            .kind = Flag::value,
            .metavar = "SECONDS",
            .help = "a TLS connection's first byte and handshake are\n"
                    "due within this (default {default})",
            .doc = "a connection to a TLS listener whose first byte and handshake have not come "
                   "within this many seconds of its accept is closed; then `--header-timeout` "
                   "runs for its first request",
            .to = seconds(AT(server.tls_handshake_timeout)),
        },
        {
            .name = "tls-ticket-rotation",
            .kind = Flag::value,
            .metavar = "SECONDS",
            .help = "TLS session ticket keys are replaced this often\n(default {default})",
            .doc = "every this many seconds (on the wall clock, the same periods in every "
                   "`--workers` process) a new session ticket key seals new tickets; the one "
                   "before still opens tickets for one more period (they are renewed), older "
                   "ones are gone from every process and cannot be derived again. A session "
                   "lives this long (the lifetime hint its ticket carries); 1 to 604800",
            .to = number(AT(tls_ticket_rotation), 1, 604800),
        },
        {
            .name = "admin-tls",
            .kind = Flag::toggle,
            .help = "TLS on the --admin-listen too (with --certfile)",
            .doc = "the admin listener serves TLS with the same certificate (it is plain "
                   "otherwise: it is meant for loopback and operators); needs `--certfile` and "
                   "a TCP `--admin-listen`",
            .to = on(AT(server.admin_tls)),
        },
    };
    return insert_after(std::move(rows), "unix-owner", std::move(tls));
}

#undef AT

}  // namespace m0::app
