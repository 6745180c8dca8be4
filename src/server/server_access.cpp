// The access log's entries (--access-log): begun when a request is
// dispatched, the answer's status and bytes noted as they are written,
// the line written when the request ends or its connection closes (a hold:
// with how long it lasted and the events it delivered). Loop thread.
#include <ctime>

#include "loop/loop.hpp"
#include "server/access_log.hpp"
#include "server/conn.hpp"

namespace m0::server {

void Server::access_begin(std::unique_ptr<AccessEntry>& a, const http::Request& req, SlotRef slot) {
    if (a) access_end(a, slot);  // never left open, but never lost either
    auto e = std::make_unique<AccessEntry>();
    e->started = monotonic_seconds();
    e->rec.received = std::time(nullptr);
    e->rec.remote = req.remote_addr;
    e->rec.request = req.method + " " + http::redact_target(req.target) + " " + req.protocol();
    if (auto v = req.headers.get("Referer")) e->rec.referer = *v;
    if (auto v = req.headers.get("User-Agent")) e->rec.user_agent = *v;
    a = std::move(e);
}

void Server::access_answer(std::unique_ptr<AccessEntry>& a, const std::string& remote, int status,
                           size_t head_bytes) {
    if (!a) {
        // An answer to a request that never parsed (400, 408, 413, 431, ...):
        // logged with "-" for its request line, as the combined format has it.
        a = std::make_unique<AccessEntry>();
        a->started = monotonic_seconds();
        a->rec.received = std::time(nullptr);
        a->rec.remote = remote;
    }
    a->rec.status = status;
    a->rec.bytes += head_bytes;
    a->hold_started = monotonic_seconds();
    a->rec.seconds = a->hold_started - a->started;
}

void Server::access_end(std::unique_ptr<AccessEntry>& a, SlotRef slot) {
    std::unique_ptr<AccessEntry> e = std::move(a);
    if (!access_log_) return;
    double now = monotonic_seconds();
    if (e->rec.status == 0) {
        // The connection closed before any answer: the client left, or a
        // hold was refused at its head. Logged as nginx logs it, 499.
        e->rec.status = 499;
        e->rec.seconds = now - e->started;
    } else if (e->rec.hold) {
        e->rec.hold_seconds = now - e->hold_started;
        e->rec.events = holds_.delivered(slot);
    } else {
        e->rec.seconds = now - e->started;
    }
    access_log_->write(http::format_access(e->rec));
}

void Server::access_begin(Conn& c, const http::Request& req) {
    access_begin(c.access, req, c.slot);
}

void Server::access_answer(Conn& c, int status, size_t head_bytes) {
    access_answer(c.access, c.remote_addr, status, head_bytes);
}

void Server::access_bytes(Conn& c, size_t n) { c.access->rec.bytes += n; }

void Server::access_end(Conn& c) { access_end(c.access, c.slot); }

}  // namespace m0::server
