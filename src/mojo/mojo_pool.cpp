#include "mojo/mojo_pool.hpp"

#include "loop/log.hpp"

namespace m0::mojo {

MojoPool::MojoPool(size_t threads, hold::Handoff handoff, size_t max_queued)
    : handoff_(std::move(handoff)), pool_("mojo", threads, max_queued) {}

Admission MojoPool::submit(Handler& handler, SlotRef slot, http::Request req,
                           const hold::Handoff* via) {
    const hold::Handoff* h = via ? via : &handoff_;
    auto shared = std::make_shared<http::Request>(std::move(req));
    auto cancel = h->ring ? h->ring->cancels.arm(slot) : nullptr;
    return pool_.submit(
        [this, h, &handler, slot, shared](size_t thread) {
            serve_job(*h, pool_, handler, slot, *shared, thread);
        },
        std::move(cancel), handler.quick());
}

Admission MojoPool::run_here(Handler& handler, SlotRef slot, http::Request req,
                             const hold::Handoff* via, size_t loop) {
    serve_job(via ? *via : handoff_, pool_, handler, slot, req, 0,
              "mojo-loop-" + std::to_string(loop));
    pool_.completed.fetch_add(1);
    return Admission::queued;
}

void serve_job(const hold::Handoff& h, Pool& pool, Handler& handler, SlotRef slot,
               http::Request& req, size_t thread_index, const std::string& named) {
    // Read before the handler may consume the request.
    const hold::Start start = hold::read_start(h, req);
    const std::string worker = named.empty() ? "mojo-" + std::to_string(thread_index) : named;
    h.at(hold::Point::handler_start, slot);

    http::Response resp;
    try {
        resp = handler.serve(req);
    } catch (const std::exception& e) {
        pool.raised.fetch_add(1);
        M0_LOG(error, "mojo handler raised on ", req.method, " ", req.target, ": ", e.what());
        hold::post_response(h, slot, http::error_response(500, "internal server error"));
        return;
    }

    auto d = hold::take_stream_hold(resp, worker, h.bus != nullptr);
    if (d.kind == hold::HoldKind::bad) {
        M0_LOG(error, "mojo handler on ", req.target, ": ", d.error);
        hold::post_response(h, slot, http::error_response(502, d.error));
        return;
    }
    if (d.kind == hold::HoldKind::stream) {
        hold::finish_hold(h, slot, start, std::move(resp), std::move(d));
        return;
    }
    if (resp.stream) {
        // A stream begun on a pool thread has no producer the loop drains; only a
        // hold (fed by the bus) may stream from here.
        pool.raised.fetch_add(1);
        M0_LOG(error, "mojo handler on ", req.target,
               " answered a streamed body that is not a hold: refused 409");
        hold::post_response(h, slot,
                            http::error_response(409, "a mojo mount may stream only as a hold"));
        return;
    }
    hold::post_response(h, slot, std::move(resp));
}

}  // namespace m0::mojo
