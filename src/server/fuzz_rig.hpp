// What the server's fuzzers share (fuzz_request.cpp, fuzz_h2.cpp,
// fuzz_ws.cpp): a mount's answer posted as a pool posts it, a client's bytes
// written to the server in pieces with the loop stepped between them, the
// half-close and the wait for the server's close and release. Fuzzer thread
// only.
#pragma once
#include <sys/socket.h>

#include <cerrno>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "http/fuzz_check.hpp"
#include "server/test_rig.hpp"

namespace m0::fuzzing {

using Deadline = std::chrono::steady_clock::time_point;
// One pass of the loop; waits for an event (timers included) when true.
using Step = std::function<void(bool block)>;

// Answers `s` with `resp` and `body`: whole, or streamed (a head carrying
// the first half of the body, a chunk with the rest, the end).
inline void post_answer(CompletionRing& ring, SlotRef s, http::Response resp, std::string body,
                        bool streamed) {
    Completion c;
    c.slot = s;
    if (!streamed) {
        c.kind = Completion::Kind::response;
        resp.body = std::move(body);
        c.response = std::move(resp);
        ring.push(std::move(c));
        return;
    }
    auto st = std::make_shared<StreamState>(1 << 20);
    const size_t half = body.size() / 2;
    c.kind = Completion::Kind::head;
    resp.body = body.substr(0, half);
    c.response = std::move(resp);
    c.stream = st;
    ring.push(std::move(c));
    Completion chunk;
    chunk.kind = Completion::Kind::chunk;
    chunk.slot = s;
    chunk.data = body.substr(half);
    chunk.stream = st;
    ring.push(std::move(chunk));
    Completion end;
    end.kind = Completion::Kind::end;
    end.slot = s;
    end.stream = st;
    ring.push(std::move(end));
}

// The largest write an input's byte names in bits 1-3: 1 .. 16384 bytes.
inline size_t max_piece(uint8_t byte) { return size_t(1) << ((byte >> 1) & 7) * 2; }

// Writes `input` to the server in pieces of 1 to `max_piece` bytes (their
// sizes drawn from `state`), the loop stepped between them; stops early when
// the server closed.
inline void write_pieces(testing::SocketClient& client, std::string_view input, size_t max_piece,
                         uint64_t state, const Step& step, Deadline deadline) {
    state |= 1;
    size_t pos = 0;
    while (pos < input.size()) {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        const size_t n = std::min(input.size() - pos, 1 + size_t(state % max_piece));
        const ssize_t w = ::send(client.fd, input.data() + pos, n, MSG_NOSIGNAL);
        if (w > 0)
            pos += size_t(w);
        else if (w < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
            break;  // the server closed (an error answer, Connection: close, GOAWAY)
        step(false);
        client.pump();
        FUZZ_CHECK(std::chrono::steady_clock::now() < deadline);
    }
}

// Half-closes and reads until the server closes.
inline void drain(testing::SocketClient& client, const Step& step, Deadline deadline) {
    ::shutdown(client.fd, SHUT_WR);
    while (!client.eof) {
        step(true);
        client.pump();
        FUZZ_CHECK(std::chrono::steady_clock::now() < deadline);
    }
}

// write_pieces, then drain.
inline void write_then_drain(testing::SocketClient& client, std::string_view input,
                             size_t max_piece, uint64_t state, const Step& step,
                             Deadline deadline) {
    write_pieces(client, input, max_piece, state, step, deadline);
    drain(client, step, deadline);
}

// Steps the loop until the server holds no connection.
inline void wait_released(const server::Server& server, const Step& step, Deadline deadline) {
    while (server.connections() != 0) {
        step(true);
        FUZZ_CHECK(std::chrono::steady_clock::now() < deadline);
    }
}

}  // namespace m0::fuzzing
