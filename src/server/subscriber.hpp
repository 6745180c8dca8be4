// Subscriber: what one transport writes to the holds that use it. The hold
// table (holds.hpp) numbers nothing and encodes nothing itself: it keeps each
// hold's cursor, replay, pacing and the slow-reader rule, and asks the hold's
// transport for the bytes of an event, a reset, the reconnect hint and the
// heartbeat (a stream), or for the one answer that ends it (a long-poll).
// One implementation a transport, one file each:
//   Transport::stream    SSE over HTTP/1.1 (sse_subscriber.cpp)
//   Transport::response  GRIP's long-poll, Grip-Hold: response (poll_subscriber.cpp)
//   Transport::websocket WebSocket messages after a 101 (ws_subscriber.cpp)
// Stateless and shared by every hold of the transport; any thread.
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "bus/frames.hpp"
#include "http/message.hpp"

namespace m0::server {

// One encoded event: immutable, shared by every hold it is queued to and by
// every connection output it is written to, freed when the last of them lets
// it go. Loop thread; the count is atomic all the same.
using SharedBytes = std::shared_ptr<const std::string>;

// websocket_deflate: a WebSocket with permessage-deflate (RFC 7692): its
// events compressed, once an event for all of its kind.
enum class Transport : uint8_t { stream, response, websocket, websocket_deflate };
inline constexpr size_t kTransports = 4;
inline bool is_websocket(Transport t) {
    return t == Transport::websocket || t == Transport::websocket_deflate;
}

// Why a hold ends (Subscriber::end): the server goes or closes its channel, or
// the reader is too slow for its buffer.
enum class EndWhy : uint8_t { leaving, slow };

class Subscriber {
  public:
    virtual ~Subscriber() = default;
    // Whether the first event a hold takes ends it, as the whole answer to
    // its request (answer()); false: a stream of events (event() and the rest).
    virtual bool answers_once() const = 0;
    // Whether the transport takes `f` at all.
    virtual bool carries(const bus::PublishFrame& f) const = 0;

    // A stream's bytes for `f`, made once an event and shared by every hold
    // (the bus's own, when it made them where it numbered the event); null
    // when it carries no bytes for it.
    virtual SharedBytes event(const bus::PublishFrame& f) const = 0;
    // The gap history cannot fill: what is delivered starts at `oldest`.
    virtual SharedBytes reset(uint64_t oldest) const = 0;
    // The last bytes of a hold that ends: come back in `retry_ms`.
    virtual std::string end(uint64_t retry_ms, EndWhy why) const = 0;
    // Written to a hold idle for --heartbeat seconds.
    virtual const SharedBytes& heartbeat() const = 0;

    // A long-poll's answer: `held`, the handler's own answer, with `f` in it.
    virtual http::Response answer(const http::Response& held, const bus::PublishFrame& f) const = 0;
};

const Subscriber& sse_subscriber();         // sse_subscriber.cpp
const Subscriber& poll_subscriber();        // poll_subscriber.cpp
const Subscriber& ws_subscriber();          // ws_subscriber.cpp
const Subscriber& ws_deflate_subscriber();  // ws_subscriber.cpp
inline const Subscriber& subscriber(Transport t) {
    switch (t) {
        case Transport::response:
            return poll_subscriber();
        case Transport::websocket:
            return ws_subscriber();
        case Transport::websocket_deflate:
            return ws_deflate_subscriber();
        case Transport::stream:
            break;
    }
    return sse_subscriber();
}

}  // namespace m0::server
