// Fuzzer: the SSE encoder (sse::encode_event, encoded_size, encode_control,
// encode_retry) against a reader that follows the WHATWG event-stream
// interpretation (HTML §9.2.6): lines end at CRLF, LF or CR; a field line is
// NAME ":" [" "] VALUE; "data" lines are joined with LF; a blank line
// dispatches. Whatever the data (CR, LF, CRLF, NUL, any byte), the encoding
// must read back as exactly one event with the given id and name and the data
// with its line ends made LF, must use no field but id, event and data, and
// must be encoded_size() bytes.
// Input: 8 bytes of id, a length-prefixed event name (CR, LF and NUL removed:
// names are checked before they reach the encoder, bus::check_event), the
// rest is the data.
#include <fuzzer/FuzzedDataProvider.h>

#include <optional>
#include <string>
#include <vector>

#include "http/fuzz_check.hpp"
#include "http/sse.hpp"

namespace {

struct Event {
    std::string type;  // "message" when no event field
    std::string data;
    std::optional<std::string> id;  // the last event id buffer, if an id field was seen
};

struct Reading {
    std::vector<Event> events;        // dispatched events
    std::vector<std::string> fields;  // every field name seen, in order
    std::optional<std::string> retry;
    bool trailing = false;  // bytes after the last dispatch (an event not ended)
};

// The WHATWG reader, over one whole stream.
Reading read_stream(const std::string& s) {
    Reading r;
    std::string data, type;
    std::optional<std::string> last_id;
    bool pending = false;
    size_t i = 0;
    while (i < s.size()) {
        size_t end = s.find_first_of("\r\n", i);
        if (end == std::string::npos) {  // a line with no end: never processed
            r.trailing = true;
            break;
        }
        std::string line = s.substr(i, end - i);
        i = end + ((s[end] == '\r' && end + 1 < s.size() && s[end + 1] == '\n') ? 2 : 1);
        if (line.empty()) {  // dispatch
            pending = false;
            if (data.empty()) {
                type.clear();
                continue;
            }
            if (data.back() == '\n') data.pop_back();
            r.events.push_back({type.empty() ? "message" : type, data, last_id});
            data.clear();
            type.clear();
            continue;
        }
        pending = true;
        if (line[0] == ':') continue;  // a comment
        size_t colon = line.find(':');
        std::string name = line.substr(0, colon);
        std::string value;
        if (colon != std::string::npos) {
            value = line.substr(colon + 1);
            if (!value.empty() && value[0] == ' ') value.erase(0, 1);
        }
        r.fields.push_back(name);
        if (name == "event") {
            type = value;
        } else if (name == "data") {
            data += value;
            data += '\n';
        } else if (name == "id") {
            if (value.find('\0') == std::string::npos) last_id = value;
        } else if (name == "retry") {
            r.retry = value;
        }
    }
    r.trailing = r.trailing || pending;
    return r;
}

// The data as a reader gets it back: CRLF and lone CR become LF.
std::string lf_lines(const std::string& data) {
    std::string out;
    for (size_t i = 0; i < data.size(); ++i) {
        if (data[i] == '\r') {
            out += '\n';
            if (i + 1 < data.size() && data[i + 1] == '\n') ++i;
        } else {
            out += data[i];
        }
    }
    return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* bytes, size_t size) {
    FuzzedDataProvider in(bytes, size);
    const uint64_t id = in.ConsumeIntegral<uint64_t>();
    std::string event = in.ConsumeRandomLengthString(300);
    std::erase_if(event, [](char c) { return c == '\r' || c == '\n' || c == '\0'; });
    const std::string data = in.ConsumeRemainingBytesAsString();
    const std::string want = lf_lines(data);

    // encode_event
    const std::string enc = m0::sse::encode_event(id, event, data);
    FUZZ_CHECK(enc.size() == m0::sse::encoded_size(id, event, data));
    FUZZ_CHECK(enc.find('\r') == std::string::npos);  // every CR of the data ended a line
    FUZZ_CHECK(enc.size() >= 2 && enc.compare(enc.size() - 2, 2, "\n\n") == 0);
    FUZZ_CHECK(enc.find("\n\n") == enc.size() - 2);  // one blank line: one dispatch, at the end
    Reading r = read_stream(enc);
    FUZZ_CHECK(!r.trailing);
    FUZZ_CHECK(r.events.size() == 1);
    FUZZ_CHECK(r.events[0].id == std::to_string(id));
    FUZZ_CHECK(r.events[0].type == (event.empty() ? "message" : event));
    FUZZ_CHECK(r.events[0].data == want);
    FUZZ_CHECK(!r.retry);
    for (size_t k = 0; k < r.fields.size(); ++k) {
        if (k == 0)
            FUZZ_CHECK(r.fields[k] == "id");
        else if (k == 1 && !event.empty())
            FUZZ_CHECK(r.fields[k] == "event");
        else
            FUZZ_CHECK(r.fields[k] == "data");
    }
    // Every line is "id: ", "event: " or "data: " and its value, so a data line
    // that looks like a field ("id: 9", "retry: 1", ":") stays data.
    FUZZ_CHECK(r.fields.size() ==
               1 + (event.empty() ? 0 : 1) +
                   static_cast<size_t>(std::count(want.begin(), want.end(), '\n')) + 1);

    // encode_control: the same event without an id line.
    const std::string ctl = m0::sse::encode_control(event, data);
    Reading c = read_stream(ctl);
    FUZZ_CHECK(!c.trailing);
    FUZZ_CHECK(c.events.size() == 1);
    FUZZ_CHECK(!c.events[0].id);
    FUZZ_CHECK(c.events[0].type == (event.empty() ? "message" : event));
    FUZZ_CHECK(c.events[0].data == want);
    for (const auto& f : c.fields) FUZZ_CHECK(f == "event" || f == "data");

    // encode_retry: a retry field, nothing dispatched.
    Reading t = read_stream(m0::sse::encode_retry(id));
    FUZZ_CHECK(t.events.empty() && !t.trailing);
    FUZZ_CHECK(t.retry == std::to_string(id));

    // The heartbeat is a comment: no field, no event.
    Reading h = read_stream(std::string(m0::sse::kHeartbeat));
    FUZZ_CHECK(h.events.empty() && h.fields.empty() && !h.trailing);
    return 0;
}
