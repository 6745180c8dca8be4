// WebSocket-over-HTTP (Pushpin's protocol, pushpin.org "WebSocket-over-HTTP"):
// a WebSocket's events carried in the body of HTTP requests and answers with
// Content-Type application/websocket-events. Pure; any thread.
//
// DESIGN
// An event is a line `TYPE\r\n`, or `TYPE SIZE\r\nCONTENT\r\n` with SIZE the
// content's length in hex (Pushpin's encodeEvents, pygripcontrol's
// encode_websocket_events). The types: OPEN, TEXT, BINARY, PING, PONG,
// CLOSE (content: a two-byte code, then the reason), DISCONNECT. The server
// encodes what a client did (encode_events) and decodes what the view
// answered (decode_events). Pushpin's own decoder takes any type and a short
// read at the end; this one refuses an unknown type, a size that is not hex
// or names more bytes than follow, and content not followed by CRLF, with a
// reason, so a view that answers garbage is told why in the log and its
// client gets a close with 1011, never half an event.
//
// With the grip extension (the OPEN answer's `Sec-WebSocket-Extensions:
// grip`), a TEXT event whose content starts `c:` is a control message (JSON:
// subscribe, unsubscribe, detach, keep-alive, set-meta: decode_ws_control in
// json.hpp), and a message the view sends starts with a prefix (`m:`, or the
// extension's message-prefix parameter) that the server strips; an
// unprefixed one is dropped, as Pushpin drops it.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "http/message.hpp"

namespace m0::http::woh {

inline constexpr std::string_view kContentType = "application/websocket-events";

struct Event {
    std::string type;                    // OPEN, TEXT, BINARY, PING, PONG, CLOSE, DISCONNECT
    std::optional<std::string> content;  // absent: the line has no size
};

// Whether `type` is one of the seven.
bool known_type(std::string_view type);

// The body of a request (or an answer) carrying `events`.
std::string encode_events(const std::vector<Event>& events);

// Decodes an answer's body: false with `err` (one line, naming the byte
// offset) on anything but a run of well-formed events of known types.
bool decode_events(std::string_view body, std::vector<Event>& out, std::string& err);

// A CLOSE event's content: the code, big-endian, then the reason.
std::string close_content(uint16_t code, std::string_view reason);

// The grip extension in `h`'s Sec-WebSocket-Extensions: its message prefix
// ("m:" unless the extension names one); nullopt without it.
std::optional<std::string> grip_prefix(const Headers& h);

// A control message (the content after `c:`): what the view asks of the
// connection (decode_ws_control in json.hpp reads it).
struct Control {
    enum class Type : uint8_t { subscribe, unsubscribe, detach, keep_alive, set_meta };
    Type type = Type::subscribe;
    std::string channel;  // subscribe, unsubscribe
    // keep-alive: what is sent (`content`, or `content-bin` decoded) as a
    // message of `message_type` (text, binary, ping or pong; text by default,
    // binary for content-bin) when the connection sent nothing for `timeout`
    // seconds (mode "idle", the default) or every `timeout` seconds
    // ("interval"); no content or a timeout of 0 turns it off.
    std::string content;
    std::string message_type = "text";
    uint32_t timeout = 0;
    bool interval = false;
    std::string name, value;  // set-meta: an empty value removes it
};

}  // namespace m0::http::woh
