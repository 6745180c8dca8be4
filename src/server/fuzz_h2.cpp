// Fuzzer: an HTTP/2 connection end to end. The input is what a client sends
// after the connection preface (which the harness writes first): frames,
// well-formed or not, written to a real Server over a socketpair in pieces
// whose sizes derive from the input, the loop stepped between them; then the
// client half-closes and reads until the server closes.
// The mount answers every request at once: whole, or streamed (a target
// with "stream" in it: head, chunk, end).
// Checked: what the server sent splits exactly into frames (RFC 9113 §4.1:
// a 9-byte header, at most the default 16384 payload bytes), its first a
// SETTINGS frame on stream 0; the server closes after the client's FIN; once
// the client closes too, the connection and every stream's slot are
// released.
// Input: the first byte picks the largest write (bits 0-2); the rest is the
// byte stream after the preface.
#include <event2/event.h>

#include <chrono>
#include <memory>
#include <string>
#include <string_view>

#include "http/fuzz_check.hpp"
#include "loop/log.hpp"
#include "server/fuzz_rig.hpp"
#include "server/h2_conn.hpp"

namespace {

using namespace m0;

struct Rig {
    testing::ServerRig rig;
    size_t requests = 0;
    Rig() : rig(config()) {
        rig.server->add_mount("/", [this](SlotRef s, http::Request&& r) {
            ++requests;
            answer(s, r);
            return Admission::queued;
        });
    }
    static server::ServerConfig config() {
        server::ServerConfig cfg;
        cfg.limits = http::ParserLimits{2048, 1024, 32};
        cfg.h2_max_streams = 8;
        return cfg;
    }
    void answer(SlotRef s, const http::Request& r) {
        http::Response resp;
        resp.headers.add("Content-Type", "text/plain");
        fuzzing::post_answer(rig.ring, s, std::move(resp),
                             r.method + " " + r.target + " " + std::to_string(r.body.size()),
                             r.target.find("stream") != std::string::npos);
    }
    void step(bool block) {
        event_base_loop(rig.loop.base(), block ? EVLOOP_ONCE : EVLOOP_NONBLOCK);
    }
};

// The server's bytes, frame by frame: every frame whole and within bounds.
void check_frames(std::string_view in) {
    FUZZ_CHECK(in.size() >= 9 && in[3] == NGHTTP2_SETTINGS);
    while (!in.empty()) {
        FUZZ_CHECK(in.size() >= 9);
        const auto b = [&](size_t i) { return size_t(uint8_t(in[i])); };
        const size_t len = (b(0) << 16) | (b(1) << 8) | b(2);
        FUZZ_CHECK(len <= 16384);
        FUZZ_CHECK(in.size() >= 9 + len);
        in.remove_prefix(9 + len);
    }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
    log::set_level(log::Level::error);
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* bytes, size_t size) {
    static Rig* const rig = new Rig;  // one server for the whole run; each input a connection
    if (size == 0) return 0;
    const size_t max_piece = size_t(1) << (bytes[0] & 7) * 2;  // 1 .. 16384
    std::string input(server::kH2Preface);
    input.append(reinterpret_cast<const char*>(bytes + 1), size - 1);

    auto client = rig->rig.connect();
    FUZZ_CHECK(client != nullptr);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    const fuzzing::Step step = [](bool block) { rig->step(block); };
    fuzzing::write_then_drain(*client, input, max_piece, size | 1, step, deadline);
    check_frames(client->in);
    client->close();
    fuzzing::wait_released(*rig->rig.server, step, deadline);
    FUZZ_CHECK(rig->rig.server->h2_streams() == 0);  // every stream's slot released
    return 0;
}
