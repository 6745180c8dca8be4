// WebSocket frames for the loop tests (test_ws, test_woh): a client's
// (masked) frame, the server's frames parsed, a close frame's code. Test
// thread only.
#pragma once
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace m0::testing::wsf {

// A client frame: masked (RFC 6455 §5.3) with `key` unless `mask` is false.
inline std::string frame(uint8_t op, std::string_view payload, bool fin = true, uint8_t rsv = 0,
                         bool mask = true, std::array<uint8_t, 4> key = {0x12, 0x34, 0x56, 0x78}) {
    std::string f;
    f += char((fin ? 0x80 : 0) | (rsv << 4) | op);
    const uint8_t m = mask ? 0x80 : 0;
    const uint64_t n = payload.size();
    if (n < 126) {
        f += char(m | n);
    } else if (n < 65536) {
        f += char(m | 126);
        f += char(n >> 8);
        f += char(n & 0xFF);
    } else {
        f += char(m | 127);
        for (int s = 56; s >= 0; s -= 8) f += char((n >> s) & 0xFF);
    }
    if (mask)
        for (uint8_t k : key) f += char(k);
    for (size_t i = 0; i < payload.size(); ++i)
        f += mask ? char(uint8_t(payload[i]) ^ key[i % 4]) : payload[i];
    return f;
}

inline std::string code(uint16_t c) { return {char(c >> 8), char(c & 0xFF)}; }

struct Frame {
    uint8_t op = 0;
    std::string payload;
};

// The server's frames in `bytes` (unmasked, as a server sends them); a cut
// last frame is left out.
inline std::vector<Frame> parse(std::string_view bytes) {
    std::vector<Frame> out;
    size_t i = 0;
    while (i + 2 <= bytes.size()) {
        uint64_t n = uint8_t(bytes[i + 1]) & 0x7F;
        size_t j = i + 2;
        if (n >= 126) {
            const size_t w = n == 126 ? 2 : 8;
            if (j + w > bytes.size()) break;
            n = 0;
            for (size_t k = 0; k < w; ++k) n = (n << 8) | uint8_t(bytes[j + k]);
            j += w;
        }
        if (j + n > bytes.size()) break;
        out.push_back({uint8_t(bytes[i] & 0x0F), std::string(bytes.substr(j, n))});
        i = j + n;
    }
    return out;
}

inline std::optional<uint16_t> close_code(const std::vector<Frame>& frames) {
    for (const auto& f : frames)
        if (f.op == 0x8 && f.payload.size() >= 2)
            return uint16_t(uint8_t(f.payload[0]) << 8 | uint8_t(f.payload[1]));
    return std::nullopt;
}

}  // namespace m0::testing::wsf
