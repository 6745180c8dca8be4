#include "mojo/builtin.hpp"

#include <ctime>

#include "bus/names.hpp"
#include "grant/grant.hpp"

namespace m0::mojo {

std::string json_escape(std::string_view s) {
    static constexpr char kHex[] = "0123456789abcdef";
    std::string out = "\"";
    for (char ch : s) {
        auto c = static_cast<unsigned char>(ch);
        switch (c) {
            case '"':
                out += "\\\"";
                break;
            case '\\':
                out += "\\\\";
                break;
            case '\n':
                out += "\\n";
                break;
            case '\r':
                out += "\\r";
                break;
            case '\t':
                out += "\\t";
                break;
            default:
                if (c < 0x20) {
                    out += "\\u00";
                    out += kHex[c >> 4];
                    out += kHex[c & 15];
                } else {
                    out += static_cast<char>(c);
                }
        }
    }
    out += '"';
    return out;
}

namespace {

http::Response text(int status, std::string body) {
    http::Response r;
    r.status = status;
    r.headers.add("Content-Type", "text/plain; charset=utf-8");
    r.body = std::move(body);
    return r;
}

// A hold is read with GET (HEAD: its head alone). OPTIONS is answered with
// what the route allows (a CORS preflight, with --cors-origin, is the loop's
// and never comes here); any other method is refused 405 rather than held.
std::optional<http::Response> hold_method(const http::Request& req) {
    if (req.method == "GET" || req.method == "HEAD") return std::nullopt;
    http::Response r = req.method == "OPTIONS"
                           ? text(204, "")
                           : text(405, "a hold is read with GET, not " + req.method + "\n");
    if (r.status == 204) r.headers.remove("Content-Type");
    r.headers.add("Allow", "GET, HEAD, OPTIONS");
    return r;
}

http::Response hold_response(const std::string& channels) {
    http::Response r;
    r.headers.add("M0-Hold", "stream");
    r.headers.add("M0-Channel", channels);
    r.body = ": mojo hold\n\n";
    return r;
}

http::Response echo(const http::Request& req) {
    std::string j = "{\"method\":" + json_escape(req.method) +
                    ",\"path\":" + json_escape(req.path_info) +
                    ",\"query\":" + json_escape(req.query) + ",\"headers\":{";
    bool first = true;
    for (const auto& [k, v] : req.headers.items) {
        if (!first) j += ",";
        first = false;
        j += json_escape(http::to_lower(k)) + ":" + json_escape(v);
    }
    // The body is bytes; as JSON it is carried as Latin-1 code points so any
    // byte survives the round trip.
    std::string body;
    for (char ch : req.body) {
        auto c = static_cast<unsigned char>(ch);
        if (c < 0x80) {
            body += static_cast<char>(c);
        } else {
            body += static_cast<char>(0xC0 | (c >> 6));
            body += static_cast<char>(0x80 | (c & 0x3F));
        }
    }
    j += "},\"body\":" + json_escape(body) + "}";
    http::Response r;
    r.headers.add("Content-Type", "application/json");
    r.body = std::move(j);
    return r;
}

}  // namespace

void BuiltinMount::Echo::on_open(WsContext& c) {
    c.accept();
    if (auto channel = c.request().query_param("channel"); channel && !channel->empty())
        c.subscribe(*channel);
}

void BuiltinMount::Echo::on_message(WsContext& c, bool text, std::string_view message) {
    if (text)
        c.send("echo: " + std::string(message));
    else
        c.send_binary(message);
}

std::optional<http::Response> BuiltinMount::granted_channels(const http::Request& req,
                                                             std::string& channels) const {
    if (!env_.grant_keys) return text(503, "grants are not configured (--grant-key-file)\n");
    auto token = req.query_param("grant");
    if (!token) return text(403, "missing grant\n");
    grant::Grant g;
    auto keys = env_.grant_keys->get();  // the ring of this moment, kept for this grant
    auto v = grant::verify(*keys, *token, static_cast<int64_t>(std::time(nullptr)), &g);
    if (v != grant::Verdict::ok) return text(403, std::string(grant::reason(v)) + "\n");
    for (const auto& c : g.channels) {
        if (bus::check_channel(c) != bus::NameError::ok)
            return text(403, "grant names a refused channel\n");
        if (!channels.empty()) channels += ",";
        channels += c;
    }
    return std::nullopt;
}

http::Response BuiltinMount::serve(const http::Request& req) {
    const std::string& p = req.path_info;
    if (p == "/hello") return text(200, "hello from mojo\n");
    if (p == "/echo") return echo(req);
    const bool holds =
        p == "/hold" || p == "/poll" || p == "/ws" || p == "/live" || p == "/live-ws";
    if (holds)
        if (auto refused = hold_method(req)) return std::move(*refused);
    if (p == "/hold" || p == "/poll" || p == "/ws") {
        // Unauthenticated on purpose: these routes exist to exercise the hold
        // mechanism. A real mount decides here whether the connection may be
        // held and which channel it joins (see /live, which checks a grant).
        auto channel = req.query_param("channel");
        if (!channel || channel->empty()) return text(400, "missing channel parameter\n");
        for (std::string_view rest = *channel;;) {
            size_t comma = rest.find(',');
            auto e = bus::check_channel(rest.substr(0, comma));
            if (e != bus::NameError::ok) return text(400, std::string(bus::reason(e)) + "\n");
            if (comma == std::string_view::npos) break;
            rest.remove_prefix(comma + 1);
        }
        if (p == "/hold") return hold_response(*channel);
        if (p == "/ws") {
            // A WebSocket subscriber on an upgrade request (the loop checked
            // its handshake and writes the 101); a stream hold otherwise.
            http::Response r = hold_response(*channel);
            r.headers.set("M0-Hold", "websocket");
            return r;
        }
        // GRIP's long-poll: the first event on the channel is the answer, or
        // this one (204) after `timeout` seconds (default Grip-Timeout's).
        http::Response r = text(204, "");
        r.headers.add("Grip-Hold", "response");
        auto prev_id = req.query_param("prev_id");  // the cursor, as a GRIP app passes it
        r.headers.add("Grip-Channel", *channel + (prev_id ? "; prev-id=" + *prev_id : ""));
        if (auto t = req.query_param("timeout")) r.headers.add("Grip-Timeout", *t);
        return r;
    }
    if (p == "/ws-echo") return serve_ws(echo_, req);
    if (p == "/stream") {
        // A streamed body that is not a hold: the pool refuses it 409. It exists
        // to prove that refusal.
        http::Response r;
        r.headers.add("Content-Type", "text/plain");
        auto n = std::make_shared<int>(0);
        r.stream = [n](std::string& chunk) {
            if (*n >= 3) return false;
            chunk = "chunk " + std::to_string((*n)++) + "\n";
            return true;
        };
        return r;
    }
    if (p == "/live" || p == "/live-ws") {
        std::string channels;
        if (auto refused = granted_channels(req, channels)) return std::move(*refused);
        http::Response r = hold_response(channels);
        // The twin: a WebSocket subscriber on an upgrade (the loop checked the
        // handshake; the refusals above are answered before any 101).
        if (p == "/live-ws") r.headers.set("M0-Hold", "websocket");
        return r;
    }
    return text(404, "no such mojo route\n");
}

}  // namespace m0::mojo
