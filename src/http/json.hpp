// The admin API's request bodies, decoded over nlohmann::json (Debian
// nlohmann-json3-dev), and its answers, encoded. Pure, any thread; nothing
// here throws.
//
//   POST /publish    {"channel": C, "data": D, "event": E}      decode_publish
//   POST /close      {"channel": C}                             decode_close
//   POST /publish/   Pushpin's {"items": [ITEM, ...]}           decode_pushpin
//
// RFC 8259 §8.1: JSON text between systems "MUST be encoded using UTF-8":
// nlohmann's parser refuses bytes that are not (overlong forms, surrogates,
// nothing past U+10FFFF) and lone \u surrogates, so every string decoded here
// is UTF-8. Only content-bin, base64 by definition, decodes to any bytes.
#pragma once
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <string_view>
#include <vector>

namespace m0::http {

// An event for the m0serve publish API.
struct AdminEvent {
    std::string channel;
    std::string data;
    std::string event;      // empty: no `event:` line
    bool has_data = false;  // `data` was given (a string; "" is an empty event)
};

// One Pushpin item that has an http-stream format.
struct PushpinItem {
    enum class Action { send, close };
    std::string channel;
    Action action = Action::send;
    std::string content;  // send: written to the channel's holds as it is
};

// A flat object: every value a string or null (null: the key is absent);
// other keys are ignored. False with `err` (one line, for a 400) on anything
// else, and when `channel` is missing.
bool decode_publish(std::string_view body, AdminEvent& out, std::string& err);
bool decode_close(std::string_view body, std::string& channel, std::string& err);

// Pushpin's publish format (pushpin.org, "HTTP publishing"): an object with
// an array `items`; each item an object with a string `channel`, optional
// string `id` and `prev-id` (the publisher's own ids: checked for type,
// otherwise ignored), and `formats`, an object. Its `http-stream` is either
// {"content": STRING} or {"content-bin": BASE64} (action "send", the
// default), or {"action": "close"}. Items without `http-stream` (only
// `http-response` or `ws-message`: nothing here serves them) are not
// returned, only counted in `skipped`. False with `err` on anything else
// (the "hint" action included): the whole request is refused, nothing decoded.
bool decode_pushpin(std::string_view body, std::vector<PushpinItem>& items, size_t& skipped,
                    std::string& err);

// An admin answer's body: `value` as JSON with one space after each ',' and
// ':' (the answers' form: {"ids": [1, 2], "closed": 0}; nlohmann's dump()
// writes none), keys in the order given, then a newline. A string that is
// not UTF-8 is written with U+FFFD in place of its bad bytes.
std::string encode_answer(const nlohmann::ordered_json& value);

}  // namespace m0::http
