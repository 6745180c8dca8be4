// Fuzzer: the HTTP request path end to end. The input's bytes go into a real
// Server over a socketpair (as src/server/test_rig.hpp wires it), written in
// pieces whose sizes derive from the input with the loop stepped between them,
// so the server reads, parses and assembles them in whatever pieces arrive;
// then the client half-closes and reads until the server closes.
// The mount answers every request at once with an echo of what it received
// (method, target, version, keep-alive, headers, body), whole or streamed.
// The same bytes fed whole to an http::RequestParser are the reference.
// Checked: the client gets, in order, one answer per request the reference
// parses, each echoing exactly that request, up to the first that closes the
// connection (Connection: close, an error, a close-delimited stream); an
// error is an error answer and the last; every answer is well framed; nothing
// follows the last answer; the server closes and releases the connection.
// A client connection that opens with HTTP/2's preface (prior knowledge)
// speaks HTTP/2: its answer is checked for framing only (whole frames, the
// server's SETTINGS first); fuzz_h2 checks what the frames say.
// Input: the first byte picks the listener (bit 0: the admin listener, whose
// answers are checked for framing and order only) and the largest write
// (bits 1-3); the rest is the byte stream.
#include <event2/event.h>

#include <chrono>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "http/fuzz_check.hpp"
#include "loop/log.hpp"
#include "server/codec.hpp"
#include "server/fuzz_rig.hpp"
#include "server/h2_conn.hpp"

namespace {

using namespace m0;
using http::Request;
using http::RequestParser;
using Status = RequestParser::Status;

constexpr http::ParserLimits kLimits{2048, 1024};

uint64_t fnv(std::string_view s, uint64_t h = 14695981039346656037ull) {
    for (char c : s) h = (h ^ static_cast<unsigned char>(c)) * 1099511628211ull;
    return h;
}

// What the mount answers: one line that pins the request it received.
std::string echo(const Request& r) {
    uint64_t h = fnv(r.body);
    for (const auto& [k, v] : r.headers.items) h = fnv(v, fnv(k, h) * 31);
    return r.method + " " + r.target + " 1." + std::to_string(r.version_minor) +
           (r.keep_alive ? " keep " : " close ") + std::to_string(r.headers.items.size()) + " " +
           std::to_string(r.body.size()) + " " + std::to_string(h) + "\n";
}

bool streamed(const Request& r) { return r.target.find("stream") != std::string::npos; }

struct Rig {
    testing::ServerRig rig;
    Rig() : rig(config(), true, bus_options()) {
        rig.server->add_mount("/", [this](SlotRef s, Request&& r) {
            answer(s, r);
            return Admission::queued;
        });
    }
    static server::ServerConfig config() {
        server::ServerConfig cfg;
        cfg.limits = kLimits;
        cfg.admin_key = "k";
        return cfg;
    }
    static bus::BusOptions bus_options() {
        bus::BusOptions o;
        o.history.per_channel = 4;
        o.history.max_bytes = 1 << 20;
        o.codec = server::codec();
        return o;
    }
    void answer(SlotRef s, const Request& r) {
        http::Response resp;
        resp.headers.add("Content-Type", "text/plain");
        fuzzing::post_answer(rig.ring, s, std::move(resp), echo(r), streamed(r));
    }
    // One pass of the loop; waits for an event (timers included) when `block`.
    void step(bool block) {
        event_base_loop(rig.loop.base(), block ? EVLOOP_ONCE : EVLOOP_NONBLOCK);
    }
};

// What the reference parse expects, in order.
struct Expected {
    bool error = false;
    bool head = false;  // a HEAD request: no body in its answer
    bool keep_alive = true;
    bool close_delimited = false;  // a streamed answer the server frames by closing
    std::string echo;
};

std::vector<Expected> reference(std::string_view input) {
    RequestParser p(kLimits);
    std::vector<Expected> out;
    while (!input.empty()) {
        auto r = p.feed(input.data(), input.size());
        input.remove_prefix(r.consumed);
        if (r.status == Status::error) {
            out.push_back({true, false, false, false, {}});
            break;
        }
        if (r.status == Status::complete) {
            Request req = p.take();
            Expected e;
            e.head = req.is_head();
            e.keep_alive = req.keep_alive;
            e.close_delimited = streamed(req) && (req.version_minor == 0 || e.head);
            e.echo = echo(req);
            out.push_back(e);
            if (!e.keep_alive) break;  // the server answers it and closes
            continue;
        }
        if (r.status == Status::need_more && r.consumed == 0) break;
    }
    return out;
}

struct Answer {
    int status = 0;
    bool close = false;
    std::string body;
};

bool iequals_prefix(std::string_view line, std::string_view name) {
    return line.size() >= name.size() && http::iequals(line.substr(0, name.size()), name);
}

// Splits what the client read into answers; 1xx interim answers are skipped.
std::vector<Answer> answers(std::string_view in, const std::vector<Expected>& want) {
    std::vector<Answer> out;
    while (!in.empty()) {
        size_t end = in.find("\r\n\r\n");
        FUZZ_CHECK(end != std::string_view::npos);
        std::string_view head = in.substr(0, end + 2);
        in.remove_prefix(end + 4);
        FUZZ_CHECK(head.starts_with("HTTP/1.1 ") && head.size() >= 12);
        Answer a;
        a.status = std::stoi(std::string(head.substr(9, 3)));
        FUZZ_CHECK(a.status >= 100 && a.status <= 599);
        if (a.status < 200) {
            FUZZ_CHECK(head == "HTTP/1.1 100 Continue\r\n");
            continue;
        }
        FUZZ_CHECK(out.size() < want.size());
        const Expected& e = want[out.size()];
        long length = -1;
        bool chunked = false;
        size_t lines = 0;
        for (size_t pos = head.find("\r\n") + 2; pos < head.size(); ++lines) {
            size_t eol = head.find("\r\n", pos);
            std::string_view line = head.substr(pos, eol - pos);
            pos = eol + 2;
            FUZZ_CHECK(line.find(": ") != std::string_view::npos);
            if (iequals_prefix(line, "Content-Length: ")) {
                FUZZ_CHECK(length < 0);
                length = std::stol(std::string(line.substr(16)));
            }
            if (iequals_prefix(line, "Transfer-Encoding: ")) chunked = line.ends_with(": chunked");
            if (iequals_prefix(line, "Connection: ")) a.close = line.ends_with(": close");
        }
        FUZZ_CHECK(!(chunked && length >= 0));
        if (e.head) {
            // no body
        } else if (length >= 0) {
            FUZZ_CHECK(in.size() >= size_t(length));
            a.body = in.substr(0, size_t(length));
            in.remove_prefix(size_t(length));
        } else if (chunked) {
            for (;;) {
                size_t eol = in.find("\r\n");
                FUZZ_CHECK(eol != std::string_view::npos);
                size_t n = std::stoul(std::string(in.substr(0, eol)), nullptr, 16);
                in.remove_prefix(eol + 2);
                FUZZ_CHECK(in.size() >= n + 2 && in.substr(n, 2) == "\r\n");
                a.body.append(in.substr(0, n));
                in.remove_prefix(n + 2);
                if (n == 0) break;
            }
        } else {
            FUZZ_CHECK(a.close);  // delimited by the close: the rest is the body
            a.body = in;
            in = {};
        }
        out.push_back(std::move(a));
        if (out.back().close) FUZZ_CHECK(in.empty());  // nothing after a closing answer
    }
    return out;
}

// What a server speaking HTTP/2 sends: whole frames, its SETTINGS first.
void check_h2_frames(std::string_view in) {
    FUZZ_CHECK(in.size() >= 9 && in[3] == 0x04 && (in[4] & 0x01) == 0);  // SETTINGS, not an ACK
    while (!in.empty()) {
        FUZZ_CHECK(in.size() >= 9);
        const size_t length =
            size_t(uint8_t(in[0])) << 16 | size_t(uint8_t(in[1])) << 8 | uint8_t(in[2]);
        FUZZ_CHECK(length <=
                   16384);  // SETTINGS_MAX_FRAME_SIZE's initial value; the server never raises it
        FUZZ_CHECK(in.size() >= 9 + length);
        in.remove_prefix(9 + length);
    }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
    log::set_level(log::Level::error);
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* bytes, size_t size) {
    static Rig* const rig = new Rig;  // one server for the whole run; each input a connection
    if (size == 0) return 0;
    const bool admin = bytes[0] & 1;
    const size_t max_piece = fuzzing::max_piece(bytes[0]);
    std::string_view input(reinterpret_cast<const char*>(bytes + 1), size - 1);
    const std::vector<Expected> want = reference(input);

    auto client = rig->rig.connect(admin);
    FUZZ_CHECK(client != nullptr);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    const fuzzing::Step step = [](bool block) { rig->step(block); };
    fuzzing::write_then_drain(*client, input, max_piece, fnv(input) | 1, step, deadline);
    if (!admin && input.starts_with(server::kH2Preface)) {
        check_h2_frames(client->in);
        client->close();
        fuzzing::wait_released(*rig->rig.server, step, deadline);
        return 0;
    }
    std::vector<Answer> got = answers(client->in, want);

    // In order, up to the first answer that closes.
    for (size_t i = 0; i < got.size(); ++i) {
        const Expected& e = want[i];
        const Answer& a = got[i];
        if (e.error) {
            FUZZ_CHECK(a.status >= 400 && a.close);
        } else if (!admin) {
            FUZZ_CHECK(a.status == 200);
            FUZZ_CHECK(a.body == (e.head ? std::string() : e.echo));
        }
        if (a.close) {
            FUZZ_CHECK(i + 1 == got.size());
            FUZZ_CHECK(e.error || !e.keep_alive || e.close_delimited);
        }
    }
    // Nothing expected is left unanswered, unless an earlier answer closed.
    if (got.size() < want.size()) {
        FUZZ_CHECK(!got.empty() && got.back().close);
    }

    client->close();
    fuzzing::wait_released(*rig->rig.server, step, deadline);
    return 0;
}
