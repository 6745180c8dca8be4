#include "pool/metrics.hpp"

namespace m0 {

bool HoldCount::reserve() {
    int64_t n = n_.load();
    do {
        if (n >= limit_.load()) return false;
    } while (!n_.compare_exchange_weak(n, n + 1));
    return true;
}

}  // namespace m0
