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
// Limits: the head (request line + headers) over max_header is 431, and so
// are more than max_headers field lines; a body
// over max_body is 413 (known at the head for Content-Length, while reading
// for chunked). Request-smuggling shapes are 400: Content-Length with
// Transfer-Encoding, differing Content-Lengths, Transfer-Encoding on HTTP/1.0,
// chunked not the final coding or applied twice, whitespace or another non-token
// byte in a field name, a repeated or malformed Host, differing Content-Types,
// bad chunk sizes. A coding other than chunked before chunked is 501.
// Owner: the loop thread (one parser per connection).
#pragma once
#include <http_parser.h>

#include <string>

#include "http/message.hpp"

namespace m0::http {

struct ParserLimits {
    size_t max_header = 16384;
    size_t max_body = 16 * 1024 * 1024;
    // Field lines of one request, header and trailer sections together
    // (--max-headers); past it, 431.
    size_t max_headers = 100;
};

class RequestParser {
  public:
    enum class Status { need_more, expect_continue, complete, error };
    struct Result {
        Status status = Status::need_more;
        size_t consumed = 0;   // bytes of the input used; the rest is for later
        int error_status = 0;  // 400, 405, 413, 417, 431, 501, 505
        std::string error_reason;
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

  private:
    static int on_message_begin(http_parser*);
    static int on_url(http_parser*, const char*, size_t);
    static int on_header_field(http_parser*, const char*, size_t);
    static int on_header_value(http_parser*, const char*, size_t);
    static int on_headers_complete(http_parser*);
    static int on_body(http_parser*, const char*, size_t);
    static int on_message_complete(http_parser*);
    int fail(int status, std::string reason);
    bool count_head(size_t n);

    http_parser parser_{};
    http_parser_settings settings_{};
    ParserLimits limits_;
    Request req_;
    std::string field_;
    bool last_was_value_ = false;
    size_t head_bytes_ = 0;
    size_t body_bytes_ = 0;
    bool in_message_ = false;
    bool head_done_ = false;
    bool complete_ = false;
    bool expect_pause_ = false;
    int err_status_ = 0;
    std::string err_reason_;
    size_t fields_ = 0;  // field lines of this message (max_headers)
};

}  // namespace m0::http
