#include "pool/pool.hpp"

#include <utility>

#include "loop/log.hpp"

namespace m0 {

Pool::Pool(std::string name, size_t threads, size_t max_queued, Hooks hooks)
    : name_(std::move(name)), max_queued_(max_queued), hooks_(std::move(hooks)) {
    threads_.reserve(threads);
    for (size_t i = 0; i < threads; ++i) sleepers_.push_back(std::make_unique<Sleeper>());
    for (size_t i = 0; i < threads; ++i) threads_.emplace_back([this, i] { worker(i); });
}

Pool::~Pool() { stop(); }

Admission Pool::submit(Job job, std::shared_ptr<const CancelFlag> cancel, bool quick) {
    Sleeper* wake = nullptr;
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
        queue_.push_back({std::move(job), std::move(cancel), Clock::now(), quick});
        // A ready thread looks at the queue before it sleeps (it decrements
        // ready_ under this lock first): it takes a quick job in microseconds.
        // A thread waiting in `enter` takes it, or wakes the next to wait.
        if (lingering_) {
            wake = std::exchange(lingering_, nullptr);
            wake->woken = true;
        } else if ((!quick || ready_ == 0) && !entering_) {
            wake = take_latest_locked();
        }
    }
    if (wake) wake->cv.notify_one();  // a sleeper lives as long as the pool
    return Admission::queued;
}

Pool::Job Pool::take_locked(bool* quick) {
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
        if (quick) *quick = q.quick;
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
    Sleeper& me = *sleepers_[index];
    std::unique_lock lock(mu_);
    ++ready_;
    bool held = false;  // what `enter` took, kept from the last job (keep_locked)
    for (;;) {
        // Not ready while asleep (the wait checks first, under the lock, so a
        // job already queued is taken without a gap anyone could see). While
        // another thread waits in `enter`, this one sleeps: that one takes
        // the job, or wakes the next to wait.
        while (!held && !((!paused_ && !queue_.empty() && (!entering_ || stopping_)) ||
                          (stopping_ && queue_.empty()))) {
            --ready_;
            me.woken = false;
            idle_.push_back(&me);
            // Whoever wakes it takes it off idle_ and counts it ready: a
            // thread woken is as good as awake for the jobs queued after.
            me.cv.wait(lock, [&] { return me.woken; });
        }
        if (queue_.empty()) break;  // stopping, nothing left
        const bool entered_now = !held && hooks_.enter;
        if (entered_now) {
            // Not ready while it may block here (the WSGI pool's GIL).
            --ready_;
            entering_ = true;
            enter_since_ = Clock::now();
            lock.unlock();
            hooks_.enter();
            entered.fetch_add(1);
            lock.lock();
            entering_ = false;
            ++ready_;
        }
        // Empty: another thread took it first. A job that may block takes
        // this thread out of the ready ones while it runs.
        bool quick = false;
        Job job = paused_ ? Job{} : take_locked(&quick);
        // Through `enter` with jobs left: the next thread waits there.
        Sleeper* next = entered_now && !paused_ && !queue_.empty() ? take_latest_locked() : nullptr;
        if (job && !quick) --ready_;
        if (job) ++running_;
        lock.unlock();
        if (next) next->cv.notify_one();
        if (job) run(job, index);
        lock.lock();
        if (job) --running_;
        if (job && !quick) ++ready_;
        held = job && keep_locked();
        if (!held && job && linger_locked()) {
            lingering_ = &me;
            me.woken = false;
            me.cv.wait_for(lock, hooks_.linger, [&] { return me.woken; });
            if (lingering_ == &me) lingering_ = nullptr;
            held = keep_locked();
        }
        if (!held && hooks_.leave) {
            lock.unlock();
            hooks_.leave();
            lock.lock();
        }
    }
    --ready_;
    lock.unlock();
    if (hooks_.exit) hooks_.exit();
}

bool Pool::keep_locked() const {
    if (hooks_.keep_for.count() <= 0 || !hooks_.enter) return false;
    // Another thread in a job may be waiting for what this one holds.
    if (paused_ || queue_.empty() || running_ > 0) return false;
    return !entering_ || Clock::now() - enter_since_ < hooks_.keep_for;
}

bool Pool::linger_locked() const {
    return hooks_.linger.count() > 0 && hooks_.enter && !paused_ && !stopping_ && queue_.empty() &&
           running_ == 0;
}

Pool::Sleeper* Pool::take_latest_locked() {
    if (idle_.empty()) return nullptr;
    Sleeper* s = idle_.back();  // the latest asleep: its cache, and its core, are warmest
    idle_.pop_back();
    s->woken = true;
    ++ready_;
    return s;
}

std::vector<Pool::Sleeper*> Pool::take_idle_locked() {
    std::vector<Sleeper*> all;
    all.swap(idle_);
    for (Sleeper* s : all) s->woken = true;
    ready_ += all.size();
    return all;
}

void Pool::stop() {
    std::vector<Sleeper*> woken;
    {
        std::lock_guard lock(mu_);
        stopping_ = true;
        paused_ = false;
        woken = take_idle_locked();
        if (lingering_) {
            lingering_->woken = true;
            woken.push_back(std::exchange(lingering_, nullptr));
        }
    }
    for (Sleeper* s : woken) s->cv.notify_one();
    for (auto& t : threads_)
        if (t.joinable()) t.join();
}

void Pool::pause() {
    std::lock_guard lock(mu_);
    paused_ = true;
}

void Pool::resume() {
    std::vector<Sleeper*> woken;
    {
        std::lock_guard lock(mu_);
        paused_ = false;
        woken = take_idle_locked();
    }
    for (Sleeper* s : woken) s->cv.notify_one();
}

size_t Pool::sleeping() const {
    std::lock_guard lock(mu_);
    return idle_.size();
}

size_t Pool::queued() const {
    std::lock_guard lock(mu_);
    return queue_.size();
}

}  // namespace m0
