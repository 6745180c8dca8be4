// Server: the loop side of m0serve. Connections, slots, routing, writing
// responses, holds and the bus's subscription table.
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
// completion comes back through the ring -> written.
//
// A hold: the pool thread queued an h frame on the bus channel before it
// posted the hold's completion. When that completion is handled, the loop
// drains the bus channel FIRST (on_bus_ready), so the frame has subscribed the
// slot before the head is written; events that reach a subscription whose head
// is not out yet wait in HoldState::pending behind it. A hold completion whose
// slot has no subscription after the drain is an invariant break: logged, the
// head written, the connection closed (never a stream that hears nothing).
// When the client leaves (EOF, error, write timeout, output over
// --hold-buffer-limit) the slot is unsubscribed and released at once, and its
// generation bumped so late frames and completions for it are dropped.
#pragma once
#include <event2/bufferevent.h>
#include <event2/listener.h>

#include <deque>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <unordered_set>
#include <vector>

#include "bus/channel.hpp"
#include "bus/subscriptions.hpp"
#include "http/message.hpp"
#include "http/metrics.hpp"
#include "http/parser.hpp"
#include "loop/loop.hpp"
#include "pool/completion.hpp"

namespace m0 {
class Pool;
}

namespace m0::http {

struct ServerConfig {
    ParserLimits limits;
    double header_timeout = 10;
    double keepalive_timeout = 30;
    double write_timeout = 60;
    double grace = 10;
    size_t max_connections = 1024;
    double heartbeat = 15;
    size_t hold_buffer_limit = 1024 * 1024;
    size_t stream_high_water = 256 * 1024;
    std::string admin_key;  // bearer key for admin POST /publish; empty: refused
    std::string server_header = "m0serve/" M0_VERSION;
};

// Hands a routed request to a pool; false when the pool will not take it.
using SubmitFn = std::function<bool(SlotRef, Request&&)>;

class Server {
  public:
    // `bus` is null without --realtime. All references must outlive the server.
    Server(Loop& loop, ServerConfig cfg, CompletionRing& ring, bus::BusChannel* bus,
           Metrics& metrics);
    ~Server();
    Server(const Server&) = delete;
    Server& operator=(const Server&) = delete;

    // PREFIX "/" (or "") mounts everything; "/native" serves /native and /native/...
    void add_mount(std::string prefix, SubmitFn submit);
    void add_pool(const Pool* pool) { pools_.push_back(pool); }

    // Binds a listener; false with `err` set (e.g. the port is in use).
    bool listen(const std::string& host, uint16_t port, bool admin, std::string& err);
    uint16_t bound_port(bool admin) const { return admin ? admin_port_ : port_; }

    // Adopts a connected socket (a socketpair end in tests); the server owns it.
    SlotRef adopt(int fd, std::string remote_addr, uint16_t remote_port, bool admin = false);

    // The two queues' handlers (also callable directly by tests, in any order).
    void on_completions_ready();
    void on_bus_ready();

    // SIGTERM: stop accepting, send each hold a retry hint and close it, let
    // in-flight requests finish within the grace period, then exit the loop.
    void shutdown();
    bool shutting_down() const { return shutting_down_; }
    // Admin POST /close: every hold on `channel` gets a retry hint and is
    // closed (clients reconnect with their Last-Event-ID). Returns how many.
    size_t close_channel(const std::string& channel);

    // Introspection (loop thread; tests and metrics).
    bool alive(SlotRef s) const { return find(s) != nullptr; }
    bool holding(SlotRef s) const;
    bool subscribed(SlotRef s) const { return subs_.subscribed(s); }
    size_t connections() const { return open_; }
    size_t holds() const { return holding_.size(); }
    const bus::Subscriptions& subscriptions() const { return subs_; }

  private:
    struct Conn;
    struct HoldState;
    enum class Phase { reading, waiting, streaming, holding, closing, lingering };

    Conn* find(SlotRef s) const;
    SlotRef alloc_slot();
    static void on_accept(evconnlistener*, evutil_socket_t, sockaddr*, int, void*);
    static void on_admin_accept(evconnlistener*, evutil_socket_t, sockaddr*, int, void*);
    static void on_accept_error(evconnlistener*, void*);
    void accept_fd(evutil_socket_t fd, sockaddr* addr, bool admin);
    void pause_accepting(int err);
    void resume_accepting();
    static void on_read(bufferevent*, void*);
    static void on_write(bufferevent*, void*);
    static void on_event(bufferevent*, short, void*);
    static void on_timer(evutil_socket_t, short, void*);

    void process_input(Conn& c);
    void dispatch(Conn& c, Request req);
    Response admin_handle(const Request& req);
    void handle_completion(Completion& comp);
    void send_whole(Conn& c, Response& r);
    void start_stream(Conn& c, Response& r, std::shared_ptr<StreamState> st);
    void stream_chunk(Conn& c, std::string& data);
    void end_stream(Conn& c, bool aborted);
    void finish_hold_head(Conn& c, Response& r);
    void finish_request(Conn& c);
    void fail_request(Conn& c, int status, std::string_view reason);
    void close_after_write(Conn& c);
    void close_conn(Conn& c);
    void arm_timer(Conn& c, double seconds);
    void on_timeout(Conn& c);
    void sse_peer_frame(bus::HoldFrame& f);
    void fanout(bus::PublishFrame& f);
    bool write_hold(Conn& c, std::string_view bytes);
    void drop_hold(Conn& c);
    void heartbeat();
    void check_drained();
    std::string head_text(const Conn& c, const Response& r, std::string_view framing);
    const std::string& date_header();

    Loop& loop_;
    ServerConfig cfg_;
    CompletionRing& ring_;
    bus::BusChannel* bus_;
    Metrics& metrics_;
    std::vector<const Pool*> pools_;

    struct MountEntry {
        std::string prefix;
        SubmitFn submit;
    };
    std::vector<MountEntry> mounts_;  // longest prefix first

    struct SlotEntry {
        uint32_t gen = 1;
        std::unique_ptr<Conn> conn;
    };
    std::vector<SlotEntry> slots_;
    std::vector<uint32_t> free_slots_;
    size_t open_ = 0;          // connections, admin ones too
    size_t open_clients_ = 0;  // client connections (--max-connections)
    bus::Subscriptions subs_;
    std::unordered_set<uint32_t> holding_;  // slot indices in Phase::holding

    evconnlistener* listener_ = nullptr;
    evconnlistener* admin_listener_ = nullptr;
    uint16_t port_ = 0, admin_port_ = 0;
    std::string listen_host_;
    std::unique_ptr<Timer> accept_pause_;  // loop thread: re-enables the paused listeners
    bool accept_episode_ = false;          // loop thread: accept() failing, not yet resumed
    std::unique_ptr<FdWatcher> ring_watch_, bus_watch_;
    std::unique_ptr<Timer> heartbeat_timer_, grace_timer_;
    bool shutting_down_ = false;
    bool exited_ = false;  // check_drained() ended the loop
    std::minstd_rand rng_{std::random_device{}()};
    time_t date_time_ = 0;
    std::string date_;
};

}  // namespace m0::http
