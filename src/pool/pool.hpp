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
// Ownership: `queue_`, `stopping_`, `paused_` under `mu_`; the counters are
// atomics read by /metrics.
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
    struct Hooks {
        std::function<void()> init, exit, enter, leave;
    };
    Pool(std::string name, size_t threads, size_t max_queued = kUnbounded, Hooks hooks = {});
    ~Pool();
    Pool(const Pool&) = delete;
    Pool& operator=(const Pool&) = delete;

    // Loop thread. Queues a job, or says why not: stopping once stop() began;
    // full when max_queued jobs wait already (after dropping those whose
    // client left). `cancel` (may be null) is the request's cancel flag: a job
    // whose flag is set when a thread comes to take it is not run.
    Admission submit(Job job, std::shared_ptr<const CancelFlag> cancel = {});
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

    std::atomic<int> busy{0};            // jobs running now
    std::atomic<uint64_t> raised{0};     // jobs whose handler raised or was refused
    std::atomic<uint64_t> completed{0};  // jobs finished
    std::atomic<uint64_t> rejected{0};   // submits refused: the queue was full
    std::atomic<uint64_t> skipped{0};    // jobs dropped unrun: their client had left
    std::atomic<uint64_t> wait_ns{0};    // sum over jobs taken to run: submit -> taken
    std::atomic<uint64_t> waits{0};      // jobs taken to run (the count of wait_ns)

  private:
    using Clock = std::chrono::steady_clock;
    struct Queued {
        Job job;
        std::shared_ptr<const CancelFlag> cancel;
        Clock::time_point since;
        bool abandoned() const { return cancel && cancel->cancelled(); }
    };

    // Under mu_: the oldest job whose client is still there (empty when there
    // is none), dropping and counting the abandoned ones before it; the queue
    // wait of the job returned is counted.
    Job take_locked();
    void worker(size_t index);
    void run(Job& job, size_t index);

    std::string name_;
    const size_t max_queued_;
    const Hooks hooks_;
    mutable std::mutex mu_;
    std::condition_variable cv_;
    std::deque<Queued> queue_;  // guarded by mu_
    bool stopping_ = false;     // guarded by mu_
    bool paused_ = false;       // guarded by mu_
    std::vector<std::thread> threads_;
};

}  // namespace m0
