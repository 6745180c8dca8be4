#include "hold/hold.hpp"

#include <atomic>
#include <charconv>
#include <optional>

#include "hold/grip.hpp"
#include "http/websocket.hpp"
#include "loop/log.hpp"

namespace m0::hold {

uint64_t read_cursor(const http::Request& req) {
    std::optional<std::string> query;
    auto v = req.headers.get("Last-Event-ID");
    if (!v) {
        // The header wins; the query parameter is Mercure's spelling.
        query = req.query_param("lastEventID");
        if (!query) return 0;
        v = *query;
    }
    uint64_t n = 0;
    auto [p, ec] = std::from_chars(v->data(), v->data() + v->size(), n);
    if (ec != std::errc() || p != v->data() + v->size()) return 0;
    return n;
}

Start read_start(const Handoff& h, const http::Request& req) {
    return Start{read_cursor(req), h.bus ? h.bus->position() : 0, http::ws::asks_upgrade(req)};
}

// M0-Channel is a comma-separated list with optional whitespace (SP, HTAB)
// around each comma. check_channel() refuses names that begin or end with
// either, so this trimming never changes a name a mount checked.
static std::vector<std::string> split_channels(std::string_view list) {
    std::vector<std::string> out;
    while (true) {
        size_t comma = list.find(',');
        std::string_view item = list.substr(0, comma);
        while (!item.empty() && bus::is_ows(item.front())) item.remove_prefix(1);
        while (!item.empty() && bus::is_ows(item.back())) item.remove_suffix(1);
        out.emplace_back(item);
        if (comma == std::string_view::npos) break;
        list.remove_prefix(comma + 1);
    }
    return out;
}

// Reads a Grip-Hold answer (grip.hpp) into `d`: its channels and keep-alive.
// False (d is bad) on anything refused.
static bool read_grip_hold(const std::string& mode, const std::optional<std::string>& channels,
                           const std::optional<std::string>& keep_alive,
                           const std::optional<std::string>& timeout, HoldDecision& d) {
    d.kind = HoldKind::bad;
    d.response = http::iequals(mode, "response");
    if (!d.response && !http::iequals(mode, "stream")) {
        d.error = "unknown Grip-Hold value '" + mode + "'";
        return false;
    }
    if (!channels) {
        d.error = "Grip-Hold without Grip-Channel";
        return false;
    }
    if (d.response) {
        // A long-poll answers once: no keep-alive is written to it.
        d.timeout = kGripTimeout;
        if (timeout && !grip_timeout(*timeout, d.timeout)) {
            d.error = "Grip-Timeout must be whole seconds from 0 to 86400";
            return false;
        }
        d.prev_id = grip_prev_id(*channels);
    } else if (keep_alive && !grip_keep_alive(*keep_alive, d.keepalive, d.error)) {
        return false;
    }
    d.channels = grip_channels(*channels);
    d.kind = HoldKind::none;
    return true;
}

bool asks_hold(const http::Headers& headers) {
    return headers.has("M0-Hold") || headers.has("Grip-Hold");
}

HoldDecision take_stream_hold(http::Response& resp, std::string_view worker, bool realtime) {
    HoldDecision d;
    auto m0_mode = resp.headers.get("M0-Hold");
    auto grip_mode = resp.headers.get("Grip-Hold");
    if (!m0_mode && !grip_mode) return d;
    const bool grip = !m0_mode;
    std::string mode(grip ? *grip_mode : *m0_mode);
    const bool both = m0_mode && grip_mode;
    // A hold consumes every M0-Hold, M0-Channel and Grip-* header, whichever asked.
    auto channel_header = resp.headers.get_joined(grip ? "Grip-Channel" : "M0-Channel");
    auto keep_alive = resp.headers.get_joined("Grip-Keep-Alive");
    auto timeout = resp.headers.get_joined("Grip-Timeout");
    resp.headers.remove("M0-Hold");
    resp.headers.remove("M0-Channel");
    remove_grip_headers(resp.headers);
    const char* channel_name = grip ? "Grip-Channel" : "M0-Channel";
    if (both) {
        d.kind = HoldKind::bad;
        d.error = "both M0-Hold and Grip-Hold";
        return d;
    }
    if (grip) {
        if (!read_grip_hold(mode, channel_header, keep_alive, timeout, d)) return d;
    } else {
        if (http::iequals(mode, "websocket")) {
            // A WebSocket when the request is an upgrade (finish_hold), else a stream.
            d.websocket = true;
        } else if (!http::iequals(mode, "stream")) {
            d.kind = HoldKind::bad;
            d.error = "unknown M0-Hold value '" + mode + "'";
            return d;
        }
        if (!channel_header) {
            d.kind = HoldKind::bad;
            d.error = "M0-Hold without M0-Channel";
            return d;
        }
        d.channels = split_channels(*channel_header);
    }
    for (const auto& c : d.channels) {
        auto e = bus::check_channel(c);
        if (e != bus::NameError::ok) {
            d.kind = HoldKind::bad;
            d.error = std::string(channel_name) + " refused: " + bus::reason(e);
            return d;
        }
    }
    d.kind = HoldKind::stream;
    if (!realtime || d.response) return d;
    // The head of the stream: close-delimited, so no Content-Length and no
    // Transfer-Encoding; nothing may frame the events but SSE itself.
    resp.status = 200;
    resp.headers.remove("Content-Length");
    resp.headers.remove("Transfer-Encoding");
    resp.headers.remove("Connection");
    resp.headers.set("Content-Type", "text/event-stream");
    resp.headers.set("Cache-Control", "no-cache");
    // nginx (ngx_http_proxy_module): "Buffering can also be enabled or
    // disabled by passing 'yes' or 'no' in the X-Accel-Buffering response
    // header field": a proxy in front passes each event on as it comes.
    resp.headers.set("X-Accel-Buffering", "no");
    resp.headers.set("x-worker", std::string(worker));
    resp.stream = nullptr;
    return d;
}

bool send_hold_frame(bus::Bus* bus, SlotRef slot, Start start, std::vector<std::string> channels,
                     bus::KeepAlive keepalive, bool response, uint32_t timeout, bool websocket) {
    if (!bus) return false;
    bus::HoldFrame f;
    f.stream_url = bus::reserved_stream_url(slot);
    f.cursor = start.cursor;
    f.position = start.position;
    f.channels = std::move(channels);
    f.keepalive = std::move(keepalive);
    f.response = response;
    f.timeout = timeout;
    f.websocket = websocket;
    return bus->send(std::move(f));
}

void post_response(const Handoff& h, SlotRef slot, http::Response resp) {
    Completion c;
    c.kind = Completion::Kind::response;
    c.slot = slot;
    c.response = std::move(resp);
    h.ring->push(std::move(c));
    h.at(Point::completion_posted, slot);
}

void finish_hold(const Handoff& h, SlotRef slot, Start start, http::Response head, HoldDecision d) {
    if (d.websocket && !start.websocket)
        M0_LOG(info,
               "M0-Hold: websocket on a request that is no WebSocket upgrade: served as a "
               "stream hold");
    if (!h.bus) {
        static std::atomic<bool> said{false};
        if (!said.exchange(true))
            M0_LOG(warn,
                   "a handler asked for a hold, but --realtime is off: holds are answered "
                   "as ordinary responses");
        post_response(h, slot, std::move(head));
        return;
    }
    if (d.channels.size() > h.max_channels) {
        // Each name is a subscription the loop keeps for the hold's life: a
        // handler that joins thousands is a defect, not a hold.
        std::string why = "M0-Channel names " + std::to_string(d.channels.size()) +
                          " channels, over --max-hold-channels " + std::to_string(h.max_channels);
        M0_LOG(error, "hold refused for slot ", to_string(slot), ": ", why);
        post_response(h, slot, http::error_response(502, why));
        return;
    }
    if (h.metrics) {
        if (!h.metrics->holds_open.reserve()) {
            h.metrics->holds_refused.fetch_add(1);
            auto r = http::error_response(503, "too many holds open");
            r.headers.add("Retry-After", "5");
            post_response(h, slot, std::move(r));
            return;
        }
    }
    // A long-poll's cursor: the request's, else Grip-Channel's prev-id.
    if (d.response && start.cursor == 0) start.cursor = d.prev_id;
    // The frame goes first: the loop subscribes the slot before it writes the head.
    if (!send_hold_frame(h.bus, slot, start, std::move(d.channels), std::move(d.keepalive),
                         d.response, d.timeout, d.websocket && start.websocket)) {
        if (h.metrics) h.metrics->holds_open.release();
        M0_LOG(warn, "hold refused for slot ", to_string(slot),
               ": the bus channel is full or closed");
        auto r = http::error_response(503, "hold refused: the bus channel is full");
        r.headers.add("Retry-After", "1");
        post_response(h, slot, std::move(r));
        return;
    }
    h.at(Point::frame_sent, slot);
    Completion c;
    c.kind = Completion::Kind::hold;
    c.slot = slot;
    c.response = std::move(head);
    h.ring->push(std::move(c));
    h.at(Point::completion_posted, slot);
}

}  // namespace m0::hold
