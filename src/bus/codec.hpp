// Codec: what the transports make of an event, given to a bus by whoever
// builds it (the server's: server/codec.hpp). The bus numbers, keeps and
// replays events; it does not know how any transport writes them. It asks
// the codec two things: how large an event is, before it is numbered (the
// --max-event-size check), and the event's forms once it is numbered, made
// there once and shared by every lane, the history and every replay.
// Stateless: plain functions, any thread.
#pragma once
#include <cstddef>
#include <string_view>

#include "bus/frames.hpp"

namespace m0::bus {

struct Codec {
    // The size of a (not raw) event against --max-event-size: its largest
    // form, its id counted at its widest, so the verdict does not depend on
    // which id it would get. Null: the event's data and name.
    size_t (*measure)(std::string_view event, std::string_view data) = nullptr;
    // Fills f.forms once f is numbered (under the bus's lock: no waiting).
    // The forms carry the event's text: a frame that has any is kept in
    // history and replayed as its id, channel, raw flag and forms only, the
    // transports reading its name and data back from them (kept_whole frames
    // excepted). Null: events carry no forms.
    void (*encode)(PublishFrame& f) = nullptr;
};

}  // namespace m0::bus
