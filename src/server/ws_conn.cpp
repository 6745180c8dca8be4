// Server, WebSocket connections (RFC 6455): the handshake's check, the 101,
// reading the client's frames, the close handshake, pings. Loop thread only.
//
// DESIGN
// A WebSocket is a hold whose transport is Transport::websocket. The upgrade
// request is checked on the loop before any pool sees it (ws_handshake: a bad
// one is answered 400, 426 or 403 and closed). A valid one is dispatched like
// any request; a handler that answers `M0-Hold: websocket` holds it: the
// pool thread sends the h frame (marked websocket) before its completion, and
// the loop drains its lane before it writes the 101 (finish_hold_head), so
// the subscription exists before the head, as for every hold. The handler's
// body is not sent; a Sec-WebSocket-Protocol it answers is echoed when the
// client offered it.
//
// I/O. The server's frames to many subscribers (events, the ping heartbeat,
// the end) are made once and shared (ws_subscriber.cpp), written through the
// hold table like an SSE stream's: staged, one sendmsg a connection a turn,
// the lean output after the 101 (hold_output.cpp). A hold's lean event reads
// too (EV_READ always): for a WebSocket it feeds what it reads to wslay
// instead of dropping it, at most kReadBudget bytes a turn, so one client
// that sends fast cannot keep the loop from the others. wslay's context (a
// WsReader, about 8.3 KiB) exists only while it is needed: made when the
// client's bytes arrive or a ping is to go (ws_reader), freed when what it
// was given is read to the end of a message and it has nothing to send
// (ws_release), so a subscriber costs about what an SSE hold does. Before the hold is
// lean (the 101 still in the bufferevent's output) wslay reads the
// bufferevent's input. wslay's own frames (pongs, the answer to a close, a
// close for the client's error) are small and few: its send callback stages
// a copy, behind the events staged before it. Nothing a client sends can
// grow the server: wslay keeps at most --ws-max-message of a message, and a
// client whose unsent output (pongs it does not read) passes twice
// --hold-buffer-limit is closed as a slow reader (1013), as a hold is.
//
// Why libwslay: its event API does no I/O of its own (recv and send
// callbacks over whatever the caller has), so it fits libevent's callbacks and
// the lean hold's one event; it checks RFC 6455's MUSTs on what it reads
// (masking, reserved bits and opcodes, control frames over 125 bytes or
// fragmented, continuation order, 64-bit lengths, close codes: 1002; UTF-8
// in text messages across fragments and in close reasons, with its own
// DFA: 1007; the message size: 1009), answers pings and closes, and is
// packaged in Debian (libwslay-dev 1.1.1). Compared: libwebsockets (owns its
// event loop and sockets; its libevent glue would take the connection from
// the server), uWebSockets (its own loop, not in Debian), websocketpp
// (Asio), and a parser of our own (the framing rules are where servers go
// wrong). Our own checks of text UTF-8 and close codes were taken out: the sabotage
// run showed wslay closing with 1007 and 1002 without them (test_ws), but
// for a close frame's reason, which wslay checks only from the third byte of
// each piece it reads: that one is ours (Utf8Validator). Also ours: the 1002
// for a frame wslay's frame layer refuses (it sends a close with no code), a
// close frame of one byte (1002), and frames of our own for events, made
// once (ws_subscriber.cpp).
//
// Closing. When a close frame has gone out (wslay's answer to the client's,
// or one for the client's error), the hold stops and the connection closes
// after its output: the server sends FIN first (RFC 6455 §7.1.1: "the server
// SHOULD close [the TCP connection] first") and reads until the client
// closes, for at most --ws-close-timeout (begin_linger). A close the hold
// table writes (1001 at shutdown or a channel's close, 1013 for a slow
// reader) takes the same path, and wslay is told to send nothing after it.
//
// Pings: every connection silent for --ws-ping-interval is pinged; one that
// answers nothing within --ws-pong-timeout is closed (a peer that is gone).
// One timer for the loop's WebSockets, ticking a few times per interval.
//
// What a client sends beyond control frames (a text or binary message) goes
// to a WebSocket-over-HTTP view as an event (ws_over_http.cpp); an M0-Hold
// view has nobody to read it, and it is dropped.
#include <event2/buffer.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>

#include "loop/log.hpp"
#include "server/conn.hpp"
#include "server/server.hpp"

namespace m0::server {

namespace ws = http::ws;

namespace {
// Bytes read from one WebSocket in one loop turn.
constexpr size_t kReadBudget = 64 * 1024;
}  // namespace

// wslay's callbacks: `user` is the Conn. Friends of the server (nested type).
struct Server::WsIo {
    static Conn& conn(void* user) { return *static_cast<Conn*>(user); }

    // Queues a close for the client's error and reads nothing more.
    static void fail(WsState& w, uint16_t code, std::string_view reason) {
        if (w.failed) return;
        w.failed = true;
        wslay_event_context_ptr ctx = w.reader->ctx;
        wslay_event_queue_close(ctx, code, reinterpret_cast<const uint8_t*>(reason.data()),
                                std::min<size_t>(reason.size(), 123));
        wslay_event_shutdown_read(ctx);
    }

    static ssize_t on_recv(wslay_event_context_ptr ctx, uint8_t* buf, size_t len, int, void* user) {
        Conn& c = conn(user);
        WsState& w = *c.ws;
        WsReader& rd = *w.reader;
        if (c.bev) {
            // Not lean yet: what the bufferevent read.
            const int n = evbuffer_remove(bufferevent_get_input(c.bev), buf, len);
            if (n > 0) {
                w.last_heard = monotonic_seconds();
                w.ping_sent = 0;
                rd.fed += static_cast<size_t>(n);
                return n;
            }
            wslay_event_set_error(ctx, WSLAY_ERR_WOULDBLOCK);
            return -1;
        }
        while (rd.budget > 0) {
            const ssize_t r = ::recv(c.fd, buf, std::min(len, rd.budget), MSG_DONTWAIT);
            if (r > 0) {
                rd.budget -= static_cast<size_t>(r);
                rd.fed += static_cast<size_t>(r);
                w.last_heard = monotonic_seconds();
                w.ping_sent = 0;
                return r;
            }
            if (r < 0 && errno == EINTR) continue;
            if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
            // The end of the stream, or an error: the client is gone.
            w.eof = true;
            wslay_event_set_error(ctx, WSLAY_ERR_CALLBACK_FAILURE);
            return -1;
        }
        wslay_event_set_error(ctx, WSLAY_ERR_WOULDBLOCK);
        return -1;
    }

    static ssize_t on_send(wslay_event_context_ptr, const uint8_t* data, size_t len, int,
                           void* user) {
        Conn& c = conn(user);
        // Staged behind what the hold table wrote; the whole frame at once,
        // so no frame of wslay's is ever cut by an event's.
        c.server->write(c.slot, std::string_view(reinterpret_cast<const char*>(data), len));
        return static_cast<ssize_t>(len);
    }

    static void on_frame_start(wslay_event_context_ptr,
                               const wslay_event_on_frame_recv_start_arg* a, void* user) {
        WsState& w = *conn(user).ws;
        WsReader& rd = *w.reader;
        // The frame's size on the wire (RFC 6455 §5.2): two bytes, the
        // extended length in the fewest bytes, the client's masking key.
        const uint64_t n = a->payload_length;
        rd.frame_size = 2 + (n < 126 ? 0 : n <= 0xFFFF ? 2 : 8) + 4 + n;
        rd.in_frame = true;
        if (a->opcode < 0x8) rd.in_message = !a->fin;  // a data frame: the message's last?
        rd.in_close = a->opcode == static_cast<uint8_t>(ws::Opcode::close);
        if (!rd.in_close) return;
        rd.close_seen = 0;
        rd.close_utf8.reset();
        // RFC 6455 §5.5.1: a close frame's body, if any, starts with a
        // two-byte code; wslay reads one byte as no code at all.
        if (a->payload_length == 1) fail(w, ws::kProtocolError, "close frame of one byte");
    }

    static void on_frame_chunk(wslay_event_context_ptr,
                               const wslay_event_on_frame_recv_chunk_arg* a, void* user) {
        WsState& w = *conn(user).ws;
        WsReader& rd = *w.reader;
        if (!rd.in_close) return;  // text: wslay's own check holds across pieces
        // §5.5.1: the reason after the code "MUST be UTF-8" (§8.1: else fail,
        // 1007). wslay skips the first two bytes of every piece it reads, so a
        // reason that arrives in pieces is checked here.
        std::string_view bytes(reinterpret_cast<const char*>(a->data), a->data_length);
        const size_t skip =
            rd.close_seen >= 2 ? 0 : std::min<size_t>(2 - rd.close_seen, bytes.size());
        rd.close_seen += bytes.size();
        if (!rd.close_utf8.feed(bytes.substr(skip)))
            fail(w, ws::kInvalidData, "close reason is not UTF-8");
    }

    static void on_frame_end(wslay_event_context_ptr, void* user) {
        WsState& w = *conn(user).ws;
        WsReader& rd = *w.reader;
        rd.in_frame = false;
        rd.framed += rd.frame_size;
        if (rd.in_close && !rd.close_utf8.complete())
            fail(w, ws::kInvalidData, "close reason ends inside a UTF-8 character");
    }

    static void on_msg(wslay_event_context_ptr, const wslay_event_on_msg_recv_arg* a, void* user) {
        Conn& c = conn(user);
        WsState& w = *c.ws;
        if (w.failed) return;
        if (a->opcode == static_cast<uint8_t>(ws::Opcode::close) ||
            a->opcode == static_cast<uint8_t>(ws::Opcode::ping) ||
            a->opcode == static_cast<uint8_t>(ws::Opcode::pong)) {
            // wslay answers pings and the close; a WebSocket-over-HTTP view hears of them.
            c.server->on_ws_control(
                c, a->opcode,
                std::string_view(reinterpret_cast<const char*>(a->msg), a->msg_length),
                a->status_code);
            return;
        }
        const bool text = a->opcode == static_cast<uint8_t>(ws::Opcode::text);
        if (!text && a->opcode != static_cast<uint8_t>(ws::Opcode::binary)) return;
        std::string_view msg(reinterpret_cast<const char*>(a->msg), a->msg_length);
        if (!(a->rsv & WSLAY_RSV1_BIT)) {
            c.server->on_ws_message(c, text, msg);
            return;
        }
        // Compressed (RFC 7692 §7.2.2): inflated within --ws-max-message,
        // and its text checked as UTF-8 here (wslay skips compressed text).
        if (!w.inflater) w.inflater = std::make_unique<ws::Inflater>();
        std::string plain;
        switch (w.inflater->inflate(msg, c.server->cfg_.ws.max_message, plain)) {
            case ws::Inflater::Result::too_big:
                fail(w, ws::kTooBig, "message too big (inflated)");
                return;
            case ws::Inflater::Result::bad:
                fail(w, ws::kInvalidData, "bad compressed data");
                return;
            case ws::Inflater::Result::ok:
                break;
        }
        if (text && !ws::Utf8Validator().feed(plain)) {
            fail(w, ws::kInvalidData, "text is not UTF-8");
            return;
        }
        c.server->on_ws_message(c, text, plain);
    }
};

bool Server::ws_handshake(Conn& c, http::Request& req) {
    ws::Upgrade u = ws::check_upgrade(req, cfg_.ws.origins);
    // After a 101 the connection is no longer HTTP's; after any other answer
    // to an upgrade request it closes.
    c.keep_alive = false;
    if (u.status != 0) {
        M0_LOG(info, "WebSocket handshake from ", c.remote_addr, " refused ",
               std::to_string(u.status), ": ", u.reason);
        http::Response r = ws::refusal(u);
        c.send_whole(r);
        c.finish_request();
        return false;
    }
    c.ws = std::make_unique<WsState>();
    auto& h = *(c.ws->handshake = std::make_unique<WsHandshake>());
    h.accept = std::move(u.accept);
    h.protocols = std::move(u.protocols);
    if (!cfg_.ws.no_deflate) h.extensions = ws::negotiate_deflate(req.headers);
    c.ws->deflate = !h.extensions.empty();
    return true;
}

std::string Server::ws_head(Conn& c, http::Response& r) {
    // RFC 6455 §4.2.2: 101, Upgrade: websocket, Connection: Upgrade,
    // Sec-WebSocket-Accept; a subprotocol only if the client offered it.
    http::Response h;
    h.status = 101;
    h.headers.add("Upgrade", "websocket");
    const WsHandshake& hs = *c.ws->handshake;
    h.headers.add("Sec-WebSocket-Accept", hs.accept);
    if (auto p = r.headers.get("Sec-WebSocket-Protocol")) {
        const auto& offered = hs.protocols;
        if (std::find(offered.begin(), offered.end(), *p) != offered.end())
            h.headers.add("Sec-WebSocket-Protocol", std::string(*p));
        else
            M0_LOG(warn, "WebSocket on slot ", to_string(c.slot), ": the handler chose protocol '",
                   std::string(*p), "', which the client did not offer: left out");
    }
    if (!hs.extensions.empty()) h.headers.add("Sec-WebSocket-Extensions", hs.extensions);
    if (auto w = r.headers.get("x-worker")) h.headers.add("x-worker", std::string(*w));
    r.status = 101;  // the access log's
    r.body.clear();  // nothing but frames after the 101
    const bool keep = c.keep_alive;
    c.keep_alive = true;  // head_text adds no "Connection: close"
    std::string head = c.head_text(h, "Connection: Upgrade\r\n");
    c.keep_alive = keep;
    return head;
}

void Server::ws_open(Conn& c) {
    WsState& w = *c.ws;
    w.open = true;
    w.handshake.reset();  // its answer went with the 101
    w.last_heard = monotonic_seconds();
    ws_slots_.push_back(c.slot);
    if (!ws_timer_->pending()) ws_timer_->start(ws_tick_seconds());
}

WsReader* Server::ws_reader(Conn& c) {
    static constexpr wslay_event_callbacks kCallbacks = {
        WsIo::on_recv,        WsIo::on_send,      nullptr,      WsIo::on_frame_start,
        WsIo::on_frame_chunk, WsIo::on_frame_end, WsIo::on_msg,
    };
    WsState& w = *c.ws;
    if (w.reader) return w.reader.get();
    auto rd = std::make_unique<WsReader>();
    if (wslay_event_context_server_init(&rd->ctx, &kCallbacks, &c) != 0) {
        M0_LOG(error, "WebSocket on slot ", to_string(c.slot), ": out of memory");
        rd->ctx = nullptr;
        return nullptr;
    }
    // §10.4: a limit on the message size, reassembled from its fragments:
    // past it, wslay closes with 1009.
    wslay_event_config_set_max_recv_msg_length(rd->ctx, cfg_.ws.max_message);
    // RFC 7692 §6: a compressed message has RSV1 on its first frame.
    if (w.deflate) wslay_event_config_set_allowed_rsv_bits(rd->ctx, WSLAY_RSV1_BIT);
    if (w.quiet) {
        wslay_event_shutdown_read(rd->ctx);
        wslay_event_shutdown_write(rd->ctx);
    }
    w.reader = std::move(rd);
    return w.reader.get();
}

void Server::ws_release(Conn& c) {
    WsState& w = *c.ws;
    const WsReader* rd = w.reader.get();
    if (!rd || w.reading || w.failed || rd->in_frame || rd->in_message || rd->fed != rd->framed ||
        wslay_event_get_queued_msg_count(rd->ctx) != 0 || wslay_event_get_close_sent(rd->ctx) ||
        wslay_event_get_close_received(rd->ctx))
        return;
    w.reader.reset();
}

size_t Server::ws_readers() const {
    size_t n = 0;
    for (SlotRef slot : ws_slots_)
        if (const Conn* c = find(slot); c && c->ws && c->ws->reader) ++n;
    return n;
}

double Server::ws_tick_seconds() const {
    return std::clamp(std::min(cfg_.ws.ping_interval, cfg_.ws.pong_timeout) / 4, 0.05, 1.0);
}

void Server::ws_read(Conn& c) {
    WsState* w = c.ws.get();
    if (!w || !w->open || c.phase != Phase::holding) return;
    // Before the hold is lean, only what the bufferevent holds is read.
    if (c.bev && evbuffer_get_length(bufferevent_get_input(c.bev)) == 0 && !w->reader) return;
    WsReader* rd = ws_reader(c);
    if (!rd) {
        close_conn(c);
        return;
    }
    rd->budget = kReadBudget;
    w->reading = true;
    const int rv = wslay_event_recv(rd->ctx);
    w->reading = false;
    ws_settle(c, rv);
}

void Server::ws_settle(Conn& c, int rv) {
    WsState& w = *c.ws;
    wslay_event_context_ptr ctx = w.reader->ctx;
    const SlotRef slot = c.slot;
    if (w.eof) {
        // Gone without the close handshake (RFC 6455 §7.1.5: 1006, abnormal).
        close_conn(c);
        return;
    }
    if (rv == WSLAY_ERR_CALLBACK_FAILURE && !w.failed) {
        // wslay's frame layer refused a header (a control frame over 125
        // bytes or fragmented, §5.5; a 64-bit length with its most
        // significant bit set, §5.2) and queued a close with no code: the
        // close that goes says why (§7.4.1: 1002, a protocol error).
        wslay_event_shutdown_write(ctx);
        write(slot, ws::close_frame(ws::kProtocolError, "malformed frame"));
        w.failed = true;
        M0_LOG(info, "WebSocket on slot ", to_string(slot), " from ", c.remote_addr,
               " closed with 1002: a malformed frame");
        holds_.stop(slot);
        close_after_write(slot);
        return;
    }
    wslay_event_send(ctx);  // what wslay queued: staged now, in order
    if (rv != 0 && rv != WSLAY_ERR_CALLBACK_FAILURE)
        M0_LOG(warn, "WebSocket on slot ", to_string(slot), ": wslay error ", std::to_string(rv));
    if (wslay_event_get_close_sent(ctx) || rv != 0) {
        if (w.failed || !wslay_event_get_close_received(ctx))
            M0_LOG(info, "WebSocket on slot ", to_string(slot), " from ", c.remote_addr,
                   " closed with ", std::to_string(wslay_event_get_status_code_sent(ctx)));
        holds_.stop(slot);
        close_after_write(slot);
        return;
    }
    if (unsent(slot) > 2 * cfg_.hold_buffer_limit) {
        // Control frames it does not read (pongs to its pings): a slow reader.
        M0_LOG(info, "slow reader: WebSocket on slot ", to_string(slot),
               " does not read its control frames, closed");
        metrics_.slow_readers_closed.fetch_add(1);
        holds_.drop(slot, 1000, EndWhy::slow);
        return;
    }
    ws_release(c);
}

void Server::ws_quiet(Conn& c) {
    // A close frame the hold table wrote is the last frame: wslay sends nothing
    // after it, and reads nothing more (the linger drops what comes).
    if (!c.ws) return;
    c.ws->quiet = true;
    if (!c.ws->reader) return;
    wslay_event_shutdown_read(c.ws->reader->ctx);
    wslay_event_shutdown_write(c.ws->reader->ctx);
}

void Server::on_ws_message(Conn& c, bool text, std::string_view payload) {
    // A WebSocket-over-HTTP view is sent it; an M0-Hold one has no reader.
    if (c.ws->woh) {
        woh_event(c, text ? "TEXT" : "BINARY", std::string(payload));
        return;
    }
    M0_LOG(debug, "WebSocket on slot ", to_string(c.slot), ": a ", text ? "text" : "binary",
           " message of ", std::to_string(payload.size()), " bytes dropped");
}

void Server::on_ws_control(Conn& c, uint8_t opcode, std::string_view payload, uint16_t code) {
    WohState* o = c.ws->woh.get();
    if (!o) return;
    if (opcode == static_cast<uint8_t>(ws::Opcode::close)) {
        // Its code, and the reason after the two bytes wslay read it from.
        o->close_seen = true;
        const std::string_view reason = payload.size() > 2 ? payload.substr(2) : "";
        woh_event(c, "CLOSE",
                  code == WSLAY_CODE_NO_STATUS_RCVD ? std::optional<std::string>()
                                                    : http::woh::close_content(code, reason));
        return;
    }
    // Pushpin's compactness: a ping's or pong's content only when it has one.
    std::optional<std::string> content;
    if (!payload.empty()) content = std::string(payload);
    woh_event(c, opcode == static_cast<uint8_t>(ws::Opcode::ping) ? "PING" : "PONG",
              std::move(content));
}

void Server::ws_tick() {
    const double now = monotonic_seconds();
    size_t kept = 0;
    for (size_t i = 0; i < ws_slots_.size(); ++i) {
        const SlotRef slot = ws_slots_[i];
        Conn* c = find(slot);
        if (!c || !c->ws || !c->ws->open) continue;  // gone: forgotten here
        ws_slots_[kept++] = slot;
        WsState& w = *c->ws;
        if (c->phase != Phase::holding) continue;
        if (w.woh) woh_keepalive(*c, now);
        if (w.ping_sent > 0 && now - w.ping_sent >= cfg_.ws.pong_timeout) {
            M0_LOG(info, "WebSocket on slot ", to_string(slot), " from ", c->remote_addr,
                   ": no pong within --ws-pong-timeout, closed");
            close_conn(*c);
            continue;
        }
        if (w.ping_sent == 0 && now - w.last_heard >= cfg_.ws.ping_interval) {
            // §5.5.2: "A Ping frame MAY be sent at any time after the
            // connection is established"; the peer "MUST send a Pong frame".
            static constexpr uint8_t kPayload[] = {'m', '0'};
            wslay_event_msg msg{static_cast<uint8_t>(ws::Opcode::ping), kPayload, sizeof kPayload};
            WsReader* rd = ws_reader(*c);
            if (rd && wslay_event_queue_msg(rd->ctx, &msg) == 0) {
                w.ping_sent = now;
                wslay_event_send(rd->ctx);
            }
            if (rd) ws_release(*c);
        }
    }
    ws_slots_.resize(kept);
    if (!ws_slots_.empty()) ws_timer_->start(ws_tick_seconds());
}

}  // namespace m0::server
