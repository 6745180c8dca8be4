// AdminApi: what the admin listener serves. Loop thread only.
//
//   GET  /metrics   the counters (Prometheus text)
//   POST /publish   {"channel": C, "data": D, "event": E}: an event on the bus
//   POST /close     {"channel": C}: every hold on C gets a retry hint and ends
//
// POST needs `Authorization: Bearer KEY` (--admin-key-file), compared in
// constant time; without a key configured the API refuses every POST.
#pragma once
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "bus/bus.hpp"
#include "http/message.hpp"
#include "pool/metrics.hpp"
#include "pool/pool.hpp"

namespace m0::server {

class AdminApi {
  public:
    // Ends every hold on a channel; returns how many.
    using CloseChannel = std::function<size_t(const std::string& channel)>;

    // `bus` is null without --realtime (publish and close answer 503).
    AdminApi(std::string key, Metrics& metrics, bus::Bus* bus, CloseChannel close);
    void add_pool(const Pool* pool) { pools_.push_back(pool); }
    // Gets the answer to one admin request, exactly once, on the loop thread:
    // at once, or (a publish on a shared bus) after the bus answers. Never throws.
    using Answer = std::function<void(http::Response)>;
    void handle(const http::Request& req, Answer answer);
    // handle() for an answer that comes at once (tests; every request on the
    // in-process bus).
    http::Response handle(const http::Request& req);

  private:
    // Every answer but a valid publish's; that one is left in `publish`
    // (channel, data, event) for handle() to hand to the bus.
    http::Response answer_now(const http::Request& req,
                              std::map<std::string, std::string>& publish);

    std::string key_;
    Metrics& metrics_;
    bus::Bus* bus_;
    CloseChannel close_;
    std::vector<const Pool*> pools_;
};

}  // namespace m0::server
