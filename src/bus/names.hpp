// Channel and event names, and the reserved per-slot namespace.
//
// reserved_stream_url(slot) names a connection's own channel ("m0.slot.I.G");
// the h frame carries it so the loop learns which slot to hold. Nothing outside
// the server may publish there: every publish boundary (m0.publish, the admin
// API, a hold's M0-Channel) checks names with check_channel(), which refuses
// that namespace, empty names, names over kMaxChannelName bytes, CR, LF, NUL
// or ',' (the M0-Channel separator), and names that begin or end with SP or
// HTAB. That last rule keeps a name the same bytes at every boundary: a hold's
// M0-Channel list trims optional whitespace around its commas, so a name that
// could lose bytes there would be checked as one name and held as another.
// Pure functions, any thread.
#pragma once
#include <optional>
#include <string>
#include <string_view>

#include "loop/slot.hpp"

namespace m0::bus {

inline constexpr size_t kMaxChannelName = 256;
inline constexpr std::string_view kReservedPrefix = "m0.slot.";

enum class NameError { ok, empty, too_long, bad_char, edge_space, reserved };

NameError check_channel(std::string_view name);
// SP or HTAB: the optional whitespace trimmed around M0-Channel's commas.
constexpr bool is_ows(char c) { return c == ' ' || c == '\t'; }
// Event names: may be empty (no `event:` line); no CR, LF, NUL; at most 256 bytes.
NameError check_event(std::string_view name);
// A one-line reason for an error answer, e.g. "channel name is reserved".
const char* reason(NameError e);

std::string reserved_stream_url(SlotRef slot);
bool is_reserved(std::string_view name);
// The slot a reserved name names; nullopt for anything else.
std::optional<SlotRef> parse_reserved_stream_url(std::string_view name);

}  // namespace m0::bus
