// The WSGI pool: blocking threads that run a Python WSGI application (PEP 3333).
//
// DESIGN
// A pool thread keeps one Python thread state for its life, and takes the GIL
// before it takes a job (Pool::Hooks: a request waits in the FIFO queue, not
// on a thread waiting for the GIL). A job: read the cursor (Last-Event-ID)
// before the app runs; (the GIL held) build the environ; call app(environ, start_response); then
//   - a hold (start_response named M0-Hold): collect the body (the head of the
//     stream), close the iterable, release the GIL, take_stream_hold and
//     finish_hold: the same code, in the same order, as the mojo pool;
//   - otherwise the body as it is yielded: a first chunk that completes a
//     declared Content-Length (or an iterable that ends) is one whole
//     response; anything else streams (head, chunks, end), the thread waiting
//     with the GIL released while the connection's output is over the
//     high-water mark.
// Every piece of the body (from the iterable, write(), or a file) is admitted
// against the declared Content-Length (http::BodyLength): never past it (the
// iteration stops), and short of it the stream ends aborted so the connection
// closes; both are logged. wsgi.file_wrapper around a regular file: the job
// hands the loop a dup of its descriptor and the range to send (FileBody,
// sendfile(2) from the loop), then calls close() and ends, keeping no thread.
// The app's close() is always called (PEP 3333). An exception before the
// head is out is a 500 with the traceback in the log; after, the connection is
// closed so a truncated body never looks complete.
// start_response and the write callable it returns belong to their request:
// an app that keeps them and calls them later gets RuntimeError, and no other
// request's answer changes (they reach the job through a link the job clears,
// under the GIL, when it ends).
#pragma once
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "hold/hold.hpp"
#include "pool/pool.hpp"

namespace m0::wsgi {

class WsgiPool {
  public:
    // max_queued: the bound of jobs waiting for a thread (--max-queued).
    WsgiPool(size_t threads, hold::Handoff handoff, size_t max_queued = Pool::kUnbounded);
    // Loop thread. Queues the request for `app` (a strong reference the caller
    // keeps alive), with a cancel flag armed on the handoff's ring for `slot`;
    // or says why not.
    // `via` (--loops): the handoff of the loop the request came from (its
    // completion ring and bus lane), which must outlive the pool; null: the
    // pool's own.
    Admission submit(PyObject* app, SlotRef slot, http::Request req,
                     const hold::Handoff* via = nullptr);
    Pool& pool() { return pool_; }
    const hold::Handoff& handoff() const { return handoff_; }

  private:
    hold::Handoff handoff_;
    Pool pool_;
};

// One job, as run on a pool thread (takes and releases the GIL itself).
void serve_job(const hold::Handoff& h, Pool& pool, PyObject* app, SlotRef slot, http::Request& req,
               size_t thread_index);

}  // namespace m0::wsgi
