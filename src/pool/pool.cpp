#include "pool/pool.hpp"

#include "loop/log.hpp"

namespace m0 {

Pool::Pool(std::string name, size_t threads, size_t max_queued, Hooks hooks)
    : name_(std::move(name)), max_queued_(max_queued), hooks_(std::move(hooks)) {
    threads_.reserve(threads);
    for (size_t i = 0; i < threads; ++i) threads_.emplace_back([this, i] { worker(i); });
}

Pool::~Pool() { stop(); }

Admission Pool::submit(Job job, std::shared_ptr<const CancelFlag> cancel) {
    {
        std::lock_guard lock(mu_);
        if (stopping_) return Admission::stopping;
        if (queue_.size() >= max_queued_) {
            // Jobs whose client left hold no place: drop them before refusing.
            size_t gone = std::erase_if(queue_, [](const Queued& q) { return q.abandoned(); });
            skipped.fetch_add(gone);
        }
        if (queue_.size() >= max_queued_) {
            rejected.fetch_add(1);
            return Admission::full;
        }
        queue_.push_back({std::move(job), std::move(cancel), Clock::now()});
    }
    cv_.notify_one();
    return Admission::queued;
}

Pool::Job Pool::take_locked() {
    while (!queue_.empty()) {
        Queued q = std::move(queue_.front());
        queue_.pop_front();
        if (q.abandoned()) {
            skipped.fetch_add(1);
            continue;
        }
        auto waited = std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - q.since);
        wait_ns.fetch_add(static_cast<uint64_t>(waited.count()));
        waits.fetch_add(1);
        return std::move(q.job);
    }
    return {};
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
        job = take_locked();
    }
    if (!job) return false;
    run(job, 0);
    return true;
}

void Pool::worker(size_t index) {
    if (hooks_.init) hooks_.init();
    for (;;) {
        {
            std::unique_lock lock(mu_);
            cv_.wait(lock, [&] {
                return (!paused_ && !queue_.empty()) || (stopping_ && queue_.empty());
            });
            if (queue_.empty()) break;  // stopping, nothing left
        }
        if (hooks_.enter) hooks_.enter();
        Job job;
        {
            std::lock_guard lock(mu_);
            if (!paused_) job = take_locked();  // empty: another thread took it first
        }
        if (job) run(job, index);
        if (hooks_.leave) hooks_.leave();
    }
    if (hooks_.exit) hooks_.exit();
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
