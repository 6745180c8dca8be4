// Completions: what a pool thread hands the loop through the completion ring.
//
// A job ends in exactly one of:
//   response            a whole response (head and body), written at once; its
//                       body may be a file (FileBody: sent by sendfile(2) from
//                       the loop, wsgi.file_wrapper);
//   head, chunk*, end   a streamed body: the head, then chunks as the app yields
//                       them, then end (aborted: the app failed mid-body, so the
//                       connection is closed rather than the body faked);
//   hold                the head of a hold (the loop subscribed the slot first,
//                       from the h frame the pool thread queued before this).
// Memory stays bounded while streaming: StreamState counts the bytes a stream
// has in the ring and in the connection's output buffer, and the pool thread
// waits while that is above the high-water mark.
#pragma once
#include <unistd.h>

#include <condition_variable>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <string>

#include "http/message.hpp"
#include "loop/notify_queue.hpp"
#include "loop/slot.hpp"
#include "pool/admission.hpp"

namespace m0 {

// Shared by one streaming job (pool thread) and its connection (loop thread).
struct StreamState {
    explicit StreamState(size_t high_water) : hwm(high_water) {}

    // Pool thread: account `n` bytes about to be queued, after waiting while the
    // stream is over the high-water mark. False when the client is gone (the
    // producer should stop and close its iterable).
    // (completion.cpp, so that a change to it recompiles one file.)
    bool reserve(size_t n);
    // Loop thread: `n` bytes moved from the ring into the output buffer, which
    // now holds `out_len` bytes.
    void moved(size_t n, size_t out_len) {
        std::lock_guard lock(mu);
        in_ring -= n < in_ring ? n : in_ring;
        buffered = out_len;
    }
    // Loop thread: the output buffer drained to `out_len` bytes.
    void drained(size_t out_len) {
        {
            std::lock_guard lock(mu);
            buffered = out_len;
        }
        cv.notify_all();
    }
    // Loop thread: the connection is gone; wakes the producer.
    void cancel() {
        {
            std::lock_guard lock(mu);
            gone = true;
        }
        cv.notify_all();
    }
    bool is_gone() {
        std::lock_guard lock(mu);
        return gone;
    }

    std::mutex mu;
    std::condition_variable cv;
    size_t in_ring = 0;   // guarded by mu
    size_t buffered = 0;  // guarded by mu
    bool gone = false;    // guarded by mu
    const size_t hwm;
};

// A response's body as a range of an open regular file, sent by the loop
// (libevent's evbuffer_add_file: sendfile(2) on a socket). Made by a pool
// thread, then owned by whoever holds the completion: the loop takes the
// descriptor (fd -1 then); a completion dropped on its way (the client left)
// closes it here.
struct FileBody {
    FileBody(int fd_, uint64_t offset_, uint64_t length_, bool cut_)
        : fd(fd_), offset(offset_), length(length_), cut(cut_) {}
    FileBody(const FileBody&) = delete;
    FileBody& operator=(const FileBody&) = delete;
    ~FileBody() {
        if (fd >= 0) ::close(fd);
    }
    int fd;           // a descriptor of the pool's own (a dup), or -1 once taken
    uint64_t offset;  // where the body starts in the file
    uint64_t length;  // how much of it goes
    bool cut;         // the file holds less than the declared length: close after
};

struct Completion {
    enum class Kind { response, head, chunk, end, hold };
    Kind kind = Kind::response;
    SlotRef slot;
    http::Response response;              // response, head, hold
    std::string data;                     // chunk
    bool aborted = false;                 // end: the body failed midway
    std::shared_ptr<StreamState> stream;  // head, chunk, end
    std::shared_ptr<FileBody> file;       // response: the body, instead of response.body
};

// The completion ring: pool threads -> the loop. Unbounded and never closed
// (neither a capacity nor close() is reachable through this type), so a push
// cannot fail and answers nothing to check: a pool thread's completion always
// reaches the loop, which drops it there if its slot has left.
// It also carries the one signal that goes the other way, loop -> pool: the
// cancel flags of dispatched requests (see admission.hpp), armed by the pools'
// submit() and set by the server when a client leaves.
class CompletionRing : private NotifyQueue<Completion> {
    using Base = NotifyQueue<Completion>;

  public:
    CompletionRing() = default;

    void push(Completion&& c) {
        if (!Base::push(std::move(c))) std::abort();  // unreachable: no capacity, no close
    }
    using Base::drain;
    using Base::fd;
    using Base::observer;
    using Base::peek;
    using Base::size;

    CancelBoard cancels;  // loop thread only
};

}  // namespace m0
