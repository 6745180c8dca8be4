// Server::Conn: one connection, its state and its HTTP/1.1 state machine
// (http1_conn.cpp: reading, parsing, backpressure, keep-alive, half-close,
// timeouts, the closing handshake; writer.cpp: the answers it writes). The
// server's other files reach its state for a hold's output
// (hold_output.cpp) and for the protocols it may switch to (h2_conn.cpp,
// ws_conn.cpp). Loop thread only;
// private to the server folder.
#pragma once
#include <event2/bufferevent.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "http/access.hpp"
#include "server/h2_conn.hpp"
#include "server/server.hpp"
#include "server/ws_conn.hpp"

namespace m0::server {

// Between looks for a departed client's reset (Server::probe_departure).
inline constexpr double kProbeSeconds = 0.05;

// A long-poll (GRIP's Grip-Hold: response) while it waits: the handler's own
// answer, sent at `deadline` unless an event answers first (poll.cpp).
struct PollState {
    uint32_t timeout = 0;  // Grip-Timeout, from the h frame
    http::Response held;   // the handler's answer, once its completion came
};

// A TLS listener's connection until its first byte (tls_accept.cpp).
struct Server::TlsPeek {
    Server* server = nullptr;
    int fd = -1;
    event* ev = nullptr;  // the socket's EV_READ, with the timeout
    const Listener* via = nullptr;
    std::string remote_addr;
    uint16_t remote_port = 0;
    double deadline = 0;  // monotonic: the first byte and the handshake are due
};

// Every hold keeps one, so its fields are packed (the small ones together).
struct Server::Conn {
    Server* server = nullptr;
    SlotRef slot;
    int fd = -1;  // the socket
    Phase phase = Phase::reading;
    uint8_t version_minor = 1;
    bool admin = false;
    bool in_process = false;  // inside process_input (no re-entry)
    bool keep_alive = true;
    bool dispatched = false;  // a request came on it: idle now, it is an idle keep-alive one
    bool head_request = false;
    bool peer_eof = false;       // the client half-closed: answer what it sent, then close
    bool read_paused = false;    // output over the high-water mark: the next request waits
    bool idle_on_drain = false;  // an answer is draining: the keep-alive timer starts after
    bool chunked = false;        // the streaming body is chunk-framed
    bool stream_body = false;    // the streaming answer carries a body (not HEAD, 1xx, 204, 304)
    // A streaming body framed by Content-Length: the bytes it may still carry.
    std::optional<uint64_t> stream_left;
    bool io_writing = false;  // lean: `io` is armed with EV_WRITE
    // TLS (an OpenSSL bufferevent): never lean, never written to its socket
    // but through the bufferevent (hold_output.cpp).
    bool tls = false;
    bool tls_pending = false;  // TLS: its handshake has not completed (tls_connected)
    uint16_t remote_port = 0;
    // Until a hold goes lean: the socket's reads, writes and write timeout.
    bufferevent* bev = nullptr;
    event* timer = nullptr;  // made on demand (arm_timer); a lean hold has none
    // Reading phase only: a hold parses nothing more (its answer closes the
    // connection), so the parser, most of a Conn's size, goes when it starts.
    std::unique_ptr<http::RequestParser> parser;
    double deadline = 0;  // waiting: when --request-timeout answers 504 (monotonic)
    std::shared_ptr<StreamState> stream;
    std::string remote_addr;
    // The request's Origin (with --cors-origin), kept for a hold head's CORS
    // fields, and a preflight's answer (http::CorsAsk).
    std::unique_ptr<http::CorsAsk> cors;
    const Listener* via = nullptr;        // the listener it came through (null: adopted)
    std::unique_ptr<AccessEntry> access;  // --access-log only
    std::unique_ptr<PollState> poll;      // a long-poll only, from its h frame to its answer
    std::unique_ptr<WsState> ws;          // a WebSocket only, from its handshake's check
    std::unique_ptr<H2State> h2;          // HTTP/2 only (Phase::h2): the session, its streams
    // Holding: what the hold table wrote this loop turn, not yet in the
    // output; Server::flush_staged sends it in one sendmsg at the turn's end
    // (hold_output.cpp). References to the shared event bytes, not copies.
    std::vector<SharedBytes> staged;  // loop thread
    size_t staged_bytes = 0;          // loop thread: their total size
    // A lean hold (go_lean, once its head has left): no bufferevent. `io`
    // watches the socket: EV_READ always (what the client sends is dropped;
    // its leaving is seen), EV_WRITE with --write-timeout while `out` holds
    // what the socket did not take (references to the shared bytes, out[0]
    // from out_off on).
    event* io = nullptr;
    std::vector<SharedBytes> out;  // loop thread
    size_t out_off = 0;            // loop thread: bytes of out[0] already sent
    size_t out_bytes = 0;          // loop thread: unsent bytes in `out`

    explicit Conn(http::ParserLimits limits)
        : parser(std::make_unique<http::RequestParser>(limits)) {}

    // ---- the HTTP/1.1 state machine (http1_conn.cpp) ----
    // The bufferevent's callbacks (`arg` is the Conn) and the timer's.
    static void on_read(bufferevent*, void* arg);
    static void on_write(bufferevent*, void* arg);
    static void on_event(bufferevent*, short what, void* arg);
    static void on_timer(evutil_socket_t, short, void* arg);
    // Parses what was read, one request at a time, each to Server::dispatch;
    // may close the connection (`this` is then gone).
    void process_input();
    // Reading resumes unless the output is over the high-water mark or the
    // pipelined input over its bound.
    void resume_reading();
    // The output is over --output-high-water.
    bool output_full() const;
    // The answer is written: the next request, or the close.
    void finish_request();
    // Answers `status` with `reason` and closes; `retry`: with Retry-After.
    void fail_request(int status, std::string_view reason, bool retry = false);
    // Charges the body read so far of the request being read to
    // --max-body-total, once its declared length is seen to fit what is
    // left (nothing reserved for it); false when either does not fit.
    bool charge_body();
    void close_after_write();
    // Closing once the output is out: stop sending, read until the client
    // closes or the linger's seconds pass.
    void begin_linger();
    // The connection's one timer: made on demand, re-armed, stopped.
    void arm_timer(double seconds);
    void disarm_timer();
    void on_timeout();
    // A FIN while a request waits: a 100 Continue looks for the reset that
    // tells a departure from a half-close.
    void probe_departure();
    bool peer_reset() const;

    // ---- writing answers (writer.cpp) ----
    // The head: the answer's fields, with framing, Date, Server and
    // Connection the server's own.
    std::string head_text(const http::Response& r, std::string_view framing) const;
    // A whole answer (a 502 in its place when it cannot be written).
    void send_whole(http::Response& r);
    // `head` then `body` into the output. A plain connection whose output is
    // empty writes them to its socket at once (one writev): the answer leaves
    // this loop turn with no write event enabled and disabled around it (two
    // epoll_ctl an answer); what the socket does not take goes to the output.
    void send_now(std::string_view head, std::string_view body);
    // A whole answer whose body is a file range (wsgi.file_wrapper): the head
    // framed by the file's length, the file sent by sendfile(2); a cut file
    // (short of the declared length) closes the connection after it.
    void send_file(http::Response& r, FileBody& f);
    // A streamed answer: its head, its chunks (never past a declared
    // Content-Length), its end (short of that length, a close).
    void start_stream(http::Response& r, std::shared_ptr<StreamState> st);
    void stream_chunk(std::string& data);
    void end_stream(bool aborted);
    // Answers 502 in place of an answer that cannot be written, and closes.
    void refuse_answer(const char* why);
};

}  // namespace m0::server
