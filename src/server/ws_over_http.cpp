// Server, WebSocket-over-HTTP (Pushpin's protocol; http/ws_events.hpp): a
// WebSocket whose application is a plain HTTP view, e.g. a Django view
// written for django-grip's WebSocketContext. Loop thread only.
//
// DESIGN
// Which upgrades: those whose path is under a --ws-over-http prefix. The
// server cannot tell from the view: a view written for Pushpin answers only
// POSTs of events (django-grip's middleware sees no WebSocketContext on the
// upgrade's GET), and an M0-Hold view answers only the GET, so whichever of
// the two it were sent first, a view of the other kind would misread it.
// Pushpin decides the same way, by route (`over_http` in its routes file).
//
// The connection's events become requests to the mount that serves the
// path, on its pool, in process: POST to the upgrade's target with its
// headers (but Upgrade, Connection, Accept, Content-*, Sec-WebSocket-Key,
// -Version and any Meta-*), `Content-Type` and `Accept:
// application/websocket-events`, `Connection-Id` and a `Meta-NAME` for each
// meta value the view set. One request is in flight per connection: what the
// client does meanwhile waits in `queued` and goes as one batch with the
// next, in order (Pushpin's batching). A client's queue past four times
// --ws-max-message is closed 1013: the view is behind.
//
// The handshake: the upgrade is checked on the loop (ws_handshake), then its
// OPEN goes to the view. An answer 200 of events whose first is OPEN accepts:
// the hold opens, subscribed to the channels its `c:` subscribe messages
// name, with a replay from the bus position read when the OPEN was
// dispatched (what the view published while it ran is not lost), then the
// 101 goes as any hold's head does (finish_hold_head), then the rest of the
// answer is carried out. Any other answer refuses: its status, headers and
// body are the client's answer (Pushpin's ErrorRejected); an answer of 200
// events whose first is not OPEN, or that cannot be decoded, is a 502.
// `Sec-WebSocket-Extensions: grip` in the OPEN answer turns on control
// messages (`c:` TEXT events) and the message prefix (`m:`).
//
// An answer after the handshake: TEXT and BINARY are sent (with grip: a
// prefixed message, stripped; `c:` a control message; else dropped), PING
// and PONG as those frames, CLOSE closes with its code (none or 0: 1000),
// DISCONNECT drops the connection. Set-Meta-NAME headers (and set-meta
// control messages) set the meta values sent with later requests; an empty
// value removes one. A later subscribe replays the new channel from the
// hold's last id (begin_resync: an event of it published while the view ran
// but before the hold's last event on its other channels is not replayed).
// An answer that is not 200 events closes with 1011.
//
// The client's side: TEXT, BINARY, PING and PONG become events; its close
// becomes CLOSE (wslay has answered it); a connection that goes without the
// close handshake sends DISCONNECT. That last request is submitted as the
// connection is released: its answer is dropped, and it may run beside a
// request still in flight. After `detach` nothing more goes to the view.
#include <unistd.h>

#include <algorithm>

#include "bus/names.hpp"
#include "http/json.hpp"
#include "loop/log.hpp"
#include "server/conn.hpp"
#include "server/server.hpp"

namespace m0::server {

namespace ws = http::ws;
namespace woh = http::woh;

namespace {
// Headers of the upgrade request not passed to the view.
constexpr std::string_view kDropped[] = {
    "Upgrade",
    "Connection",
    "Accept",
    "Connection-Id",
    "Content-Type",
    "Content-Length",
    "Transfer-Encoding",
    "Sec-WebSocket-Key",
    "Sec-WebSocket-Version",
    "Sec-WebSocket-Extensions",
};
constexpr size_t kRejectBodyMax = 100000;  // Pushpin's REJECT_BODY_MAX

bool starts_with_ci(std::string_view s, std::string_view prefix) {
    return s.size() >= prefix.size() && http::iequals(s.substr(0, prefix.size()), prefix);
}

// A channel a subscribe names: checked as at every publish boundary.
bool channel_ok(SlotRef slot, std::string_view channel) {
    const bus::NameError e = bus::check_channel(channel);
    if (e == bus::NameError::ok) return true;
    M0_LOG(warn, "WebSocket on slot ", to_string(slot), ": subscribe refused: ", bus::reason(e));
    return false;
}

bool is_events(const http::Response& r) {
    auto ct = r.headers.get("Content-Type");
    return r.status == 200 && ct &&
           http::trim_ows(ct->substr(0, ct->find(';'))) == woh::kContentType;
}
}  // namespace

bool Server::over_http(const http::Request& req) const {
    for (const auto& p : cfg_.ws.over_http)
        if (req.path == p ||
            (req.path.starts_with(p) && (p.ends_with('/') || req.path[p.size()] == '/')))
            return true;
    return false;
}

void Server::woh_start(Conn& c, http::Request req, const SubmitFn& submit) {
    if (!bus_) {
        c.ws.reset();
        http::Response r = http::error_response(501, "WebSocket-over-HTTP needs --realtime");
        c.send_whole(r);
        c.finish_request();
        return;
    }
    auto o = std::make_unique<WohState>();
    o->cid = std::to_string(::getpid()) + "-" + std::to_string(c.slot.index) + "-" +
             std::to_string(c.slot.gen);
    o->submit = &submit;
    for (auto name : kDropped) req.headers.remove(name);
    std::erase_if(req.headers.items,
                  [](const auto& h) { return starts_with_ci(h.first, "Meta-"); });
    req.method = "POST";
    req.body.clear();
    o->base = std::move(req);
    o->queued.push_back({"OPEN", std::nullopt});
    c.ws->woh = std::move(o);
    c.phase = Phase::waiting;
    if (!woh_send(c)) return;
    c.deadline = monotonic_seconds() + cfg_.request_timeout;
    c.arm_timer(cfg_.request_timeout);
}

namespace {
// The next request to the view: the queued events, which it takes.
http::Request next_request(WohState& o) {
    http::Request req = o.base;
    req.body = woh::encode_events(o.queued);
    o.queued.clear();
    o.queued_bytes = 0;
    req.headers.add("Accept", std::string(woh::kContentType));
    req.headers.add("Connection-Id", o.cid);
    req.headers.add("Content-Type", std::string(woh::kContentType));
    req.headers.add("Content-Length", std::to_string(req.body.size()));
    for (const auto& [k, v] : o.meta) req.headers.add("Meta-" + k, v);
    return req;
}
}  // namespace

bool Server::woh_send(Conn& c) {
    WohState& o = *c.ws->woh;
    if (o.in_flight || o.queued.empty() || o.detached) return true;
    http::Request req = next_request(o);
    o.position = bus_->position();
    o.in_flight = true;
    const Admission admitted = (*o.submit)(c.slot, std::move(req));
    if (admitted == Admission::queued) return true;
    o.in_flight = false;
    const bool full = admitted == Admission::full;
    if (!o.opened) {
        refuse_admission(c, full);
        return false;
    }
    woh_close(c, ws::kTryAgainLater, full ? "too many queued requests" : "server is shutting down");
    return false;
}

void Server::woh_event(Conn& c, std::string type, std::optional<std::string> content) {
    WohState& o = *c.ws->woh;
    if (o.detached || c.phase != Phase::holding) return;
    o.queued_bytes += content ? content->size() : 0;
    o.queued.push_back({std::move(type), std::move(content)});
    if (o.queued_bytes > 4 * cfg_.ws.max_message) {
        M0_LOG(info, "WebSocket on slot ", to_string(c.slot),
               ": its view is behind (queued events past 4 x --ws-max-message), closed");
        woh_close(c, ws::kTryAgainLater, "the application is behind");
        return;
    }
    woh_send(c);
}

void Server::woh_close(Conn& c, uint16_t code, std::string_view reason) {
    WsState& w = *c.ws;
    if (w.woh) w.woh->ended = true;  // the view ended it, or it failed: no DISCONNECT
    if (!w.open) return;
    const SlotRef slot = c.slot;
    WsReader* rd = ws_reader(c);
    if (!rd) {
        close_conn(c);
        return;
    }
    wslay_event_queue_close(rd->ctx, code, reinterpret_cast<const uint8_t*>(reason.data()),
                            std::min<size_t>(reason.size(), 123));
    wslay_event_shutdown_read(rd->ctx);
    // Inside wslay_event_recv (a client's message led here), ws_settle
    // sends the close and ends the hold once wslay returns.
    if (w.reading) return;
    wslay_event_send(rd->ctx);
    holds_.stop(slot);
    close_after_write(slot);
}

void Server::woh_gone(Conn& c) {
    WohState& o = *c.ws->woh;
    if (!o.opened || o.ended || o.detached) return;
    o.ended = true;
    const bool closed = std::any_of(o.queued.begin(), o.queued.end(),
                                    [](const woh::Event& e) { return e.type == "CLOSE"; });
    if (!closed && !o.close_seen) o.queued.push_back({"DISCONNECT", std::nullopt});
    if (o.queued.empty()) return;
    // Its answer, if any, finds no connection; a refusal leaves nobody to tell.
    (void)(*o.submit)(c.slot, next_request(o));
}

void Server::woh_answer(Conn& c, Completion& comp) {
    WohState& o = *c.ws->woh;
    if (comp.kind == Completion::Kind::chunk || comp.kind == Completion::Kind::end) return;
    o.in_flight = false;
    if (comp.kind != Completion::Kind::response || comp.file) {
        if (comp.stream) comp.stream->cancel();
        woh_fail(c, "the view streamed its answer to WebSocket events");
        return;
    }
    http::Response& r = comp.response;
    std::vector<woh::Event> events;
    std::string err;
    if (!is_events(r)) {
        if (!o.opened) {
            M0_LOG(info, "WebSocket-over-HTTP on slot ", to_string(c.slot),
                   " refused by the view: ", std::to_string(r.status));
            r.headers.remove("Content-Length");
            if (r.body.size() > kRejectBodyMax) r.body.resize(kRejectBodyMax);
            c.ws.reset();  // an HTTP answer, not a 101
            c.send_whole(r);
            c.finish_request();
            return;
        }
        woh_fail(c, "the view answered " + std::to_string(r.status) + ", not WebSocket events");
        return;
    }
    if (!woh::decode_events(r.body, events, err)) {
        woh_fail(c, err);
        return;
    }
    for (const auto& [k, v] : r.headers.items)
        if (k.size() > 9 && starts_with_ci(k, "Set-Meta-")) set_meta(o, k.substr(9), v);
    size_t next = 0;
    if (!o.opened) {
        if (events.empty() || events.front().type != "OPEN") {
            woh_fail(c, "the view's answer to OPEN does not begin with OPEN");
            return;
        }
        next = 1;
        o.prefix = woh::grip_prefix(r.headers);
        if (!woh_open(c, r)) return;
    }
    const SlotRef slot = c.slot;
    for (size_t i = next; i < events.size(); ++i) {
        Conn* live = find(slot);
        if (!live || live->phase != Phase::holding || !live->ws || !live->ws->woh) return;
        if (!woh_carry(*live, events[i])) return;
    }
    if (Conn* live = find(slot); live && live->phase == Phase::holding) woh_send(*live);
}

void Server::woh_fail(Conn& c, const std::string& why) {
    M0_LOG(warn, "WebSocket-over-HTTP on slot ", to_string(c.slot), ": ", why);
    if (!c.ws->woh->opened) {
        c.ws.reset();
        http::Response r = http::error_response(502, why);
        c.send_whole(r);
        c.finish_request();
        return;
    }
    woh_close(c, ws::kInternalError, "the application failed");
}

void Server::set_meta(WohState& o, std::string_view name, std::string_view value) {
    const std::string key = http::to_lower(name);
    std::erase_if(o.meta, [&](const auto& m) { return m.first == key; });
    if (!value.empty()) o.meta.emplace_back(key, std::string(value));
}

bool Server::woh_open(Conn& c, const http::Response& answer) {
    // A hold as any other: past --max-holds it is refused before the 101.
    if (!metrics_.holds_open.reserve()) {
        metrics_.holds_refused.fetch_add(1);  // counted, not logged: as a pool's refusal
        c.ws.reset();
        http::Response r = http::error_response(503, "too many holds open");
        r.headers.add("Retry-After", "5");
        c.send_whole(r);
        c.finish_request();
        return false;
    }
    WohState& o = *c.ws->woh;
    // The channels its answer subscribes to are subscribed before the 101.
    std::vector<std::string> channels;
    if (o.prefix)
        for (const auto& e : woh_controls(answer))
            if (e.type == woh::Control::Type::subscribe && channel_ok(c.slot, e.channel) &&
                std::find(channels.begin(), channels.end(), e.channel) == channels.end())
                channels.push_back(e.channel);
    const SlotRef slot = c.slot;
    on_bus_ready();  // every event numbered so far has reached its holds
    if (!find(slot)) {
        metrics_.holds_open.release();
        return false;
    }
    holds_.open_awaiting(slot, o.position, channels, {}, c.ws->transport());
    const uint64_t upto = bus_->link_stats().shared ? bus::kUptoUnknown : bus_->position();
    if (!channels.empty() && o.position < upto)
        request_replay(slot, channels, o.position, upto, false);
    else
        holds_.replayed(slot, bus::Replay{.upto = upto}, 0, monotonic_seconds());
    o.opened = true;
    o.subscribed_at_open = channels;
    http::Response head;
    if (auto p = answer.headers.get("Sec-WebSocket-Protocol"))
        head.headers.add("Sec-WebSocket-Protocol", std::string(*p));
    if (auto w = answer.headers.get("x-worker")) head.headers.add("x-worker", std::string(*w));
    finish_hold_head(c, head);
    Conn* live = find(slot);
    return live && live->phase == Phase::holding;
}

std::vector<woh::Control> Server::woh_controls(const http::Response& answer) {
    std::vector<woh::Control> out;
    std::vector<woh::Event> events;
    std::string err;
    if (!woh::decode_events(answer.body, events, err)) return out;
    for (const auto& e : events) {
        woh::Control ctl;
        if (e.type == "TEXT" && e.content && e.content->starts_with("c:") &&
            http::decode_ws_control(std::string_view(*e.content).substr(2), ctl, err))
            out.push_back(std::move(ctl));
    }
    return out;
}

bool Server::woh_carry(Conn& c, const woh::Event& e) {
    WohState& o = *c.ws->woh;
    const std::string& content = e.content ? *e.content : std::string();
    const SlotRef slot = c.slot;
    if (e.type == "TEXT" || e.type == "BINARY") {
        const bool text = e.type == "TEXT";
        std::string_view payload = content;
        if (o.prefix) {
            if (text && payload.starts_with("c:")) return woh_control(c, payload.substr(2));
            if (!payload.starts_with(*o.prefix)) {
                M0_LOG(debug, "WebSocket on slot ", to_string(slot),
                       ": an unprefixed message dropped");
                return true;
            }
            payload.remove_prefix(o.prefix->size());
        }
        if (text && !ws::Utf8Validator().feed(payload)) {
            woh_fail(c, "the view sent a TEXT message that is not UTF-8");
            return false;
        }
        write(slot, ws::server_frame(text ? ws::Opcode::text : ws::Opcode::binary, payload));
        if (!o.keepalive_interval) o.last_out = monotonic_seconds();
        return true;
    }
    if (e.type == "PING" || e.type == "PONG") {
        write(slot, ws::server_frame(e.type == "PING" ? ws::Opcode::ping : ws::Opcode::pong,
                                     std::string_view(content).substr(0, 125)));
        return true;
    }
    if (e.type == "CLOSE") {
        uint16_t code =
            content.size() >= 2 ? uint16_t((uint8_t(content[0]) << 8) | uint8_t(content[1])) : 0;
        if (code == 0) code = ws::kNormal;
        if (!ws::sendable_close_code(code)) {
            woh_fail(c, "the view closed with " + std::to_string(code) + ", not a close code");
            return false;
        }
        woh_close(c, code, content.size() > 2 ? std::string_view(content).substr(2) : "");
        return false;
    }
    if (e.type == "DISCONNECT") {
        o.ended = true;
        close_conn(c);
        return false;
    }
    woh_fail(c, "the view sent " + e.type + " after the handshake");
    return false;
}

bool Server::woh_control(Conn& c, std::string_view json) {
    WohState& o = *c.ws->woh;
    woh::Control ctl;
    std::string err;
    const SlotRef slot = c.slot;
    if (!http::decode_ws_control(json, ctl, err)) {
        M0_LOG(warn, "WebSocket on slot ", to_string(slot), ": a control message refused: ", err);
        return true;
    }
    using Type = woh::Control::Type;
    switch (ctl.type) {
        case Type::subscribe:
        case Type::unsubscribe: {
            // The OPEN answer's own subscriptions were made with the hold.
            auto& at_open = o.subscribed_at_open;
            if (auto it = std::find(at_open.begin(), at_open.end(), ctl.channel);
                it != at_open.end() && ctl.type == Type::subscribe) {
                at_open.erase(it);
                return true;
            }
            woh_subscribe(c, ctl.channel, ctl.type == Type::subscribe);
            return find(slot) != nullptr;
        }
        case Type::detach:
            o.detached = true;
            o.queued.clear();
            return true;
        case Type::keep_alive:
            o.keepalive_every = ctl.content.empty() ? 0 : ctl.timeout;
            o.keepalive_interval = ctl.interval;
            o.keepalive_frame =
                ws::server_frame(ctl.message_type == "binary" ? ws::Opcode::binary
                                 : ctl.message_type == "ping" ? ws::Opcode::ping
                                 : ctl.message_type == "pong" ? ws::Opcode::pong
                                                              : ws::Opcode::text,
                                 ctl.message_type == "ping" || ctl.message_type == "pong"
                                     ? std::string_view(ctl.content).substr(0, 125)
                                     : std::string_view(ctl.content));
            o.last_out = monotonic_seconds();
            return true;
        case Type::set_meta:
            set_meta(o, ctl.name, ctl.value);
            return true;
    }
    return true;
}

void Server::woh_subscribe(Conn& c, const std::string& channel, bool on) {
    const SlotRef slot = c.slot;
    if (on && !channel_ok(slot, channel)) return;
    std::vector<std::string> channels = holds_.channels(slot);
    auto it = std::find(channels.begin(), channels.end(), channel);
    if (on == (it != channels.end())) return;
    if (on) {
        channels.push_back(channel);
        on_bus_ready();  // what was numbered so far reached the hold's channels
        if (!find(slot)) return;
    } else {
        channels.erase(it);
    }
    holds_.set_channels(slot, channels);
    if (!on) return;
    uint64_t after = 0;
    if (holds_.begin_resync(slot, after, channels))
        request_replay(slot, channels, after,
                       bus_->link_stats().shared ? bus::kUptoUnknown : bus_->position(), false);
}

void Server::woh_keepalive(Conn& c, double now) {
    WohState& o = *c.ws->woh;
    if (o.keepalive_every == 0 || now - o.last_out < o.keepalive_every) return;
    write(c.slot, o.keepalive_frame);
    o.last_out = now;
}

}  // namespace m0::server
