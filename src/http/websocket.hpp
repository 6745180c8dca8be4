// WebSocket (RFC 6455), the parts that are pure: the opening handshake's
// checks and its Sec-WebSocket-Accept, an event's message, a server frame's
// bytes, and an incremental UTF-8 validator. Any thread.
//
// DESIGN
// The loop checks an upgrade request before any pool sees it
// (check_upgrade): a bad one is answered here (400, 426, 403) and never
// dispatched. The frames a client sends are parsed by libwslay on the loop
// (server/ws_conn.cpp); the frames the server sends to many subscribers are
// made once here (server_frame) and shared, as an SSE event's bytes are.
// A server frame is never masked (RFC 6455 §5.1: "A server MUST NOT mask any
// frames that it sends to the client"), so its bytes are the same for every
// connection. wslay checks what a client sends after the 101 (server/
// ws_conn.cpp), UTF-8 too, but a close frame's reason only from the third
// byte of each piece it reads: Utf8Validator checks reasons as they come.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "http/cors.hpp"
#include "http/message.hpp"

namespace m0::http::ws {

enum class Opcode : uint8_t {
    continuation = 0x0,
    text = 0x1,
    binary = 0x2,
    close = 0x8,
    ping = 0x9,
    pong = 0xA,
};

// Close codes the server sends (RFC 6455 §7.4.1).
enum Close : uint16_t {
    kNormal = 1000,
    kGoingAway = 1001,
    kProtocolError = 1002,
    kInvalidData = 1007,
    kPolicyViolation = 1008,
    kTooBig = 1009,
    kInternalError = 1011,
    kTryAgainLater = 1013,  // IANA's registry (RFC 6455 §11.7)
};

// Who may open a WebSocket from a browser page: the Origin header against a
// list (--ws-origin, else --cors-origin; "*" allows every origin). A request
// with no Origin is not a browser's (RFC 6455 §10.2: "servers ... that are not
// intended to process input from any web page ... SHOULD verify the Origin
// field"; a non-browser client need not send one) and is allowed, and so is a
// page of the server's own origin (Origin's host[:port] is the request's Host).
class OriginCheck {
  public:
    OriginCheck() = default;
    // nullopt with `err` naming a malformed origin.
    static std::optional<OriginCheck> make(const std::vector<std::string>& origins,
                                           std::string& err);
    bool allows(const Request& req) const;
    bool listed() const { return policy_.enabled(); }

  private:
    CorsPolicy policy_;
};

// What check_upgrade found.
struct Upgrade {
    bool asked = false;  // Upgrade names websocket, or a GET has a Sec-WebSocket-Key
    int status = 0;      // 0: a valid handshake; else the refusal's status
    std::string reason;  // status != 0: why, for the answer's body and the log
    std::string accept;  // status == 0: Sec-WebSocket-Accept
    // Sec-WebSocket-Protocol's offered names, in the client's order.
    std::vector<std::string> protocols;
};

// The comma-separated items of every `name` field, trimmed, empty ones left out.
std::vector<std::string> list_items(const Headers& h, std::string_view name);

// Whether `req` asks for a WebSocket: Upgrade names the websocket token, or
// it is a GET with a Sec-WebSocket-Key (a WebSocket client's handshake whose
// Upgrade a proxy in front did not pass on: check_upgrade refuses it 400
// with that reason, rather than the request reaching a view as a plain GET).
bool asks_upgrade(const Request& req);

// RFC 6455 §4.2.1's checks of an opening handshake, then the origin's.
// asked == false: not an upgrade to websocket (nothing else is set).
Upgrade check_upgrade(const Request& req, const OriginCheck& origins);

// The answer to a refused handshake: `u.status` with `u.reason` as its body,
// and, for 426, `Sec-WebSocket-Version: 13` (RFC 6455 §4.4).
Response refusal(const Upgrade& u);

// RFC 6455 §4.2.2: base64(SHA-1(key + the GUID)).
std::string accept_key(std::string_view key);
// Loads what accept_key needs from OpenSSL (its default provider's SHA-1),
// once: called at start-up, before any fork, so that workers share it and the
// first WebSocket does not pay for it; accept_key loads it otherwise.
void prepare();

// What a WebSocket subscriber is sent for an event: a JSON object with "id"
// (a string, as SSE's id: line is: the client hands it back as it came,
// whatever range ids take later; left out when 0, for a control message),
// "event" (left out when empty) and "data". Bytes of `data` that are not
// UTF-8 become U+FFFD.
std::string event_message(uint64_t id, std::string_view event, std::string_view data);
// server_frame(Opcode::text, event_message(id, event, data)).size(), counted
// without building either when `event` and `data` are ASCII (else built).
size_t event_frame_size(uint64_t id, std::string_view event, std::string_view data);

// Whether an endpoint may send `code` in a close frame (RFC 6455 §7.4: 1000
// to 1003, 1007 to 1014 (IANA's registry), 3000 to 4999).
inline bool sendable_close_code(uint16_t code) {
    return (code >= 1000 && code <= 1003) || (code >= 1007 && code <= 1014) ||
           (code >= 3000 && code <= 4999);
}

// A whole unmasked frame (FIN set) with `payload`, as a server sends it.
std::string server_frame(Opcode op, std::string_view payload);
// A close frame's bytes: the code, then `reason` (at most 123 bytes, cut).
std::string close_frame(uint16_t code, std::string_view reason);

// UTF-8 (RFC 3629 §4's syntax: no overlongs, no surrogates, at most
// U+10FFFF), fed in pieces. feed() returns false from the first byte that
// cannot start or continue a valid sequence on; complete() is true when the
// bytes fed so far end on a whole character.
class Utf8Validator {
  public:
    bool feed(std::string_view bytes);
    bool complete() const { return need_ == 0 && ok_; }
    bool ok() const { return ok_; }
    void reset() { *this = Utf8Validator{}; }

  private:
    uint8_t need_ = 0;               // continuation bytes still to come
    uint8_t lo_ = 0x80, hi_ = 0xBF;  // the next continuation byte's range
    bool ok_ = true;
};

}  // namespace m0::http::ws
