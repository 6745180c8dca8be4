#include "loop/loop.hpp"

#include <cmath>
#include <stdexcept>
#include <thread>

namespace m0 {

timeval to_timeval(double seconds) {
    timeval tv;
    double whole = std::floor(seconds);
    tv.tv_sec = static_cast<time_t>(whole);
    tv.tv_usec = static_cast<suseconds_t>((seconds - whole) * 1e6);
    return tv;
}

Loop::Loop() : base_(event_base_new()) {
    if (!base_) throw std::runtime_error("event_base_new failed");
}

Loop::~Loop() { event_base_free(base_); }

void Loop::run() { event_base_dispatch(base_); }

void Loop::run_once() { event_base_loop(base_, EVLOOP_NONBLOCK); }

bool Loop::run_until(const std::function<bool()>& done, std::chrono::milliseconds timeout) {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    while (!done()) {
        if (std::chrono::steady_clock::now() > deadline) return false;
        event_base_loop(base_, EVLOOP_NONBLOCK);
        if (done()) return true;
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    return true;
}

void Loop::exit() { event_base_loopexit(base_, nullptr); }

FdWatcher::FdWatcher(Loop& loop, int fd, std::function<void()> cb) : cb_(std::move(cb)) {
    ev_ = event_new(loop.base(), fd, EV_READ | EV_PERSIST, on_ready, this);
    event_add(ev_, nullptr);
}

FdWatcher::~FdWatcher() { event_free(ev_); }

void FdWatcher::on_ready(evutil_socket_t, short, void* arg) { static_cast<FdWatcher*>(arg)->cb_(); }

Timer::Timer(Loop& loop, std::function<void()> cb, bool persistent) : cb_(std::move(cb)) {
    ev_ = event_new(loop.base(), -1, persistent ? EV_PERSIST : 0, on_fire, this);
}

Timer::~Timer() { event_free(ev_); }

void Timer::start(double seconds) {
    timeval tv = to_timeval(seconds);
    event_add(ev_, &tv);
}

void Timer::stop() { event_del(ev_); }

bool Timer::pending() const { return event_pending(ev_, EV_TIMEOUT, nullptr) != 0; }

void Timer::on_fire(evutil_socket_t, short, void* arg) { static_cast<Timer*>(arg)->cb_(); }

double monotonic_seconds() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
}

}  // namespace m0
