// The generic pool and the completion ring: what a push into the ring can
// answer, and (manual mode, threads == 0) the order and accounting of jobs.
#include <catch2/catch.hpp>
#include <type_traits>

#include "pool/completion.hpp"
#include "pool/pool.hpp"

using namespace m0;

namespace {

template <class Q>
concept Closable = requires(Q& q) {
    q.close();
};

Completion response_for(SlotRef s) {
    Completion c;
    c.slot = s;
    return c;
}

}  // namespace

TEST_CASE(
    "completion ring: a push cannot fail, so it answers nothing and the ring cannot be closed",
    "[pool][ring]") {
    static_assert(std::is_void_v<decltype(std::declval<CompletionRing&>().push(Completion{}))>);
    static_assert(!Closable<CompletionRing>);
    CompletionRing ring;
    for (uint32_t i = 0; i < 1000; ++i) ring.push(response_for({i, 1}));
    std::deque<Completion> out;
    CHECK(ring.drain(out) == 1000);
    CHECK(out.back().slot == SlotRef{999, 1});
}
