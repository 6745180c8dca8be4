// NotifyQueue: FIFO order, refusals (capacity, close), the eventfd wake on the
// empty -> non-empty transition only, drain, and many producers.
#include <poll.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <deque>
#include <string>
#include <thread>
#include <vector>

#include "loop/notify_queue.hpp"

using m0::NotifyQueue;

namespace {

// True when the eventfd is readable now (poll with a zero timeout).
bool readable(int fd) {
    pollfd p{fd, POLLIN, 0};
    int n = ::poll(&p, 1, 0);
    REQUIRE(n >= 0);
    return n == 1 && (p.revents & POLLIN);
}

// Clears the eventfd counter without touching the queue.
void clear_fd(int fd) {
    uint64_t v;
    while (::read(fd, &v, sizeof v) > 0) {
    }
}

}  // namespace

TEST_CASE("notify queue: items come out in the order they were pushed", "[loop][queue]") {
    NotifyQueue<int> q;
    for (int i = 0; i < 100; ++i) REQUIRE(q.push(int(i)));
    CHECK(q.size() == 100);
    std::deque<int> out;
    CHECK(q.drain(out) == 100);
    REQUIRE(out.size() == 100);
    for (int i = 0; i < 100; ++i) CHECK(out[i] == i);
    CHECK(q.size() == 0);
}

TEST_CASE("notify queue: drain moves every item and appends to what the caller holds",
          "[loop][queue]") {
    NotifyQueue<std::string> q;
    SECTION("into an empty deque") {
        REQUIRE(q.push("a"));
        REQUIRE(q.push("b"));
        std::deque<std::string> out;
        CHECK(q.drain(out) == 2);
        CHECK(out == std::deque<std::string>{"a", "b"});
        CHECK(q.size() == 0);
        CHECK(q.peek().empty());
    }
    SECTION("appended after items already held") {
        REQUIRE(q.push("c"));
        REQUIRE(q.push("d"));
        std::deque<std::string> out{"x"};
        CHECK(q.drain(out) == 2);
        CHECK(out == std::deque<std::string>{"x", "c", "d"});
        CHECK(q.size() == 0);
    }
    SECTION("an empty queue drains nothing") {
        std::deque<std::string> out;
        CHECK(q.drain(out) == 0);
        CHECK(out.empty());
    }
    SECTION("the queue is usable after a drain") {
        REQUIRE(q.push("1"));
        std::deque<std::string> out;
        q.drain(out);
        REQUIRE(q.push("2"));
        CHECK(q.peek() == std::deque<std::string>{"2"});
    }
}

TEST_CASE("notify queue: a push over capacity is refused and leaves the queue as it was",
          "[loop][queue]") {
    NotifyQueue<int> q(3);
    CHECK(q.push(1));
    CHECK(q.push(2));
    CHECK(q.push(3));
    CHECK_FALSE(q.push(4));
    bool made = false;
    CHECK_FALSE(q.push_with([&] {
        made = true;
        return 5;
    }));
    CHECK_FALSE(made);  // make() runs only for a push that succeeds
    CHECK(q.peek() == std::deque<int>{1, 2, 3});
    std::deque<int> out;
    q.drain(out);
    CHECK(q.push(6));  // room again after the drain
    CHECK(q.peek() == std::deque<int>{6});
}

TEST_CASE("notify queue: every push after close is refused", "[loop][queue]") {
    NotifyQueue<int> q;
    REQUIRE(q.push(1));
    CHECK_FALSE(q.closed());
    q.close();
    CHECK(q.closed());
    CHECK_FALSE(q.push(2));
    bool made = false;
    CHECK_FALSE(q.push_with([&] {
        made = true;
        return 3;
    }));
    CHECK_FALSE(made);
    // What was queued before the close is still delivered.
    std::deque<int> out;
    CHECK(q.drain(out) == 1);
    CHECK(out == std::deque<int>{1});
}

TEST_CASE("notify queue: the eventfd becomes readable only on the empty to non-empty push",
          "[loop][queue]") {
    NotifyQueue<int> q;
    CHECK_FALSE(readable(q.fd()));

    SECTION("a first push wakes, a drain clears") {
        REQUIRE(q.push(1));
        CHECK(readable(q.fd()));
        std::deque<int> out;
        q.drain(out);
        CHECK_FALSE(readable(q.fd()));
        REQUIRE(q.push(2));
        CHECK(readable(q.fd()));
    }
    SECTION("pushes onto a non-empty queue do not wake again") {
        REQUIRE(q.push(1));
        REQUIRE(readable(q.fd()));
        clear_fd(q.fd());  // the consumer saw the wake but has not drained yet
        REQUIRE(q.push(2));
        REQUIRE(q.push(3));
        CHECK_FALSE(readable(q.fd()));
        std::deque<int> out;
        CHECK(q.drain(out) == 3);
        REQUIRE(q.push(4));  // empty again: this one wakes
        CHECK(readable(q.fd()));
    }
    SECTION("a refused push does not wake") {
        q.close();
        CHECK_FALSE(q.push(1));
        CHECK_FALSE(readable(q.fd()));
    }
    SECTION("the eventfd counter is 1 after a burst of pushes") {
        for (int i = 0; i < 10; ++i) REQUIRE(q.push(int(i)));
        uint64_t v = 0;
        REQUIRE(::read(q.fd(), &v, sizeof v) == sizeof v);
        CHECK(v == 1);
    }
}

TEST_CASE("notify queue: the observer sees each push under the lock with the new size",
          "[loop][queue]") {
    NotifyQueue<int> q;
    std::vector<std::pair<int, size_t>> seen;
    q.observer = [&](const int& item, size_t size) { seen.emplace_back(item, size); };
    REQUIRE(q.push(7));
    REQUIRE(q.push(8));
    CHECK(seen == std::vector<std::pair<int, size_t>>{{7, 1}, {8, 2}});
}

TEST_CASE("notify queue: 4 producers x 10000 items: nothing lost, each producer's items in order",
          "[loop][queue]") {
    constexpr int kProducers = 4;
    constexpr int kItems = 10000;
    NotifyQueue<std::pair<int, int>> q;
    std::atomic<int> go{0};
    std::vector<std::thread> producers;
    for (int p = 0; p < kProducers; ++p)
        producers.emplace_back([&, p] {
            while (go.load() == 0) std::this_thread::yield();
            for (int i = 0; i < kItems; ++i) {
                while (!q.push({p, i})) std::this_thread::yield();
            }
        });

    // The consumer drains concurrently and only when the eventfd wakes it, like
    // the loop: a lost wake-up leaves items queued with the fd silent (timeout).
    std::vector<int> next(kProducers, 0);
    size_t total = 0;
    bool ordered = true;
    bool lost_wake = false;
    go.store(1);
    while (total < size_t(kProducers) * kItems) {
        pollfd pfd{q.fd(), POLLIN, 0};
        if (::poll(&pfd, 1, 3000) != 1) {
            lost_wake = true;
            break;
        }
        std::deque<std::pair<int, int>> out;
        q.drain(out);
        for (auto [p, i] : out) {
            if (i != next[p]) ordered = false;
            next[p] = i + 1;
        }
        total += out.size();
    }
    for (auto& t : producers) t.join();
    std::deque<std::pair<int, int>> rest;
    q.drain(rest);
    CHECK_FALSE(lost_wake);
    CHECK(rest.empty());
    CHECK(total == size_t(kProducers) * kItems);
    CHECK(ordered);
    for (int p = 0; p < kProducers; ++p) CHECK(next[p] == kItems);
}
