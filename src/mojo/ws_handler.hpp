// A native WebSocket handler for a mojo mount: on_open, on_message,
// on_close, called on a mojo pool thread with a WsContext that sends
// messages, subscribes to channels and closes.
//
// DESIGN
// The server speaks to a native handler as to a WebSocket-over-HTTP view
// (server/ws_over_http.cpp), in process: each batch of the connection's
// events is one job on the mount's pool, whose answer the loop carries out.
// So a pool thread is busy only while a handler runs, never for the
// connection's life; one batch at a time per connection, in order; the
// connection's subscriptions, replay and fan-out are the hold table's, as
// for every WebSocket. serve_ws decodes a batch and calls the handler;
// the WsContext collects what it asked for as the answer's events.
//
// A mount lists its WebSocket routes (below its prefix) in
// `static constexpr std::array<std::string_view, N> ws_paths`; the server
// treats an upgrade there as it does one under --ws-over-http, and the
// mount's serve() hands those requests to serve_ws. Thread: the pool
// thread that runs the job; a WsContext lives for one batch.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "http/message.hpp"
#include "http/ws_events.hpp"

namespace m0::mojo {

class WsContext {
  public:
    explicit WsContext(const http::Request& req);
    // The event request: the upgrade's target, query and headers.
    const http::Request& request() const { return req_; }
    const std::string& id() const { return id_; }  // the connection's, for every batch
    // on_open: take the WebSocket (without it, the handshake is refused 403).
    void accept() { accepted_ = true; }
    void send(std::string_view text);
    void send_binary(std::string_view bytes);
    // The connection hears `channel`'s events from the next message on
    // (checked by the server as every channel name is).
    void subscribe(std::string_view channel);
    void unsubscribe(std::string_view channel);
    // A close frame with `code`; nothing more is sent after it.
    void close(uint16_t code = 1000);
    // Meta values (kept by the server between batches; names lower-case).
    std::optional<std::string> meta(std::string_view name) const;
    void set_meta(std::string_view name, std::string_view value);

    // serve_ws's: the batch's events, or an answer refusing a request that
    // carries none; and the answer once the handler ran.
    bool read(std::vector<http::woh::Event>& events, http::Response& refusal) const;
    bool accepted() const { return accepted_; }
    bool closed() const { return closed_; }
    http::Response answer(bool opening) const;

  private:
    void control(std::string_view type, std::string_view channel);
    const http::Request& req_;
    std::string id_;
    bool accepted_ = false, closed_ = false;
    std::vector<http::woh::Event> out_;
    std::vector<std::pair<std::string, std::string>> set_meta_;
};

template <class H>
concept WsHandler = requires(H& h, WsContext& c, std::string_view m, uint16_t code) {
    h.on_open(c);
    h.on_message(c, true, m);
    h.on_close(c, code);
};

// Runs one batch of a connection's events through `h`: OPEN calls on_open,
// TEXT and BINARY on_message, CLOSE on_close with the client's code (and the
// close is answered), DISCONNECT on_close with 1006; PING and PONG were
// answered by the server. After a close, nothing more of the batch is read.
template <WsHandler H>
http::Response serve_ws(H& h, const http::Request& req) {
    WsContext c(req);
    std::vector<http::woh::Event> events;
    http::Response refusal;
    if (!c.read(events, refusal)) return refusal;
    bool opening = false;
    for (const auto& e : events) {
        if (c.closed()) break;
        const std::string_view content = e.content ? std::string_view(*e.content) : "";
        if (e.type == "OPEN") {
            opening = true;
            h.on_open(c);
        } else if (e.type == "TEXT" || e.type == "BINARY") {
            h.on_message(c, e.type == "TEXT", content);
        } else if (e.type == "CLOSE" || e.type == "DISCONNECT") {
            const uint16_t code = e.type == "DISCONNECT" ? 1006
                                  : content.size() >= 2
                                      ? uint16_t(uint8_t(content[0]) << 8 | uint8_t(content[1]))
                                      : 1005;
            h.on_close(c, code);
            if (e.type == "CLOSE") c.close(code < 1005 || code > 1006 ? code : 1000);
            break;
        }
    }
    return c.answer(opening);
}

}  // namespace m0::mojo
