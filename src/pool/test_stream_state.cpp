// StreamState: the bounded-memory hand-off of a streamed body. The pool
// thread waits while the bytes it queued and the bytes in the connection's
// output buffer are over the high-water mark; the loop's drain wakes it; a
// client that left releases it with `false`.
#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <thread>

#include "pool/completion.hpp"

using namespace m0;
using namespace std::chrono_literals;

namespace {
bool eventually(const std::function<bool()>& f) {
    for (int i = 0; i < 2000; ++i) {
        if (f()) return true;
        std::this_thread::sleep_for(1ms);
    }
    return f();
}
}  // namespace

TEST_CASE("stream state: a producer over the high-water mark waits for the drain",
          "[pool][stream]") {
    StreamState st(100);
    REQUIRE(st.reserve(60));  // 60 queued: under the mark
    REQUIRE(st.reserve(60));  // 120 queued: allowed (the mark is checked before)
    std::atomic<int> phase{0};
    std::thread producer([&] {
        bool ok = st.reserve(10);  // over the mark: must wait
        phase = ok ? 1 : 2;
    });
    std::this_thread::sleep_for(50ms);
    CHECK(phase.load() == 0);  // still waiting
    st.moved(120, 120);        // the loop moved everything into the output buffer
    std::this_thread::sleep_for(20ms);
    CHECK(phase.load() == 0);  // still over: the bytes are in the output buffer
    st.drained(30);            // the socket took most of it
    CHECK(eventually([&] { return phase.load() == 1; }));
    producer.join();
}

TEST_CASE("stream state: a client that leaves releases a waiting producer with false",
          "[pool][stream]") {
    StreamState st(10);
    REQUIRE(st.reserve(20));
    std::atomic<int> phase{0};
    std::thread producer([&] { phase = st.reserve(5) ? 1 : 2; });
    std::this_thread::sleep_for(30ms);
    CHECK(phase.load() == 0);
    st.cancel();
    CHECK(eventually([&] { return phase.load() == 2; }));
    producer.join();
    CHECK_FALSE(st.reserve(1));  // and every later reserve
}
