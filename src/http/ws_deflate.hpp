// permessage-deflate (RFC 7692) for WebSockets: the negotiation's answer,
// a server frame's payload compressed, a client's message inflated. zlib.
//
// DESIGN
// The server always answers `server_no_context_takeover`: each message it
// sends is compressed on its own (RFC 7692 §7.2.1: raw DEFLATE, flushed,
// the final 00 00 FF FF taken off), so an event's compressed frame is the
// same bytes for every subscriber and is made once an event and shared, as
// the uncompressed frame is. An offer that limits the server's window
// (`server_max_window_bits` under 15) is declined: the shared bytes are made
// with a 32 KiB window for everyone; such a client then gets uncompressed
// messages (the next offer, or none). `client_max_window_bits` and
// `client_no_context_takeover` need nothing of the server: a client's
// messages are inflated by one stream per connection that keeps its window,
// which reads both a client that keeps its context and one that does not.
// An inflated message longer than the limit stops there (a deflate bomb
// never grows the server past --ws-max-message).
//
// deflate_message and deflate_frame: any thread (a compressor per thread).
// An Inflater: its connection's thread.
#pragma once
#include <memory>
#include <string>
#include <string_view>

#include "http/message.hpp"

namespace m0::http::ws {

// The 101's Sec-WebSocket-Extensions value for the client's first
// permessage-deflate offer the server accepts; empty when none (no offer, or
// each has an unknown or repeated parameter, a bad value, or limits the
// server's window).
std::string negotiate_deflate(const Headers& request);

// One message's payload compressed (RFC 7692 §7.2.1).
std::string deflate_message(std::string_view payload);

// A whole unmasked server frame (as server_frame makes it) with its payload
// compressed and RSV1 set; a control frame is returned as it is.
std::string deflate_frame(std::string_view frame);

class Inflater {
  public:
    enum class Result { ok, too_big, bad };
    Inflater();
    ~Inflater();
    Inflater(const Inflater&) = delete;
    Inflater& operator=(const Inflater&) = delete;
    // Inflates one compressed message into `out` (RFC 7692 §7.2.2): too_big
    // as soon as it passes `limit` bytes, bad for data that is not DEFLATE.
    Result inflate(std::string_view message, size_t limit, std::string& out);

  private:
    struct Stream;
    std::unique_ptr<Stream> z_;
};

}  // namespace m0::http::ws
