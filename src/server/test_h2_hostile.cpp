// The attacks on HTTP/2 servers, each refused, on the real loop: frames
// written by hand on a socketpair the server adopts (prior knowledge), where
// a well-behaved client (nghttp2's) would not send them. After each, the
// server still serves a new connection.
#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdlib>

#include "server/h2_conn.hpp"
#include "server/test_h2_client.hpp"

using namespace m0;
using namespace m0::testing;
using m0::server::ServerConfig;

namespace {

struct Rig : ServerRig {
    std::vector<SlotRef> got;                              // requests that reached the mount
    std::vector<std::shared_ptr<const CancelFlag>> flags;  // theirs, armed as a pool's submit does
    explicit Rig(ServerConfig cfg = {}) : ServerRig(std::move(cfg)) {
        server->add_mount("/", [this](SlotRef s, http::Request&&) {
            got.push_back(s);
            flags.push_back(ring.cancels.arm(s));
            return Admission::queued;
        });
    }
    // A new connection is served: its request reaches the mount.
    bool serves() {
        auto c = connect();
        const size_t before = got.size();
        c->send(std::string(server::kH2Preface) + kEmptySettings + raw_get(1, "/ok"));
        return step_until([&] { return got.size() == before + 1; });
    }
};

std::string preface() { return std::string(server::kH2Preface) + kEmptySettings; }

// Whether the server's bytes hold a GOAWAY frame (scanning frame by frame).
bool has_goaway(const std::string& in, uint32_t* code = nullptr) {
    size_t off = 0;
    while (off + 9 <= in.size()) {
        const auto b = [&](size_t i) { return uint32_t(uint8_t(in[off + i])); };
        const size_t len = (b(0) << 16) | (b(1) << 8) | b(2);
        if (b(3) == NGHTTP2_GOAWAY && off + 9 + len <= in.size()) {
            if (code) *code = (b(13) << 24) | (b(14) << 16) | (b(15) << 8) | b(16);
            return true;
        }
        off += 9 + len;
    }
    return false;
}

// Writes `wire` as fast as the socket takes it, the loop reading meanwhile,
// until the server's GOAWAY or its close.
bool send_until_end(Rig& rig, SocketClient& c, const std::string& wire) {
    size_t off = 0;
    return rig.step_until([&] {
        while (off < wire.size()) {
            const ssize_t n = ::send(c.fd, wire.data() + off, wire.size() - off, MSG_DONTWAIT);
            if (n <= 0) break;
            off += size_t(n);
        }
        c.pump();
        return has_goaway(c.in) || c.eof;
    });
}

}  // namespace

TEST_CASE("h2 hostile: rapid reset (CVE-2023-44487): resets past the bound end the connection") {
    Rig rig;
    auto c = rig.connect();
    std::string wire = preface();
    // HEADERS then RST_STREAM, over and over: the library's token bucket
    // (1000 at once, 33 a second) ends it with GOAWAY.
    const std::string cancel("\0\0\0\x08", 4);
    int32_t id = 1;
    for (; id < 2 * 1200; id += 2)
        wire += raw_get(id, "/x") + frame(NGHTTP2_RST_STREAM, 0, id, cancel);
    REQUIRE(send_until_end(rig, *c, wire));
    uint32_t code = 0;
    CHECK(has_goaway(c->in, &code));
    CHECK(code != NGHTTP2_NO_ERROR);
    CHECK(rig.metrics.h2_client_resets.load() > 0);
    // The jobs of reset streams are cancelled: none is left to run.
    size_t left = 0;
    for (const auto& f : rig.flags) left += f->cancelled() ? 0 : 1;
    CHECK(left == 0);
    CHECK(rig.serves());
}

TEST_CASE(
    "h2 hostile: MadeYouReset (CVE-2025-8671): stream errors the client causes past "
    "--h2-max-stream-errors end the connection with ENHANCE_YOUR_CALM; a few do not") {
    ServerConfig cfg;
    cfg.h2_max_stream_errors = 20;
    Rig rig(cfg);
    // A request, then a WINDOW_UPDATE that takes its stream's window past
    // 2^31-1 (RFC 9113 §6.9.1: a stream error FLOW_CONTROL_ERROR): the
    // server resets a stream the client never reset, its request dispatched.
    const std::string most("\x7f\xff\xff\xff", 4);
    const auto made_reset = [&](int32_t id) {
        return raw_get(id, "/x") + frame(NGHTTP2_WINDOW_UPDATE, 0, id, most);
    };
    SECTION("a few: each stream reset, the connection serves on") {
        auto c = rig.connect();
        std::string wire = preface();
        for (int32_t id = 1; id < 2 * 10; id += 2) wire += made_reset(id);
        REQUIRE(c->send(wire));
        REQUIRE(rig.step_until([&] { return rig.got.size() == 10; }));
        REQUIRE(c->send(raw_get(101, "/after")));
        REQUIRE(rig.step_until([&] {
            c->pump();
            return rig.got.size() == 11;
        }));
        CHECK_FALSE(has_goaway(c->in));
        CHECK(rig.metrics.h2_stream_errors.load() == 10);
        CHECK(rig.metrics.h2_calm.load() == 0);
        CHECK(rig.metrics.h2_streams.load() == 11);
        CHECK(rig.metrics.h2_connections.load() == 1);
        size_t cancelled = 0;
        for (const auto& f : rig.flags) cancelled += f->cancelled() ? 1 : 0;
        CHECK(cancelled == 10);  // the reset streams' jobs
    }
    SECTION("past the budget: GOAWAY ENHANCE_YOUR_CALM, every job cancelled") {
        auto c = rig.connect();
        std::string wire = preface();
        for (int32_t id = 1; id < 2 * 200; id += 2) wire += made_reset(id);
        REQUIRE(send_until_end(rig, *c, wire));
        uint32_t code = 0;
        CHECK(has_goaway(c->in, &code));
        CHECK(code == NGHTTP2_ENHANCE_YOUR_CALM);
        CHECK(rig.got.size() < 200);
        CHECK(rig.metrics.h2_stream_errors.load() > 20);
        CHECK(rig.metrics.h2_calm.load() == 1);
        size_t left = 0;
        for (const auto& f : rig.flags) left += f->cancelled() ? 0 : 1;
        CHECK(left == 0);
        CHECK(rig.wait_eof(*c));
        CHECK(rig.serves());
    }
}

TEST_CASE("h2 hostile: a CONTINUATION flood (CVE-2024-27316) ends the connection") {
    Rig rig;
    auto c = rig.connect();
    std::string wire = preface();
    const std::string block = hpack({{":method", "GET"}, {":scheme", "http"}, {":path", "/"}});
    wire += frame(NGHTTP2_HEADERS, NGHTTP2_FLAG_END_STREAM, 1, block);  // no END_HEADERS
    const std::string junk = hpack({{"x-a", std::string(100, 'a')}});
    for (int i = 0; i < 64; ++i) wire += frame(NGHTTP2_CONTINUATION, 0, 1, junk);
    c->send(wire);
    REQUIRE(rig.step_until([&] {
        c->pump();
        return has_goaway(c->in);
    }));
    CHECK(rig.got.empty());
    CHECK(rig.wait_eof(*c));
    CHECK(rig.metrics.h2_calm.load() == 1);
    CHECK(rig.serves());
}

TEST_CASE("h2 hostile: an HPACK bomb (a small block, a large list once decoded) is reset") {
    ServerConfig cfg;
    cfg.limits.max_header = 4096;
    Rig rig(cfg);
    auto c = rig.connect();
    // One 4000-byte field into the dynamic table, then 200 one-byte references to it.
    std::string block =
        hpack({{":method", "GET"}, {":scheme", "http"}, {":authority", "t"}, {":path", "/"}});
    block += std::string("\x40\x05x-big\x7f", 8);  // literal, incremental indexing, name "x-big"
    {
        uint32_t n = 4000 - 127;  // HPACK integer, 7-bit prefix already 127
        while (n >= 128) {
            block += char(0x80 | (n & 0x7f));
            n >>= 7;
        }
        block += char(n);
    }
    block += std::string(4000, 'b');
    for (int i = 0; i < 200; ++i) block += '\xbe';  // indexed: dynamic table entry 62
    c->send(preface() +
            frame(NGHTTP2_HEADERS, NGHTTP2_FLAG_END_STREAM | NGHTTP2_FLAG_END_HEADERS, 1, block));
    // RST_STREAM (its 9-byte header) on stream 1: nothing was kept of the 800 KB list.
    REQUIRE(rig.step_until([&] {
        c->pump();
        return c->in.find(std::string("\0\0\x04\x03\0\0\0\0\x01", 9)) != std::string::npos;
    }));
    CHECK(rig.got.empty());
    CHECK(rig.serves());
}

TEST_CASE("h2 hostile: PING and SETTINGS floods from a client that does not read end it") {
    const bool ping = GENERATE(true, false);
    Rig rig;
    auto c = rig.connect();
    // Small socket buffers: the server's ACKs back up at once.
    int small = 4096;
    ::setsockopt(c->server_fd, SOL_SOCKET, SO_SNDBUF, &small, sizeof small);
    ::setsockopt(c->fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
    REQUIRE(c->send(preface()));
    const std::string one = ping ? frame(NGHTTP2_PING, 0, 0, std::string(8, 'p')) : kEmptySettings;
    std::string burst;
    for (int i = 0; i < 256; ++i) burst += one;
    const SlotRef slot = c->slot;
    REQUIRE(rig.step_until(
        [&] {
            (void)::send(c->fd, burst.data(), burst.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
            return !rig.server->alive(slot);
        },
        std::chrono::milliseconds(10000)));
    CHECK(rig.serves());
}

TEST_CASE("h2 hostile: a zero window held forever resets the answer after --write-timeout") {
    ServerConfig cfg;
    cfg.write_timeout = 0.2;
    Rig rig(cfg);
    auto c = rig.connect();
    H2Client h(*c, false, {{NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, 0}});
    const int32_t id = h.request("GET", "/big");
    REQUIRE(h.until(rig, [&] { return rig.got.size() == 1; }));
    const bool file = GENERATE(false, true);  // a body, or a file range (wsgi.file_wrapper)
    Completion comp;
    comp.slot = rig.got[0];
    if (file) {
        char path[] = "/tmp/m0-h2-fileXXXXXX";
        const int fd = ::mkstemp(path);
        REQUIRE(fd >= 0);
        ::unlink(path);
        REQUIRE(::write(fd, std::string(1000, 'z').data(), 1000) == 1000);
        comp.file = std::make_shared<FileBody>(fd, 0, 1000, false);
    } else {
        comp.response.body = std::string(1000, 'z');
    }
    rig.ring.push(std::move(comp));
    REQUIRE(h.until(rig, [&] { return h.streams[id].closed; }));
    CHECK(h.streams[id].header(":status") == "200");
    CHECK(h.streams[id].data.empty());
    CHECK(h.streams[id].error == NGHTTP2_CANCEL);
    CHECK(rig.server->alive(c->slot));  // the connection stays
}

TEST_CASE("h2 hostile: connection-specific fields are refused per stream (RFC 9113 §8.2.2)") {
    Rig rig;
    auto c = rig.connect();
    H2Client h(*c);
    const int32_t te = h.request("GET", "/a", {{"transfer-encoding", "chunked"}});
    const int32_t conn = h.request("GET", "/b", {{"connection", "keep-alive"}});
    const int32_t ok = h.request("GET", "/c");
    REQUIRE(h.until(rig, [&] {
        return h.streams[te].closed && h.streams[conn].closed && rig.got.size() == 1;
    }));
    CHECK(h.streams[te].error == NGHTTP2_PROTOCOL_ERROR);
    CHECK(h.streams[conn].error == NGHTTP2_PROTOCOL_ERROR);
    (void)ok;
}
