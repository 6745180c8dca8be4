// The server's codec (bus::Codec): an event's forms as its transports write
// them, made once where the bus numbers it and shared by every lane, the
// history and every replay (subscriber.hpp's transports read them).
//   Form::sse  an SSE event (id:, event:, data: lines), or a raw event's data
//              as it is: stream holds (and a long-poll reads the text back)
//   Form::ws   one WebSocket text frame whose payload is
//              {"id": "N", "event": NAME, "data": DATA} (http/websocket.hpp),
//              or a ws-message item's content as it is
// Pure functions, any thread.
#pragma once
#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

#include "bus/codec.hpp"
#include "bus/frames.hpp"

namespace m0::server {

enum class Form : size_t { sse = 0, ws = 1 };
static_assert(static_cast<size_t>(Form::ws) < bus::kForms);

inline const std::shared_ptr<const std::string>& form(const bus::PublishFrame& f, Form which) {
    return f.forms[static_cast<size_t>(which)];
}

// The bytes a stream hold is written for `f`: its SSE event, a raw event's
// data as it is, an http-response item's http-stream content; null for what
// a stream is not written (a ws-message item, a response item without
// http-stream content).
std::shared_ptr<const std::string> sse_bytes(const bus::PublishFrame& f);
// The bytes a WebSocket subscriber is written for `f`: the envelope's text
// frame, or a ws-message item's content (alone or inside an http-response
// item) as a text or binary frame; null for other raw events.
std::shared_ptr<const std::string> ws_bytes(const bus::PublishFrame& f);
// An event's largest form, its id at its widest (20 digits): what
// --max-event-size judges it by, so no subscriber of any transport is written
// more than that for one event.
size_t measure(std::string_view event, std::string_view data);
// Both forms of `f`.
void encode(bus::PublishFrame& f);

// measure and encode, for the bus.
inline bus::Codec codec() { return {&measure, &encode}; }

}  // namespace m0::server
