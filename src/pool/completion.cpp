#include "pool/completion.hpp"

namespace m0 {

bool StreamState::reserve(size_t n) {
    std::unique_lock lock(mu);
    cv.wait(lock, [&] { return gone || in_ring + buffered <= hwm; });
    if (gone) return false;
    in_ring += n;
    return true;
}

}  // namespace m0
