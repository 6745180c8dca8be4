// sse_load's parts: the run's state (sse_load.cpp), TLS (sse_tls.cpp), the
// HTTP/2 client session (sse_h2.cpp), WebSocket (sse_ws.cpp) and /proc
// (sse_proc.cpp). Everything
// runs on the one thread of the one libevent loop; no state here is shared
// with another thread.
#pragma once

#include <event2/bufferevent.h>
#include <event2/event.h>
#include <http_parser.h>
#include <openssl/ssl.h>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace sse {

[[noreturn]] void die(const std::string& why);
int64_t now_ns();

struct Url {
    std::string host, path;
    uint16_t port = 80;
    bool tls = false;  // https:// or wss://
    bool ws = false;   // ws:// or wss://
};

struct Options {
    std::string url, publish_url, publish_body = "{data}", label, cafile;
    std::vector<std::string> publish_headers;
    int holds = 1000, channels = 1, connecting = 500, sources = 0;
    int source_first = 0;  // the first source address: 127.0.0.(1 + source_first)
    std::string go_file;   // once every stream is open, wait for this file to exist
    double rate = 20, seconds = 10, open_timeout = 60, drain_timeout = 5;
    int burst = 0, storm = 0, pad = 0;
    int streams = 0;     // HTTP/2 streams a connection; 0: HTTP/1.1
    int handshakes = 0;  // the handshake loop instead of streams
    std::vector<int> server_pids;
};

struct Run;
struct H2Link;  // one HTTP/2 connection and its streams (sse_h2.cpp)
struct WsLink;  // one WebSocket's handshake and wslay context (sse_ws.cpp)

// One client stream: an HTTP/1.1 connection (a stream, or the publisher),
// or with --streams one stream of an H2Link.
struct Conn {
    Run* run = nullptr;
    bufferevent* bev = nullptr;  // HTTP/1.1 only
    http_parser parser{};
    H2Link* h2 = nullptr;  // HTTP/2: its connection, until the stream is gone
    WsLink* ws = nullptr;  // WebSocket: its link, until the connection is gone
    int index = -1;        // the hold's number; -1: the publisher
    int channel = 0;
    bool open = false, failed = false;
    std::string line;  // a partial body line
    std::vector<bool> seen;
    uint64_t last_seq = 0;
    // --storm: the current event's `id:` line; events seen; when it connected.
    std::string block_id;
    int got = 0;
    int64_t connect_ns = 0;
};

struct Run {
    Options o;
    Url stream, publish;
    event_base* base = nullptr;
    SSL_CTX* tls_h1 = nullptr;  // ALPN http/1.1 (https:// without --streams, the probe)
    SSL_CTX* tls_h2 = nullptr;  // ALPN h2 (https:// with --streams)
    std::vector<std::unique_ptr<Conn>> holds;
    std::unique_ptr<Conn> publisher;
    int next_to_open = 0, connecting = 0, opened = 0, failed = 0, dropped = 0;
    int64_t open_deadline = 0;
    int64_t go_deadline = 0;  // --go-file: past it, the events start without it
    bool said_open = false;   // --go-file: "open N" written
    // Publishing.
    int total_events = 0, published = 0, answered = 0, publish_errors = 0;
    std::vector<int> per_channel;  // events published on each channel
    bool publish_pending = false;
    bool publisher_closing = false;  // the last answer said Connection: close
    int64_t first_publish = 0, last_delivery = 0, last_progress = 0;
    // Deliveries.
    uint64_t delivered = 0, duplicates = 0, out_of_order = 0, foreign = 0;
    // Each delivery's latency from its event's due time (steady: the rate's
    // schedule, so a publisher held up by slow answers does not hide the
    // wait, as wrk2 corrects coordinated omission; burst: its send), and
    // from its send (the `t=` in its data).
    std::vector<uint32_t> latency_us, sent_latency_us;
    std::vector<int64_t> due_ns;  // by seq: when the event was due
    int64_t publish_lag_max = 0;  // the most an event was sent after it was due
    std::vector<int> pids;
    double cpu_before = 0;
    double own_cpu_before = 0;  // own_cpu_seconds() when publishing began
    int64_t rss_before = 0, rss_holds = 0;
    int64_t owned_before = 0, owned_holds = 0;  // owned_rss_bytes, as the two above (not --storm)
    event* tick = nullptr;
    event* due_timer = nullptr;  // steady: the next event's due time
    // --storm: the stream that reads the events first, the id of the first,
    // and when the other streams began to open.
    std::unique_ptr<Conn> probe;
    std::string first_id;
    int64_t storm_start = 0, rss_peak = 0;
};

// sse_load.cpp: what a stream's transport reports, whichever it is.
void stream_head(Conn& c, int status);              // the answer's status
void stream_data(Conn& c, std::string_view chunk);  // body bytes, decoded
void stream_event(Conn& c, std::string_view text);  // one event's data (`seq=N t=NS` in it)
void stream_gone(Conn& c);                          // closed or reset
std::string stream_path(const Run& r, int channel);
// A connected socket from source address 127.0.0.(1+source) to u, TLS when
// u.tls (with ctx); no callbacks set yet.
bufferevent* dial(Run& r, const Url& u, int source, SSL_CTX* ctx);

// sse_proc.cpp: the servers' processes (roots and their descendants), their
// summed RSS in bytes and CPU seconds (user and system), the driver's own.
std::vector<int> with_descendants(const std::vector<int>& roots);
int64_t rss_bytes(const std::vector<int>& pids);
// The part of their RSS they own: anonymous and shared memory (RssAnon and
// RssShmem), without the file-backed pages (the code of the binary and its
// libraries, mapped in as paths run for the first time, shared and
// reclaimable).
int64_t owned_rss_bytes(const std::vector<int>& pids);
double cpu_seconds(const std::vector<int>& pids);
double own_cpu_seconds();

// sse_tls.cpp
// A client context: TLS 1.2 or 1.3, the peer verified against cafile (and
// the URL's IP address against its names, in tls_bufferevent), ALPN offering
// `alpn` alone, no session cache (every connection a full handshake).
SSL_CTX* tls_client_ctx(const std::string& cafile, std::string_view alpn);
bufferevent* tls_bufferevent(event_base* base, int fd, SSL_CTX* ctx, const std::string& host);
// The protocol the server chose by ALPN ("" for none).
std::string tls_alpn(bufferevent* bev);
// --handshakes N: N connections, --connecting at a time, each a full
// handshake and one GET of --url with `Connection: close`; prints one JSON
// line; returns the exit status.
int run_handshakes(Run& r);

// sse_h2.cpp: one connection carrying `streams` (each Conn's index and
// channel set), the requests sent once it is open.
void h2_open(Run& r, const std::vector<Conn*>& streams, int source);

// sse_ws.cpp: the hold c (its index and channel set) as a WebSocket.
void ws_open(Run& r, Conn& c, int source);

}  // namespace sse
