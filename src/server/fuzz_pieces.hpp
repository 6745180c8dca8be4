// What the fuzzers that drive a real Server over a socketpair share
// (fuzz_request, fuzz_ws): libFuzzer's start-up (the log kept to errors),
// the largest write an input's first byte names, and its bytes written in
// pieces with the loop stepped between. One fuzzer's one file includes it.
#pragma once
#include <sys/socket.h>

#include <cerrno>
#include <cstdint>
#include <string_view>

#include "loop/log.hpp"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
    m0::log::set_level(m0::log::Level::error);
    return 0;
}

namespace m0::fuzz {

// Bits 1-3 of an input's first byte: the largest write, 1 .. 16384 bytes.
inline size_t max_piece(uint8_t first) { return size_t(1) << ((first >> 1) & 7) * 2; }

// Writes `data` to `fd` in pieces of 1 .. `max` bytes (sizes from a
// xorshift seeded with `seed`), calling `step` after each; stops early when
// the peer has closed.
template <class Step>
void write_pieces(int fd, std::string_view data, size_t max, uint64_t seed, Step step) {
    uint64_t state = seed | 1;
    size_t pos = 0;
    while (pos < data.size()) {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        size_t n = std::min(data.size() - pos, 1 + size_t(state % max));
        ssize_t w = ::send(fd, data.data() + pos, n, MSG_NOSIGNAL);
        if (w > 0)
            pos += size_t(w);
        else if (w < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
            break;  // the server closed
        step();
    }
}

}  // namespace m0::fuzz
