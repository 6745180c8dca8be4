// GRIP's hold instructions (Pushpin's "GRIP" protocol), read beside M0-Hold
// by take_stream_hold on a pool thread. Pure functions, any thread.
//
//   Grip-Hold: stream                   held exactly like M0-Hold: stream
//   Grip-Hold: response                 a long-poll: the first event on the
//                                       channels answers the request (the
//                                       handler's answer, its body replaced),
//                                       or the handler's own answer does at
//                                       Grip-Timeout
//   Grip-Timeout: S                     a long-poll's wait: whole seconds,
//                                       0..86400 (under 1 is 1; default 55,
//                                       Pushpin's)
//   Grip-Channel: a, b; prev-id=3       the channels (the header may repeat);
//                                       a long-poll's numeric prev-id is its
//                                       cursor when the request brought none
//                                       (the lowest, when several); other
//                                       parameters are ignored
//   Grip-Keep-Alive: DATA; format=F; timeout=S
//                                       the hold's keep-alive: DATA (F raw,
//                                       the default, cstring or base64)
//                                       written after S seconds (1..86400;
//                                       default --heartbeat) with nothing sent
// Every Grip-* header of a Grip hold is removed from the head the client gets.
#pragma once
#include <string>
#include <string_view>
#include <vector>

#include "bus/frames.hpp"
#include "http/message.hpp"

namespace m0::hold {

// Grip-Channel's names: the comma-separated items, each up to its first ";"
// and trimmed of SP and HTAB (so a GRIP channel name cannot hold ";").
std::vector<std::string> grip_channels(std::string_view list);

// The lowest numeric prev-id parameter of Grip-Channel's items; 0 when none
// has one (a prev-id that is not a decimal number is not a cursor here).
uint64_t grip_prev_id(std::string_view list);

// Grip-Timeout's seconds: false when not a whole number in 0..86400.
bool grip_timeout(std::string_view value, uint32_t& seconds);
inline constexpr uint32_t kGripTimeout = 55;  // Pushpin's default

// Reads a Grip-Keep-Alive value into `out`; false with `err` when its data is
// empty or does not decode in its format, the format is unknown, or the
// timeout is not a whole number of seconds in 1..86400. Other parameters
// (mode=) are ignored: the keep-alive is always sent on idleness.
bool grip_keep_alive(std::string_view value, bus::KeepAlive& out, std::string& err);

// Removes every header whose name begins "Grip-" (case-insensitive).
void remove_grip_headers(http::Headers& headers);

}  // namespace m0::hold
