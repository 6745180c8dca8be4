// Pool: a fixed set of blocking worker threads running jobs in FIFO order.
//
// DESIGN
// The loop submits a job (a closure owning its Request); one pool thread runs
// it to the end and talks back to the loop only through the completion ring
// and, for holds, the bus channel. Threads never touch connections.
// Built with threads == 0 the pool is manual: jobs wait in the queue until a
// test calls run_next() on its own thread, so a test decides when each runs.
// pause()/resume() hold threaded workers before they take the next job.
// Ownership: `queue_`, `stopping_`, `paused_` under `mu_`; the counters are
// atomics read by /metrics.
#pragma once
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace m0 {

class Pool {
  public:
    // A job receives the index of the thread running it (for x-worker).
    using Job = std::function<void(size_t thread_index)>;

    Pool(std::string name, size_t threads, std::function<void()> thread_init = {},
         std::function<void()> thread_exit = {});
    ~Pool();
    Pool(const Pool&) = delete;
    Pool& operator=(const Pool&) = delete;

    // Queues a job; false once stop() began (the caller answers 503).
    bool submit(Job job);
    // Manual pools: runs the oldest queued job on the calling thread; false when
    // none is queued.
    bool run_next();
    // Stops taking jobs, lets running and queued jobs finish, joins the threads.
    void stop();
    void pause();
    void resume();

    const std::string& name() const { return name_; }
    size_t threads() const { return threads_.size(); }
    size_t queued() const;

    std::atomic<int> busy{0};            // jobs running now
    std::atomic<uint64_t> raised{0};     // jobs whose handler raised or was refused
    std::atomic<uint64_t> completed{0};  // jobs finished

  private:
    void worker(size_t index);
    void run(Job& job, size_t index);

    std::string name_;
    std::function<void()> thread_init_, thread_exit_;
    mutable std::mutex mu_;
    std::condition_variable cv_;
    std::deque<Job> queue_;  // guarded by mu_
    bool stopping_ = false;  // guarded by mu_
    bool paused_ = false;    // guarded by mu_
    std::vector<std::thread> threads_;
};

}  // namespace m0
