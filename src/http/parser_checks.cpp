// The byte-level checks RequestParser makes around http-parser: the request
// head before http-parser reads it (scan_head: the request line against
// RFC 9112 §3, line ends against §2.2), and the framing bytes of a chunked
// body after it (check_framing). Loop thread, like the parser.
#include <algorithm>
#include <string_view>

#include "http/chars.hpp"
#include "http/parser.hpp"

namespace m0::http {

namespace {
// Longer than any method http-parser knows: RFC 9112 §3, "A server that
// receives a method longer than any that it implements SHOULD respond with a
// 501 (Not Implemented) status code."
constexpr size_t kMaxMethod = 32;
}  // namespace

bool RequestParser::request_line_byte(unsigned char b, Refusal& bad) {
    // RFC 9112 §3: request-line = method SP request-target SP HTTP-version.
    // "Although the request-line grammar rule requires that each of the
    // component elements be separated by a single SP octet, recipients MAY
    // instead parse on whitespace-delimited word boundaries": not here, so
    // that no two readings of one line exist. "Recipients of an invalid
    // request-line SHOULD respond with either a 400 (Bad Request) error".
    HeadScan& h = scan_;
    switch (h.part) {
        case 0:  // RFC 9110 §9.1: method = token
            if (b == ' ') {
                if (h.part_len == 0) break;
                h.part = 1;
                h.part_len = 0;
                return true;
            }
            if (!is_tchar(char(b))) {
                bad = {400, "bad method"};
                return false;
            }
            if (++h.part_len > kMaxMethod) {
                bad = {501, "method not implemented (longer than any served)"};
                return false;
            }
            return true;
        case 1:  // RFC 3986 §2: a URI is visible ASCII; no CTL, SP or byte over 0x7e
            if (b == ' ') {
                if (h.part_len == 0) break;
                h.part = 2;
                h.part_len = 0;
                return true;
            }
            if (h.part_len == 0) h.target_slash = b == '/';
            if (b <= 0x20 || b >= 0x7f) {
                bad = {400, "bad byte in the request target"};
                return false;
            }
            if (++h.part_len > limits_.max_header) {
                bad = {414, "request target too long"};
                return false;
            }
            return true;
        default: {  // RFC 9112 §2.3: HTTP-version = HTTP-name "/" DIGIT "." DIGIT
            static constexpr std::string_view kName = "HTTP/";
            const size_t k = h.part_len++;
            bool good = k < kName.size()   ? char(b) == kName[k]
                        : k == 5 || k == 7 ? is_digit(char(b))
                                           : k == 6 && b == '.';
            if (!good) {
                bad = {400, "bad http version"};
                return false;
            }
            if (k == 5) h.major = char(b);
            return true;
        }
    }
    bad = {400, "malformed request line"};
    return false;
}

bool RequestParser::end_request_line(Refusal& bad) {
    const HeadScan& h = scan_;
    if (h.part == 0 || h.part_len == 0) {
        bad = {400, "malformed request line"};
        return false;
    }
    if (h.part == 1) {  // method SP target: the HTTP/0.9 simple request, if it names a path
        bad = h.target_slash ? Refusal{505, "HTTP/0.9 is not served"}
                             : Refusal{400, "malformed request line"};
        return false;
    }
    if (h.part_len != 8) {
        bad = {400, "bad http version"};
        return false;
    }
    // RFC 9110 §15.6.6: 505 "the server does not support, or refuses to
    // support, the major version of HTTP that was used in the request message".
    if (h.major != '1') {
        bad = {505, "only HTTP/1.x is served"};
        return false;
    }
    return true;
}

size_t RequestParser::scan_head(const char* data, size_t len, Refusal& bad) {
    head_end_ = std::string::npos;
    HeadScan& h = scan_;
    if (!h.active) return len;
    for (size_t i = 0; i < len; ++i) {
        const auto b = static_cast<unsigned char>(data[i]);
        if (h.cr) {
            h.cr = false;
            // RFC 9112 §2.2: "A recipient of such a bare CR MUST consider that
            // element to be invalid".
            if (b != '\n') {
                bad = {400, "bare CR in the request head"};
                return i;
            }
            if (h.line_len == 0) {
                if (h.lines == 0)
                    continue;  // RFC 9112 §2.2: an empty line before the request line is ignored
                h.active = false;  // the empty line that ends the head
                head_end_ = i + 1;
                return len;
            }
            if (h.lines == 0 && !end_request_line(bad)) return i;
            ++h.lines;
            h.line_len = 0;
            continue;
        }
        if (b == '\r') {
            h.cr = true;
            continue;
        }
        // RFC 9112 §2.2: "a recipient MAY recognize a single LF as a line
        // terminator": this one does not, in the head as in chunked framing
        // (which http-parser already holds to CRLF), so that a bare LF never
        // ends a line here that another reader would not end.
        if (b == '\n') {
            bad = {400, "bare LF in the request head"};
            return i;
        }
        if (h.line_len == 0 && h.lines > 0 && (b == ' ' || b == '\t')) {
            // RFC 9112 §2.2: "A recipient that receives whitespace between the
            // start-line and the first header field MUST either reject the message
            // as invalid or ..."; RFC 9112 §5.2: a server that receives an obs-fold
            // "MUST either reject the message by sending a 400 (Bad Request),
            // preferably with a representation explaining that obsolete line
            // folding is unacceptable, or ...". Both are rejected.
            bad = {400, h.lines == 1 ? "whitespace before the first header field"
                                     : "obsolete line folding is not accepted"};
            return i;
        }
        ++h.line_len;
        if (h.lines == 0) {
            in_message_ = true;
            if (!request_line_byte(b, bad)) return i;
        }
    }
    return len;
}

bool RequestParser::check_framing(const char* data, size_t n) {
    if (!frame_active_) return true;
    size_t pos = head_end_ != std::string::npos ? head_end_ : frame_skip_;
    frame_skip_ = 0;
    if (n < pos) {
        // Paused for 100-continue before the head's last byte: it comes again.
        frame_skip_ = pos - n;
        return true;
    }
    auto refuse = [this](const char* why) {
        fail(400, why);
        return false;
    };
    size_t k = 0;
    while (pos < n) {
        while (k < spans_.size() && spans_[k].first + spans_[k].second <= pos) ++k;
        if (k < spans_.size() && spans_[k].first <= pos) {
            pos = spans_[k].first + spans_[k].second;  // chunk data: any byte
            continue;
        }
        const size_t end = k < spans_.size() ? std::min(n, spans_[k].first) : n;
        for (; pos < end; ++pos) {
            const auto b = static_cast<unsigned char>(data[pos]);
            // RFC 9112 §7.1: chunk = chunk-size [ chunk-ext ] CRLF chunk-data CRLF;
            // §7.1.1: chunk-ext-name = token, chunk-ext-val = token / quoted-string.
            // No CTL belongs in either, and a line ends with CRLF only.
            if (frame_cr_) {
                frame_cr_ = false;
                if (b != '\n') return refuse("bare CR in chunked framing");
                if (frame_line_ == FrameLine::size) {
                    // chunk-ext = *( BWS ";" ... ): whitespace after the size
                    // only comes before an extension.
                    if (frame_digits_ == 0 || frame_size_part_ == 1)
                        return refuse("bad chunk size");
                    frame_line_ = frame_zero_ ? FrameLine::trailer : FrameLine::data_end;
                } else if (frame_line_ == FrameLine::data_end) {
                    frame_line_ = FrameLine::size;
                }
                frame_size_part_ = 0;
                frame_digits_ = 0;
                frame_zero_ = true;
                continue;
            }
            if (b == '\r') {
                frame_cr_ = true;
                continue;
            }
            if (b == '\n') return refuse("bare LF in chunked framing");
            if ((b < 0x20 && b != '\t') || b == 0x7f)
                return refuse("control byte in chunked framing");
            if (frame_line_ == FrameLine::size && frame_size_part_ < 2) {
                // RFC 9112 §7.1: chunk-size = 1*HEXDIG, then [ chunk-ext ].
                // http-parser takes "5 5" for 5; here it is refused.
                const bool ws = b == ' ' || b == '\t';
                if (frame_size_part_ == 0 && is_hexdig(char(b))) {
                    ++frame_digits_;
                    frame_zero_ = frame_zero_ && b == '0';
                    if (frame_digits_ > 16) ++frame_extra_;  // past 64 bits: leading zeros
                } else if (frame_digits_ > 0 && ws) {
                    frame_size_part_ = 1;
                } else if (frame_digits_ > 0 && b == ';') {
                    frame_size_part_ = 2;
                } else {
                    return refuse("bad chunk size");
                }
            }
            // RFC 9112 §7.1.1: "A server ought to limit the total length of chunk
            // extensions received in a request to an amount reasonable for the
            // services provided, in the same way that it applies length
            // limitations and timeouts for other parts of a message, and generate
            // an appropriate 4xx (Client Error) response if that amount is
            // exceeded." Bounded by max_header, like the head (trailer fields
            // are counted with the head's fields).
            if (frame_line_ == FrameLine::size && frame_size_part_ > 0) ++frame_extra_;
            if (frame_extra_ > limits_.max_header) return refuse("chunk extensions too long");
        }
    }
    if (complete_) frame_active_ = false;
    return true;
}

}  // namespace m0::http
