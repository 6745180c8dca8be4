// Admission: what the loop and a pool agree on when a request is handed over.
//
// DESIGN
// submit() answers queued, or why not: the pool is stopping, or its queue
// already holds --max-queued jobs. The server turns each refusal into its own
// 503 ("server is shutting down"; "too many queued requests" + Retry-After).
//
// A queued job may wait a long time; its client may leave meanwhile. Each
// dispatched request gets a CancelFlag: the loop sets it when the client's
// connection is released (Server::close_conn), and a pool thread that comes to
// take the job finds it set and drops the job instead of running it. The flag
// is one atomic: the loop never waits on a lock held by a pool thread.
// CancelBoard keeps, per slot, the flag of the request dispatched last on it;
// it lives on the loop thread only (the server and the pools' submit() run
// there), so only the flags themselves are shared.
#pragma once
#include <atomic>
#include <memory>
#include <vector>

#include "loop/slot.hpp"

namespace m0 {

enum class Admission {
    queued,    // a thread will take it
    stopping,  // stop() began: nothing more is taken
    full,      // the queue holds its bound of jobs
};

class CancelFlag {
  public:
    // Loop thread: the request's client left.
    void cancel() { gone_.store(true, std::memory_order_release); }
    // Any thread.
    bool cancelled() const { return gone_.load(std::memory_order_acquire); }

  private:
    std::atomic<bool> gone_{false};  // set by the loop thread, read by pool threads
};

class CancelBoard {
  public:
    // Loop thread: a fresh flag for the request now dispatched on `s`; it
    // replaces the flag of the slot's previous request (which has finished:
    // a connection has one request in a pool at a time).
    std::shared_ptr<const CancelFlag> arm(SlotRef s) {
        if (s.index >= slots_.size()) slots_.resize(size_t(s.index) + 1);
        Entry& e = slots_[s.index];
        e.gen = s.gen;
        e.flag = std::make_shared<CancelFlag>();
        return e.flag;
    }
    // Loop thread: the client of `s` left. Sets the flag of its request, if
    // one was dispatched on this very slot and generation, and forgets it.
    void cancel(SlotRef s) {
        if (s.index >= slots_.size()) return;
        Entry& e = slots_[s.index];
        if (!e.flag || e.gen != s.gen) return;
        e.flag->cancel();
        e.flag.reset();
    }

  private:
    struct Entry {
        uint32_t gen = 0;
        std::shared_ptr<CancelFlag> flag;
    };
    std::vector<Entry> slots_;  // loop thread only; indexed by slot index
};

}  // namespace m0
