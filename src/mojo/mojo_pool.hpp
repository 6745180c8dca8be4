// MojoPool: the pool that runs mojo mounts. Its threads never take the GIL.
//
// _pool_serve (serve_job) on a pool thread:
//   read the cursor (Last-Event-ID) before the handler sees the request;
//   run the handler;
//   a hold -> take_stream_hold, then finish_hold (frame BEFORE completion);
//   a streamed body that is not a hold -> 409, the job counted as raised;
//   anything else -> the response.
#pragma once
#include <memory>
#include <string>

#include "hold/hold.hpp"
#include "mojo/mojo.hpp"
#include "pool/pool.hpp"

namespace m0::mojo {

class MojoPool {
  public:
    // threads == 0: a manual pool (tests call pool().run_next()). max_queued:
    // the bound of jobs waiting for a thread (--max-queued).
    MojoPool(size_t threads, hold::Handoff handoff, size_t max_queued = Pool::kUnbounded);

    // Loop thread. Queues the request for `handler` (which must outlive the
    // pool), with a cancel flag armed on the handoff's ring for `slot`; or
    // says why not (stopping, full).
    // `via` (--loops): the handoff of the loop the request came from (its
    // completion ring and bus lane), which must outlive the pool; null: the
    // pool's own.
    Admission submit(Handler& handler, SlotRef slot, http::Request req,
                     const hold::Handoff* via = nullptr);
    // Loop thread `loop`: runs a quick handler's job right here, as a pool
    // thread would (x-worker mojo-loop-N); its answer reaches the loop
    // through the completion ring, like any other. Counted as the pool's.
    Admission run_here(Handler& handler, SlotRef slot, http::Request req, const hold::Handoff* via,
                       size_t loop);
    Pool& pool() { return pool_; }
    const hold::Handoff& handoff() const { return handoff_; }

  private:
    hold::Handoff handoff_;
    Pool pool_;
};

// One job, as run on a pool thread: exposed for unit tests. `worker` names
// who ran it (x-worker); empty: mojo-THREAD_INDEX.
void serve_job(const hold::Handoff& h, Pool& pool, Handler& handler, SlotRef slot,
               http::Request& req, size_t thread_index, const std::string& worker = {});

}  // namespace m0::mojo
