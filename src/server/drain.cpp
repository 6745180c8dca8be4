// Server's drain (SIGTERM, or a --workers worker being retired): the client
// listeners close, holds get their retry hint, what is in flight finishes
// within the grace period, and the loop exits once no client is left.
// Loop thread only.
#include <event2/buffer.h>

#include "loop/log.hpp"
#include "server/conn.hpp"
#include "server/server.hpp"

namespace m0::server {

namespace {
// How often the loop with the admin listener looks whether the other loops
// have drained.
constexpr double kDrainRecheckSeconds = 0.05;
}  // namespace

void Server::shutdown() {
    if (shutting_down_) return;
    shutting_down_ = true;
    shutdown_at_ = monotonic_seconds();
    admin_.set_draining();  // GET /ready: 503 from now on
    // Closed, not just disabled: a client that connects now is refused at
    // once instead of waiting in the backlog to be reset at exit. One that
    // connected before is accepted first, and answered below.
    accept_backlog();
    close_listeners(false);
    // The process says it once, with every loop's count (serve.cpp).
    M0_LOG(debug, "loop shutting down: ", std::to_string(open_), " connections, ",
           std::to_string(holds_.holding().size()), " holds");
    for (auto& e : slots_) {
        Conn* c = e.conn.get();
        if (!c || c->admin) continue;
        if (c->h2) {
            if (c->phase == Phase::h2) h2_shutdown(*c);
            continue;
        }
        if (c->phase == Phase::holding || c->phase == Phase::polling) {
            c->keep_alive = false;  // a long-poll is answered, then closed
            drop_hold(c->slot);
        } else if (c->phase == Phase::reading && !c->parser->in_message() &&
                   evbuffer_get_length(bufferevent_get_input(c->bev)) == 0 && c->dispatched) {
            // Idle between requests: closed (a client that sends as it closes
            // sends again, as HTTP clients do on a reused connection), once
            // its last answer is out: one written this very turn is still
            // in the output, and closing now would drop it.
            if (evbuffer_get_length(bufferevent_get_output(c->bev)) == 0)
                close_conn(*c);
            else
                c->close_after_write();
        } else {
            // Busy, or new: a connection accepted before the listener closed
            // has its first request on the way (--header-timeout bounds the
            // wait); it is answered, then closed.
            c->keep_alive = false;
        }
    }
    grace_timer_ = std::make_unique<Timer>(loop_, [this] {
        M0_LOG(warn, "grace period over: closing ", std::to_string(open_), " connections");
        grace_expired_ = true;
        for (auto& e : slots_)
            if (e.conn) close_conn(*e.conn);
        loop_.exit();
    });
    grace_timer_->start(cfg_.grace);
    check_drained();
}

void Server::check_drained() {
    if (exited_) return;
    size_t client = 0;
    for (auto& e : slots_)
        if (e.conn && !e.conn->admin) ++client;
    if (client == 0) {
        // The loop with the admin listener serves on (GET /ready: 503) while
        // another loop drains: the clients counter is shared by every loop.
        bool admin = false;
        for (const auto& l : listeners_) admin = admin || (l->admin && l->ev);
        if (admin && open_clients_->load() > 0) {
            if (!drain_recheck_)
                drain_recheck_ = std::make_unique<Timer>(loop_, [this] { check_drained(); });
            drain_recheck_->start(kDrainRecheckSeconds);
            return;
        }
        exited_ = true;
        close_listeners(true);
        for (auto& e : slots_)
            if (e.conn) close_conn(*e.conn);
        loop_.exit();
    }
}

}  // namespace m0::server
