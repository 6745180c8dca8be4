// Pool: a fixed set of blocking worker threads running jobs in FIFO order.
//
// DESIGN
// The loop submits a job (a closure owning its Request); one pool thread runs
// it to the end and talks back to the loop only through the completion ring
// and, for holds, the bus channel. Threads never touch connections.
// Built with threads == 0 the pool is manual: jobs wait in the queue until a
// test calls run_next() on its own thread, so a test decides when each runs.
// pause()/resume() hold threaded workers before they take the next job.
//
// The queue is bounded (--max-queued): past the bound, submit() answers full
// and the server answers 503 with Retry-After, rather than letting a request
// wait behind more work than it would ever see finish. A job carries its
// request's cancel flag (admission.hpp): a job whose client left before a
// thread took it is dropped, not run (skipped), and a full queue first drops
// such jobs before it refuses a live one. The time from submit to the moment
// a thread takes a job to run it is summed for /metrics (queue wait).
// Wake-ups: sleeping threads wait each on its own condition variable, on a
// stack, and a job wakes the one that slept last (its cache and its core are
// the warmest; a light load is served by one thread). A quick job (a mount
// that never blocks and takes microseconds) wakes none while a thread is
// `ready`: awake between jobs, woken already, or running a quick job, so
// that it looks at the queue again within microseconds. A thread running a
// job that may block is not ready, so nothing waits behind a handler that
// blocks. Threads woken by turns (notify_one per job) cost a futex wake and a
// task switch for work an awake thread would have taken (docs/BENCHMARK.md,
// "Pool wake-ups").
// Keeping what `enter` took (Hooks::keep_for; the WSGI pool's GIL): a thread
// that ends a job while another is queued, and no other thread is in a job,
// takes the next one without `leave` and `enter` in between, so that work
// that never blocks runs on one thread with no hand-off at all (a hand-off of
// the GIL is a futex wake and a task switch a request: with four threads a
// framework-less app ran at 0.75 of one thread's rate). It lets go where a
// job ends (`leave`, then back through `enter`) once the thread waiting in
// `enter` has waited keep_for, before the resource's own fairness would take
// it midway through a job (CPython asks for the GIL after one switch
// interval), and whenever another thread is in a job: that one may be
// waiting for the GIL to finish its request. At most one thread waits in
// `enter` at a time (`entering_`); the others sleep until it is through, so
// one thread is always there to take the next job the moment a job blocks
// and lets the GIL go, and a resource handed over goes to that thread.
// A thread that ends a job and finds the queue empty (no other thread in a
// job) waits Hooks::linger for the next one before it lets go (`lingering_`:
// a submit hands the job to it, waking no one else): jobs that come a few
// microseconds apart, as a loop parses them, are run with no task switch
// and no hand-off, as with one thread. Meanwhile it holds what enter took
// (the GIL: the app's own threads wait at most that long).
// Ownership: `queue_`, `stopping_`, `paused_`, `ready_`, `idle_`, `entering_`,
// `enter_since_`, `running_`, `lingering_` and each sleeper's `woken` under `mu_`; `sleepers_`
// fixed once the threads run; the counters are atomics read by /metrics.
#pragma once
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "pool/admission.hpp"

namespace m0 {

class Pool {
  public:
    // A job receives the index of the thread running it (for x-worker).
    using Job = std::function<void(size_t thread_index)>;
    static constexpr size_t kUnbounded = SIZE_MAX;

    // What a pool thread does around its work (each may be empty):
    //   init / exit: first and last, on the thread;
    //   enter: after a job is queued and before the thread takes it (it may
    //     block: the WSGI pool takes the GIL here, so the job a thread takes is
    //     the oldest at the moment Python can run it, and threads waiting for
    //     the GIL hold no request);
    //   leave: after the take, whether it found a job, and after the job
    //     (idempotent: a job may have left already).
    // keep_for: zero, `enter` and `leave` go around every job; else a thread
    // keeps what `enter` took across jobs (see DESIGN) until the thread
    // waiting in `enter` has waited this long.
    struct Hooks {
        std::function<void()> init, exit, enter, leave;
        std::chrono::nanoseconds keep_for;  // zero when left out (value-initialized)
        // With keep_for: how long a thread that found the queue empty after
        // a job waits for the next one before it lets go (zero: not at all).
        std::chrono::nanoseconds linger;
    };
    Pool(std::string name, size_t threads, size_t max_queued = kUnbounded, Hooks hooks = {});
    ~Pool();
    Pool(const Pool&) = delete;
    Pool& operator=(const Pool&) = delete;

    // Loop thread. Queues a job, or says why not: stopping once stop() began;
    // full when max_queued jobs wait already (after dropping those whose
    // client left). `cancel` (may be null) is the request's cancel flag: a job
    // whose flag is set when a thread comes to take it is not run.
    // `quick`: the job never blocks and takes microseconds (see DESIGN: a
    // ready thread takes it rather than a sleeping one being woken).
    Admission submit(Job job, std::shared_ptr<const CancelFlag> cancel = {}, bool quick = false);
    // Manual pools: runs the oldest queued job whose client is still there on
    // the calling thread (dropping older abandoned ones); false when none is.
    bool run_next();
    // Stops taking jobs, lets running and queued jobs finish, joins the threads.
    void stop();
    void pause();
    void resume();

    const std::string& name() const { return name_; }
    size_t threads() const { return threads_.size(); }
    size_t max_queued() const { return max_queued_; }
    size_t queued() const;
    // Threads asleep now, waiting for a job (tests).
    size_t sleeping() const;

    std::atomic<int> busy{0};            // jobs running now
    std::atomic<uint64_t> raised{0};     // jobs whose handler raised or was refused
    std::atomic<uint64_t> completed{0};  // jobs finished
    std::atomic<uint64_t> rejected{0};   // submits refused: the queue was full
    std::atomic<uint64_t> skipped{0};    // jobs dropped unrun: their client had left
    std::atomic<uint64_t> wait_ns{0};    // sum over jobs taken to run: submit -> taken
    std::atomic<uint64_t> waits{0};      // jobs taken to run (the count of wait_ns)
    std::atomic<uint64_t> entered{0};    // calls of the enter hook (kept across jobs: fewer)

  private:
    using Clock = std::chrono::steady_clock;
    struct Queued {
        Job job;
        std::shared_ptr<const CancelFlag> cancel;
        Clock::time_point since;
        bool quick = false;
        bool abandoned() const { return cancel && cancel->cancelled(); }
    };

    // Under mu_: the oldest job whose client is still there (empty when there
    // is none), dropping and counting the abandoned ones before it; the queue
    // wait of the job returned is counted. `quick`: whether it is.
    Job take_locked(bool* quick = nullptr);
    void worker(size_t index);
    // Under mu_, after a job: whether the thread keeps what `enter` took and
    // takes the next job straight away (see DESIGN).
    bool keep_locked() const;
    bool linger_locked() const;
    void run(Job& job, size_t index);

    std::string name_;
    const size_t max_queued_;
    const Hooks hooks_;
    mutable std::mutex mu_;
    // A thread's own wake-up: sleeping threads wait each on its own, so that
    // a job wakes the one that slept last (LIFO), not whichever the
    // condition variable picks.
    struct Sleeper {
        std::condition_variable cv;
        bool woken = false;  // guarded by mu_
    };
    // Under mu_: every sleeping thread taken off idle_, marked woken (to be
    // notified after the lock is let go).
    std::vector<Sleeper*> take_idle_locked();
    // Under mu_: the sleeper that slept last taken off idle_, marked woken and
    // counted ready (to be notified after the lock is let go), or null.
    Sleeper* take_latest_locked();
    std::vector<std::unique_ptr<Sleeper>> sleepers_;  // one per thread, made before the threads
    std::vector<Sleeper*> idle_;                      // guarded by mu_: asleep, the latest last
    std::deque<Queued> queue_;                        // guarded by mu_
    bool stopping_ = false;                           // guarded by mu_
    bool paused_ = false;                             // guarded by mu_
    size_t ready_ = 0;              // guarded by mu_: threads awake and not in a job that may block
    size_t running_ = 0;            // guarded by mu_: threads in a job
    bool entering_ = false;         // guarded by mu_: a thread is in the enter hook
    Sleeper* lingering_ = nullptr;  // guarded by mu_: waiting for a job, holding what enter took
    Clock::time_point enter_since_;  // guarded by mu_: since when (entering_)
    std::vector<std::thread> threads_;
};

}  // namespace m0
