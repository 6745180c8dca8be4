// The generic pool and the completion ring: what a push into the ring can
// answer; the queue's bound, the jobs skipped because their client left, the
// queue wait (mostly in manual mode, threads == 0, where run_next() decides
// when each job runs); the cancel board; and how /metrics shows them.
#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <future>
#include <thread>
#include <type_traits>

#include "pool/completion.hpp"
#include "pool/pool.hpp"

using namespace m0;
using namespace std::chrono_literals;

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

// Polls `done` for at most 5 s.
template <class F>
bool eventually(F done) {
    for (auto end = std::chrono::steady_clock::now() + 5s; std::chrono::steady_clock::now() < end;
         std::this_thread::sleep_for(1ms))
        if (done()) return true;
    return done();
}

// Holds a job until released; releases it on leaving scope too (declared after
// the pool, so the pool's threads are let go before it joins them). A job
// waits on its own copy of `opened`: the latch may be gone before the job
// has returned from its wait.
struct Latch {
    std::promise<void> promise;
    std::shared_future<void> opened = promise.get_future().share();
    bool open = false;
    void release() {
        if (!open) promise.set_value();
        open = true;
    }
    ~Latch() { release(); }
};

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

TEST_CASE(
    "pool: past max_queued a submit is refused as full and counted; stopping is its own answer",
    "[pool]") {
    Pool pool("wsgi", 0, 2);
    int ran = 0;
    auto job = [&](size_t) { ++ran; };
    CHECK(pool.submit(job) == Admission::queued);
    CHECK(pool.submit(job) == Admission::queued);
    CHECK(pool.submit(job) == Admission::full);
    CHECK(pool.submit(job) == Admission::full);
    CHECK(pool.queued() == 2);
    CHECK(pool.rejected.load() == 2);
    REQUIRE(pool.run_next());
    CHECK(ran == 1);
    CHECK(pool.submit(job) == Admission::queued);  // a place freed by a taken job
    pool.stop();
    CHECK(pool.submit(job) == Admission::stopping);
    CHECK(pool.rejected.load() == 2);  // a refusal while stopping is not a full queue
}

TEST_CASE("pool: a job whose client left before a thread took it is not run, and counted skipped",
          "[pool]") {
    CancelBoard board;
    Pool pool("wsgi", 0);
    std::vector<int> ran;
    REQUIRE(pool.submit([&](size_t) { ran.push_back(1); }, board.arm({1, 1})) == Admission::queued);
    REQUIRE(pool.submit([&](size_t) { ran.push_back(2); }, board.arm({2, 1})) == Admission::queued);
    REQUIRE(pool.submit([&](size_t) { ran.push_back(3); }) == Admission::queued);  // no flag
    board.cancel({1, 1});  // the loop released slot 1: its client left
    REQUIRE(pool.run_next());
    CHECK(ran == std::vector<int>{2});
    CHECK(pool.skipped.load() == 1);
    REQUIRE(pool.run_next());
    CHECK(ran == std::vector<int>{2, 3});
    CHECK_FALSE(pool.run_next());
    CHECK(pool.completed.load() == 2);
    CHECK(pool.waits.load() == 2);  // only jobs taken to run count a queue wait
}

TEST_CASE("pool: with threads, jobs whose clients left while every thread was busy are not run",
          "[pool]") {
    CancelBoard board;
    Pool pool("wsgi", 1);
    std::promise<void> release;
    std::shared_future<void> released = release.get_future().share();
    std::atomic<bool> blocking{false};
    std::atomic<int> ran{0};
    REQUIRE(pool.submit([&](size_t) {
        blocking = true;
        released.wait();
    }) == Admission::queued);
    for (uint32_t i = 1; i <= 50; ++i)
        REQUIRE(pool.submit([&](size_t) { ++ran; }, board.arm({i, 1})) == Admission::queued);
    for (uint32_t i = 1; i <= 50; ++i)
        if (i != 7) board.cancel({i, 1});  // 49 clients left; the one on slot 7 stays
    while (!blocking) std::this_thread::yield();
    release.set_value();
    pool.stop();
    CHECK(ran.load() == 1);
    CHECK(pool.skipped.load() == 49);
    CHECK(pool.completed.load() == 2);
}

TEST_CASE("pool: a full queue drops jobs whose client left before it refuses a live one",
          "[pool]") {
    CancelBoard board;
    Pool pool("wsgi", 0, 2);
    auto nothing = [](size_t) {};
    REQUIRE(pool.submit(nothing, board.arm({1, 1})) == Admission::queued);
    REQUIRE(pool.submit(nothing, board.arm({2, 1})) == Admission::queued);
    board.cancel({1, 1});
    CHECK(pool.submit(nothing, board.arm({3, 1})) == Admission::queued);
    CHECK(pool.skipped.load() == 1);
    CHECK(pool.queued() == 2);
    CHECK(pool.submit(nothing, board.arm({4, 1})) == Admission::full);
    CHECK(pool.rejected.load() == 1);
}

TEST_CASE(
    "cancel board: a client leaving cancels only the request dispatched on its slot and "
    "generation",
    "[pool]") {
    CancelBoard board;
    auto first = board.arm({3, 1});
    auto second = board.arm({3, 1});  // the connection's next request replaced it
    board.cancel({3, 2});             // another generation of index 3: a stranger
    board.cancel({9, 1});             // an index never armed
    CHECK_FALSE(second->cancelled());
    board.cancel({3, 1});
    CHECK(second->cancelled());
    CHECK_FALSE(first->cancelled());  // that request had finished
    auto next = board.arm({3, 2});    // the index reused by a new client
    CHECK_FALSE(next->cancelled());
}

TEST_CASE("pool: the queue wait runs from submit to the moment a thread takes the job", "[pool]") {
    Pool pool("mojo", 0);
    REQUIRE(pool.submit([](size_t) { std::this_thread::sleep_for(50ms); }) == Admission::queued);
    std::this_thread::sleep_for(30ms);
    REQUIRE(pool.run_next());
    CHECK(pool.waits.load() == 1);
    // At least the 30 ms queued; not the 50 ms the job ran on top of it.
    CHECK(pool.wait_ns.load() >= 30'000'000u);
    CHECK(pool.wait_ns.load() < 50'000'000u + 30'000'000u);
}

TEST_CASE(
    "pool: a quick job queued while a thread is ready waits for that thread; no sleeper is woken",
    "[pool]") {
    Pool pool("mojo", 2);
    REQUIRE(eventually([&] { return pool.sleeping() == 2; }));
    Latch latch;
    std::atomic<int> first{-1}, second{-1};
    REQUIRE(pool.submit(
                [&first, opened = latch.opened](size_t i) {
                    first = static_cast<int>(i);
                    opened.wait();
                },
                {}, true) == Admission::queued);
    REQUIRE(eventually([&] { return first >= 0; }));
    REQUIRE(pool.submit([&](size_t i) { second = static_cast<int>(i); }, {}, true) ==
            Admission::queued);
    // The thread in the first quick job looks at the queue next: the other
    // sleeps on, and the second job waits.
    std::this_thread::sleep_for(50ms);
    CHECK(second == -1);
    CHECK(pool.sleeping() == 1);
    latch.release();
    REQUIRE(eventually([&] { return second >= 0; }));
    CHECK(second == first);
}

TEST_CASE("pool: a job queued behind one that may block wakes a sleeping thread", "[pool]") {
    Pool pool("mojo", 2);
    REQUIRE(eventually([&] { return pool.sleeping() == 2; }));
    Latch latch;
    std::atomic<int> slow{-1}, quick{-1};
    REQUIRE(pool.submit([&slow, opened = latch.opened](size_t i) {
        slow = static_cast<int>(i);
        opened.wait();
    }) == Admission::queued);
    REQUIRE(eventually([&] { return slow >= 0; }));
    REQUIRE(pool.submit([&](size_t i) { quick = static_cast<int>(i); }, {}, true) ==
            Admission::queued);
    CHECK(eventually([&] { return quick >= 0; }));  // while the first still blocks
    CHECK(quick != slow);
    latch.release();
}

TEST_CASE("pool: the thread woken for a job is the one that went to sleep last", "[pool]") {
    Pool pool("wsgi", 3);
    REQUIRE(eventually([&] { return pool.sleeping() == 3; }));
    std::vector<int> ran;
    for (int k = 0; k < 6; ++k) {
        std::atomic<int> at{-1};
        REQUIRE(pool.submit([&](size_t i) { at = static_cast<int>(i); }) == Admission::queued);
        REQUIRE(eventually([&] { return at >= 0 && pool.sleeping() == 3; }));
        ran.push_back(at);
    }
    // Each job's thread was the last asleep when the next came: it ran them all.
    CHECK(std::count(ran.begin(), ran.end(), ran.front()) == 6);
}
