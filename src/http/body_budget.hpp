// The request bodies a process keeps in memory at once, in all
// (--max-body-total). A body is buffered whole before its application runs
// (a pool thread is never held by a slow client), so without a bound in all
// one HTTP/2 connection's 100 streams could hold 100 times --max-body-size,
// and every connection its own. A request's charge is taken as its body
// arrives and given back when the request is gone (its job ended, its
// connection closed); a body that would pass the total is refused 503 with
// Retry-After instead, and one whose declared length does not fit what is
// left is refused at its head (before any 100 Continue). A declared length
// reserves nothing: a client that declares 16 MiB and sends a byte a minute
// holds a byte of the total, not 16 MiB.
//
// Threads: BodyBudget's counter is an atomic, taken and given back by the
// loops and released by whichever thread drops the last handle of a charge
// (a pool thread, after its job); `limit` is fixed at start. A BodyCharge is
// owned by one thread at a time (the loop while its request is read, then
// whoever holds the request).
#pragma once
#include <atomic>
#include <cstdint>
#include <memory>

namespace m0::http {

class BodyBudget {
  public:
    explicit BodyBudget(uint64_t limit) : limit_(limit) {}
    // Takes `n` bytes of the total; false (nothing taken) when they do not fit.
    bool take(uint64_t n) {
        uint64_t used = used_.load(std::memory_order_relaxed);
        do {
            if (n > limit_ - used) return false;
        } while (!used_.compare_exchange_weak(used, used + n, std::memory_order_relaxed));
        return true;
    }
    void give(uint64_t n) { used_.fetch_sub(n, std::memory_order_relaxed); }
    // Whether `n` more bytes would fit now (nothing taken).
    bool fits(uint64_t n) const { return n <= limit_ - used(); }
    uint64_t used() const { return used_.load(std::memory_order_relaxed); }

  private:
    const uint64_t limit_;
    std::atomic<uint64_t> used_{0};
};

// One request's share of the budget; given back when it is destroyed.
class BodyCharge {
  public:
    explicit BodyCharge(std::shared_ptr<BodyBudget> budget) : budget_(std::move(budget)) {}
    ~BodyCharge();
    BodyCharge(const BodyCharge&) = delete;
    BodyCharge& operator=(const BodyCharge&) = delete;
    // Makes the charge at least `n` bytes; false when the rest does not fit
    // (the charge is then as it was).
    bool reach(uint64_t n);
    // Whether the charge could reach `n` bytes now (nothing taken).
    bool could_reach(uint64_t n) const { return n <= bytes_ || budget_->fits(n - bytes_); }
    uint64_t bytes() const { return bytes_; }

  private:
    std::shared_ptr<BodyBudget> budget_;
    uint64_t bytes_ = 0;
};

}  // namespace m0::http
