// Properties of the request parser (http::RequestParser), the loop's first line
// of defence against bad input:
//   - however the bytes are split across reads, the outcome is the same: the
//     same requests, then an error in both or in neither (a head with two
//     faults, say too long and a malformed line, may report either first:
//     the limit is counted as callbacks see the bytes);
//   - arbitrary bytes never crash it and never produce a request with a body
//     over the limit or a head over the limit;
//   - whitespace between a field name and its colon is a 400, never a request,
//     whatever the field and however the bytes are split (RFC 9112 §5.1);
//   - a chunked body past --max-body-size is a 413, never a request.
#include <rapidcheck.h>

#include <cstdio>

#include "http/parser.hpp"

using namespace m0::http;

namespace {

struct Outcome {
    std::vector<std::string> requests;  // method target body, per request
    int error = 0;
};

// Feeds `input` in pieces of the given sizes (cycled), taking each request.
Outcome run(const std::string& input, const std::vector<size_t>& pieces, ParserLimits limits) {
    RequestParser p(limits);
    Outcome o;
    std::string buffer;  // bytes received but not consumed, as a connection keeps them
    size_t pos = 0, k = 0;
    for (int guard = 0; guard < 100000; ++guard) {
        if (pos < input.size()) {
            size_t n =
                pieces.empty() ? input.size() : std::max<size_t>(1, pieces[k++ % pieces.size()]);
            n = std::min(n, input.size() - pos);
            buffer.append(input, pos, n);
            pos += n;
        }
        bool progress = true;
        while (progress && !buffer.empty()) {
            auto r = p.feed(buffer.data(), buffer.size());
            buffer.erase(0, r.consumed);
            progress = r.consumed > 0;
            if (r.status == RequestParser::Status::error) {
                o.error = r.error_status;
                return o;
            }
            if (r.status == RequestParser::Status::expect_continue) progress = true;
            if (r.status == RequestParser::Status::complete) {
                Request req = p.take();
                RC_ASSERT(req.body.size() <= limits.max_body);
                o.requests.push_back(req.method + " " + req.target + " " + req.body);
                progress = true;
            }
        }
        if (pos >= input.size() && (buffer.empty() || !progress)) break;
    }
    return o;
}

// Requests built from pieces that matter to the parser, sometimes corrupted.
rc::Gen<std::string> gen_request() {
    using namespace rc;
    return gen::apply(
        [](std::string method, std::string path, int framing, std::string body, bool expect,
           std::vector<std::string> extra) {
            std::string r = method + " " + path + " HTTP/1.1\r\nHost: h\r\n";
            for (const auto& e : extra) r += e;
            if (expect) r += "Expect: 100-continue\r\n";
            if (framing == 0) {
                if (!body.empty()) r += "Content-Length: " + std::to_string(body.size()) + "\r\n";
                r += "\r\n" + body;
            } else if (framing == 1) {
                r += "Transfer-Encoding: chunked\r\n\r\n";
                if (!body.empty()) {
                    char size[32];
                    snprintf(size, sizeof size, "%zx", body.size());
                    r += std::string(size) + "\r\n" + body + "\r\n";
                }
                r += "0\r\n\r\n";
            } else {
                r += "Content-Length: " + std::to_string(body.size()) +
                     "\r\nTransfer-Encoding: chunked\r\n\r\n" + body;
            }
            return r;
        },
        gen::weightedElement<std::string>(
            {{4, "GET"}, {4, "POST"}, {2, "PUT"}, {1, "HEAD"}, {1, "DELETE"}, {1, "G@T"}}),
        gen::weightedElement<std::string>({{4, "/"},
                                           {4, "/a?b=c"},
                                           {4, "/native/hold?channel=x"},
                                           {1, "*"},
                                           {1, "/%zz"},
                                           {1, "nopath"}}),
        gen::inRange(0, 3), gen::container<std::string>(gen::inRange<char>(0, 127)),
        gen::arbitrary<bool>(),
        gen::resize(
            4, gen::container<std::vector<std::string>>(gen::element<std::string>(
                   "X-A: 1\r\n", "Last-Event-ID: 7\r\n", "Content-Length: 3\r\n", "Bad Header\r\n",
                   "Connection: close\r\n", "X-Long: " + std::string(300, 'v') + "\r\n"))));
}

}  // namespace

int main() {
    ParserLimits limits;
    limits.max_header = 512;
    limits.max_body = 64;
    bool ok = true;
    ok &= rc::check(
        "parser: any split of the input gives the same requests, then the same failure or none",
        [&] {
            auto reqs = *rc::gen::container<std::vector<std::string>>(gen_request());
            std::string input;
            for (const auto& r : reqs) input += r;
            auto pieces = *rc::gen::container<std::vector<size_t>>(rc::gen::inRange<size_t>(1, 16));
            Outcome whole = run(input, {}, limits);
            Outcome split = run(input, pieces, limits);
            RC_ASSERT(whole.requests == split.requests);
            RC_ASSERT((whole.error != 0) == (split.error != 0));
        });
    ok &= rc::check("parser: arbitrary bytes end in requests within the limits or an error", [&] {
        auto input = *rc::gen::arbitrary<std::string>();
        auto pieces = *rc::gen::container<std::vector<size_t>>(rc::gen::inRange<size_t>(1, 8));
        Outcome o = run(input, pieces, limits);
        if (o.error) RC_ASSERT(o.error >= 400 && o.error < 600);
    });
    ok &= rc::check("parser: whitespace before a field's colon is 400, never a request", [&] {
        auto name = *rc::gen::element<std::string>("Host", "X-A", "Transfer-Encoding",
                                                   "Content-Length", "Expect", "Connection");
        auto ws = *rc::gen::resize(
            3, rc::gen::nonEmpty(rc::gen::container<std::string>(rc::gen::element(' ', '\t'))));
        auto value = *rc::gen::element<std::string>("h", "chunked", "gzip, chunked", "2",
                                                    "100-continue", "close");
        std::string input = "POST / HTTP/1.1\r\nHost: h\r\n" + name + ws + ": " + value +
                            "\r\nContent-Length: 2\r\n\r\nab";
        auto pieces = *rc::gen::container<std::vector<size_t>>(rc::gen::inRange<size_t>(1, 8));
        Outcome o = run(input, pieces, limits);
        RC_ASSERT(o.requests.empty());
        RC_ASSERT(o.error == 400);
    });
    ok &= rc::check(
        "parser: a chunked body past the limit is 413, never a request, however its "
        "chunks are sized and the bytes split",
        [&] {
            // Chunks each within the limit, together past it.
            std::vector<size_t> sizes;
            size_t total = 0;
            while (total <= limits.max_body) {
                sizes.push_back(*rc::gen::inRange<size_t>(1, limits.max_body + 1));
                total += sizes.back();
            }
            std::string input = "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n";
            for (size_t n : sizes) {
                char line[32];
                std::snprintf(line, sizeof line, "%zx\r\n", n);
                input += line + std::string(n, 'b') + "\r\n";
            }
            input += "0\r\n\r\n";
            auto pieces = *rc::gen::container<std::vector<size_t>>(rc::gen::inRange<size_t>(1, 32));
            Outcome o = run(input, pieces, limits);
            RC_ASSERT(o.requests.empty());
            RC_ASSERT(o.error == 413);
        });
    return ok ? 0 : 1;
}
