#include "bus/names.hpp"

#include <charconv>

namespace m0::bus {

NameError check_channel(std::string_view name) {
    if (name.empty()) return NameError::empty;
    if (name.size() > kMaxChannelName) return NameError::too_long;
    for (char c : name)
        if (c == '\r' || c == '\n' || c == '\0' || c == ',') return NameError::bad_char;
    if (is_ows(name.front()) || is_ows(name.back())) return NameError::edge_space;
    if (is_reserved(name)) return NameError::reserved;
    return NameError::ok;
}

NameError check_event(std::string_view name) {
    if (name.size() > kMaxChannelName) return NameError::too_long;
    for (char c : name)
        if (c == '\r' || c == '\n' || c == '\0') return NameError::bad_char;
    return NameError::ok;
}

const char* reason(NameError e) {
    switch (e) {
        case NameError::ok:
            return "ok";
        case NameError::empty:
            return "channel name is empty";
        case NameError::too_long:
            return "name is longer than 256 bytes";
        case NameError::bad_char:
            return "name contains CR, LF, NUL or ','";
        case NameError::edge_space:
            return "channel name begins or ends with a space or tab";
        case NameError::reserved:
            return "channel name is in the reserved m0.slot. namespace";
    }
    return "bad name";
}

std::string reserved_stream_url(SlotRef slot) {
    return std::string(kReservedPrefix) + std::to_string(slot.index) + "." +
           std::to_string(slot.gen);
}

bool is_reserved(std::string_view name) { return name.starts_with(kReservedPrefix); }

std::optional<SlotRef> parse_reserved_stream_url(std::string_view name) {
    if (!is_reserved(name)) return std::nullopt;
    name.remove_prefix(kReservedPrefix.size());
    size_t dot = name.find('.');
    if (dot == std::string_view::npos) return std::nullopt;
    SlotRef s;
    auto a = std::from_chars(name.data(), name.data() + dot, s.index);
    auto b = std::from_chars(name.data() + dot + 1, name.data() + name.size(), s.gen);
    if (a.ec != std::errc() || a.ptr != name.data() + dot || b.ec != std::errc() ||
        b.ptr != name.data() + name.size() || dot == 0)
        return std::nullopt;
    return s;
}

}  // namespace m0::bus
