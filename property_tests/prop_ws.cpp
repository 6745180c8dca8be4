// Properties of the WebSocket frame reader, over the real Server and Loop
// (a client on a socketpair, the loop stepped by the test) and the builtin
// mount's echo handler (/native/ws-echo) on a manual mojo pool:
//   - any split of a valid message into fragments (text or binary, each
//     fragment masked with its own key, pings between them, the bytes fed in
//     pieces of any size) reaches the handler whole: it echoes it once, and
//     each ping is answered, in order, with nothing closed;
//   - a text message with an invalid UTF-8 sequence anywhere (a lone
//     continuation byte, an overlong form, a surrogate, a code point past
//     U+10FFFF, a sequence cut short, also across a fragment's edge or at the
//     message's end) is closed 1007 and never reaches the handler.
// The ordering of events for WebSocket subscribers (no event lost or doubled
// across the start of a subscription) is prop_hold_order's, whose holds are
// WebSockets or SSE streams.
#include <rapidcheck.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "mojo/builtin.hpp"
#include "mojo/mojo_pool.hpp"
#include "server/test_rig.hpp"
#include "server/test_ws_frames.hpp"

using namespace m0;
using namespace m0::testing::wsf;

namespace {

constexpr size_t kMaxMessage = 4096;  // --ws-max-message

server::ServerConfig config() {
    server::ServerConfig cfg;
    cfg.heartbeat = 3600;  // no pings of the server's own
    cfg.ws.max_message = kMaxMessage;
    cfg.ws.over_http = {"/native/ws-echo"};  // what the binary adds for the mount's ws_paths
    return cfg;
}

// A Server with the builtin mount on a manual pool, and one WebSocket open
// on /native/ws-echo.
struct Rig : testing::ServerRig {
    mojo::HandlerFor<mojo::BuiltinMount> handler{mojo::MojoEnv{}};
    std::unique_ptr<mojo::MojoPool> pool;
    std::unique_ptr<testing::SocketClient> conn;

    Rig() : ServerRig(config(), true) {
        hold::Handoff h;
        h.ring = &ring;
        h.bus = &bus;
        h.metrics = &metrics;
        pool = std::make_unique<mojo::MojoPool>(0, h);
        server->add_mount("/native", [this](SlotRef s, http::Request&& r) {
            return pool->submit(handler, s, std::move(r));
        });
        try {
            open();
        } catch (...) {
            server.reset();  // before the pool goes (the members go before the base)
            throw;
        }
    }
    void open() {
        conn = connect();
        RC_ASSERT(conn != nullptr);
        RC_ASSERT(
            conn->send("GET /native/ws-echo?channel=c HTTP/1.1\r\nHost: h\r\nUpgrade: websocket\r\n"
                       "Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
                       "Sec-WebSocket-Version: 13\r\n\r\n"));
        RC_ASSERT(loop.run_until([&] { return pool->pool().queued() == 1; }));
        RC_ASSERT(pool->pool().run_next());  // OPEN
        RC_ASSERT(read_until(*conn, "\r\n\r\n"));
        const size_t end = conn->in.find("\r\n\r\n") + 4;
        RC_ASSERT(conn->in.rfind("HTTP/1.1 101 Switching Protocols\r\n", 0) == 0);
        conn->in.erase(0, end);
    }
    ~Rig() override { server.reset(); }  // its last DISCONNECT goes to the pool, still here
    Rig(const Rig&) = delete;
    Rig& operator=(const Rig&) = delete;

    // Steps the loop (running the handler's jobs) until `done` or the close.
    void run(const std::function<bool(const std::vector<Frame>&)>& done) {
        step_until([&] {
            if (pool->pool().queued() > 0) pool->pool().run_next();
            conn->pump();
            auto f = parse(conn->in);
            return done(f) || close_code(f) || conn->eof;
        });
    }
};

std::string utf8(uint32_t cp) {
    std::string s;
    if (cp < 0x80) {
        s += char(cp);
    } else if (cp < 0x800) {
        s += char(0xC0 | (cp >> 6));
        s += char(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
        s += char(0xE0 | (cp >> 12));
        s += char(0x80 | ((cp >> 6) & 0x3F));
        s += char(0x80 | (cp & 0x3F));
    } else {
        s += char(0xF0 | (cp >> 18));
        s += char(0x80 | ((cp >> 12) & 0x3F));
        s += char(0x80 | ((cp >> 6) & 0x3F));
        s += char(0x80 | (cp & 0x3F));
    }
    return s;
}

// Valid UTF-8 text: code points of every encoded length, no surrogate.
rc::Gen<std::string> gen_text() {
    auto cp = rc::gen::oneOf(
        rc::gen::inRange<uint32_t>(0x20, 0x7F), rc::gen::inRange<uint32_t>(0x80, 0x800),
        rc::gen::inRange<uint32_t>(0x800, 0xD800), rc::gen::inRange<uint32_t>(0xE000, 0x10000),
        rc::gen::inRange<uint32_t>(0x10000, 0x110000));
    return rc::gen::map(rc::gen::container<std::vector<uint32_t>>(cp), [](const auto& cps) {
        std::string s;
        for (uint32_t c : cps)
            if (s.size() < 1200) s += utf8(c);  // whole characters only
        return s;
    });
}

std::array<uint8_t, 4> key() {
    return *rc::gen::container<std::array<uint8_t, 4>>(rc::gen::arbitrary<uint8_t>());
}

// The message cut into fragments at `cuts` (positions, any order), each
// masked with its own key, a ping before each fragment but the first when
// `pings` says so. Returns the bytes and the pings' payloads in order.
std::string fragments(uint8_t op, const std::string& msg, std::vector<size_t> cuts,
                      const std::vector<bool>& pings, std::vector<std::string>& sent_pings) {
    for (auto& c : cuts) c = msg.empty() ? 0 : c % (msg.size() + 1);
    cuts.push_back(0);
    cuts.push_back(msg.size());
    std::sort(cuts.begin(), cuts.end());
    cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
    if (cuts.size() == 1) cuts.push_back(msg.size());  // an empty message: one frame
    std::string out;
    for (size_t i = 0; i + 1 < cuts.size(); ++i) {
        if (i > 0 && i - 1 < pings.size() && pings[i - 1]) {
            sent_pings.push_back("p" + std::to_string(i));
            out += frame(0x9, sent_pings.back(), true, 0, true, key());
        }
        const bool last = i + 2 == cuts.size();
        out += frame(i == 0 ? op : 0x0, msg.substr(cuts[i], cuts[i + 1] - cuts[i]), last, 0, true,
                     key());
    }
    return out;
}

// Sends `bytes` in pieces of the generated sizes, stepping the loop between.
void feed(Rig& rig, const std::string& bytes) {
    const auto sizes = *rc::gen::container<std::vector<size_t>>(rc::gen::inRange<size_t>(1, 64));
    size_t off = 0, k = 0;
    while (off < bytes.size()) {
        const size_t n =
            std::min(bytes.size() - off, sizes.empty() ? bytes.size() : sizes[k++ % sizes.size()]);
        if (!rig.conn->send(std::string_view(bytes).substr(off, n))) break;  // closed
        off += n;
        for (int i = 0; i < 2; ++i) rig.loop.run_once();
    }
}

// Invalid UTF-8 sequences (RFC 3629 §3 and §4).
const std::vector<std::string> kInvalid = {
    "\x80",              // a continuation byte with no lead
    "\xBF",              //
    "\xC0\xAF",          // an overlong '/'
    "\xC1\xBF",          // an overlong two-byte form
    "\xE0\x80\xAF",      // an overlong three-byte form
    "\xED\xA0\x80",      // a UTF-16 surrogate
    "\xED\xBF\xBF",      //
    "\xF0\x80\x80\xAF",  // an overlong four-byte form
    "\xF4\x90\x80\x80",  // past U+10FFFF
    "\xF5\x80\x80\x80",  // a lead byte no code point has
    "\xFE",              //
    "\xFF",              //
    "\xC2",              // cut short (followed by ASCII, a lead byte or the end)
    "\xE2\x82",          //
    "\xF0\x9F\x98",      //
};

}  // namespace

int main() {
    bool ok = true;
    ok &= rc::check(
        "any split of a valid message (masked fragments, pings between, fed in any pieces) "
        "reaches the handler whole, each ping answered in order",
        [] {
            const bool text = *rc::gen::arbitrary<bool>();
            const std::string msg =
                text ? *gen_text()
                     : *rc::gen::map(rc::gen::string<std::string>(),
                                     [](std::string s) { return s.substr(0, 1200); });
            const auto cuts =
                *rc::gen::container<std::vector<size_t>>(rc::gen::arbitrary<size_t>());
            const auto pings = *rc::gen::container<std::vector<bool>>(rc::gen::arbitrary<bool>());
            std::vector<std::string> sent_pings;
            const std::string bytes = fragments(text ? 0x1 : 0x2, msg, cuts, pings, sent_pings);
            Rig rig;
            feed(rig, bytes);
            const std::string want = text ? "echo: " + msg : msg;
            rig.run([&](const std::vector<Frame>& f) { return f.size() >= sent_pings.size() + 1; });
            const auto f = parse(rig.conn->in);
            RC_ASSERT(!close_code(f));
            RC_ASSERT(f.size() == sent_pings.size() + 1);
            std::vector<std::string> pongs;
            size_t messages = 0;
            for (const auto& fr : f) {
                if (fr.op == 0xA) {
                    pongs.push_back(fr.payload);
                } else {
                    RC_ASSERT(fr.op == (text ? 0x1 : 0x2));
                    RC_ASSERT(fr.payload == want);
                    ++messages;
                }
            }
            RC_ASSERT(messages == 1u);
            RC_ASSERT(pongs == sent_pings);
        });
    ok &= rc::check(
        "a text message with invalid UTF-8 anywhere, fragmented or not, is closed 1007 and never "
        "reaches the handler",
        [] {
            const std::string good = *gen_text();
            const std::string bad = *rc::gen::elementOf(kInvalid);
            // Inserted between two characters (a cut inside one would make a
            // different invalid text): the positions where a character starts.
            std::vector<size_t> starts;
            for (size_t i = 0; i <= good.size(); ++i)
                if (i == good.size() || (uint8_t(good[i]) & 0xC0) != 0x80) starts.push_back(i);
            const size_t at = *rc::gen::elementOf(starts);
            const std::string msg = good.substr(0, at) + bad + good.substr(at);
            const auto cuts =
                *rc::gen::container<std::vector<size_t>>(rc::gen::arbitrary<size_t>());
            std::vector<std::string> sent_pings;
            const std::string bytes = fragments(0x1, msg, cuts, {}, sent_pings);
            Rig rig;
            feed(rig, bytes);
            rig.run([](const std::vector<Frame>&) { return false; });
            const auto f = parse(rig.conn->in);
            RC_ASSERT(close_code(f) == std::optional<uint16_t>(1007));
            for (const auto& fr : f) RC_ASSERT(fr.op == 0x8);  // no echo
            RC_ASSERT(rig.pool->pool().queued() == 0u);
        });
    return ok ? 0 : 1;
}
