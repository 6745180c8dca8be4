#include "http/parser.hpp"

#include <algorithm>
#include <charconv>
#include <optional>
#include <string_view>

#include "http/chars.hpp"

namespace m0::http {

namespace {
RequestParser* self(http_parser* p) { return static_cast<RequestParser*>(p->data); }

// RFC 3986 §2.3: unreserved = ALPHA / DIGIT / "-" / "." / "_" / "~"
bool is_unreserved(char c) {
    return is_digit(c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '-' ||
           c == '.' || c == '_' || c == '~';
}
// RFC 3986 §2.2: sub-delims = "!" / "$" / "&" / "'" / "(" / ")" / "*" / "+" / "," / ";" / "="
bool is_sub_delim(char c) {
    return c == '!' || c == '$' || c == '&' || c == '\'' || c == '(' || c == ')' || c == '*' ||
           c == '+' || c == ',' || c == ';' || c == '=';
}

// RFC 9112 §3.2: Host = uri-host [ ":" port ], with RFC 3986 §3.2.2-3.2.3:
//   host = IP-literal / IPv4address / reg-name; port = *DIGIT
// An IPv4address is also a reg-name; an IP-literal is checked for its
// characters, not for the shape of the address inside the brackets.
bool valid_host(std::string_view h) {
    size_t i = 0;
    if (!h.empty() && h[0] == '[') {
        // IP-literal = "[" ( IPv6address / IPvFuture ) "]"
        size_t close = h.find(']');
        if (close == std::string_view::npos || close == 1) return false;
        for (char c : h.substr(1, close - 1))
            if (!is_unreserved(c) && !is_sub_delim(c) && c != ':') return false;
        i = close + 1;
    } else {
        // reg-name = *( unreserved / pct-encoded / sub-delims )
        while (i < h.size() && h[i] != ':') {
            if (h[i] == '%') {  // pct-encoded = "%" HEXDIG HEXDIG
                if (h.size() - i < 3 || !is_hexdig(h[i + 1]) || !is_hexdig(h[i + 2])) return false;
                i += 3;
                continue;
            }
            if (!is_unreserved(h[i]) && !is_sub_delim(h[i])) return false;
            ++i;
        }
    }
    if (i == h.size()) return true;
    if (h[i] != ':') return false;
    for (++i; i < h.size(); ++i)
        if (!is_digit(h[i])) return false;
    return true;
}

// RFC 3986 §2.1: pct-encoded = "%" HEXDIG HEXDIG.
// RFC 3986 §7.3: "the "%00" percent-encoding (NUL) may require special handling
// and should be rejected if the application is not expecting to receive raw
// data within a component": no application here expects a NUL in a path.
const char* bad_path(std::string_view path) {
    for (size_t i = 0; i < path.size(); ++i) {
        if (path[i] != '%') continue;
        if (path.size() - i < 3 || !is_hexdig(path[i + 1]) || !is_hexdig(path[i + 2]))
            return "bad percent-encoding in the path";
        if (path[i + 1] == '0' && path[i + 2] == '0') return "an encoded NUL in the path";
        i += 2;
    }
    return nullptr;
}

using Refusal = RequestParser::Refusal;

// The codings of a request's Transfer-Encoding, of which only chunked is served.
// RFC 9112 §6.1: Transfer-Encoding = #transfer-coding, and RFC 9112 §7:
//   transfer-coding = token *( OWS ";" OWS transfer-parameter )
// "All transfer-coding names are case-insensitive".
Refusal check_codings(std::string_view value) {
    size_t chunked = 0;
    bool chunked_last = false;
    bool other = false;
    for (size_t pos = 0; pos <= value.size();) {
        size_t comma = std::min(value.find(',', pos), value.size());
        std::string_view element = trim_ows(value.substr(pos, comma - pos));
        pos = comma + 1;
        // RFC 9110 §5.6.1: "a recipient MUST parse and ignore a reasonable number
        // of empty list elements"
        if (element.empty()) continue;
        std::string_view name = trim_ows(element.substr(0, element.find(';')));
        if (name.empty()) return {400, "bad transfer coding"};
        for (char c : name)
            if (!is_tchar(c)) return {400, "bad transfer coding"};
        chunked_last = iequals(name, "chunked");
        if (chunked_last)
            ++chunked;
        else
            other = true;
    }
    // RFC 9112 §6.3: "If a Transfer-Encoding header field is present in a request
    // and the chunked transfer coding is not the final encoding, the message body
    // length cannot be determined reliably; the server MUST respond with the 400
    // (Bad Request) status code and then close the connection."
    if (!chunked_last) return {400, "chunked is not the final transfer coding"};
    // RFC 9112 §6.1: "A sender MUST NOT apply the chunked transfer coding more than
    // once to a message body"
    if (chunked > 1) return {400, "chunked applied more than once"};
    // RFC 9112 §6.1: "A server that receives a request message with a transfer
    // coding it does not understand SHOULD respond with 501 (Not Implemented)."
    if (other) return {501, "unsupported transfer coding"};
    return {};
}

// A trailer field named `name` (whole, any case): refused with a reason that
// names the field, or {} when it is only dropped (every other name).
Refusal check_trailer_field(std::string_view name) {
    static constexpr struct {
        std::string_view name;
        const char* reason;
    } refused[] = {
        // framing
        {"Content-Length", "Content-Length is not allowed as a trailer field"},
        {"Transfer-Encoding", "Transfer-Encoding is not allowed as a trailer field"},
        {"Trailer", "Trailer is not allowed as a trailer field"},
        // routing
        {"Host", "Host is not allowed as a trailer field"},
        // the connection
        {"Connection", "Connection is not allowed as a trailer field"},
        {"Keep-Alive", "Keep-Alive is not allowed as a trailer field"},
        {"TE", "TE is not allowed as a trailer field"},
        {"Upgrade", "Upgrade is not allowed as a trailer field"},
    };
    // RFC 9110 §6.5.1: "Many fields cannot be processed outside the header
    // section because their evaluation is necessary prior to receiving the
    // content, such as those that describe message framing, routing,
    // authentication, request modifiers, response controls, or content format."
    // Those that frame the message, route it or govern the connection are
    // refused: a trailer naming one is a client (or an intermediary) that reads
    // the message another way than this server does.
    for (const auto& r : refused)
        if (iequals(name, r.name)) return {400, r.reason};
    return {};
}
}  // namespace

bool is_token(std::string_view s) {
    if (s.empty()) return false;
    for (char c : s)
        if (!is_tchar(c)) return false;
    return true;
}

RequestParser::RequestParser(ParserLimits limits) : limits_(limits) {
    http_parser_init(&parser_, HTTP_REQUEST);
    parser_.data = this;
    http_parser_settings_init(&settings_);
    settings_.on_message_begin = on_message_begin;
    settings_.on_url = on_url;
    settings_.on_header_field = on_header_field;
    settings_.on_header_value = on_header_value;
    settings_.on_headers_complete = on_headers_complete;
    settings_.on_body = on_body;
    settings_.on_message_complete = on_message_complete;
    settings_.on_chunk_header = on_chunk_header;
}

int RequestParser::fail(int status, std::string reason) {
    if (err_status_ == 0) {
        err_status_ = status;
        err_reason_ = std::move(reason);
    }
    return -1;
}

bool RequestParser::count_head(size_t n) {
    head_bytes_ += n;
    return head_bytes_ <= limits_.max_header;
}

int RequestParser::on_message_begin(http_parser* p) {
    auto* s = self(p);
    s->req_ = Request{};
    s->field_.clear();
    s->last_was_value_ = false;
    s->head_bytes_ = 0;
    s->body_bytes_ = 0;
    s->declared_body_ = 0;
    s->in_message_ = true;
    s->head_done_ = false;
    s->fields_ = 0;
    s->frame_active_ = false;
    s->frame_cr_ = false;
    s->frame_skip_ = 0;
    s->frame_extra_ = 0;
    s->frame_line_ = FrameLine::size;
    s->frame_size_part_ = 0;
    s->frame_digits_ = 0;
    s->frame_zero_ = true;
    return 0;
}

int RequestParser::on_url(http_parser* p, const char* at, size_t n) {
    auto* s = self(p);
    // RFC 9112 §3: "A server that receives a request-target longer than any URI
    // it wishes to parse MUST respond with a 414 (URI Too Long) status code."
    if (!s->count_head(n)) return s->fail(414, "request target too long");
    s->req_.target.append(at, n);
    return 0;
}

int RequestParser::on_header_field(http_parser* p, const char* at, size_t n) {
    auto* s = self(p);
    const bool starts = s->last_was_value_ || s->field_.empty();  // a new field line
    // ": " and CRLF counted once per header, not once per callback (byte-by-byte reads).
    if (!s->count_head(n + (starts ? 4 : 0))) return s->fail(431, "request head too large");
    // RFC 6585 §5: 431 "indicates that the server is unwilling to process the
    // request because its header fields are too large"; a count of them is
    // bounded like their bytes, trailer fields included.
    if (starts && ++s->fields_ > s->limits_.max_headers)
        return s->fail(431, "too many header fields (more than " +
                                std::to_string(s->limits_.max_headers) + ")");
    // http-parser lets a space through in a field name and still frames the body
    // by "Transfer-Encoding : chunked", which the checks below would not see under
    // that name: this loop is what refuses it. Trailer fields are field lines too.
    for (size_t i = 0; i < n; ++i) {
        // RFC 9112 §5.1: "No whitespace is allowed between the field name and colon.
        // ... A server MUST reject, with a response status code of 400 (Bad Request),
        // any received request message that contains whitespace between a header
        // field name and colon."
        if (at[i] == ' ' || at[i] == '\t') return s->fail(400, "whitespace in a header field name");
        // RFC 9110 §5.1: field-name = token
        if (!is_tchar(at[i])) return s->fail(400, "bad header field name");
    }
    if (s->last_was_value_) s->field_.clear();  // a new field line begins
    // A trailer field's name too (bounded by count_head above): on_header_value
    // decides on it once it is whole.
    s->field_.append(at, n);
    s->last_was_value_ = false;
    return 0;
}

int RequestParser::on_header_value(http_parser* p, const char* at, size_t n) {
    auto* s = self(p);
    if (!s->count_head(n)) return s->fail(431, "request head too large");
    // RFC 9110 §5.5: field-value = *field-content, of field-vchar (VCHAR /
    // obs-text), SP and HTAB; "a recipient of CR, LF, or NUL within a field
    // value MUST either reject the message or replace each of those characters
    // with SP". http-parser refuses control characters in a value except as
    // its first byte ("X-A:\0" came through): this loop refuses them all,
    // trailer fields' values too.
    if (!is_field_value(std::string_view(at, n)))
        return s->fail(400, "control character in a header field value");
    if (s->head_done_) {
        // A trailer field. Its name is whole when its value begins: http-parser
        // calls here (with no bytes for an empty value) before the line's end.
        if (!s->last_was_value_) {
            Refusal bad = check_trailer_field(s->field_);
            if (bad.status) return s->fail(bad.status, bad.reason);
        }
        // RFC 9110 §6.5.1: "A recipient MUST NOT merge a trailer field into a
        // header section unless the recipient understands the corresponding
        // header field definition and that definition explicitly permits and
        // defines how trailer field values can be safely merged." None is merged:
        // the others are counted against the limits and dropped.
        s->last_was_value_ = true;
        return 0;
    }
    if (!s->last_was_value_) {
        // RFC 9110 §5.1: field-name = token, so never empty.
        if (s->field_.empty()) return s->fail(400, "empty header field name");
        s->req_.headers.add(s->field_, std::string());
    }
    s->req_.headers.items.back().second.append(at, n);
    s->last_was_value_ = true;
    return 0;
}

int RequestParser::on_headers_complete(http_parser* p) {
    auto* s = self(p);
    Request& r = s->req_;
    r.method = http_method_str(static_cast<http_method>(p->method));
    r.version_major = p->http_major;
    r.version_minor = p->http_minor;
    if (r.version_major != 1) return s->fail(505, "only HTTP/1.x is served");
    // RFC 9110 §9.1: "An origin server that receives a request method that is
    // unrecognized or not implemented SHOULD respond with the 501 (Not
    // Implemented) status code." No tunnel is made here.
    if (p->method == HTTP_CONNECT) return s->fail(501, "CONNECT is not implemented");

    // RFC 9110 §5.5: a field value excludes leading and trailing whitespace
    // (the parser strips the leading part).
    for (auto& kv : r.headers.items)
        while (!kv.second.empty() && (kv.second.back() == ' ' || kv.second.back() == '\t'))
            kv.second.pop_back();

    // Split the target: origin-form "/path?query", "*" (OPTIONS), or absolute-form.
    const std::string& t = r.target;
    std::optional<std::string> authority;  // of an absolute-form target
    if (t == "*") {
        // RFC 9112 §3.2.4: the asterisk-form "is only used for a server-wide
        // OPTIONS request".
        if (p->method != HTTP_OPTIONS) return s->fail(400, "asterisk-form target without OPTIONS");
        r.path = "*";
    } else {
        http_parser_url u;
        http_parser_url_init(&u);
        if (http_parser_parse_url(t.data(), t.size(), 0, &u) != 0)
            return s->fail(400, "bad request target");
        // RFC 9112 §3.2: origin-form = absolute-path [ "?" query ], and an
        // absolute-URI has no fragment either.
        if (u.field_set & (1 << UF_FRAGMENT))
            return s->fail(400, "a fragment in the request target");
        // RFC 9110 §4.2.4: "A recipient SHOULD parse for userinfo and treat its
        // presence as an error".
        if (u.field_set & (1 << UF_USERINFO)) return s->fail(400, "userinfo in the request target");
        if (u.field_set & (1 << UF_SCHEMA)) {
            std::string_view scheme(t.data() + u.field_data[UF_SCHEMA].off,
                                    u.field_data[UF_SCHEMA].len);
            if (!iequals(scheme, "http") && !iequals(scheme, "https"))
                return s->fail(400, "a scheme other than http or https");
            size_t from = t.find("://");
            if (from == std::string::npos) return s->fail(400, "bad request target");
            from += 3;
            size_t to = std::min(t.find_first_of("/?", from), t.size());
            authority = t.substr(from, to - from);
            // RFC 9110 §4.2.1: "A recipient that processes such a URI reference
            // [an "http" URI with an empty host] MUST reject it as invalid."
            if (authority->empty() || (*authority)[0] == ':' || !valid_host(*authority))
                return s->fail(400, "bad authority in the request target");
        }
        if (u.field_set & (1 << UF_PATH))
            r.path = t.substr(u.field_data[UF_PATH].off, u.field_data[UF_PATH].len);
        else
            r.path = "/";
        if (u.field_set & (1 << UF_QUERY))
            r.query = t.substr(u.field_data[UF_QUERY].off, u.field_data[UF_QUERY].len);
        if (r.path.empty() || r.path[0] != '/') return s->fail(400, "bad request target");
        if (const char* why = bad_path(r.path)) return s->fail(400, why);
    }

    // RFC 9112 §6.3: a message with both Transfer-Encoding and Content-Length is
    // a smuggling shape; so are differing Content-Lengths. Refuse, do not guess.
    size_t te = 0;
    std::string_view te_value;
    std::string_view cl_value;
    bool cl_seen = false;
    bool host_seen = false;
    std::optional<std::string_view> content_type;
    for (const auto& [k, v] : r.headers.items) {
        if (iequals(k, "Transfer-Encoding")) {
            ++te;
            te_value = v;
        } else if (iequals(k, "Content-Length")) {
            if (cl_seen && v != cl_value) return s->fail(400, "differing content-length headers");
            cl_seen = true;
            cl_value = v;
        } else if (iequals(k, "Host")) {
            // RFC 9112 §3.2: "A server MUST respond with a 400 (Bad Request) status
            // code to any HTTP/1.1 request message that lacks a Host header field and
            // to any request message that contains more than one Host header field
            // line or a Host header field with an invalid field value."
            // An empty value is valid (an empty reg-name): RFC 9112 §3.2 asks for it
            // when the target has no authority.
            if (host_seen) return s->fail(400, "repeated host header");
            host_seen = true;
            if (!valid_host(v)) return s->fail(400, "bad host header");
        } else if (iequals(k, "Content-Type")) {
            // RFC 9110 §5.3: "A sender MUST NOT generate multiple field lines with
            // the same name ... unless that field's definition allows multiple field
            // line values to be recombined as a comma-separated list"; Content-Type
            // (§8.3) does not. Two differing media types leave the body's type open.
            if (content_type && *content_type != v)
                return s->fail(400, "differing content-type headers");
            content_type = v;
        }
    }
    // RFC 9110 §5.3 would let two Transfer-Encoding lines be one list; a client
    // has no need to send two, so they are refused rather than joined.
    if (te > 1) return s->fail(400, "repeated transfer-encoding");
    // RFC 9112 §6.1: "A server or client that receives an HTTP/1.0 message
    // containing a Transfer-Encoding header field MUST treat the message as if the
    // framing is faulty, even if a Content-Length is present, and close the
    // connection after processing the message." (Every refusal closes.)
    if (te && r.version_minor == 0) return s->fail(400, "transfer-encoding on HTTP/1.0");
    if (te && cl_seen) return s->fail(400, "content-length with transfer-encoding");
    if (te) {
        Refusal bad = check_codings(te_value);
        if (bad.status) return s->fail(bad.status, bad.reason);
        // http-parser frames the body: a list read here as ending in chunked that
        // it does not take as chunked (a parameter on chunked, a tab around a
        // comma) would be read two ways. Refuse it.
        if (!(p->flags & F_CHUNKED))
            return s->fail(400, "transfer-encoding framing not recognized");
    }
    if (r.version_minor >= 1 && !host_seen) return s->fail(400, "missing host header");
    // RFC 9112 §3.2.2: "When an origin server receives a request with an
    // absolute-form of request-target, the origin server MUST ignore the
    // received Host header field (if any) and instead use the host information
    // of the request-target." (The received one was still checked above.)
    if (authority) r.headers.set("Host", std::move(*authority));

    bool has_body = (p->flags & F_CHUNKED) || (cl_seen && p->content_length > 0);
    if (cl_seen && p->content_length != ULLONG_MAX && p->content_length > s->limits_.max_body)
        return s->fail(413, "request body too large");

    r.keep_alive = http_should_keep_alive(p) != 0;
    if (cl_seen && !(p->flags & F_CHUNKED)) s->declared_body_ = p->content_length;
    s->head_done_ = true;
    s->frame_active_ = (p->flags & F_CHUNKED) != 0;

    if (auto expect = r.headers.get("Expect")) {
        if (!iequals(*expect, "100-continue")) return s->fail(417, "unsupported expectation");
        // RFC 9110 §10.1.1: a server that will read the body sends 100 (Continue)
        // first; only on HTTP/1.1 and only when a body comes.
        if (r.version_minor >= 1 && has_body) {
            s->expect_pause_ = true;
            http_parser_pause(p, 1);
        }
    }
    return 0;
}

int RequestParser::on_body(http_parser* p, const char* at, size_t n) {
    auto* s = self(p);
    if (s->frame_active_) s->spans_.emplace_back(size_t(at - s->feed_base_), n);
    // Within max_body: a Content-Length was checked at the head, each chunk's
    // size at its size line (on_chunk_header), before any of its data.
    s->body_bytes_ += n;
    s->req_.body.append(at, n);
    return 0;
}

int RequestParser::on_message_complete(http_parser* p) {
    auto* s = self(p);
    s->complete_ = true;
    s->in_message_ = false;
    s->head_done_ = false;
    s->scan_ = HeadScan{};    // the next message's head is scanned from its first byte
    http_parser_pause(p, 1);  // one request at a time: the rest waits in the buffer
    return 0;
}

int RequestParser::on_chunk_header(http_parser* p) {
    auto* s = self(p);
    // The size line says how much comes: a chunk that would take the body past
    // max_body is refused at its size, not after its data has been read.
    if (p->content_length > s->limits_.max_body - s->body_bytes_)
        return s->fail(413, "request body too large");
    return 0;
}

RequestParser::Result RequestParser::error_result() const {
    Result res;
    res.status = Status::error;
    res.error_status = err_status_;
    res.error_reason = err_reason_;
    return res;
}

RequestParser::Result RequestParser::feed(const char* data, size_t len) {
    Result res;
    if (err_status_) return error_result();
    if (HTTP_PARSER_ERRNO(&parser_) == HPE_PAUSED) http_parser_pause(&parser_, 0);
    if (len == 0) return res;
    // The head's bytes first: http-parser sees only those before a refused one,
    // so an error it finds comes first in the stream and wins.
    Refusal bad;
    const size_t ok = scan_head(data, len, bad);
    // RFC 9110 §9.1: "An origin server that receives a request method that is
    // unrecognized or not implemented SHOULD respond with the 501 (Not
    // Implemented) status code." http-parser stops at the first byte of a
    // method it does not know; the rest of the request line decides between a
    // malformed line (400), an unserved version (505) and an unknown method (501).
    auto decide_method = [&]() {
        if (scan_.lines > 0)
            fail(501, "method not implemented");
        else if (bad.status)
            fail(bad.status, bad.reason);
        else
            res.consumed = len;  // the line goes on: scanned, nothing to parse
        return err_status_ ? error_result() : res;
    };
    if (method_unknown_) return decide_method();
    feed_base_ = data;
    spans_.clear();
    // RFC 9112 §2.2: "a server that is expecting to receive and parse a
    // request-line SHOULD ignore at least one empty line (CRLF) received prior to
    // the request-line". http-parser skips them before on_message_begin: they
    // begin no message and are not counted against max_header.
    // (A length of 0 would tell http-parser the connection ended: not called.)
    size_t n = ok ? http_parser_execute(&parser_, &settings_, data, ok) : 0;
    res.consumed = n;
    enum http_errno e = HTTP_PARSER_ERRNO(&parser_);
    if (err_status_) return error_result();
    if (e == HPE_INVALID_METHOD) {
        method_unknown_ = true;
        return decide_method();
    }
    if (e != HPE_OK && e != HPE_PAUSED) {
        // What was parsed before the error comes first in the stream.
        if (!check_framing(data, n)) return error_result();
        int status = 400;
        std::string reason;
        switch (e) {
            case HPE_INVALID_CHUNK_SIZE:
                reason = "bad chunk size";
                break;
            case HPE_UNEXPECTED_CONTENT_LENGTH:
                reason = "conflicting content-length";
                break;
            case HPE_INVALID_CONTENT_LENGTH:  // also a chunk size past 64 bits
                reason = head_done_ ? "bad chunk size" : "bad content-length";
                break;
            case HPE_HEADER_OVERFLOW:
                status = 431;
                reason = "request head too large";
                break;
            case HPE_INVALID_HEADER_TOKEN:
                reason = "invalid character in a header field";
                break;
            case HPE_INVALID_VERSION:
                reason = "bad http version";
                break;
            default:
                reason = std::string("malformed request: ") + http_errno_name(e);
        }
        // Kept through fail(), status and reason together: later feeds repeat both.
        fail(status, std::move(reason));
        return error_result();
    }
    if (bad.status) {  // everything before the refused byte parsed
        fail(bad.status, bad.reason);
        return error_result();
    }
    if (!check_framing(data, n)) return error_result();
    if (complete_) {
        res.status = Status::complete;
        return res;
    }
    if (expect_pause_) {
        expect_pause_ = false;
        res.status = Status::expect_continue;
        return res;
    }
    // A head still incomplete after max_header bytes (e.g. one endless header
    // line split across reads) is caught by the callbacks' counting.
    return res;
}

Request RequestParser::take() {
    complete_ = false;
    Request out = std::move(req_);
    req_ = Request{};
    return out;
}

}  // namespace m0::http
