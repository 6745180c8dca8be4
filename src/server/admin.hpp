// AdminApi: what the admin listener serves. Loop thread only.
//
//   GET  /metrics   the counters (Prometheus text)
//   POST /publish   {"channel": C, "data": D, "event": E}: an event on the bus
//   POST /close     {"channel": C}: every hold on C gets a retry hint and ends
//   POST /publish/  Pushpin's {"items": [...]} (http/json.hpp): each item's
//                   http-stream content is published raw (written verbatim),
//                   its "close" action closes the channel's holds
//
// POST needs `Authorization: Bearer KEY` (--admin-key-file), compared in
// constant time, or `Authorization: Bearer JWT`, a GRIP publisher's token
// signed HS256 with that key (grant/jwt.hpp). Without a key configured the
// API refuses every POST, unless it is open (--admin-open, which main allows
// only on a loopback listener): then no key is asked for.
#pragma once
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "bus/channel.hpp"
#include "http/message.hpp"
#include "pool/metrics.hpp"
#include "pool/pool.hpp"

namespace m0::server {

class AdminApi {
  public:
    // Ends every hold on a channel; returns how many.
    using CloseChannel = std::function<size_t(const std::string& channel)>;

    // `bus` is null without --realtime (publish and close answer 503).
    // `open`: POSTs need no key (--admin-open).
    AdminApi(std::string key, bool open, Metrics& metrics, bus::Bus* bus, CloseChannel close);
    void add_pool(const Pool* pool) { pools_.push_back(pool); }
    // The key read again (SIGHUP); later requests are checked against it.
    void set_key(std::string key) { key_ = std::move(key); }
    // The answer to one admin request; never throws.
    http::Response handle(const http::Request& req);

  private:
    // POST /publish/: Pushpin's items.
    http::Response publish_items(const http::Request& req);

    // Why a POST is not authorized (the 401 or 403 to answer), or nullopt.
    std::optional<http::Response> refuse(const http::Request& req) const;

    std::string key_;
    bool open_;
    Metrics& metrics_;
    bus::Bus* bus_;
    CloseChannel close_;
    std::vector<const Pool*> pools_;
};

}  // namespace m0::server
