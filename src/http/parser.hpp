// RequestParser: incremental HTTP/1.1 request parsing over http-parser.
//
// DESIGN
// Pure and incremental: feed() takes whatever bytes arrived and reports
// need_more, expect_continue (head done, the client waits for 100 Continue),
// complete (one request ready in take()), or error (status + one-line reason).
// It never throws. After `complete` the parser stops at the message boundary,
// so pipelined requests stay in the caller's buffer until the caller feeds
// them again (responses go out in order because the next request is not
// parsed before the current one is answered).
// Limits: the head (request line + headers) over max_header is 431 (414 when
// the request target alone is over it); more than max_headers field lines is
// 431; a body over max_body is 413 (known at the head for Content-Length, at
// each chunk's size line for chunked). Request-smuggling shapes are 400: Content-Length with
// Transfer-Encoding, differing Content-Lengths, Transfer-Encoding on HTTP/1.0,
// chunked not the final coding or applied twice, whitespace or another non-token
// byte in a field name, a control character (HTAB aside) in a field value, a
// repeated or malformed Host, differing Content-Types, bad chunk sizes, a trailer field naming
// Content-Length, Transfer-Encoding, Trailer, Host, Connection, Keep-Alive, TE or Upgrade (other
// trailer fields are counted and dropped). A coding other than chunked
// before chunked is 501. Before http-parser sees them, the head's bytes are checked here
// (scan_head): the request line against RFC 9112 §3 (one SP between its parts, a token method, a
// target of visible ASCII, "HTTP/" DIGIT "." DIGIT), and every line end against §2.2 (CRLF only, no
// obs-fold); a well-formed request line whose method http-parser does not know is 501. After it,
// the framing bytes of a chunked body (size lines, extensions, trailers: all that is not chunk
// data) are checked the same way (check_framing), since http-parser lets any byte but CR through a
// chunk extension. Owner: the loop thread (one parser per connection).
#pragma once
#include <http_parser.h>

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "http/message.hpp"

namespace m0::http {

struct ParserLimits {
    size_t max_header = 16384;
    size_t max_body = 16 * 1024 * 1024;
    // Field lines of one request, header and trailer sections together
    // (--max-headers); past it, 431.
    size_t max_headers = 100;
};

// RFC 9110 §5.6.2: token = 1*tchar.
bool is_token(std::string_view s);

class RequestParser {
  public:
    enum class Status { need_more, expect_continue, complete, error };
    struct Result {
        Status status = Status::need_more;
        size_t consumed = 0;   // bytes of the input used; the rest is for later
        int error_status = 0;  // 400, 413, 414, 417, 431, 501, 505
        std::string error_reason;
    };

    // A refusal: a status and its one-line reason.
    struct Refusal {
        int status = 0;  // 0: none
        const char* reason = "";
    };

    explicit RequestParser(ParserLimits limits = {});
    RequestParser(const RequestParser&) = delete;
    RequestParser& operator=(const RequestParser&) = delete;

    Result feed(const char* data, size_t len);
    // The completed request (valid after Status::complete); resets for the next one.
    Request take();
    // True once any byte of a message that is not yet complete has been fed.
    bool in_message() const { return in_message_; }
    // True while the head of the current message is complete (body pending).
    bool head_done() const { return head_done_; }
    // The message being read: its body's bytes so far, and the length its
    // head declared (Content-Length; 0 when none, or chunked).
    size_t body_read() const { return body_bytes_; }
    size_t body_declared() const { return declared_body_; }
    // The message's share of --max-body-total (the connection charges it);
    // it goes with the request take() gives.
    std::shared_ptr<BodyCharge>& body_charge() { return req_.body_charge; }
    // A refused message: what was read of it, and its charge, let go.
    void drop_message() { req_ = Request{}; }

  private:
    static int on_message_begin(http_parser*);
    static int on_url(http_parser*, const char*, size_t);
    static int on_header_field(http_parser*, const char*, size_t);
    static int on_header_value(http_parser*, const char*, size_t);
    static int on_headers_complete(http_parser*);
    static int on_body(http_parser*, const char*, size_t);
    static int on_message_complete(http_parser*);
    static int on_chunk_header(http_parser*);
    int fail(int status, std::string reason);
    bool count_head(size_t n);
    Result error_result() const;
    // Checks the head's bytes in data[0, len) before http-parser sees them;
    // returns how many come before the first refused one (len when none is).
    size_t scan_head(const char* data, size_t len, Refusal& bad);
    bool request_line_byte(unsigned char b, Refusal& bad);
    bool end_request_line(Refusal& bad);
    // Checks the framing bytes of a chunked body among the n parsed ones.
    bool check_framing(const char* data, size_t n);

    http_parser parser_{};
    http_parser_settings settings_{};
    ParserLimits limits_;
    Request req_;
    std::string field_;  // the name of the field line being read (a trailer field's too)
    bool last_was_value_ = false;
    size_t head_bytes_ = 0;
    size_t body_bytes_ = 0;
    size_t declared_body_ = 0;  // the head's Content-Length (0: none, or chunked)
    bool in_message_ = false;
    bool head_done_ = false;
    bool complete_ = false;
    bool expect_pause_ = false;
    int err_status_ = 0;
    std::string err_reason_;
    size_t fields_ = 0;  // field lines of this message (max_headers)

    // scan_head's state: from a message's first byte to the empty line that
    // ends its head (inactive from there until the message completes).
    struct HeadScan {
        bool active = true;
        bool cr = false;      // the last byte was CR
        size_t lines = 0;     // complete lines (0: the request line is pending)
        size_t line_len = 0;  // bytes of the current line
        int part = 0;         // request line: 0 method, 1 target, 2 version
        size_t part_len = 0;
        char major = 0;             // the version's major digit
        bool target_slash = false;  // the target begins with /
    } scan_;
    size_t head_end_ = 0;          // in this feed's data: just past the head (npos: not here)
    bool method_unknown_ = false;  // http-parser refused the method; the request line decides
    // check_framing's state, for a chunked body.
    bool frame_active_ = false;
    bool frame_cr_ = false;
    size_t frame_skip_ = 0;   // bytes of the head re-fed after an expect pause
    size_t frame_extra_ = 0;  // extension bytes (and size digits past 16) so far
    // The framing line being read: a chunk's size line, the CRLF after its
    // data, or a trailer line; in a size line, how far (0 digits, 1 whitespace
    // after them, 2 extensions), and whether its digits are all zero so far.
    enum class FrameLine { size, data_end, trailer } frame_line_ = FrameLine::size;
    int frame_size_part_ = 0;
    size_t frame_digits_ = 0;
    bool frame_zero_ = true;
    const char* feed_base_ = nullptr;
    std::vector<std::pair<size_t, size_t>> spans_;  // chunk data in this feed: offset, length
};

}  // namespace m0::http
