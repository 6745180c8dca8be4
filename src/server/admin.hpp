// AdminApi: what the admin listener serves. Loop thread only.
//
//   GET  /metrics   the counters (Prometheus text)
//   GET  /ready     200 while serving, 503 once draining (SIGTERM, or a
//                   --workers worker being retired): for load balancers and
//                   readiness probes
//   POST /publish   {"channel": C, "data": D, "event": E}: an event on the bus;
//                   or an array of such objects, up to --publish-batch-max:
//                   checked whole (a bad one refuses all, 400 or 413 naming
//                   its index), then published as one batch, ids in order,
//                   answered {"ids": [...]}
//   POST /close     {"channel": C}: every hold on C gets a retry hint and ends
//   POST /publish/  Pushpin's {"items": [...]} (http/json.hpp): each item's
//                   http-stream content is published raw (written verbatim),
//                   its http-response the answer of the channel's long-polls
//                   (one event, both formats), its "close" action closes the
//                   channel's holds
//
// POST needs `Authorization: Bearer KEY` (--admin-key-file), compared in
// constant time, or `Authorization: Bearer JWT`, a GRIP publisher's token
// signed HS256 with that key (grant/jwt.hpp). Without a key configured the
// API refuses every POST, unless it is open (--admin-open, which main allows
// only on a loopback listener): then no key is asked for.
#pragma once
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "bus/bus.hpp"
#include "http/json.hpp"
#include "http/message.hpp"
#include "pool/metrics.hpp"
#include "pool/pool.hpp"

namespace m0::server {

// The events one POST /publish array may carry by default (--publish-batch-max).
inline constexpr size_t kPublishBatchMax = 1000;

class AdminApi {
  public:
    // Ends every hold on a channel; `done` gets how many, on the loop thread,
    // at once or (several loops) once every loop has closed its own.
    using Closed = std::function<void(size_t closed)>;
    using CloseChannel = std::function<void(const std::string& channel, const Closed& done)>;

    // `bus` is null without --realtime (publish and close answer 503).
    // `open`: POSTs need no key (--admin-open).
    AdminApi(std::string key, bool open, Metrics& metrics, bus::Bus* bus, CloseChannel close);
    void add_pool(const Pool* pool) { pools_.push_back(pool); }
    // The key read again (SIGHUP); later requests are checked against it.
    void set_key(std::string key) { key_ = std::move(key); }
    void set_close(CloseChannel close) { close_ = std::move(close); }
    // A POST /publish array of more events is refused whole: 413.
    void set_batch_max(size_t n) { batch_max_ = n; }
    // From now on GET /ready answers 503 (the server began to drain).
    void set_draining() { draining_ = true; }
    // Gets the answer to one admin request, exactly once, on the loop thread:
    // at once, or (a publish on a shared bus) after the bus answers. Never throws.
    using Answer = std::function<void(http::Response)>;
    void handle(const http::Request& req, Answer answer);
    // handle() for an answer that comes at once (tests; every request on the
    // in-process bus).
    http::Response handle(const http::Request& req);

  private:
    // What handle() still has to do once the request is checked: hand its
    // events to the bus, which answers at once or later.
    using Deferred = std::function<void(Answer)>;
    // Every answer but a valid publish's; for that one, `later` is set.
    http::Response answer_now(const http::Request& req, Deferred& later);
    // POST /publish/: Pushpin's items, checked whole; `later` publishes them.
    http::Response publish_items(const http::Request& req, Deferred& later);
    // POST /publish with a JSON array: checked whole, then one bus batch.
    http::Response publish_batch(const http::Request& req, Deferred& later);

    // Why a POST is not authorized (the 401 or 403 to answer), or nullopt.
    std::optional<http::Response> refuse(const http::Request& req) const;
    // Pushpin items being published, one after the other.
    struct ItemRun {
        std::shared_ptr<std::vector<http::PushpinItem>> items;
        size_t skipped = 0;
        size_t next = 0;            // the next item to hand to the bus
        std::vector<uint64_t> ids;  // of the items published so far
        size_t closed = 0;
        Answer answer;
        bool driving = false;  // inside publish_item's loop
        bool waiting = false;  // an item is with the bus
        bool failed = false;   // answered with an error: nothing more
    };
    void publish_item(std::shared_ptr<ItemRun> run);

    std::string key_;
    bool open_;
    Metrics& metrics_;
    bus::Bus* bus_;
    CloseChannel close_;
    std::vector<const Pool*> pools_;
    size_t batch_max_ = kPublishBatchMax;
    bool draining_ = false;  // set by Server::shutdown on the same loop
};

}  // namespace m0::server
