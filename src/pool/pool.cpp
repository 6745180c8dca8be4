#include "pool/pool.hpp"

#include "loop/log.hpp"

namespace m0 {

Pool::Pool(std::string name, size_t threads, std::function<void()> thread_init,
           std::function<void()> thread_exit)
    : name_(std::move(name)),
      thread_init_(std::move(thread_init)),
      thread_exit_(std::move(thread_exit)) {
    threads_.reserve(threads);
    for (size_t i = 0; i < threads; ++i) threads_.emplace_back([this, i] { worker(i); });
}

Pool::~Pool() { stop(); }

bool Pool::submit(Job job) {
    {
        std::lock_guard lock(mu_);
        if (stopping_) return false;
        queue_.push_back(std::move(job));
    }
    cv_.notify_one();
    return true;
}

void Pool::run(Job& job, size_t index) {
    busy.fetch_add(1);
    try {
        job(index);
    } catch (const std::exception& e) {
        raised.fetch_add(1);
        M0_LOG(error, name_, " pool: job raised: ", e.what());
    }
    busy.fetch_sub(1);
    completed.fetch_add(1);
}

bool Pool::run_next() {
    Job job;
    {
        std::lock_guard lock(mu_);
        if (queue_.empty()) return false;
        job = std::move(queue_.front());
        queue_.pop_front();
    }
    run(job, 0);
    return true;
}

void Pool::worker(size_t index) {
    if (thread_init_) thread_init_();
    for (;;) {
        Job job;
        {
            std::unique_lock lock(mu_);
            cv_.wait(lock, [&] {
                return (!paused_ && !queue_.empty()) || (stopping_ && queue_.empty());
            });
            if (queue_.empty()) break;  // stopping, nothing left
            job = std::move(queue_.front());
            queue_.pop_front();
        }
        run(job, index);
    }
    if (thread_exit_) thread_exit_();
}

void Pool::stop() {
    {
        std::lock_guard lock(mu_);
        stopping_ = true;
        paused_ = false;
    }
    cv_.notify_all();
    for (auto& t : threads_)
        if (t.joinable()) t.join();
}

void Pool::pause() {
    std::lock_guard lock(mu_);
    paused_ = true;
}

void Pool::resume() {
    {
        std::lock_guard lock(mu_);
        paused_ = false;
    }
    cv_.notify_all();
}

size_t Pool::queued() const {
    std::lock_guard lock(mu_);
    return queue_.size();
}

}  // namespace m0
