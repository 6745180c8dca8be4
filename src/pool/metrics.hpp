// Metrics: server-wide counters, atomics so any thread (loop or pool) may
// bump them; the admin listener renders them (server/metrics_text.hpp).
#pragma once
#include <atomic>
#include <cstdint>

namespace m0 {

// The holds open, against --max-holds: one count is both the m0_holds_open
// gauge and the limit's. A place is taken before the loop holds a
// connection: by a pool thread before it sends the h frame (hold/hold.cpp),
// by the loop before a WebSocket-over-HTTP connection's 101
// (server/ws_over_http.cpp). The loop gives it back when the hold ends
// (HoldTable::release) or its frame finds nobody to hold
// (Server::sse_peer_frame). Any thread.
class HoldCount {
  public:
    // --max-holds: set once at start-up, before any thread takes a place;
    // unlimited until then.
    void set_limit(int64_t limit) { limit_.store(limit); }
    int64_t limit() const { return limit_.load(); }
    // A place; false (nothing taken) when limit() are open.
    // In metrics.cpp, as the other bodies a sabotage target changes: a
    // mutation then recompiles one file, not every one that counts.
    bool reserve();
    void release() { n_.fetch_sub(1); }
    int64_t load() const { return n_.load(); }

  private:
    std::atomic<int64_t> n_{0};
    std::atomic<int64_t> limit_{INT64_MAX};
};

struct Metrics {
    HoldCount holds_open;                          // places taken (see HoldCount)
    std::atomic<uint64_t> holds_total{0};          // holds whose head was written
    std::atomic<uint64_t> events_delivered{0};     // event writes to holds
    std::atomic<uint64_t> events_muted{0};         // events at or below a hold's cursor
    std::atomic<uint64_t> frames_dropped{0};       // h frames for slots that had left
    std::atomic<uint64_t> completions_dropped{0};  // completions for slots that had left
    std::atomic<uint64_t> holds_refused{0};        // over --max-holds
    std::atomic<uint64_t> slow_readers_closed{0};  // holds over --hold-buffer-limit
    std::atomic<uint64_t> events_replayed{0};      // events written from history on a hold's start
    std::atomic<uint64_t> resets_sent{0};          // m0-reset events: a gap history could not fill
    std::atomic<int64_t> connections_open{0};
    std::atomic<uint64_t> connections_total{0};
    std::atomic<uint64_t> connections_refused{0};  // over --max-connections
    std::atomic<uint64_t> accept_paused{0};        // accept() out of fds: listeners paused
    std::atomic<uint64_t> requests_total{0};
    std::atomic<uint64_t> requests_timed_out{0};  // 504s past --request-timeout
    std::atomic<uint64_t> bodies_refused{0};      // 503s past --max-body-total
    // TLS client connections (not the admin listener's); loop threads bump them.
    std::atomic<uint64_t> tls_handshakes{0};         // handshakes completed
    std::atomic<uint64_t> tls_resumed{0};            // of them, sessions resumed
    std::atomic<uint64_t> tls_handshakes_failed{0};  // closed before a handshake completed
    std::atomic<uint64_t> tls_plain_refused{0};      // plain HTTP on a TLS port (400)
    // HTTP/2 and WebSocket (loop threads bump them).
    std::atomic<uint64_t> h2_connections{0};    // HTTP/2 sessions started (h2 or h2c)
    std::atomic<uint64_t> h2_streams{0};        // streams a client opened
    std::atomic<uint64_t> h2_client_resets{0};  // RST_STREAMs from clients
    std::atomic<uint64_t> h2_stream_errors{0};  // resets the server sent for a client's frames
    std::atomic<uint64_t> h2_calm{0};           // sessions ended GOAWAY ENHANCE_YOUR_CALM by us
    std::atomic<uint64_t> websockets{0};        // 101s written (WebSocket holds begun)
};

}  // namespace m0
