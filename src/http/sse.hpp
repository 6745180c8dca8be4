// The Server-Sent-Events encoder (WHATWG HTML §9.2 "Server-sent events").
// Pure functions, any thread.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>

namespace m0::sse {

// "id: N\n", "event: NAME\n" when `event` is not empty, one "data: " line per
// line of `data` (split at CRLF, LF or CR), then the blank line that
// dispatches the event. `event` holds no CR, LF or NUL (every publish checks
// it, bus::check_event): a line end in it would begin a field of its own.
std::string encode_event(uint64_t id, std::string_view event, std::string_view data);
// What an EventSource client reads from `wire`, one event as encode_event
// wrote it: its name, and its data: lines joined with LF (so `data` with its
// line ends made LF). False when `wire` is not such an event.
bool decode_event(std::string_view wire, std::string& event, std::string& data);
// encode_event(id, event, data).size(), counted without building the string.
size_t encoded_size(uint64_t id, std::string_view event, std::string_view data);
// A comment line: ignored by EventSource, keeps proxies and the client's
// idle timers from closing the stream.
inline constexpr std::string_view kHeartbeat = ":\n\n";
// "retry: MS\n\n": the reconnection time the client should wait.
std::string encode_retry(uint64_t ms);
// A control event the server writes on its own: "event: NAME" and its data,
// and no `id:` line, so a browser's cursor only ever holds ids of real events
// and a reconnect can never skip one.
std::string encode_control(std::string_view event, std::string_view data);
// The name of the control event that says the stream has a gap the history
// could not fill; its data is {"oldest": N}, the lowest id the stream
// delivers from here. The application resynchronises (reloads its state).
inline constexpr std::string_view kResetEvent = "m0-reset";

}  // namespace m0::sse
