// Transport::stream: Server-Sent Events over HTTP/1.1 (the WHATWG's
// EventSource). Events carry id: and data: lines (event: when named), a gap is
// an m0-reset event, the end a retry: hint, the heartbeat a comment line.
#include "http/sse.hpp"
#include "server/codec.hpp"
#include "server/subscriber.hpp"

namespace m0::server {

namespace {

class SseSubscriber final : public Subscriber {
  public:
    bool answers_once() const override { return false; }
    // Every event; event() is null for an http-response item without
    // http-stream content, which a stream is then not written.
    // A ws-message item is a WebSocket subscriber's only.
    bool carries(const bus::PublishFrame& f) const override { return !bus::ws_message(f); }
    SharedBytes event(const bus::PublishFrame& f) const override {
        // The bus made them where it numbered the event (every loop, the
        // history and each replay share them); a frame from a shared bus comes
        // without, and they are made here once a loop.
        const SharedBytes& made = form(f, Form::sse);
        return made ? made : sse_bytes(f);
    }
    SharedBytes reset(uint64_t oldest) const override {
        return std::make_shared<const std::string>(
            sse::encode_control(sse::kResetEvent, "{\"oldest\": " + std::to_string(oldest) + "}"));
    }
    std::string end(uint64_t retry_ms, EndWhy) const override {
        return sse::encode_retry(retry_ms);
    }
    const SharedBytes& heartbeat() const override { return heartbeat_; }
    http::Response answer(const http::Response& held, const bus::PublishFrame&) const override {
        return held;  // a stream is never answered once
    }

  private:
    const SharedBytes heartbeat_ = std::make_shared<const std::string>(sse::kHeartbeat);
};

}  // namespace

const Subscriber& sse_subscriber() {
    static const SseSubscriber s;
    return s;
}

}  // namespace m0::server
