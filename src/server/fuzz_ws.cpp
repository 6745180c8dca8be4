// Fuzzer: a WebSocket's frame reader and the WebSocket-over-HTTP answer
// parser, end to end on a real Server over a socketpair (as fuzz_request
// drives it). A WebSocket-over-HTTP handshake is made (the mount accepts
// OPEN with the grip extension), then, by the input's first byte:
//   mode 0, the frame reader: the rest of the input is the client's bytes
//     after the 101 (frames, or anything), written in pieces with the loop
//     stepped between them; the view echoes each TEXT and BINARY event back
//     (prefixed m:);
//   mode 1, the answer parser: the client sends one text message and the
//     rest of the input is the view's answer body to it.
// Checked: whatever the server writes after the 101 is a run of frames a
// server may send (FIN set on each, no mask, no reserved bit, a known
// opcode, a control frame at most 125 bytes), text frames are UTF-8, a close
// frame is the last frame and its code one a server sends (1000, 1002, 1007,
// 1009, 1011, 1013, or one the view or client named, 1000-4999); every
// request the view gets is well-formed events; the server closes the
// connection when the client half-closes, and releases it.
// Input: byte 0 = mode (bit 0), the largest write (bits 1-3) and whether the
// client offers permessage-deflate (bit 4: its messages may then be
// compressed, and the server's events are); the rest as above.
#include <event2/event.h>

#include <chrono>
#include <string>
#include <string_view>
#include <vector>

#include "http/fuzz_check.hpp"
#include "http/websocket.hpp"
#include "http/ws_events.hpp"
#include "loop/log.hpp"
#include "server/fuzz_rig.hpp"
#include "server/test_rig.hpp"

namespace {

using namespace m0;
namespace woh = http::woh;

constexpr std::string_view kUpgrade =
    "GET /grip HTTP/1.1\r\nHost: h\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
    "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n";
constexpr std::string_view kDeflate = "Sec-WebSocket-Extensions: permessage-deflate\r\n";

struct Rig {
    testing::ServerRig rig;
    bool echo = true;            // mode 0: events echoed; mode 1: `answer_body` once
    std::string answer_body;     // mode 1
    bool answered_once = false;  // mode 1: the fuzzed answer went
    Rig() : rig(config(), true) {
        rig.server->add_mount("/", [this](SlotRef s, http::Request&& r) {
            answer(s, r);
            return Admission::queued;
        });
    }
    static server::ServerConfig config() {
        server::ServerConfig cfg;
        cfg.heartbeat = 3600;
        cfg.ws.max_message = 512;
        cfg.ws.close_timeout = 0.05;
        cfg.ws.over_http = {"/grip"};
        return cfg;
    }
    void answer(SlotRef s, const http::Request& r) {
        std::vector<woh::Event> in;
        std::string err;
        FUZZ_CHECK(woh::decode_events(r.body, in, err));  // what the server sends is well-formed
        FUZZ_CHECK(r.headers.get("Content-Type") == std::string(woh::kContentType));
        http::Response resp;
        resp.headers.add("Content-Type", std::string(woh::kContentType));
        std::vector<woh::Event> out;
        for (const auto& e : in) {
            if (e.type == "OPEN") {
                resp.headers.add("Sec-WebSocket-Extensions", "grip");
                out.push_back({"OPEN", std::nullopt});
                out.push_back({"TEXT", "c:{\"type\":\"subscribe\",\"channel\":\"f\"}"});
            } else if ((e.type == "TEXT" || e.type == "BINARY") && e.content) {
                out.push_back({e.type, "m:" + *e.content});
            }
        }
        resp.body = woh::encode_events(out);
        if (!echo && !answered_once && !in.empty() && in.front().type != "OPEN") {
            answered_once = true;
            resp.body = answer_body;
        }
        rig.post(s, std::move(resp));
    }
    void step(bool block) {
        event_base_loop(rig.loop.base(), block ? EVLOOP_ONCE : EVLOOP_NONBLOCK);
    }
};

// Checks the server's frames after the 101.
void check_frames(std::string_view in, bool deflate) {
    bool closed = false;
    while (!in.empty()) {
        FUZZ_CHECK(!closed);  // nothing after a close frame
        FUZZ_CHECK(in.size() >= 2);
        const uint8_t b0 = uint8_t(in[0]), b1 = uint8_t(in[1]);
        FUZZ_CHECK((b0 & 0x80) != 0);  // FIN: the server fragments nothing
        const uint8_t op = b0 & 0x0F;
        const bool compressed = (b0 & 0x40) != 0;
        FUZZ_CHECK((b0 & 0x30) == 0);                      // no reserved bit but RSV1, and that one
        FUZZ_CHECK(!compressed || (deflate && op < 0x8));  // on data with permessage-deflate
        FUZZ_CHECK((b1 & 0x80) == 0);                      // never masked
        FUZZ_CHECK(op == 0x1 || op == 0x2 || op == 0x8 || op == 0x9 || op == 0xA);
        uint64_t n = b1 & 0x7F;
        size_t at = 2;
        if (n >= 126) {
            const size_t w = n == 126 ? 2 : 8;
            FUZZ_CHECK(in.size() >= at + w);
            n = 0;
            for (size_t k = 0; k < w; ++k) n = (n << 8) | uint8_t(in[at + k]);
            at += w;
        }
        FUZZ_CHECK(in.size() - at >= n);
        std::string_view payload = in.substr(at, n);
        in.remove_prefix(at + n);
        if (op >= 0x8) FUZZ_CHECK(n <= 125);
        if (op == 0x1 && !compressed) FUZZ_CHECK(http::ws::Utf8Validator().feed(payload));
        if (op == 0x8) {
            closed = true;
            if (payload.size() >= 2) {
                const unsigned code = unsigned(uint8_t(payload[0])) << 8 | uint8_t(payload[1]);
                FUZZ_CHECK(code >= 1000 && code <= 4999 && code != 1005 && code != 1006);
            }
        }
    }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
    log::set_level(log::Level::error);
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* bytes, size_t size) {
    static Rig* rig = new Rig;  // one server for the whole run; each input a connection
    if (size == 0) return 0;
    const bool answer_mode = bytes[0] & 1;
    const bool deflate = bytes[0] & 0x10;  // the client offers permessage-deflate
    const size_t max_piece = fuzzing::max_piece(bytes[0]);
    std::string_view input(reinterpret_cast<const char*>(bytes + 1), size - 1);
    rig->echo = !answer_mode;
    rig->answered_once = false;
    rig->answer_body = answer_mode ? std::string(input) : std::string();
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);

    auto client = rig->rig.connect();
    FUZZ_CHECK(client != nullptr);
    FUZZ_CHECK(client->send(std::string(kUpgrade) + std::string(deflate ? kDeflate : "") + "\r\n"));
    while (client->in.find("\r\n\r\n") == std::string::npos) {
        rig->step(true);
        client->pump();
        FUZZ_CHECK(!client->eof && std::chrono::steady_clock::now() < deadline);
    }
    FUZZ_CHECK(client->in.starts_with("HTTP/1.1 101 "));
    client->in.erase(0, client->in.find("\r\n\r\n") + 4);

    // Mode 1: one masked text message, whose answer is the input.
    static const std::string kHello = {char(0x81), char(0x82), 1, 2, 3, 4, 'h' ^ 1, 'i' ^ 2};
    std::string_view out = answer_mode ? std::string_view(kHello) : input;
    const fuzzing::Step step = [](bool block) { rig->step(block); };
    fuzzing::write_pieces(*client, out, max_piece, size * 0x9E3779B97F4A7C15ull, step, deadline);
    if (answer_mode)  // the answer comes and is carried out
        for (int i = 0; i < 50 && !rig->answered_once; ++i) rig->step(false);
    for (int i = 0; i < 5; ++i) rig->step(false);
    fuzzing::drain(*client, step, deadline);
    check_frames(client->in, deflate);
    client->close();
    fuzzing::wait_released(*rig->rig.server, step, deadline);
    return 0;
}
