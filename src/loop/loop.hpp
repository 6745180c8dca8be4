// Loop: the one event loop (a libevent event_base), owned by the loop thread.
// Tests step it with run_once(); the server runs it with run().
#pragma once
#include <event2/event.h>

#include <chrono>
#include <functional>
#include <memory>

namespace m0 {

class Loop {
  public:
    Loop();
    ~Loop();
    Loop(const Loop&) = delete;
    Loop& operator=(const Loop&) = delete;

    event_base* base() const { return base_; }
    // Runs until exit() or no events are left.
    void run();
    // One iteration that does not block: runs the callbacks of what is ready.
    void run_once();
    // Runs iterations until `done()` or `timeout` passes; true if done().
    bool run_until(const std::function<bool()>& done,
                   std::chrono::milliseconds timeout = std::chrono::milliseconds(2000));
    void exit();

  private:
    event_base* base_;
};

// A readable-fd watcher (for eventfds): calls `cb` on the loop thread.
class FdWatcher {
  public:
    FdWatcher(Loop& loop, int fd, std::function<void()> cb);
    ~FdWatcher();
    FdWatcher(const FdWatcher&) = delete;
    FdWatcher& operator=(const FdWatcher&) = delete;

  private:
    static void on_ready(evutil_socket_t, short, void* arg);
    event* ev_;
    std::function<void()> cb_;
};

// A timer on the loop; fires `cb` once after `after`, or every `after` if persistent.
class Timer {
  public:
    Timer(Loop& loop, std::function<void()> cb, bool persistent = false);
    ~Timer();
    Timer(const Timer&) = delete;
    Timer& operator=(const Timer&) = delete;
    void start(double seconds);
    void stop();
    bool pending() const;

  private:
    static void on_fire(evutil_socket_t, short, void* arg);
    event* ev_;
    std::function<void()> cb_;
};

timeval to_timeval(double seconds);
// Seconds on the monotonic clock (for deadlines and durations, never dates).
double monotonic_seconds();

}  // namespace m0
