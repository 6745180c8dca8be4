// SlotRef: names a connection by index plus generation. The loop bumps the
// generation when it releases an index, so a completion or frame that arrives
// after its client left (and the index was reused) no longer matches and is
// dropped, never delivered to a stranger.
#pragma once
#include <cstdint>
#include <string>

namespace m0 {

struct SlotRef {
    uint32_t index = 0;
    uint32_t gen = 0;
    friend bool operator==(const SlotRef&, const SlotRef&) = default;
};

inline std::string to_string(const SlotRef& s) {
    return std::to_string(s.index) + "." + std::to_string(s.gen);
}

}  // namespace m0
