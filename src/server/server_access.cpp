// The access log's entries (--access-log): begun when a request is
// dispatched, the answer's status and bytes noted as they are written,
// the line written when the request ends or its connection closes (a hold:
// with how long it lasted and the events it delivered). Loop thread.
#include <ctime>

#include "loop/loop.hpp"
#include "server/access_log.hpp"
#include "server/conn.hpp"

namespace m0::server {

void Server::access_begin(Conn& c, const http::Request& req) {
    if (c.access) access_end(c);  // never left open, but never lost either
    auto e = std::make_unique<AccessEntry>();
    e->started = monotonic_seconds();
    e->rec.received = std::time(nullptr);
    e->rec.remote = req.remote_addr;
    e->rec.request = req.method + " " + http::redact_target(req.target) + " " + req.protocol();
    if (auto v = req.headers.get("Referer")) e->rec.referer = *v;
    if (auto v = req.headers.get("User-Agent")) e->rec.user_agent = *v;
    c.access = std::move(e);
}

void Server::access_answer(Conn& c, int status, size_t head_bytes) {
    if (!c.access) {
        // An answer to a request that never parsed (400, 408, 413, 431, ...):
        // logged with "-" for its request line, as the combined format has it.
        c.access = std::make_unique<AccessEntry>();
        c.access->started = monotonic_seconds();
        c.access->rec.received = std::time(nullptr);
        c.access->rec.remote = c.remote_addr;
    }
    c.access->rec.status = status;
    c.access->rec.bytes += head_bytes;
    c.access->hold_started = monotonic_seconds();
    c.access->rec.seconds = c.access->hold_started - c.access->started;
}

void Server::access_bytes(Conn& c, size_t n) { c.access->rec.bytes += n; }

void Server::access_end(Conn& c) {
    std::unique_ptr<AccessEntry> e = std::move(c.access);
    if (!access_log_) return;
    double now = monotonic_seconds();
    if (e->rec.status == 0) {
        // The connection closed before any answer: the client left, or a
        // hold was refused at its head. Logged as nginx logs it, 499.
        e->rec.status = 499;
        e->rec.seconds = now - e->started;
    } else if (e->rec.hold) {
        e->rec.hold_seconds = now - e->hold_started;
        e->rec.events = holds_.delivered(c.slot);
    } else {
        e->rec.seconds = now - e->started;
    }
    access_log_->write(http::format_access(e->rec));
}

}  // namespace m0::server
