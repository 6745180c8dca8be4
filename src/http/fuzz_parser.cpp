// Fuzzer: the request parser (http::RequestParser) driven as the server's
// process_input drives it: the unconsumed bytes kept and fed again, a request
// taken on complete, a 100-continue pause passed, the connection ended on an
// error. The input is a byte stream (pipelined requests, any bytes), fed three
// ways: whole, one byte at a time, and in pieces whose sizes derive from the
// input. Checked on every feed and every request:
//   - never more bytes consumed than given; need_more only once all are used;
//   - after an error every later feed returns the same status and reason and
//     consumes nothing; the status is one the parser documents;
//   - a request has a method, HTTP/1.x, a path that is "*" or begins with '/',
//     field names that are tokens, values without a control character (HTAB
//     aside) and without whitespace at either end, at most one Host, never
//     both Content-Length and Transfer-Encoding, a body within the limit and
//     of its Content-Length; its path and query decode;
//   - all three feeds give the same requests and the same 100-continue pauses,
//     and an error in all or in none.
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "http/fuzz_check.hpp"
#include "http/parser.hpp"

namespace {

using m0::http::iequals;
using m0::http::Request;
using m0::http::RequestParser;
using Status = RequestParser::Status;

// Small limits, so that 431 and 413 are reached by short inputs.
constexpr m0::http::ParserLimits kLimits{1024, 512};

bool is_tchar(char c) {
    if ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) return true;
    return std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
}

void check_request(const Request& r) {
    FUZZ_CHECK(!r.method.empty());
    FUZZ_CHECK(r.version_major == 1);
    FUZZ_CHECK(r.path == "*" ? r.target == "*" : (!r.path.empty() && r.path[0] == '/'));
    FUZZ_CHECK(r.body.size() <= kLimits.max_body);
    size_t host = 0, te = 0;
    std::string_view cl;
    for (const auto& [k, v] : r.headers.items) {
        FUZZ_CHECK(!k.empty());
        for (char c : k) FUZZ_CHECK(is_tchar(c));
        for (char c : v)
            FUZZ_CHECK(c == '\t' || (static_cast<unsigned char>(c) >= 0x20 && c != 0x7f));
        FUZZ_CHECK(v.empty() || (v.front() != ' ' && v.front() != '\t'));
        FUZZ_CHECK(v.empty() || (v.back() != ' ' && v.back() != '\t'));
        if (iequals(k, "Host")) ++host;
        if (iequals(k, "Transfer-Encoding")) ++te;
        if (iequals(k, "Content-Length")) {
            FUZZ_CHECK(cl.empty() || cl == v);
            cl = v;
        }
    }
    FUZZ_CHECK(host <= 1);
    FUZZ_CHECK(r.version_minor == 0 || host == 1);
    FUZZ_CHECK(te <= 1);
    FUZZ_CHECK(te == 0 || cl.empty());
    // What the mounts read from a request: the decoded path, query parameters.
    FUZZ_CHECK(m0::http::percent_decode(r.path, false).size() <= r.path.size());
    if (auto v = r.query_param("lastEventID")) FUZZ_CHECK(v->size() <= r.query.size());
    if (!cl.empty()) {
        uint64_t n = 0;
        auto [p, ec] = std::from_chars(cl.data(), cl.data() + cl.size(), n);
        FUZZ_CHECK(ec == std::errc() && p == cl.data() + cl.size());
        FUZZ_CHECK(r.body.size() == n);
    }
}

std::string describe(const Request& r) {
    std::string s = r.method + ' ' + r.target + ' ' + r.path + '?' + r.query + ' ' +
                    std::to_string(r.version_major) + '.' + std::to_string(r.version_minor) +
                    (r.keep_alive ? " keep" : " close") + '\n';
    for (const auto& [k, v] : r.headers.items) s += k + ": " + v + '\n';
    return s + '\n' + r.body;
}

struct Outcome {
    std::vector<std::string> requests;
    int continues = 0;
    int error = 0;
};

// Feeds `input` in pieces of next_piece() bytes.
template <typename Pieces>
Outcome run(std::string_view input, Pieces next_piece) {
    RequestParser p(kLimits);
    Outcome o;
    std::string buf;  // received, not yet consumed
    size_t pos = 0;
    for (int guard = 0; guard < 1000000; ++guard) {
        if (buf.empty()) {
            if (pos >= input.size()) return o;
            size_t n = std::min(next_piece(), input.size() - pos);
            buf.append(input.substr(pos, n));
            pos += n;
        }
        const size_t given = buf.size();
        auto r = p.feed(buf.data(), buf.size());
        FUZZ_CHECK(r.consumed <= given);
        buf.erase(0, r.consumed);
        switch (r.status) {
            case Status::error: {
                // The statuses parser.hpp names (405 is no longer one: CONNECT is 501).
                FUZZ_CHECK(r.error_status == 400 || r.error_status == 413 ||
                           r.error_status == 414 || r.error_status == 417 ||
                           r.error_status == 431 || r.error_status == 501 || r.error_status == 505);
                FUZZ_CHECK(!r.error_reason.empty());
                for (std::string_view more :
                     {std::string_view(buf), std::string_view("GET / "), std::string_view()}) {
                    auto again = p.feed(more.data(), more.size());
                    FUZZ_CHECK(again.status == Status::error);
                    FUZZ_CHECK(again.error_status == r.error_status);
                    FUZZ_CHECK(again.error_reason == r.error_reason);
                    FUZZ_CHECK(again.consumed == 0);
                }
                o.error = r.error_status;
                return o;
            }
            case Status::complete: {
                FUZZ_CHECK(!p.in_message());
                Request req = p.take();
                check_request(req);
                o.requests.push_back(describe(req));
                break;
            }
            case Status::expect_continue:
                FUZZ_CHECK(p.head_done());
                ++o.continues;
                break;
            case Status::need_more:
                FUZZ_CHECK(r.consumed == given);
                break;
        }
    }
    std::fprintf(stderr, "fuzz_parser: the parser made no progress\n");
    std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* bytes, size_t size) {
    std::string_view input(reinterpret_cast<const char*>(bytes), size);
    Outcome whole = run(input, [&] { return input.size(); });
    Outcome bytewise = run(input, [] { return size_t(1); });
    // Piece sizes from a generator seeded by the input (FNV-1a), 1 to 64 bytes.
    uint64_t state = 14695981039346656037ull;
    for (char c : input) state = (state ^ static_cast<unsigned char>(c)) * 1099511628211ull;
    Outcome pieces = run(input, [&] {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        return size_t(1 + (state >> 58));
    });
    FUZZ_CHECK(whole.requests == bytewise.requests);
    FUZZ_CHECK(whole.requests == pieces.requests);
    FUZZ_CHECK((whole.error != 0) == (bytewise.error != 0));
    FUZZ_CHECK((whole.error != 0) == (pieces.error != 0));
    if (!whole.error) {
        FUZZ_CHECK(whole.continues == bytewise.continues);
        FUZZ_CHECK(whole.continues == pieces.continues);
    }
    return 0;
}
