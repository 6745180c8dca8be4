// Transport::websocket: events as WebSocket messages (RFC 6455) after a 101.
//
// DESIGN
// Each event is one text frame whose payload is a JSON object:
//   {"id": "N", "event": "NAME", "data": "..."}
// ("event" only when the event is named; "id" a string, as SSE's id: is).
// The id is what a client reconnects with (?lastEventID=N: a browser's
// WebSocket sets no header), so the envelope is the one way to carry it;
// nchan sends the data verbatim and its ids only with the ws+meta.nchan
// subprotocol, Centrifugo's unidirectional WebSocket sends JSON pushes with
// the publication's offset, Pushpin sends the publisher's content verbatim
// and replays nothing. A gap history cannot fill is the message
// {"event": "m0-reset", "data": "{\"oldest\": N}"}, with no "id": SSE's
// m0-reset, which a client tells from an event by its missing id.
// The frame is made once an event where the bus numbers it
// (Form::ws, server/codec.hpp) and shared by every subscriber, every
// loop, the history and every replay; a frame from a shared bus comes without
// and is framed here, once a loop. The heartbeat is a ping frame (one shared
// buffer); the end is a close frame: 1001 (going away: the server stops, or
// its channel is closed) or 1013 (try again later: a slow reader). Raw
// events (Pushpin's http-stream and http-response items) are not a
// WebSocket's; a ws-message item's content is, verbatim: a text message
// (content) or a binary one (content-bin), as Pushpin sends it, with no
// envelope (its id still counts: a reconnect's cursor passes it).
#include "http/sse.hpp"
#include "http/websocket.hpp"
#include "http/ws_deflate.hpp"
#include "server/codec.hpp"
#include "server/subscriber.hpp"

namespace m0::server {

namespace {

namespace ws = http::ws;

class WsSubscriber final : public Subscriber {
  public:
    explicit WsSubscriber(bool deflate) : deflate_(deflate) {}
    bool answers_once() const override { return false; }
    bool carries(const bus::PublishFrame& f) const override {
        return !f.raw || bus::ws_message(f) || f.event == bus::kResponseFormat;
    }
    SharedBytes event(const bus::PublishFrame& f) const override {
        SharedBytes plain = frame(f);
        // permessage-deflate: compressed with no context, so the same bytes
        // serve every subscriber of this kind (made once an event, here).
        if (!deflate_ || !plain) return plain;
        return std::make_shared<const std::string>(ws::deflate_frame(*plain));
    }
    SharedBytes frame(const bus::PublishFrame& f) const {
        // A ws-message item's content (alone, or inside an http-response item).
        const SharedBytes& made = form(f, Form::ws);
        if (bus::ws_message(f) || (f.raw && f.event == bus::kResponseFormat))
            return made ? made : ws_bytes(f);
        if (f.raw) return nullptr;
        if (made) return made;
        const SharedBytes& sse = form(f, Form::sse);
        if (!sse || !f.data.empty() || !f.event.empty()) return ws_bytes(f);
        // Kept with its SSE form only: its text is read back from it.
        bus::PublishFrame g;
        g.id = f.id;
        if (!sse::decode_event(*sse, g.event, g.data)) return nullptr;
        return ws_bytes(g);
    }
    SharedBytes reset(uint64_t oldest) const override {
        return std::make_shared<const std::string>(ws::server_frame(
            ws::Opcode::text, ws::event_message(0, sse::kResetEvent,
                                                "{\"oldest\": " + std::to_string(oldest) + "}")));
    }
    std::string end(uint64_t retry_ms, EndWhy why) const override {
        // RFC 6455 §7.4.1: 1001 "going away, such as a server going down";
        // 1013 (IANA): "try again later". The reason says when.
        const std::string after = "reconnect in " + std::to_string(retry_ms) + " ms";
        return why == EndWhy::slow ? ws::close_frame(ws::kTryAgainLater, "slow reader; " + after)
                                   : ws::close_frame(ws::kGoingAway, after);
    }
    const SharedBytes& heartbeat() const override { return ping_; }
    http::Response answer(const http::Response& held, const bus::PublishFrame&) const override {
        return held;  // a WebSocket is never answered once
    }

  private:
    const bool deflate_;
    const SharedBytes ping_ =
        std::make_shared<const std::string>(ws::server_frame(ws::Opcode::ping, {}));
};

}  // namespace

const Subscriber& ws_subscriber() {
    static const WsSubscriber s(false);
    return s;
}

const Subscriber& ws_deflate_subscriber() {
    static const WsSubscriber s(true);
    return s;
}

}  // namespace m0::server
