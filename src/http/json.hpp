// The admin API's request bodies, decoded over nlohmann::json (Debian
// nlohmann-json3-dev), and its answers, encoded. Pure, any thread; nothing
// here throws.
//
//   POST /publish    {"channel": C, "data": D, "event": E}      decode_publish
//                    [{"channel": C, ...}, ...]                  decode_publish_batch
//   POST /close      {"channel": C}                             decode_close
//   POST /publish/   Pushpin's {"items": [ITEM, ...]}           decode_pushpin
//
// RFC 8259 §8.1: JSON text between systems "MUST be encoded using UTF-8":
// nlohmann's parser refuses bytes that are not (overlong forms, surrogates,
// nothing past U+10FFFF) and lone \u surrogates, so every string decoded here
// is UTF-8. Only content-bin, base64 by definition, decodes to any bytes.
#pragma once
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "http/ws_events.hpp"

namespace m0::http {

// An event for the m0serve publish API.
struct AdminEvent {
    std::string channel;
    std::string data;
    std::string event;      // empty: no `event:` line
    bool has_data = false;  // `data` was given (a string; "" is an empty event)
};

// Pushpin's http-response format: the answer of the channel's long-polls
// (GRIP's Grip-Hold: response). The item's `reason` is not kept: the answer's
// reason phrase is the status's own.
struct ResponseItem {
    int code = 200;
    std::vector<std::pair<std::string, std::string>> headers;  // over the held answer's
    std::string body;
    // The item's http-stream content, when it had one: what stream holds are
    // written for the same event.
    std::optional<std::string> stream;
    // Its ws-message content, when it had one: what WebSocket subscribers
    // are sent for the same event (a binary message with ws_binary).
    std::optional<std::string> ws;
    bool ws_binary = false;
};

// One Pushpin item that has an http-stream or an http-response format.
struct PushpinItem {
    enum class Action { send, close };
    std::string channel;
    Action action = Action::send;
    std::string content;  // send: written to the channel's stream holds as it is
    bool has_stream = false;
    std::optional<ResponseItem> response;  // its http-response format
    // Its ws-message format: the content of a text message (`content`) or a
    // binary one (`content-bin`) for WebSocket subscribers.
    std::optional<std::string> ws;
    bool ws_binary = false;
};

// A response item as the bus carries it (a raw event's data, its format
// bus::kResponseFormat): a JSON object, its bytes in base64. decode is false
// on anything encode does not write.
std::string encode_response_item(const ResponseItem& item);
bool decode_response_item(std::string_view data, ResponseItem& out);

// A flat object: every value a string or null (null: the key is absent);
// other keys are ignored. False with `err` (one line, for a 400) on anything
// else, and when `channel` is missing.
bool decode_publish(std::string_view body, AdminEvent& out, std::string& err);
// POST /publish with a JSON array: each element an object as decode_publish
// takes; the first that is not names its index ("event 3: missing channel").
bool is_batch(std::string_view body);  // the body's JSON value is an array
bool decode_publish_batch(std::string_view body, std::vector<AdminEvent>& out, std::string& err);
bool decode_close(std::string_view body, std::string& channel, std::string& err);

// Pushpin's publish format (pushpin.org, "HTTP publishing"): an object with
// an array `items`; each item an object with a string `channel`, optional
// string `id` and `prev-id` (the publisher's own ids: checked for type,
// otherwise ignored), and `formats`, an object. Its `http-stream` is either
// {"content": STRING} or {"content-bin": BASE64} (action "send", the
// default), or {"action": "close"}. Its `http-response` is {"code": 200..599
// (default 200), "reason": STRING (not kept), "headers": {NAME: VALUE} or
// [[NAME, VALUE], ...], "body": STRING or "body-bin": BASE64}; "body-patch"
// is refused, as is an item that both closes and responds. Its `ws-message`
// is {"content": STRING} or {"content-bin": BASE64}, or {"action": "close"},
// which closes the channel's holds as http-stream's close does (every
// transport); an item that both closes and sends or responds is refused.
// Items with none of the three are not returned, only counted in `skipped`. False with `err` on
// anything else (the "hint" action included): the whole request is refused, nothing decoded.
bool decode_pushpin(std::string_view body, std::vector<PushpinItem>& items, size_t& skipped,
                    std::string& err);

// An admin answer's body: `value` as JSON with one space after each ',' and
// ':' (the answers' form: {"ids": [1, 2], "closed": 0}; nlohmann's dump()
// writes none), keys in the order given, then a newline. A string that is
// not UTF-8 is written with U+FFFD in place of its bad bytes.
std::string encode_answer(const nlohmann::ordered_json& value);

// A WebSocket-over-HTTP control message (the content of a `c:` TEXT event,
// Pushpin's WsControlMessage): an object whose "type" is subscribe or
// unsubscribe (with a non-empty "channel"), detach, keep-alive ("content" or
// "content-bin", "message-type", "timeout", "mode") or set-meta ("name", a
// token, and "value"). False with `err` on anything else; Pushpin's
// session, send-delayed and flush-delayed are refused as unknown.
bool decode_ws_control(std::string_view body, woh::Control& out, std::string& err);

}  // namespace m0::http
