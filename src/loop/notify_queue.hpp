// NotifyQueue: a multi-producer, single-consumer queue plus an eventfd.
//
// DESIGN
// Producers (pool threads, or any thread) push under a mutex; the consumer (the
// loop thread) is woken through the eventfd only on the empty -> non-empty
// transition, so a burst of pushes costs one wakeup. The consumer swaps the
// whole list out under the lock and processes it unlocked (Redis bio.c / h2o
// multithread.c). The queue may be bounded: a push past `capacity` is refused,
// and so is every push after close(); the producer turns a refusal into an
// error answer (a 503), never a silent drop.
//
// Ownership: `items_`, `closed_` under `mu_`; the eventfd is written by
// producers, read only by the consumer.
#pragma once
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <stdexcept>
#include <utility>

namespace m0 {

template <class T>
class NotifyQueue {
  public:
    explicit NotifyQueue(size_t capacity = SIZE_MAX) : capacity_(capacity) {
        fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
        if (fd_ < 0) throw std::runtime_error("eventfd failed");
    }
    ~NotifyQueue() { ::close(fd_); }
    NotifyQueue(const NotifyQueue&) = delete;
    NotifyQueue& operator=(const NotifyQueue&) = delete;

    // Returns false (and leaves `item` unmoved-from in effect) when the queue is
    // closed or full. Dropping that answer would drop the item silently: the
    // caller must turn a refusal into an error answer.
    [[nodiscard]] bool push(T&& item) {
        return push_with([&]() -> T&& { return std::move(item); });
    }

    // Pushes make() under the queue lock: the caller can take a number (an
    // event id) in the same critical section that fixes the item's position.
    // make() is called only when the push will succeed.
    template <class Make>
    [[nodiscard]] bool push_with(Make&& make) {
        bool wake = false;
        {
            std::lock_guard lock(mu_);
            if (closed_ || items_.size() >= capacity_) return false;
            wake = items_.empty();
            items_.push_back(make());
            if (observer) observer(items_.back(), items_.size());
        }
        if (wake) signal();
        if (released) released();
        return true;
    }

    // Pushes make(0) .. make(n - 1) under one hold of the queue lock, all or
    // none (false: closed, or fewer than n free places): a batch costs one
    // lock and at most one wakeup.
    template <class Make>
    [[nodiscard]] bool push_many(size_t n, Make&& make) {
        bool wake = false;
        {
            std::lock_guard lock(mu_);
            if (closed_ || items_.size() + n > capacity_) return false;
            wake = items_.empty() && n > 0;
            for (size_t i = 0; i < n; ++i) {
                items_.push_back(make(i));
                if (observer) observer(items_.back(), items_.size());
            }
        }
        if (wake) signal();
        if (released) released();
        return true;
    }

    // Consumer: moves every queued item into `out` (appending). Also clears the
    // eventfd counter. Returns the number taken.
    size_t drain(std::deque<T>& out) {
        uint64_t v;
        while (::read(fd_, &v, sizeof v) > 0) {
        }
        std::lock_guard lock(mu_);
        size_t n = items_.size();
        if (out.empty())
            out.swap(items_);
        else
            for (auto& it : items_) out.push_back(std::move(it));
        items_.clear();
        return n;
    }

    void close() {
        std::lock_guard lock(mu_);
        closed_ = true;
    }
    bool closed() const {
        std::lock_guard lock(mu_);
        return closed_;
    }
    size_t size() const {
        std::lock_guard lock(mu_);
        return items_.size();
    }
    // Snapshot for tests: a copy of the queued items, in order.
    std::deque<T> peek() const {
        std::lock_guard lock(mu_);
        return items_;
    }
    int fd() const { return fd_; }

    // Tests only: called on the pushing thread, under the queue lock, right
    // after each push, with the item and the queue's new size. Set it before
    // any producer runs.
    std::function<void(const T&, size_t)> observer;
    // Tests only: called on the pushing thread once a push (or a whole
    // batch) has let the queue lock go and signalled, so once a hold of the
    // lock: a consumer acting here sees what a loop woken at that moment
    // would. Set it before any producer runs.
    std::function<void()> released;

  private:
    void signal() {
        uint64_t one = 1;
        ssize_t r = ::write(fd_, &one, sizeof one);
        (void)r;  // EAGAIN means the counter is already non-zero: the consumer wakes anyway.
    }

    mutable std::mutex mu_;
    std::deque<T> items_;  // guarded by mu_
    bool closed_ = false;  // guarded by mu_
    size_t capacity_;
    int fd_ = -1;
};

}  // namespace m0
