// Server: the loop thread's owner of connections. It keeps the listeners and
// accepts, keeps the slot table, routes each request by longest mount
// prefix, writes answers, and wires the two units beside it: the hold table
// (holds.hpp, the loop side of holds) and the admin API (admin.hpp). A
// connection reads and parses itself: its HTTP/1.1 state machine is
// Server::Conn's (conn.hpp, http1_conn.cpp).
//
// DESIGN
// Loop thread only: everything in this class is created, read and changed on
// the thread that runs the Loop. Pool threads reach it through exactly two
// queues, each an MPSC queue plus an eventfd: the completion ring
// (on_completions_ready) and, with --realtime, the bus channel (on_bus_ready).
//
// A request: read -> parse (one at a time per connection; pipelined requests
// wait in the input buffer, so answers go out in order) -> route by longest
// mount prefix -> the mount's submit() queues a job on its pool -> the job's
// completion comes back through the ring -> written. A listener's routes
// (Routes) are its mounts: the client listeners' the applications', the
// admin listeners' one mount, the admin API, whose submit answers on the
// loop (serve_admin), at once or after a shared bus's round trip, through
// the same completion path and --request-timeout as a pool's answer; the
// admin routes take no WebSocket upgrade. While a connection's
// unsent output is over --output-high-water no further request of it is
// parsed (read backpressure); it is idle, for --keepalive-timeout, only once
// its last answer has drained; output that makes no progress for
// --write-timeout is cut.
//
// A hold: the pool thread queued an h frame on the bus channel before it
// posted the hold's completion. When that completion is handled, the loop
// drains the bus channel FIRST (on_bus_ready), so the frame has subscribed the
// slot (HoldTable::open) before the head is written; events that reach it
// before the head wait behind it. A hold completion whose slot has no
// subscription after the drain is an invariant break: logged, the head
// written, the connection closed (never a stream that hears nothing).
// When the client leaves (EOF, error, write timeout, a slow reader) the slot
// is released and unsubscribed at once, and its generation bumped so late
// frames and completions for it are dropped.
#pragma once
#include <event2/bufferevent.h>
#include <event2/listener.h>

#include <atomic>
#include <deque>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <unordered_map>
#include <vector>

#include "bus/channel.hpp"
#include "hold/hold.hpp"
#include "http/body_budget.hpp"
#include "http/cors.hpp"
#include "http/forwarded.hpp"
#include "http/message.hpp"
#include "http/parser.hpp"
#include "http/websocket.hpp"
#include "loop/loop.hpp"
#include "pool/completion.hpp"
#include "pool/metrics.hpp"
#include "pool/pool.hpp"
#include "server/admin.hpp"
#include "server/holds.hpp"

struct ssl_st;  // OpenSSL's SSL

namespace m0::server {
// A request refused past --max-body-total (503, with Retry-After).
inline constexpr uint64_t kMaxBodyTotal = uint64_t(256) << 20;  // --max-body-total's default
inline constexpr const char* kBodyTotalReason =
    "too much request body buffered in all (--max-body-total); try again";
class AccessLog;
struct WohState;
struct WsReader;
class TlsContext;
struct H2Stream;
struct AccessEntry;
}  // namespace m0::server

namespace m0::server {

// A unix socket listener's file: its mode (e.g. 0660) and owner (-1: the
// process's).
struct UnixSocketOptions {
    unsigned mode = 0660;
    int uid = -1, gid = -1;
};

// The binary's --hold-coalesce (a ServerConfig's own is 0, so that tests
// that drive the loop turn by turn see every flush).
inline constexpr double kHoldCoalesce = 0.001;

// WebSockets (ws_conn.cpp).
struct WsConfig {
    size_t max_message = 1024 * 1024;  // --ws-max-message: larger is closed 1009
    double ping_interval = 30;         // --ws-ping-interval: a silent client is pinged
    double pong_timeout = 10;          // --ws-pong-timeout: no answer, closed
    double close_timeout = 5;          // --ws-close-timeout: the close handshake's bound
    // --ws-origin, else --cors-origin: the pages that may open one.
    http::ws::OriginCheck origins;
    // --ws-over-http: path prefixes whose upgrades speak WebSocket-over-HTTP
    // to their view (ws_over_http.cpp).
    std::vector<std::string> over_http;
    bool no_deflate = false;  // --ws-no-deflate: permessage-deflate is never negotiated
};

struct ServerConfig {
    http::ParserLimits limits;
    double header_timeout = 10;  // a request's head, from its first byte (--header-timeout)
    // Its body, once the head is in: the longest pause between its bytes
    // (--body-timeout; nginx's client_body_timeout is the same rule).
    double body_timeout = 60;
    // Request bodies buffered at once in all (--max-body-total; 0: not
    // given, body_total() then says): the binary makes one budget every
    // loop's server shares; a server made without one makes its own.
    uint64_t max_body_total = 0;
    std::shared_ptr<http::BodyBudget> body_budget;
    // 256 MiB, or --max-body-size when that is larger (a configuration that
    // raised it before --max-body-total existed still starts).
    uint64_t body_total() const;
    double keepalive_timeout = 30;
    double write_timeout = 60;
    double request_timeout = 60;  // an answer not decided in time is 504 (--request-timeout)
    double grace = 10;
    size_t max_connections = 1024;
    double heartbeat = 15;
    size_t hold_buffer_limit = 1024 * 1024;
    // A connection's unsent output past which the server produces no more for
    // it: a streamed body's pool thread waits, and a pipelined request is not
    // parsed until the output drains to half of it (--output-high-water).
    size_t stream_high_water = hold::kStreamHighWater;
    // A hold whose unsent output stays over hold_buffer_limit this long (or
    // passes twice the limit) is a slow reader and is closed.
    double hold_drain_timeout = 5;
    // Holds' writes staged within this many seconds of the last flush's end
    // wait for the rest of it, so events published close together leave in
    // one sendmsg a connection (--hold-coalesce; the binary's default is
    // kHoldCoalesce). 0: every loop turn flushes at its end.
    double hold_coalesce = 0;
    std::string admin_key;    // bearer key for admin POST /publish; empty: refused
    bool admin_open = false;  // --admin-open: admin POSTs need no key (loopback only)
    // --publish-batch-max: the events one POST /publish array may carry (413 past it).
    size_t publish_batch_max = kPublishBatchMax;
    // Peers whose X-Forwarded-For / -Proto are believed (--forwarded-allow-ips);
    // none by default here, the binary's default is loopback.
    http::TrustedProxies forwarded_allow;
    // --cors-origin, --cors-credentials: the CORS fields of hold heads (none by default).
    http::CorsPolicy cors;
    bool reuse_port = false;  // --loops, --workers: the client listeners take SO_REUSEPORT
    // --certfile / --keyfile: TLS on every TCP client listener not bound
    // plain (--listen-plain), and on the admin one with admin_tls; null:
    // none. One context for every loop of the process (tls.hpp).
    std::shared_ptr<TlsContext> tls;
    bool admin_tls = false;  // --admin-tls
    // A TLS connection's first byte and handshake are due within this many
    // seconds of its accept (--tls-handshake-timeout); then it is closed.
    double tls_handshake_timeout = 10;
    // HTTP/2 (h2_conn.cpp): SETTINGS_MAX_CONCURRENT_STREAMS, the streams a
    // client may have open on one connection (--h2-max-concurrent-streams).
    // An EventSource holds one for as long as its page is open, and one page
    // may open dozens.
    uint32_t h2_max_streams = 256;
    // The stream errors a client may draw on one connection at once: a
    // RST_STREAM the server sends for the client's own frames (MadeYouReset,
    // CVE-2025-8671: each is a request dispatched, then reset by the
    // client's doing, past the concurrency limit and the library's bound on
    // the client's own RST_STREAMs). The budget refills by a tenth of it a
    // second; past it, GOAWAY ENHANCE_YOUR_CALM (--h2-max-stream-errors).
    uint32_t h2_max_stream_errors = 100;
    // Each stream's receive window (SETTINGS_INITIAL_WINDOW_SIZE; the
    // connection's is kH2ConnectionWindows times it): what of an upload a
    // client may send before it hears from the server (--h2-window).
    // HTTP/2's default, 65535 bytes, caps an upload at a window a round trip.
    uint32_t h2_window = 1 << 20;
    std::string server_header = "m0serve/" M0_VERSION;
    WsConfig ws;
};

// Hands a routed request to a pool: queued, or why the pool will not take it
// (the server answers 503: "server is shutting down", or "too many queued
// requests" with Retry-After).
using SubmitFn = std::function<Admission(SlotRef, http::Request&&)>;

// Before the first of several sockets binds `host:port` with SO_REUSEPORT
// (--loops, --workers): false, with `err` set, when a socket already listens
// there. SO_REUSEPORT lets any process of the same user join a port, and the
// kernel then hands it a share of the connections: a second m0serve started
// on the port would serve some of the clients and fail none. The check binds
// a socket of its own without SO_REUSEPORT, which the kernel refuses while
// anything listens on the port (with SO_REUSEADDR, so that connections left
// in TIME_WAIT by a process that has exited do not count), and closes it.
// Two servers started within the same instant can both pass it (nothing
// holds the port between the check and the bind). Any thread.
bool check_port_free(const std::string& host, uint16_t port, std::string& err);

// A listening socket bound to `host`:`port` (TCP; with `reuse_port`,
// SO_REUSEPORT: one of several on the port) or at `path` (unix, with
// `opts`; a stale socket file is replaced, a live one refused), for a
// Server to adopt_listener: what --workers' parent binds for its workers.
// -1 with `err` set when it cannot listen. Any thread.
int bind_tcp_listener(const std::string& host, uint16_t port, bool reuse_port, std::string& err);
int bind_unix_listener(const std::string& path, const UnixSocketOptions& opts, std::string& err);

class Server final : private HoldSink {
  public:
    // `bus` is null without --realtime. All references must outlive the server.
    Server(Loop& loop, ServerConfig cfg, CompletionRing& ring, bus::Bus* bus, Metrics& metrics);
    ~Server() override;
    Server(const Server&) = delete;
    Server& operator=(const Server&) = delete;

    // PREFIX "/" (or "") mounts everything; "/native" serves /native and /native/...
    // `preflights`: with --cors-origin, the loop answers the mount's CORS
    // preflights of GET and HEAD itself (http::CorsPolicy::preflight): a
    // mojo mount's. A WSGI app answers its own, as it answers everything but
    // hold heads.
    void add_mount(std::string prefix, SubmitFn submit, bool preflights = false);
    void add_pool(const Pool* pool) { admin_.add_pool(pool); }
    // Loop thread: the admin key read again (SIGHUP).
    void set_admin_key(std::string key) { admin_.set_key(std::move(key)); }
    // --access-log: one line per request as it ends; null (the default): none.
    // The log must outlive the server.
    void set_access_log(AccessLog* log) { access_log_ = log; }

    // Binds a TCP listener; false with `err` set (e.g. the port is in use).
    // With cfg.tls it serves TLS unless `plain` (or it is the admin one
    // without cfg.admin_tls).
    bool listen(const std::string& host, uint16_t port, bool admin, std::string& err,
                bool plain = false);
    // Binds a unix stream socket at `path`: a stale socket file (nobody
    // accepting) is replaced, a live one or any other file is an error. Its
    // mode and owner are set before it listens; the file is removed when the
    // listener closes.
    bool listen_unix(const std::string& path, const UnixSocketOptions& opts, bool admin,
                     std::string& err);
    // Serves on a socket that already listens (systemd socket activation); a
    // TCP one with TLS as listen() says. A unix socket is always plain.
    bool adopt_listener(int fd, bool admin, std::string& err, bool plain = false);
    // --loops: serves as one more loop of `first`'s process (called before
    // either loop runs). The same client listeners: a TCP one bound again on
    // its port (both with SO_REUSEPORT, cfg.reuse_port: the kernel spreads
    // connections over the loops), a unix or systemd one shared (a duplicate
    // of its socket: whichever loop is free accepts). One --max-connections
    // count for both (`first` keeps it: it must outlive this server). False
    // with `err` set.
    bool join(Server& first, std::string& err);
    // --loops: this server's slot generations start at `loop` << 24, so a
    // frame or completion that reached another loop than its own names no
    // slot there and is dropped, never delivered to that loop's connection
    // of the same index. Before the first connection.
    void tag_slots(uint32_t loop);
    // Admin POST /close (and Pushpin's close action) on every loop: `close`
    // gets the channel, and the number closed everywhere once every loop has
    // answered (on this loop's thread). Default: this loop's holds.
    void set_close_everywhere(AdminApi::CloseChannel close) { admin_.set_close(std::move(close)); }
    // The sockets this server listens on now: each fd and its name as
    // socket activation passes it ("admin"; "plain" for a TCP client one
    // kept plain under TLS; else "http"): a binary upgrade hands them over.
    std::vector<std::pair<int, std::string>> listener_fds() const;
    // A binary upgrade's new process serves on these listeners: their unix
    // socket files are its now, not removed when they close here.
    void leave_listener_files();
    // The port of the first TCP listener of that kind (0: none).
    uint16_t bound_port(bool admin) const;
    // Every listener of that kind: "HOST:PORT" or "unix:PATH", with " (TLS)"
    // after a TLS one.
    std::vector<std::string> listening(bool admin) const;

    // Adopts a connected socket (a socketpair end in tests); the server owns it.
    SlotRef adopt(int fd, std::string remote_addr, uint16_t remote_port, bool admin = false);

    // The two queues' handlers (also callable directly by tests, in any order).
    void on_completions_ready();
    void on_bus_ready();

    // SIGTERM: stop accepting, send each hold a retry hint and close it, let
    // in-flight requests finish within the grace period, then exit the loop.
    void shutdown();
    // Loop thread: the admin listeners stop accepting (a --workers worker
    // being retired: its replacement accepts on the same sockets).
    void close_admin_listeners() { close_listeners(true); }
    bool shutting_down() const { return shutting_down_; }
    // The loop ended because the grace period ran out (work may still run on
    // pool threads); and when shutdown() began (monotonic seconds).
    bool grace_expired() const { return grace_expired_; }
    double shutdown_at() const { return shutdown_at_; }
    // Admin POST /close: every hold on `channel` gets a retry hint and is
    // closed (clients reconnect with their Last-Event-ID). Returns how many.
    size_t close_channel(const std::string& channel);

    // Introspection (loop thread; tests and metrics).
    bool alive(SlotRef s) const { return find(s) != nullptr; }
    bool holding(SlotRef s) const;
    // Whether the connection keeps a request parser (a hold's does not).
    bool parsing(SlotRef s) const;
    // Whether the connection is a lean hold: no bufferevent, one event.
    bool lean(SlotRef s) const;
    bool subscribed(SlotRef s) const { return holds_.subscribed(s); }
    // WebSockets that hold a frame reader now (tests: most should not).
    size_t ws_readers() const;
    size_t connections() const { return open_; }
    // Bytes queued for the connection and not yet written to its socket.
    size_t unsent(SlotRef s) const;
    // Bytes read from the connection and not yet parsed (pipelined requests).
    size_t unread(SlotRef s) const;
    size_t holds() const { return holds_.holding().size(); }
    // The hold table's records, started or not (every subscription is one's:
    // subscriptions().members() is never more).
    size_t hold_records() const { return holds_.size(); }
    // HTTP/2 streams open on this loop's connections (each a slot).
    size_t h2_streams() const;
    // Of those, the streams with a DATA item on their session (an idle
    // hold's stream has none).
    size_t h2_data_items() const;
    const bus::Subscriptions& subscriptions() const { return holds_.subscriptions(); }
    // Shared event bytes that connection outputs hold a reference to (every
    // server in the process; any thread reads it): 0 once they are written or
    // their connections closed.
    static size_t output_references();
    // Tests only (loop thread): called after each slice of a flush of holds'
    // output with the connections flushed so far in that flush.
    std::function<void(size_t flushed)> on_flush_slice;
    // Tests and the bench (loop thread): TLS flushes SSL_write took whole at
    // once, and those whose record waits for the socket in the output.
    size_t tls_sent_now = 0, tls_sent_later = 0;

  private:
    struct Conn;
    // One listening socket. Kept until the server goes (connections point at
    // the one they came through); `ev` is freed when it stops accepting.
    struct Listener {
        Server* server = nullptr;
        evconnlistener* ev = nullptr;
        bool admin = false;
        std::string host;  // TCP: as given; unix: ""
        uint16_t port = 0;
        std::string path;         // unix: the socket file
        bool own_file = false;    // bound here: removed on close
        unsigned long inode = 0;  // the file bound, so another's is never removed
        bool reuse_port = false;  // bound here with SO_REUSEPORT: another loop may bind it too
        bool tls = false;         // its connections begin with a TLS handshake (tls_accept.cpp)
        std::string name() const;
    };
    // polling: a long-poll's answer waits for an event or its Grip-Timeout (poll.cpp).
    // h2: an HTTP/2 connection (h2_conn.cpp); its streams have phases of their own.
    enum class Phase : uint8_t {
        h2,
        reading,
        waiting,
        streaming,
        holding,
        polling,
        closing,
        lingering
    };

    // A TLS listener's connection before its first byte (tls_accept.cpp).
    struct TlsPeek;

    Conn* find(SlotRef s) const;
    // A connection on `fd`: plain (`ssl` null) or TLS, its handshake still to
    // come (the server owns `ssl`). Its timer is armed with `first_timeout`.
    SlotRef adopt_conn(int fd, std::string remote_addr, uint16_t remote_port, bool admin,
                       ssl_st* ssl, double first_timeout);
    // Whether a TCP listener of that kind serves TLS.
    bool tls_for(bool admin, bool plain) const;
    // A TLS listener's connection: its first byte is looked at before any
    // handshake (a plain HTTP request is answered 400); both within
    // --tls-handshake-timeout of now (tls_accept.cpp).
    void start_tls(const Listener& l, int fd, std::string remote_addr, uint16_t remote_port);
    static void on_peek(evutil_socket_t, short, void*);
    void end_peek(TlsPeek& p, bool close_fd);
    void close_peeks();           // the destructor: every peek's socket closed
    void tls_connected(Conn& c);  // BEV_EVENT_CONNECTED: the handshake is done
    SlotRef alloc_slot();
    static void on_accept(evconnlistener*, evutil_socket_t, sockaddr*, int, void*);
    static void on_accept_error(evconnlistener*, void*);
    // Starts accepting on `fd` (bound and listening); false with `err` set.
    bool add_listener(std::unique_ptr<Listener> l, int fd, std::string& err);
    void close_listeners(bool admin);
    // At shutdown, before the client listeners close: what already waits in
    // their backlogs is accepted (and answered, then closed, as the drain does
    // with a new connection) rather than reset by the close.
    void accept_backlog();
    void accept_fd(Listener& l, evutil_socket_t fd, sockaddr* addr);
    void pause_accepting(int err);
    void resume_accepting();

    // The router: a request Conn::process_input parsed, checked (an
    // upgrade), routed by longest prefix and submitted to its mount.
    void dispatch(Conn& c, http::Request req);
    struct MountEntry;
    struct Routes;
    // The request's peer, scheme and server fields from its connection
    // (X-Forwarded-* from a trusted proxy), as every protocol dispatches it.
    void prepare_request(const Conn& c, http::Request& req);
    // The mount that serves the request, its SCRIPT_NAME and PATH_INFO set;
    // null: none does.
    const MountEntry* route(const Routes& routes, http::Request& req) const;
    // The admin mount's submit: the admin API answers on the loop, at once
    // or (a publish on a shared bus) after a round trip.
    Admission serve_admin(SlotRef slot, http::Request&& req);
    void handle_completion(Completion& comp);
    void finish_hold_head(Conn& c, http::Response& r);
    // A long-poll (poll.cpp): its h frame came (the subscription is made),
    // its handler's answer is held until an event or its timeout answers.
    void finish_poll(Conn& c, http::Response& r);
    void poll_timed_out(Conn& c);
    void close_conn(Conn& c);
    void sse_peer_frame(bus::HoldFrame& f);
    // Asks the bus for a hold's replay; the answer goes to holds_.replayed.
    void request_replay(SlotRef slot, const std::vector<std::string>& channels, uint64_t after,
                        uint64_t upto, bool report_gap);
    // The bus's resync hook: every hold is replayed from its last id.
    void resync_holds();
    void drop_hold(SlotRef slot);
    // HoldSink
    size_t write(SlotRef slot, std::string_view bytes) override;
    size_t write_shared(SlotRef slot, const SharedBytes& bytes) override;
    size_t backlog(SlotRef slot) const override;
    void close_after_write(SlotRef slot) override;
    void answer(SlotRef slot, const bus::PublishFrame* event) override;  // poll.cpp
    void check_drained();

    // HTTP/2 (h2_conn.cpp: the connection and its session; h2_stream.cpp:
    // a stream's request, answers and hold output). nghttp2's callbacks:
    struct H2Io;
    struct H2Data;
    // A plain connection's first bytes are the client preface (prior
    // knowledge): true when HTTP/2 took it, or waits for the rest of them.
    bool h2_preface(Conn& c);
    // After the TLS handshake: ALPN chose h2.
    static bool alpn_h2(const Conn& c);
    void h2_start(Conn& c);
    void h2_read(Conn& c);
    // The session's frames into the output; closes the connection when the
    // session is over.
    void h2_flush(Conn& c);
    // nghttp2_session_send for `c`; on a plain connection whose output is
    // empty the frames are gathered and written at once (h2_conn.cpp).
    int h2_send(Conn& c);
    // A stream error the client caused, counted against
    // --h2-max-stream-errors: false once the budget is spent (the
    // connection then ends with GOAWAY ENHANCE_YOUR_CALM at its next flush).
    bool h2_stream_error(Conn& c);
    void h2_open_stream(Conn& c, int32_t id);
    void h2_close_stream(Conn& c, int32_t id);
    void h2_close_streams(Conn& c);  // close_conn: each stream's slot released
    H2Stream* find_stream(SlotRef s) const;
    // The connection's timer is due by `at` (monotonic) at the latest.
    void h2_arm(Conn& c, double at);
    void h2_tick(Conn& c);  // the connection's timer: streams' deadlines, idleness
    void h2_expire(Conn& c, H2Stream& st);
    void h2_shutdown(Conn& c);  // the drain: GOAWAY, holds' retry hints
    void h2_dispatch(Conn& c, H2Stream& st);
    void h2_refuse(Conn& c, H2Stream& st, int status, std::string_view reason);
    // Charges a stream's body to --max-body-total: its declared
    // content-length checked against what is left at the head (`more` 0,
    // nothing reserved), then `more` bytes arriving; false (counted) when it
    // does not fit.
    bool h2_charge_body(H2Stream& st, size_t more);
    void h2_completion(H2Stream& st, Completion& comp);
    // HEADERS for `r`, with content-length `length`, DATA from the stream's
    // queue (or file) when `body`.
    void h2_submit(Conn& c, H2Stream& st, http::Response& r, std::optional<uint64_t> length,
                   bool body);
    void h2_whole(Conn& c, H2Stream& st, http::Response& r);
    void h2_hold_head(Conn& c, H2Stream& st, http::Response& r);
    // A long-poll on a stream (poll.cpp): the handler's answer held until an
    // event or its timeout; then the stream's answer.
    void h2_poll(Conn& c, H2Stream& st, http::Response& r);
    void h2_answer(H2Stream& st, const bus::PublishFrame* event);
    // Bytes for the stream's DATA; its backlog afterwards.
    size_t h2_queue(Conn& c, H2Stream& st, SharedBytes bytes);
    void h2_resume(Conn& c, H2Stream& st);  // its data provider goes on, at the flush
    // A hold's stream with bytes queued or its end due and no DATA item: one.
    void h2_submit_data(Conn& c, H2Stream& st);
    size_t h2_write(SlotRef slot, const SharedBytes& bytes);  // HoldSink for a stream
    void h2_close_after_write(SlotRef slot);

    // The hold table's writes of this loop turn (hold_output.cpp): staged on
    // the connection, then sent at the turn's end, one sendmsg a connection;
    // what the socket does not take goes to the output by reference.
    static void on_flush(evutil_socket_t, short, void*);
    void schedule_flush();
    void flush_staged();
    void flush_staged(Conn& c);
    // A TLS connection with an empty output: its staged bytes through its
    // SSL at once; the bytes taken from `staged` (the rest goes to `out`).
    size_t tls_send_now(Conn& c, evbuffer* out);
    // Lean holds (hold_output.cpp): a hold whose head has left drops its
    // bufferevent for one event and a queue of shared bytes.
    void go_lean(Conn& c);
    void drop_lean(Conn& c);  // close_conn: its references go, its socket closes
    static void on_io(evutil_socket_t, short, void*);
    bool lean_send(Conn& c);  // false: the socket failed
    void lean_watch(Conn& c);
    void lean_sent(Conn& c);
    // Bytes in the connection's output (not counting staged ones).
    static size_t output_length(const Conn& c);
    // The access log (server_access.cpp): an entry begun at dispatch (or at an
    // answer to a request that never parsed), its answer noted, written when
    // the request ends or its connection closes.
    void access_begin(Conn& c, const http::Request& req);
    void access_answer(Conn& c, int status, size_t head_bytes);
    void access_bytes(Conn& c, size_t n);
    void access_end(Conn& c);
    // The same on an entry of its own (an HTTP/2 stream's); `slot` names the
    // hold whose events a hold's line counts.
    void access_begin(std::unique_ptr<AccessEntry>& a, const http::Request& req, SlotRef slot);
    void access_answer(std::unique_ptr<AccessEntry>& a, const std::string& remote, int status,
                       size_t head_bytes);
    void access_end(std::unique_ptr<AccessEntry>& a, SlotRef slot);
    // Why a handler's answer cannot be written as it is (nullptr: it can).
    static const char* invalid_answer(const http::Response& r);
    const std::string& date_header();

    // WebSockets (ws_conn.cpp). wslay's callbacks, with access to the server:
    struct WsIo;
    // The upgrade request's check (RFC 6455 §4.2.1) before it is dispatched:
    // false when it was refused (answered 400, 426 or 403, closing).
    bool ws_handshake(Conn& c, http::Request& req);
    // The 101 head of a WebSocket hold (the handler's answer `r` gives its
    // subprotocol and x-worker; its body is dropped).
    std::string ws_head(Conn& c, http::Response& r);
    // The 101 is queued: the client's frames are read from now on.
    void ws_open(Conn& c);
    // The connection's frame reader (wslay's context), made if it has none;
    // nullptr when out of memory.
    WsReader* ws_reader(Conn& c);
    // Frees the frame reader when nothing of the client's is half read and
    // nothing of wslay's is left to send (ws_conn.hpp, WsReader).
    void ws_release(Conn& c);
    // Reads the client's frames (a bounded amount); may close the connection.
    void ws_read(Conn& c);
    // After wslay read (`rv`: what wslay_event_recv returned): its frames
    // staged, and the close handshake or the client's departure acted on.
    void ws_settle(Conn& c, int rv);
    // A close frame the hold table wrote: wslay sends and reads nothing more.
    void ws_quiet(Conn& c);
    // A data message from the client (dropped in this slice).
    void on_ws_message(Conn& c, bool text, std::string_view payload);
    // A control frame from the client (ping, pong, close): a WebSocket-over-HTTP
    // view hears of it.
    void on_ws_control(Conn& c, uint8_t opcode, std::string_view payload, uint16_t code);
    // Pings silent WebSockets, closes those that do not answer.
    void ws_tick();
    double ws_tick_seconds() const;
    // WebSocket-over-HTTP (ws_over_http.cpp).
    bool over_http(const http::Request& req) const;  // under a --ws-over-http prefix
    // The upgrade `req` (checked) goes to the view behind `submit` as OPEN.
    void woh_start(Conn& c, http::Request req, const SubmitFn& submit);
    // The queued events as one request, unless one is in flight; false when
    // the pool refused it (the connection is answered or closing).
    bool woh_send(Conn& c);
    void woh_event(Conn& c, std::string type, std::optional<std::string> content);
    void woh_answer(Conn& c, Completion& comp);
    bool woh_open(Conn& c, const http::Response& answer);
    // Carries out one event of the view's answer; false when it ended the connection.
    bool woh_carry(Conn& c, const http::woh::Event& e);
    bool woh_control(Conn& c, std::string_view json);
    void woh_subscribe(Conn& c, const std::string& channel, bool on);
    static std::vector<http::woh::Control> woh_controls(const http::Response& answer);
    static void set_meta(WohState& o, std::string_view name, std::string_view value);
    void woh_fail(Conn& c, const std::string& why);
    void woh_close(Conn& c, uint16_t code, std::string_view reason);
    void woh_gone(Conn& c);  // the connection is released: DISCONNECT
    void woh_keepalive(Conn& c, double now);
    // The pool would not take the request: 503, closing.
    void refuse_admission(Conn& c, bool full);

    Loop& loop_;
    ServerConfig cfg_;
    CompletionRing& ring_;
    bus::Bus* bus_;
    Metrics& metrics_;
    HoldTable holds_;
    AdminApi admin_;
    AccessLog* access_log_ = nullptr;  // loop thread
    http::TrustedProxies trust_all_;   // for unix socket peers ("*")

    struct MountEntry {
        std::string prefix;
        SubmitFn submit;
        bool preflights = false;  // add_mount's
    };
    // Whether the loop answers a request to `mount` itself, as the CORS
    // preflight of a GET that may be held: add_mount's `preflights`, and the
    // policy (--cors-origin) gave the request a preflight answer when it
    // dispatched it (`asked`, http::CorsPolicy::ask: a GET's or HEAD's
    // only); one of another method is the mount's to answer.
    bool answers_preflight(const MountEntry& mount, const http::CorsAsk* asked) const;
    // What a listener's connections are served: its mounts, longest prefix
    // first, and whether an upgrade to WebSocket is checked and may be held.
    // Fixed before the loop runs (add_mount, the constructor); loop thread.
    struct Routes {
        std::vector<MountEntry> mounts;
        bool websocket = true;
    };
    Routes routes_;  // the client listeners': the applications' mounts
    // The admin listeners': one mount, the admin API, served on the loop
    // (serve_admin) and answered through the completion path as a pool's
    // answer is; no WebSocket.
    Routes admin_routes_;
    const Routes& routes_for(const Conn& c) const;

    // A slot names a connection, or an HTTP/2 stream (owned by its
    // connection's H2State).
    struct SlotEntry {
        uint32_t gen = 1;
        std::unique_ptr<Conn> conn;
        H2Stream* stream = nullptr;
    };
    std::vector<SlotEntry> slots_;
    uint32_t first_gen_ = 1;  // a new index's first generation (tag_slots)
    std::vector<uint32_t> free_slots_;
    size_t open_ = 0;  // connections, admin ones too
    // Client connections (--max-connections): this server's count, or, for a
    // server that joined another loop's (join()), that one's; any loop thread.
    std::atomic<size_t> own_clients_{0};
    std::atomic<size_t>* open_clients_ = &own_clients_;

    std::vector<std::unique_ptr<Listener>> listeners_;         // loop thread
    std::unordered_map<int, std::unique_ptr<TlsPeek>> peeks_;  // loop thread: by socket
    std::unique_ptr<Timer> accept_pause_;  // loop thread: re-enables the paused listeners
    // accept() failing for want of descriptors (the process's, so one episode
    // for every loop that joined this one), not yet resumed; any loop thread.
    std::atomic<bool> own_episode_{false};
    std::atomic<bool>* accept_episode_ = &own_episode_;
    std::unique_ptr<FdWatcher> ring_watch_, bus_watch_;
    std::unique_ptr<Timer> heartbeat_timer_, grace_timer_;
    // Draining with the admin listener while other loops still have clients:
    // looks again (check_drained) until they have none. Loop thread.
    std::unique_ptr<Timer> drain_recheck_;
    std::unique_ptr<Timer> keepalive_timer_;  // loop thread: HoldTable::keepalive each second
    std::unique_ptr<Timer> ws_timer_;         // loop thread: ws_tick while WebSockets are open
    std::vector<SlotRef> ws_slots_;           // loop thread: WebSockets (some may be gone)
    event* flush_ev_ = nullptr;               // loop thread: runs flush_staged() at the turn's end
    double last_flush_ = -1e9;                // loop thread: when the last flush ended (monotonic)
    std::vector<SlotRef> flush_list_;         // loop thread: connections with staged bytes
    size_t flush_next_ = 0;                   // loop thread: flush_list_'s first not yet flushed
    size_t flush_end_ = 0;                    // loop thread: the end of what this flush sends
    bool shutting_down_ = false;
    bool exited_ = false;  // check_drained() ended the loop
    bool grace_expired_ = false;
    double shutdown_at_ = 0;
    std::minstd_rand rng_{std::random_device{}()};
    time_t date_time_ = 0;
    std::string date_;
    std::string tls_gather_;  // loop thread: tls_send_now's one record
};

}  // namespace m0::server
