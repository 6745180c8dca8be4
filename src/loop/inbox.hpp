// Inbox: closures that any thread posts to one loop, run on that loop's
// thread in the order they were posted.
//
// DESIGN
// The loops of one process (--loops N) reach each other only through their
// inboxes: the admin API's close on every loop, SIGTERM's shutdown and
// SIGHUP's reopen, each run by the loop that owns the state it touches.
// Pool threads never use it (they have the completion ring and the bus).
// An NotifyQueue of closures plus its eventfd, watched on the loop; one
// wakeup per burst. The inbox must outlive every thread that may post to it;
// the owner of the loops keeps them all until every loop thread has ended.
// Ownership: the queue is any thread's (its own lock); the watcher and the
// running of closures, the loop thread's.
#pragma once
#include <deque>
#include <functional>
#include <utility>

#include "loop/loop.hpp"
#include "loop/notify_queue.hpp"

namespace m0 {

class Inbox {
  public:
    // Loop thread (or before the loop's thread starts).
    explicit Inbox(Loop& loop) : watch_(loop, queue_.fd(), [this] { run(); }) {}
    Inbox(const Inbox&) = delete;
    Inbox& operator=(const Inbox&) = delete;

    // Any thread: `fn` runs on the loop thread soon. False once closed.
    bool post(std::function<void()> fn) { return queue_.push(std::move(fn)); }
    // Any thread: later posts are refused (the loop is gone or going).
    void close() { queue_.close(); }

  private:
    void run() {
        std::deque<std::function<void()>> todo;
        queue_.drain(todo);
        for (auto& fn : todo) fn();
    }

    NotifyQueue<std::function<void()>> queue_;
    FdWatcher watch_;  // declared after queue_: stops watching before the queue goes
};

}  // namespace m0
