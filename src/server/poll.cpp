// Server, the loop side of GRIP's long-poll (Grip-Hold: response). Loop
// thread only.
//
// The pool thread sent the h frame (response, timeout) before it posted the
// handler's answer, as for a stream hold; the loop drained its bus channel
// first, so the slot is subscribed (HoldTable, Transport::response) and the
// connection has its PollState. finish_poll() keeps the handler's answer and
// waits in Phase::polling: the first event on the channels after the cursor
// (from the replay, or live) makes the answer (poll_subscriber.cpp), or, at
// Grip-Timeout, the handler's own answer is sent as it is. Either way the
// request ends as any other: the connection stays open for the next one
// (keep-alive), which is how a long-polling client asks again. A client that
// leaves meanwhile is seen as while a request waits (probe_departure) and its
// subscription released; a close of its channel (admin /close) and the
// shutdown answer it with the handler's own answer at once.
#include "loop/log.hpp"
#include "server/conn.hpp"
#include "server/h2_conn.hpp"
#include "server/server.hpp"

namespace m0::server {

void Server::finish_poll(Conn& c, http::Response& r) {
    if (c.peer_eof && c.peer_reset()) {  // the client left while the hold was decided
        close_conn(c);
        return;
    }
    if (const char* why = invalid_answer(r)) {
        holds_.release(c.slot);
        c.poll.reset();
        c.refuse_answer(why);
        return;
    }
    if (c.head_request || shutting_down_) {
        // RFC 9110 §9.3.2: HEAD is answered with the head alone, at once; a
        // server that is leaving answers with the handler's own answer.
        holds_.release(c.slot);
        c.poll.reset();
        c.send_whole(r);
        c.finish_request();
        return;
    }
    c.poll->held = std::move(r);
    c.phase = Phase::polling;
    c.deadline = monotonic_seconds() + c.poll->timeout;
    c.arm_timer(c.peer_eof ? std::min(kProbeSeconds, double(c.poll->timeout)) : c.poll->timeout);
    metrics_.holds_total.fetch_add(1);
    // An event already waiting (replayed, or published while the answer was
    // decided) answers it now.
    holds_.start(c.slot, monotonic_seconds());
}

void Server::answer(SlotRef slot, const bus::PublishFrame* event) {
    Conn* c = find(slot);
    if (H2Stream* st = c ? nullptr : find_stream(slot)) {
        h2_answer(*st, event);
        return;
    }
    if (!c || c->phase != Phase::polling || !c->poll) {
        holds_.release(slot);
        return;
    }
    http::Response r = event ? subscriber(Transport::response).answer(c->poll->held, *event)
                             : std::move(c->poll->held);
    c->poll.reset();
    holds_.release(slot);
    c->disarm_timer();
    c->send_whole(r);
    c->finish_request();
}

void Server::h2_poll(Conn& c, H2Stream& st, http::Response& r) {
    st.poll = false;
    if (const char* why = invalid_answer(r)) {
        holds_.release(st.slot);
        http::Response e = http::error_response(502, why);
        h2_whole(c, st, e);
        return;
    }
    if (st.head_request || shutting_down_ || c.h2->going_away) {
        holds_.release(st.slot);
        h2_whole(c, st, r);
        return;
    }
    st.poll_held = std::make_unique<http::Response>(std::move(r));
    st.state = H2Stream::State::polling;
    st.deadline = monotonic_seconds() + st.poll_timeout;
    h2_arm(c, st.deadline);
    metrics_.holds_total.fetch_add(1);
    holds_.start(st.slot, monotonic_seconds());
}

void Server::h2_answer(H2Stream& st, const bus::PublishFrame* event) {
    Conn* c = find(st.conn);
    const SlotRef slot = st.slot;
    if (!c || c->phase != Phase::h2 || st.state != H2Stream::State::polling || !st.poll_held) {
        holds_.release(slot);
        return;
    }
    http::Response r = event ? subscriber(Transport::response).answer(*st.poll_held, *event)
                             : std::move(*st.poll_held);
    st.poll_held.reset();
    holds_.release(slot);
    h2_whole(*c, st, r);
}

void Server::poll_timed_out(Conn& c) {
    M0_LOG(debug, "long-poll of slot ", to_string(c.slot), " timed out");
    holds_.drop(c.slot, 0);  // answers with the handler's own answer (answer(), null)
}

}  // namespace m0::server
