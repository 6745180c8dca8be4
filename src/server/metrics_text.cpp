#include "server/metrics_text.hpp"

namespace m0::server {

namespace {
void line(std::string& out, const char* name, const char* type, const char* help, auto value) {
    out.append("# HELP ").append(name).append(" ").append(help).append("\n");
    out.append("# TYPE ").append(name).append(" ").append(type).append("\n");
    out.append(name).append(" ").append(std::to_string(value)).append("\n");
}
}  // namespace

std::string render_metrics(const Metrics& m, const std::vector<const Pool*>& pools,
                           const bus::Bus* bus) {
    std::string o;
    line(o, "m0_holds_open", "gauge", "Held connections now.", m.holds_open.load());
    line(o, "m0_holds_total", "counter", "Holds whose head was written.", m.holds_total.load());
    line(o, "m0_events_published_total", "counter", "Events accepted by the bus.",
         bus ? bus->published.load() : 0);
    line(o, "m0_events_delivered_total", "counter", "Event writes to held connections.",
         m.events_delivered.load());
    line(o, "m0_events_muted_total", "counter", "Events at or below a hold's Last-Event-ID.",
         m.events_muted.load());
    line(o, "m0_frames_refused_total", "counter", "Frames the bus channel would not take.",
         bus ? bus->refused.load() : 0);
    line(o, "m0_events_too_large_total", "counter", "Events refused over --max-event-size.",
         bus ? bus->too_large.load() : 0);
    line(o, "m0_frames_dropped_total", "counter", "Hold frames for slots that had left.",
         m.frames_dropped.load());
    line(o, "m0_completions_dropped_total", "counter", "Completions for slots that had left.",
         m.completions_dropped.load());
    line(o, "m0_holds_refused_total", "counter", "Hold answers over --max-holds.",
         m.holds_refused.load());
    line(o, "m0_slow_readers_closed_total", "counter", "Holds closed over --hold-buffer-limit.",
         m.slow_readers_closed.load());
    line(o, "m0_bus_last_id", "gauge", "The last event id issued (the bus position).",
         bus ? bus->position() : 0);
    line(o, "m0_events_replayed_total", "counter", "Events written to holds from history.",
         m.events_replayed.load());
    line(o, "m0_resets_total", "counter", "m0-reset events: gaps history could not fill.",
         m.resets_sent.load());
    const auto hist = bus ? bus->history_stats() : bus::Bus::HistoryStats{};
    line(o, "m0_history_events", "gauge", "Events kept for replay.", hist.events);
    line(o, "m0_history_bytes", "gauge", "Bytes kept for replay.", hist.bytes);
    line(o, "m0_history_evictions_total", "counter", "Events evicted from history.",
         hist.evictions);
    if (const auto link = bus ? bus->link_stats() : bus::Bus::LinkStats{}; link.shared) {
        line(o, "m0_bus_redis_up", "gauge", "1 while the Redis bus's links are connected.",
             link.up ? 1 : 0);
        line(o, "m0_bus_redis_reconnects_total", "counter",
             "Times the Redis bus connected again after an outage.", link.reconnects);
        line(o, "m0_bus_redis_publish_failures_total", "counter",
             "Publishes the Redis bus failed (503, RuntimeError).", link.publish_failures);
    }
    line(o, "m0_connections_open", "gauge", "Open client connections.", m.connections_open.load());
    line(o, "m0_connections_total", "counter", "Accepted client connections.",
         m.connections_total.load());
    line(o, "m0_connections_refused_total", "counter", "Connections over --max-connections.",
         m.connections_refused.load());
    line(o, "m0_accept_paused_total", "counter",
         "Times accept() ran out of file descriptors and accepting paused.",
         m.accept_paused.load());
    line(o, "m0_requests_total", "counter", "Requests parsed.", m.requests_total.load());
    line(o, "m0_requests_timed_out_total", "counter",
         "Requests answered 504 past --request-timeout.", m.requests_timed_out.load());
    line(o, "m0_request_bodies_refused_total", "counter",
         "Requests answered 503: their bodies would pass --max-body-total.",
         m.bodies_refused.load());
    line(o, "m0_tls_handshakes_total", "counter", "TLS handshakes completed.",
         m.tls_handshakes.load());
    line(o, "m0_tls_resumed_total", "counter", "TLS handshakes that resumed a session.",
         m.tls_resumed.load());
    line(o, "m0_tls_handshake_failures_total", "counter",
         "TLS connections closed before a handshake completed (silent, stalled or refused).",
         m.tls_handshakes_failed.load());
    line(o, "m0_tls_plain_requests_total", "counter",
         "Plain HTTP requests on a TLS port, answered 400.", m.tls_plain_refused.load());
    line(o, "m0_h2_connections_total", "counter", "HTTP/2 connections (ALPN h2 and h2c).",
         m.h2_connections.load());
    line(o, "m0_h2_streams_total", "counter", "HTTP/2 streams clients opened.",
         m.h2_streams.load());
    line(o, "m0_h2_client_resets_total", "counter", "RST_STREAM frames from HTTP/2 clients.",
         m.h2_client_resets.load());
    line(o, "m0_h2_stream_errors_total", "counter",
         "RST_STREAM frames sent for a client's own frames (--h2-max-stream-errors).",
         m.h2_stream_errors.load());
    line(o, "m0_h2_calm_total", "counter",
         "HTTP/2 connections ended with GOAWAY ENHANCE_YOUR_CALM (stream errors past "
         "--h2-max-stream-errors, a CONTINUATION flood).",
         m.h2_calm.load());
    line(o, "m0_websockets_total", "counter", "WebSocket holds begun (101 written).",
         m.websockets.load());
    o.append("# HELP m0_pool_busy_threads Pool threads running a job now.\n");
    o.append("# TYPE m0_pool_busy_threads gauge\n");
    for (const Pool* p : pools)
        o.append("m0_pool_busy_threads{pool=\"" + p->name() + "\"} " +
                 std::to_string(p->busy.load()) + "\n");
    o.append("# HELP m0_pool_raised_total Jobs whose handler raised or was refused.\n");
    o.append("# TYPE m0_pool_raised_total counter\n");
    for (const Pool* p : pools)
        o.append("m0_pool_raised_total{pool=\"" + p->name() + "\"} " +
                 std::to_string(p->raised.load()) + "\n");
    o.append("# HELP m0_pool_queued_jobs Jobs waiting for a pool thread.\n");
    o.append("# TYPE m0_pool_queued_jobs gauge\n");
    for (const Pool* p : pools)
        o.append("m0_pool_queued_jobs{pool=\"" + p->name() + "\"} " + std::to_string(p->queued()) +
                 "\n");
    o.append(
        "# HELP m0_pool_rejected_total Requests answered 503: the queue was full "
        "(--max-queued).\n");
    o.append("# TYPE m0_pool_rejected_total counter\n");
    for (const Pool* p : pools)
        o.append("m0_pool_rejected_total{pool=\"" + p->name() + "\"} " +
                 std::to_string(p->rejected.load()) + "\n");
    o.append("# HELP m0_pool_skipped_total Queued jobs not run: their client had left.\n");
    o.append("# TYPE m0_pool_skipped_total counter\n");
    for (const Pool* p : pools)
        o.append("m0_pool_skipped_total{pool=\"" + p->name() + "\"} " +
                 std::to_string(p->skipped.load()) + "\n");
    o.append(
        "# HELP m0_pool_queue_wait_seconds Time from submit until a thread took the job "
        "to run it.\n");
    o.append("# TYPE m0_pool_queue_wait_seconds summary\n");
    for (const Pool* p : pools) {
        const double sum = static_cast<double>(p->wait_ns.load()) / 1e9;
        o.append("m0_pool_queue_wait_seconds_sum{pool=\"" + p->name() + "\"} " +
                 std::to_string(sum) + "\n");
        o.append("m0_pool_queue_wait_seconds_count{pool=\"" + p->name() + "\"} " +
                 std::to_string(p->waits.load()) + "\n");
    }
    return o;
}

}  // namespace m0::server
