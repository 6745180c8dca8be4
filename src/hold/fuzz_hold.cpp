// Fuzzer: hold headers and the head rewrite (hold::take_stream_hold) on a
// response whose headers come from the input: M0-Hold, M0-Channel, GRIP's
// Grip-Hold, Grip-Channel, Grip-Keep-Alive, the framing headers and others,
// in any case, any order, any number, any bytes.
// Checked:
//   - neither M0-Hold nor Grip-Hold: the response is left exactly as it was;
//   - otherwise no M0-Hold, M0-Channel or Grip-* header is left, and
//       bad:    a reason is given and nothing else changed;
//       stream: one or more channels, each one bus::check_channel() accepts
//               (and grant::valid_channel(), the same rule), each found in
//               the M0-Channel values (Grip-Channel's for a Grip hold); a
//               Grip-Keep-Alive's data is not empty and its interval 0 or
//               1..86400 seconds; with realtime the head is 200,
//               text/event-stream, no-cache, X-Accel-Buffering: no, x-worker,
//               with no Content-Length,
//               Transfer-Encoding or Connection, the body kept, no producer;
//   - the rewrite brings no CR or LF into the head: a value holds one only if
//     an input value did.
#include <fuzzer/FuzzedDataProvider.h>

#include <string>
#include <vector>

#include "bus/names.hpp"
#include "grant/grant.hpp"
#include "hold/hold.hpp"
#include "http/fuzz_check.hpp"

namespace {

using m0::http::Headers;
using m0::http::iequals;

const char* const kNames[] = {
    "M0-Hold",
    "m0-hold",
    "M0-Channel",
    "m0-channel",
    "M0-CHANNEL",
    "Content-Length",
    "Transfer-Encoding",
    "Connection",
    "Content-Type",
    "Cache-Control",
    "x-worker",
    "Set-Cookie",
    "X-Other",
    "M0-Hold-Extra",
    "M0-Channels",
    // GRIP, appended so the older seeds keep their meaning
    "Grip-Hold",
    "grip-hold",
    "Grip-Channel",
    "GRIP-CHANNEL",
    "Grip-Keep-Alive",
    "Grip-Status",
    "Grip-Timeout",
};
const char* const kValues[] = {
    "stream",
    "STREAM",
    "websocket",
    "Stream ",
    "a",
    "a,b",
    " a , b ",
    "a,,b",
    "m0.slot.1.1",
    "chunked",
    "0",
    "close",
    "text/html",
    "a,a",
    "\t",
    "",
    "response",
    "a; prev-id=1, b",
    "ka\\n; format=cstring; timeout=5",
    "OiBrYQoK; format=base64",
    "x; timeout=0",
    "55",
    "86401",
    "a; prev-id=7, b; prev-id=3",
};

size_t count(const Headers& h, std::string_view name) {
    size_t n = 0;
    for (const auto& [k, v] : h.items) n += iequals(k, name) ? 1 : 0;
    return n;
}

bool has_crlf(const Headers& h) {
    for (const auto& [k, v] : h.items)
        if (k.find_first_of("\r\n") != std::string::npos ||
            v.find_first_of("\r\n") != std::string::npos)
            return true;
    return false;
}

bool is_grip(std::string_view name) {
    return name.size() >= 5 && iequals(name.substr(0, 5), "Grip-");
}

// The headers but M0-Hold, M0-Channel and Grip-*, in order.
std::vector<std::pair<std::string, std::string>> others(const Headers& h) {
    std::vector<std::pair<std::string, std::string>> out;
    for (const auto& kv : h.items)
        if (!iequals(kv.first, "M0-Hold") && !iequals(kv.first, "M0-Channel") && !is_grip(kv.first))
            out.push_back(kv);
    return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* bytes, size_t size) {
    FuzzedDataProvider in(bytes, size);
    const bool realtime = in.ConsumeBool();
    const std::string worker = in.PickValueInArray({"mojo-1", "wsgi-0", "w"});
    m0::http::Response resp;
    resp.status = in.ConsumeIntegralInRange<int>(100, 599);
    resp.body = in.ConsumeRandomLengthString(64);
    if (in.ConsumeBool()) resp.stream = [](std::string&) { return false; };
    while (in.remaining_bytes() > 0 && resp.headers.items.size() < 32) {
        std::string name = in.ConsumeBool() ? std::string(in.PickValueInArray(kNames))
                                            : in.ConsumeRandomLengthString(24);
        std::string value = in.ConsumeBool() ? std::string(in.PickValueInArray(kValues))
                                             : in.ConsumeRandomLengthString(300);
        resp.headers.add(std::move(name), std::move(value));
    }

    // The hold's channel rule and the grant's are one rule.
    for (const auto& [k, v] : resp.headers.items)
        FUZZ_CHECK((m0::bus::check_channel(v) == m0::bus::NameError::ok) ==
                   m0::grant::valid_channel(v));

    const m0::http::Response before = resp;
    const bool crlf_before = has_crlf(before.headers);
    const bool grip = !before.headers.has("M0-Hold") && before.headers.has("Grip-Hold");
    const auto channel_values = before.headers.get_joined(grip ? "Grip-Channel" : "M0-Channel");
    m0::hold::HoldDecision d = m0::hold::take_stream_hold(resp, worker, realtime);

    if (!before.headers.has("M0-Hold") && !before.headers.has("Grip-Hold")) {
        FUZZ_CHECK(d.kind == m0::hold::HoldKind::none);
        FUZZ_CHECK(resp.status == before.status && resp.body == before.body);
        FUZZ_CHECK(resp.headers.items == before.headers.items);
        FUZZ_CHECK(static_cast<bool>(resp.stream) == static_cast<bool>(before.stream));
        return 0;
    }
    FUZZ_CHECK(d.kind != m0::hold::HoldKind::none);
    FUZZ_CHECK(!resp.headers.has("M0-Hold") && !resp.headers.has("M0-Channel"));
    for (const auto& kv : resp.headers.items) FUZZ_CHECK(!is_grip(kv.first));
    if (!crlf_before) FUZZ_CHECK(!has_crlf(resp.headers));
    FUZZ_CHECK(resp.body == before.body);

    if (d.kind == m0::hold::HoldKind::bad) {
        FUZZ_CHECK(!d.error.empty());
        FUZZ_CHECK(resp.status == before.status);
        FUZZ_CHECK(resp.headers.items == others(before.headers));
        return 0;
    }
    FUZZ_CHECK(d.error.empty());
    FUZZ_CHECK(!d.channels.empty());
    FUZZ_CHECK(channel_values.has_value());
    for (const auto& c : d.channels) {
        FUZZ_CHECK(m0::bus::check_channel(c) == m0::bus::NameError::ok);
        FUZZ_CHECK(m0::grant::valid_channel(c));
        FUZZ_CHECK(channel_values->find(c) != std::string::npos);
    }
    if (d.keepalive.every != 0 || !d.keepalive.bytes.empty()) {
        FUZZ_CHECK(grip && before.headers.has("Grip-Keep-Alive"));
        FUZZ_CHECK(!d.keepalive.bytes.empty());
        FUZZ_CHECK(d.keepalive.every == 0 ||
                   (d.keepalive.every >= 1 && d.keepalive.every <= 86400));
    }
    if (d.response) {
        // A long-poll: only GRIP asks for one, with no keep-alive, and the
        // handler's answer stays as it is (it is the timeout's answer).
        FUZZ_CHECK(grip);
        FUZZ_CHECK(d.keepalive.every == 0 && d.keepalive.bytes.empty());
        FUZZ_CHECK(d.timeout >= 1 && d.timeout <= 86400);
    }
    if (!realtime || d.response) {
        FUZZ_CHECK(resp.status == before.status);
        FUZZ_CHECK(resp.headers.items == others(before.headers));
        return 0;
    }
    FUZZ_CHECK(resp.status == 200);
    FUZZ_CHECK(!resp.stream);
    FUZZ_CHECK(count(resp.headers, "Content-Length") == 0);
    FUZZ_CHECK(count(resp.headers, "Transfer-Encoding") == 0);
    FUZZ_CHECK(count(resp.headers, "Connection") == 0);
    FUZZ_CHECK(count(resp.headers, "Content-Type") == 1);
    FUZZ_CHECK(resp.headers.get("Content-Type") == "text/event-stream");
    FUZZ_CHECK(count(resp.headers, "Cache-Control") == 1);
    FUZZ_CHECK(resp.headers.get("Cache-Control") == "no-cache");
    FUZZ_CHECK(count(resp.headers, "X-Accel-Buffering") == 1);
    FUZZ_CHECK(resp.headers.get("X-Accel-Buffering") == "no");
    FUZZ_CHECK(count(resp.headers, "x-worker") == 1);
    FUZZ_CHECK(resp.headers.get("x-worker") == worker);
    return 0;
}
