// An HTTP/2 connection's own state (h2_conn.cpp, h2_stream.cpp): the
// nghttp2 session that reads and writes its frames, and its streams, each
// a slot of its own. Loop thread only; private to the server folder.
//
// DESIGN
// The connection (a Conn in Phase::h2) owns the socket, its bufferevent and
// the session; a stream is what a slot names: the request path addresses it
// as it addresses an HTTP/1.1 connection (its completions, its hold's
// writes), through Server::SlotEntry::stream. Its output is a queue of
// bytes (`out`, references to shared event bytes, as a lean hold's) that
// the session's data provider takes as the stream's flow-control window
// and the connection's output allow: the queue is the stream's backlog, so
// a stream whose window stays closed is a slow reader by the hold rule,
// while the others on the connection go on.
#pragma once
#include <nghttp2/nghttp2.h>

#include <memory>
#include <optional>
#include <unordered_map>
#include <vector>

#include "http/cors.hpp"
#include "http/message.hpp"
#include "loop/slot.hpp"
#include "pool/completion.hpp"
#include "server/access_log.hpp"
#include "server/holds.hpp"

namespace m0::server {

// A connection's receive window, in streams' windows (--h2-window's).
inline constexpr uint32_t kH2ConnectionWindows = 16;

struct H2Stream {
    enum class State : uint8_t {
        receiving,  // its request's headers and body are arriving
        waiting,    // dispatched: its pool's answer is due by `deadline`
        answering,  // a response (whole or streamed) is being sent
        holding,    // a hold: events are written as they come
        polling,    // a long-poll: an event, or its Grip-Timeout, answers it
        closing,    // its last bytes are queued: RST_STREAM if not sent by `deadline`
    };
    int32_t id = 0;
    SlotRef slot;  // the stream's own slot
    SlotRef conn;  // its connection's
    State state = State::receiving;
    bool head_request = false;
    bool submitted = false;  // its response HEADERS are queued on the session
    bool deferred = false;   // the data provider waits for bytes (resume_data)
    // A DATA item of ours is on the session (a data provider attached), and
    // its provider has said EOF (the item goes once that frame is sent). A
    // hold's item lasts while its queue has bytes: an idle hold keeps none
    // (nghttp2's item is about 150 bytes), the next event submits one.
    bool item = false;
    bool item_ending = false;
    bool eof = false;  // after `out`, END_STREAM
    int refuse = 0;    // receiving: its answer once the request ends (431, 413)
    // Receiving: its head, then its body; gone once dispatched (a hold keeps
    // nothing of its request).
    std::unique_ptr<http::Request> req;
    // Monotonic: its HEADERS began (--header-timeout); once they have ended
    // (`in_body`), its body's last DATA (--body-timeout: the longest pause).
    double born = 0;
    bool in_body = false;
    // The request's Origin (with --cors-origin), for a hold head's CORS
    // fields, and a preflight's answer (http::CorsAsk).
    std::unique_ptr<http::CorsAsk> cors;
    size_t header_bytes = 0;  // receiving: decoded header bytes (--max-header-size)
    size_t header_count = 0;  // receiving: header fields (--max-headers)
    // Queued for DATA frames: out[out_head] from out_off on, then the rest
    // (a vector: an idle hold's empty queue owns no memory).
    std::vector<SharedBytes> out;
    size_t out_head = 0;
    size_t out_off = 0;
    size_t out_bytes = 0;                 // unsent bytes in `out`
    std::shared_ptr<StreamState> stream;  // a streamed answer's producer
    std::shared_ptr<FileBody> file;       // a file answer, read as the window allows
    // A long-poll (GRIP's Grip-Hold: response), from its h frame: its
    // Grip-Timeout, then the handler's answer it holds until an event.
    uint32_t poll_timeout = 0;
    std::unique_ptr<http::Response> poll_held;
    bool poll = false;  // its h frame said response: a long-poll
    // monotonic, 0 for none: waiting, its answer (--request-timeout);
    // polling, its Grip-Timeout;
    // answering and holding, progress while `out` holds bytes
    // (--write-timeout); closing, its last bytes (--hold-drain-timeout).
    double deadline = 0;
    std::unique_ptr<AccessEntry> access;  // --access-log only
};

struct H2State {
    nghttp2_session* session = nullptr;
    std::unordered_map<int32_t, std::unique_ptr<H2Stream>> streams;
    bool flush_listed = false;  // on the server's flush list (a stream wrote)
    bool going_away = false;    // GOAWAY sent: closes once its streams end
    // Stream errors the client caused (Server::h2_stream_error): the budget
    // left, when it was counted (monotonic), and whether it ran out.
    double error_budget = -1;  // -1: full, not yet counted
    double error_at = 0;
    bool calm = false;
    double idle_since = 0;  // monotonic: its last stream ended (--keepalive-timeout)
    double timer_at = 0;    // monotonic: when the connection's timer is due (h2_tick)
    // Holds whose backlog fell under --hold-buffer-limit in the data
    // provider: told to the hold table after the session's send.
    std::vector<SlotRef> drained;

    H2State() = default;
    H2State(const H2State&) = delete;
    H2State& operator=(const H2State&) = delete;
    ~H2State() {
        if (session) nghttp2_session_del(session);
    }
};

// The client preface of HTTP/2 with prior knowledge (RFC 9113 §3.4).
inline constexpr std::string_view kH2Preface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

}  // namespace m0::server
