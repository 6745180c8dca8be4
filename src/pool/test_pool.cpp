// The generic pool and the completion ring: what a push into the ring can
// answer; the queue's bound, the jobs skipped because their client left, the
// queue wait (mostly in manual mode, threads == 0, where run_next() decides
// when each job runs); the cancel board; and how /metrics shows them.
#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <condition_variable>
#include <future>
#include <mutex>
#include <thread>
#include <type_traits>
#include <vector>

#include "pool/completion.hpp"
#include "pool/metrics.hpp"
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

// What `enter` takes as the WSGI pool takes the GIL: one holder at a time,
// handed to those who ask in the order they asked (a ticket lock, so a test
// knows who is next); give() by a thread that does not hold it does nothing,
// as drop_gil.
struct Token {
    std::mutex mu;
    std::condition_variable cv;
    uint64_t next = 0, serving = 0;  // guarded by mu
    std::thread::id holder;          // guarded by mu
    void take() {
        std::unique_lock lock(mu);
        const uint64_t ticket = next++;
        cv.wait(lock, [&] { return serving == ticket; });
        holder = std::this_thread::get_id();
    }
    void give() {
        std::lock_guard lock(mu);
        if (holder != std::this_thread::get_id()) return;
        holder = {};
        ++serving;
        cv.notify_all();
    }
    bool mine() {
        std::lock_guard lock(mu);
        return holder == std::this_thread::get_id();
    }
    Pool::Hooks hooks(std::chrono::nanoseconds keep_for, std::chrono::nanoseconds linger = {}) {
        return {.enter = [this] { take(); },
                .leave = [this] { give(); },
                .keep_for = keep_for,
                .linger = linger};
    }
};

// Once all of `pool`'s threads sleep, queues `jobs` jobs at once (paused
// meanwhile) that each run `body`; the index of the thread each ran on, once
// all are done.
template <class F>
std::vector<int> run_queued(Pool& pool, int jobs, F body) {
    REQUIRE(eventually([&] { return pool.sleeping() == pool.threads(); }));
    std::vector<int> ran(static_cast<size_t>(jobs), -1);
    pool.pause();
    for (size_t k = 0; k < ran.size(); ++k)
        REQUIRE(pool.submit([&ran, body, k](size_t i) {
            ran[k] = static_cast<int>(i);
            body();
        }) == Admission::queued);
    pool.resume();
    REQUIRE(eventually([&] { return pool.completed.load() == ran.size(); }));
    return ran;
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

TEST_CASE(
    "pool: a thread keeps what enter took across the jobs queued, so work that never blocks runs "
    "on one thread with no hand-off",
    "[pool][keep]") {
    Token token;
    Pool pool("wsgi", 3, Pool::kUnbounded, token.hooks(10s));
    constexpr int kJobs = 20;
    std::atomic<int> unheld{0};
    auto ran = run_queued(pool, kJobs, [&] {
        if (!token.mine()) ++unheld;
    });
    CHECK(unheld == 0);
    CHECK(std::count(ran.begin(), ran.end(), ran.front()) == kJobs);
    // The one that ran them, and at most the two others once each, finding
    // nothing left when the token came to them.
    CHECK(pool.entered.load() <= 3);
    REQUIRE(eventually([&] { return pool.sleeping() == 3; }));
    std::lock_guard lock(token.mu);
    CHECK(token.serving == token.next);  // let go once the queue was empty
}

TEST_CASE(
    "pool: a thread lets go where a job ends once the thread waiting in enter has waited "
    "keep_for",
    "[pool][keep]") {
    Token token;
    Pool pool("wsgi", 2, Pool::kUnbounded, token.hooks(1ms));
    auto ran = run_queued(pool, 10, [] { std::this_thread::sleep_for(3ms); });  // > keep_for
    // Both threads ran some: the one waiting got it where a job ended.
    CHECK(std::count(ran.begin(), ran.end(), ran.front()) < 10);
}

TEST_CASE(
    "pool: while another thread is in a job, the holder lets go where its job ends, so a job "
    "that gave the token up to block gets it back at the next job's end",
    "[pool][keep]") {
    Token token;
    Pool pool("wsgi", 3, Pool::kUnbounded, token.hooks(10s));
    REQUIRE(eventually([&] { return pool.sleeping() == 3; }));
    std::mutex mu;
    std::vector<std::string> order;  // guarded by mu
    auto note = [&](std::string what) {
        std::lock_guard lock(mu);
        order.push_back(std::move(what));
    };
    Latch go;
    std::atomic<bool> blocking{false}, asking{false};
    // As a view that blocks: lets the token go, waits, asks for it back.
    REQUIRE(pool.submit([&, opened = go.opened](size_t) {
        token.give();
        blocking = true;
        opened.wait();
        asking = true;
        token.take();
        note("blocker back");
    }) == Admission::queued);
    REQUIRE(eventually([&] { return blocking.load(); }));
    pool.pause();
    constexpr int kJobs = 6;
    for (int k = 1; k <= kJobs; ++k)
        REQUIRE(pool.submit([&, k](size_t) {
            if (k == 1) {
                go.release();
                // The blocker asks for the token meanwhile.
                CHECK(eventually([&] { return asking.load(); }));
                std::this_thread::sleep_for(20ms);
            }
            note("job " + std::to_string(k));
        }) == Admission::queued);
    pool.resume();
    REQUIRE(eventually([&] { return pool.completed.load() == kJobs + 1; }));
    std::lock_guard lock(mu);
    auto back = std::find(order.begin(), order.end(), "blocker back");
    REQUIRE(back != order.end());
    // After job 1, or job 2 when the third thread asked before the blocker.
    CHECK(back - order.begin() <= 2);
}

TEST_CASE(
    "pool: a thread that finds the queue empty after a job waits linger for the next one, "
    "still holding what enter took",
    "[pool][keep]") {
    Token token;
    Pool pool("wsgi", 2, Pool::kUnbounded, token.hooks(10s, 10s));
    REQUIRE(eventually([&] { return pool.sleeping() == 2; }));
    std::atomic<int> first{-1}, second{-1};
    REQUIRE(pool.submit([&](size_t i) { first = static_cast<int>(i); }) == Admission::queued);
    REQUIRE(eventually([&] { return pool.completed.load() == 1; }));
    CHECK(pool.sleeping() == 1);  // the other: the one that ran it is awake, lingering
    REQUIRE(pool.submit([&](size_t i) { second = static_cast<int>(i); }) == Admission::queued);
    REQUIRE(eventually([&] { return pool.completed.load() == 2; }));
    CHECK(second == first);
    CHECK(pool.entered.load() == 1);  // taken once for both
}

TEST_CASE("hold count: places up to the limit, none past it, given back; threads never pass it",
          "[pool][metrics]") {
    HoldCount count;
    CHECK(count.limit() == INT64_MAX);  // unlimited until set
    count.set_limit(2);
    CHECK(count.reserve());
    CHECK(count.reserve());
    CHECK_FALSE(count.reserve());
    CHECK(count.load() == 2);
    count.release();
    CHECK(count.reserve());
    CHECK(count.load() == 2);
    count.release();
    count.release();

    // Eight threads race for 100 places, 1000 tries each.
    count.set_limit(100);
    std::atomic<int64_t> taken{0}, most{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < 8; ++t)
        threads.emplace_back([&] {
            for (int i = 0; i < 1000; ++i) {
                if (!count.reserve()) continue;
                const int64_t now = count.load();
                int64_t m = most.load();
                while (now > m && !most.compare_exchange_weak(m, now)) {
                }
                taken.fetch_add(1);
                if (i % 3 == 0) count.release();
            }
        });
    for (auto& th : threads) th.join();
    CHECK(most.load() <= 100);
    CHECK(count.load() == 100);  // every place taken in the end, none over
}
