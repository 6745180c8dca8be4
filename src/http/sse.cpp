#include "http/sse.hpp"

namespace m0::sse {

std::string encode_event(uint64_t id, std::string_view event, std::string_view data) {
    std::string out;
    out.reserve(data.size() + event.size() + 32);
    out.append("id: ").append(std::to_string(id)).push_back('\n');
    if (!event.empty()) out.append("event: ").append(event).push_back('\n');
    // WHATWG SSE: lines end at CRLF, LF or CR; each becomes one data field, and
    // the client joins them with LF. An empty payload is one empty data line.
    size_t start = 0;
    for (;;) {
        size_t end = data.find_first_of("\r\n", start);
        std::string_view line = data.substr(
            start, end == std::string_view::npos ? std::string_view::npos : end - start);
        out.append("data: ").append(line).push_back('\n');
        if (end == std::string_view::npos) break;
        start =
            end + ((data[end] == '\r' && end + 1 < data.size() && data[end + 1] == '\n') ? 2 : 1);
    }
    out.push_back('\n');
    return out;
}

bool decode_event(std::string_view wire, std::string& event, std::string& data) {
    event.clear();
    data.clear();
    bool any_data = false;
    while (!wire.empty()) {
        size_t nl = wire.find('\n');
        if (nl == std::string_view::npos) return false;  // every line ends in LF
        std::string_view line = wire.substr(0, nl);
        wire.remove_prefix(nl + 1);
        if (line.empty()) return any_data && wire.empty();  // the blank line ends it
        if (line.starts_with("data: ")) {
            if (any_data) data.push_back('\n');
            data.append(line.substr(6));
            any_data = true;
        } else if (line.starts_with("event: ")) {
            event.assign(line.substr(7));
        } else if (!line.starts_with("id: ")) {
            return false;
        }
    }
    return false;
}

size_t encoded_size(uint64_t id, std::string_view event, std::string_view data) {
    size_t n = 4 + std::to_string(id).size() + 1;   // "id: N\n"
    if (!event.empty()) n += 7 + event.size() + 1;  // "event: NAME\n"
    // The same line ends as encode_event(): LF, CR, or CRLF as one.
    size_t lines = 1, end_bytes = 0;
    for (size_t i = 0; i < data.size(); ++i) {
        if (data[i] != '\r' && data[i] != '\n') continue;
        ++lines;
        ++end_bytes;
        if (data[i] == '\r' && i + 1 < data.size() && data[i + 1] == '\n') {
            ++i;
            ++end_bytes;
        }
    }
    // Each line is "data: " LINE "\n"; a blank line ends the event.
    return n + (data.size() - end_bytes) + lines * 7 + 1;
}

std::string encode_retry(uint64_t ms) { return "retry: " + std::to_string(ms) + "\n\n"; }

std::string encode_control(std::string_view event, std::string_view data) {
    // encode_event without its id line.
    std::string e = encode_event(0, event, data);
    return e.substr(e.find('\n') + 1);
}

}  // namespace m0::sse
