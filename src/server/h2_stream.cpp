// Server, an HTTP/2 stream: its request dispatched to the same router and
// pools as an HTTP/1.1 one, its completions answered as HEADERS and DATA,
// and a hold's output through the hold sink. Loop thread only.
//
// DESIGN
// A stream's slot is what its job and its hold name (Server::SlotEntry::
// stream); a completion or a hold's write for it finds the stream, and its
// connection by the stream's `conn`. Bytes for the stream go into its `out`
// queue (a hold's events by reference, as a lean hold keeps them), which
// the session's data provider drains as the stream's window and the
// connection's output allow; an empty queue defers the provider, and a
// write resumes it. A hold's stream keeps its DATA item only while its
// queue has bytes: the frame that takes the queue whole ends the item (not
// the stream), and the next write submits another, so an idle hold keeps
// nothing on the session but nghttp2's stream. So `out` is the stream's
// backlog: a hold whose window stays closed passes --hold-buffer-limit and
// is a slow reader by the same rule as an HTTP/1.1 one (its retry hint
// queued, RST_STREAM if it is not taken within --hold-drain-timeout), and
// the other streams of the connection are not held up by it. A streamed
// answer's producer waits on the same queue (StreamState). A file answer is
// read (pread) as the window allows, never whole.
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cstring>

#include "http/body_length.hpp"
#include "loop/log.hpp"
#include "server/conn.hpp"
#include "server/h2_conn.hpp"

namespace m0::server {

using namespace m0::http;

namespace {

// RFC 9113 §8.2.2: fields that belong to a connection, not to a stream.
bool connection_field(std::string_view k) {
    return iequals(k, "Connection") || iequals(k, "Keep-Alive") ||
           iequals(k, "Transfer-Encoding") || iequals(k, "Upgrade") ||
           iequals(k, "Proxy-Connection") || iequals(k, "Content-Length") || iequals(k, "Date");
}

}  // namespace

// The data provider: DATA frames from a stream's queue or file.
struct Server::H2Data {
    static ssize_t read(nghttp2_session*, int32_t, uint8_t* buf, size_t length, uint32_t* flags,
                        nghttp2_data_source* src, void* p) {
        auto& st = *static_cast<H2Stream*>(src->ptr);
        Conn& c = *static_cast<Conn*>(p);
        Server& s = *c.server;
        if (st.file) {
            FileBody& f = *st.file;
            const size_t want = static_cast<size_t>(std::min<uint64_t>(length, f.length));
            const ssize_t n = want ? ::pread(f.fd, buf, want, static_cast<off_t>(f.offset)) : 0;
            // A file cut short of its declared length: the stream is reset.
            if (n < 0 || (n == 0 && want > 0)) return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
            if (st.access) st.access->rec.bytes += static_cast<size_t>(n);
            f.offset += static_cast<uint64_t>(n);
            f.length -= static_cast<uint64_t>(n);
            if (f.length == 0) *flags |= NGHTTP2_DATA_FLAG_EOF;
            st.deadline = monotonic_seconds() + s.cfg_.write_timeout;
            return n;
        }
        const bool was_over = st.out_bytes > s.cfg_.hold_buffer_limit;
        size_t n = 0;
        while (n < length && st.out_head < st.out.size()) {
            const std::string& b = *st.out[st.out_head];
            const size_t take = std::min(length - n, b.size() - st.out_off);
            std::memcpy(buf + n, b.data() + st.out_off, take);
            n += take;
            st.out_off += take;
            if (st.out_off == b.size()) {
                st.out[st.out_head++].reset();
                st.out_off = 0;
            }
        }
        if (st.out_head == st.out.size()) {
            st.out.clear();
            st.out.shrink_to_fit();  // an idle hold keeps no queue
            st.out_head = 0;
        }
        st.out_bytes -= n;
        if (st.access) st.access->rec.bytes += n;
        if (n > 0 && st.state != H2Stream::State::closing)
            st.deadline = st.out_bytes > 0 ? monotonic_seconds() + s.cfg_.write_timeout : 0;
        if (st.stream) st.stream->drained(st.out_bytes);
        if (was_over && st.out_bytes <= s.cfg_.hold_buffer_limit &&
            st.state == H2Stream::State::holding)
            c.h2->drained.push_back(st.slot);
        if (st.out_bytes == 0 && st.eof) {
            *flags |= NGHTTP2_DATA_FLAG_EOF;
            st.item_ending = true;
            return static_cast<ssize_t>(n);
        }
        if (st.out_bytes == 0 && n > 0 && st.state == H2Stream::State::holding) {
            // A hold's queue taken whole: its item ends with this frame, the
            // stream does not (h2_submit_data makes the next one).
            *flags |= NGHTTP2_DATA_FLAG_EOF | NGHTTP2_DATA_FLAG_NO_END_STREAM;
            st.item_ending = true;
            return static_cast<ssize_t>(n);
        }
        if (n == 0) {
            st.deferred = true;
            return NGHTTP2_ERR_DEFERRED;
        }
        return static_cast<ssize_t>(n);
    }
};

void Server::h2_dispatch(Conn& c, H2Stream& st) {
    metrics_.requests_total.fetch_add(1);
    st.state = H2Stream::State::waiting;
    Request& req = *st.req;
    const size_t q = req.target.find('?');
    req.path = req.target.substr(0, q);
    req.query = q == std::string::npos ? "" : req.target.substr(q + 1);
    req.keep_alive = true;
    st.head_request = req.is_head();
    prepare_request(c, req);
    if (access_log_) access_begin(st.access, req, st.slot);
    st.cors = cfg_.cors.ask(req);
    M0_LOG(debug, req.method, " ", req.target, " HTTP/2 stream ", std::to_string(st.id), " slot ",
           to_string(st.slot));
    const MountEntry* mount = route(routes_, req);
    if (!mount) {
        h2_refuse(c, st, 404, "no mount serves this path");
        return;
    }
    if (answers_preflight(*mount, st.cors.get())) {
        h2_whole(c, st, *st.cors->preflight);
        return;
    }
    const Admission admitted = mount->submit(st.slot, std::move(req));
    st.req.reset();
    if (admitted != Admission::queued) {
        const bool full = admitted == Admission::full;
        Response r =
            error_response(503, full ? "too many queued requests" : "server is shutting down");
        if (full) r.headers.add("Retry-After", "1");
        h2_whole(c, st, r);
        return;
    }
    st.deadline = monotonic_seconds() + cfg_.request_timeout;
    h2_arm(c, st.deadline);
}

void Server::h2_refuse(Conn& c, H2Stream& st, int status, std::string_view reason) {
    M0_LOG(info, "HTTP/2 request from ", c.remote_addr, " refused ", std::to_string(status), ": ",
           reason);
    if (st.state == H2Stream::State::receiving && st.req->method.empty()) {
        // Its header block never ended: nothing to answer.
        nghttp2_submit_rst_stream(c.h2->session, NGHTTP2_FLAG_NONE, st.id, NGHTTP2_CANCEL);
        return;
    }
    Response r = error_response(status, reason);
    if (status == 503) r.headers.add("Retry-After", "1");
    h2_whole(c, st, r);
}

bool Server::h2_charge_body(H2Stream& st, size_t more) {
    uint64_t declared = 0;
    if (more == 0)
        if (auto cl = st.req->headers.get("content-length"))
            if (auto n = parse_content_length(*cl))  // past max_body: 413 as its DATA comes
                declared = std::min<uint64_t>(*n, cfg_.limits.max_body);
    const size_t read = st.req->body.size() + more;
    if (declared == 0 && read == 0) return true;
    auto& charge = st.req->body_charge;
    if (!charge) charge = std::make_shared<http::BodyCharge>(cfg_.body_budget);
    if (charge->could_reach(declared) && charge->reach(read)) return true;
    metrics_.bodies_refused.fetch_add(1);
    return false;
}

void Server::h2_submit(Conn& c, H2Stream& st, Response& r, std::optional<uint64_t> length,
                       bool body) {
    std::vector<std::pair<std::string, std::string>> fields;
    fields.reserve(r.headers.items.size() + 4);
    fields.emplace_back(":status", std::to_string(r.status));
    bool has_server = false;
    for (const auto& [k, v] : r.headers.items) {
        if (connection_field(k)) continue;
        if (iequals(k, "Server")) has_server = true;
        fields.emplace_back(to_lower(k), trim_ows(v));
    }
    fields.emplace_back("date", date_header());
    if (!has_server) fields.emplace_back("server", cfg_.server_header);
    if (length) fields.emplace_back("content-length", std::to_string(*length));
    std::vector<nghttp2_nv> nv;
    nv.reserve(fields.size());
    for (auto& [k, v] : fields)
        nv.push_back({reinterpret_cast<uint8_t*>(k.data()), reinterpret_cast<uint8_t*>(v.data()),
                      k.size(), v.size(), NGHTTP2_NV_FLAG_NONE});
    if (access_log_) access_answer(st.access, c.remote_addr, r.status, 0);
    nghttp2_data_provider prd{};
    prd.source.ptr = &st;
    prd.read_callback = H2Data::read;
    st.submitted = true;
    int rv = 0;
    if (body && st.state == H2Stream::State::holding && st.out_bytes == 0) {
        // A hold with nothing queued yet: its HEADERS alone, the stream left
        // open; its first event brings the DATA item (h2_submit_data).
        rv = nghttp2_submit_headers(c.h2->session, NGHTTP2_FLAG_NONE, st.id, nullptr, nv.data(),
                                    nv.size(), nullptr);
    } else {
        rv = nghttp2_submit_response(c.h2->session, st.id, nv.data(), nv.size(),
                                     body ? &prd : nullptr);
        st.item = body && rv == 0;
    }
    if (rv != 0)
        nghttp2_submit_rst_stream(c.h2->session, NGHTTP2_FLAG_NONE, st.id, NGHTTP2_INTERNAL_ERROR);
}

void Server::h2_submit_data(Conn& c, H2Stream& st) {
    if (st.item || !st.submitted || (st.out_bytes == 0 && !st.eof)) return;
    if (st.state != H2Stream::State::holding && st.state != H2Stream::State::closing) return;
    nghttp2_data_provider prd{};
    prd.source.ptr = &st;
    prd.read_callback = H2Data::read;
    // Its end due: the item's last frame carries END_STREAM.
    const uint8_t flags = st.eof ? NGHTTP2_FLAG_END_STREAM : NGHTTP2_FLAG_NONE;
    st.item = nghttp2_submit_data(c.h2->session, flags, st.id, &prd) == 0;
}

void Server::h2_whole(Conn& c, H2Stream& st, Response& r) {
    if (const char* why = invalid_answer(r)) {
        M0_LOG(error, "answer for slot ", to_string(st.slot), " refused 502: ", why);
        r = error_response(502, why);
    }
    st.state = H2Stream::State::answering;
    st.deadline = 0;
    const bool bodiless = bodiless_status(r.status);
    uint64_t len = r.body.size();
    if (st.head_request)
        if (auto v = r.headers.get("Content-Length"))
            std::from_chars(v->data(), v->data() + v->size(), len);
    const bool body = !st.head_request && !bodiless && !r.body.empty();
    if (body) h2_queue(c, st, std::make_shared<const std::string>(std::move(r.body)));
    st.eof = true;
    h2_submit(c, st, r, bodiless ? std::nullopt : std::optional<uint64_t>(len), body);
}

size_t Server::h2_queue(Conn& c, H2Stream& st, SharedBytes bytes) {
    if (bytes->empty()) return st.out_bytes;
    if (st.out_bytes == 0 && st.state != H2Stream::State::closing) {
        st.deadline = monotonic_seconds() + cfg_.write_timeout;
        h2_arm(c, st.deadline);
    }
    st.out_bytes += bytes->size();
    st.out.push_back(std::move(bytes));
    h2_resume(c, st);
    return st.out_bytes;
}

void Server::h2_resume(Conn& c, H2Stream& st) {
    if (st.deferred) {
        st.deferred = false;
        nghttp2_session_resume_data(c.h2->session, st.id);
    } else {
        h2_submit_data(c, st);  // a hold's stream with no item: a new one
    }
    H2State& h = *c.h2;
    if (h.flush_listed) return;
    h.flush_listed = true;
    if (flush_list_.empty()) schedule_flush();
    flush_list_.push_back(c.slot);
}

void Server::h2_completion(H2Stream& st, Completion& comp) {
    Conn* c = find(st.conn);
    if (!c || c->phase != Phase::h2 || st.state == H2Stream::State::closing) {
        metrics_.completions_dropped.fetch_add(1);
        if (comp.stream) comp.stream->cancel();
        return;
    }
    const SlotRef conn = st.conn;
    switch (comp.kind) {
        case Completion::Kind::response:
            if (comp.file && !invalid_answer(comp.response) && !st.head_request &&
                !bodiless_status(comp.response.status)) {
                st.state = H2Stream::State::answering;
                // Progress is due from the start: a window held at zero is reset.
                st.deadline = monotonic_seconds() + cfg_.write_timeout;
                h2_arm(*c, st.deadline);
                st.file = comp.file;
                h2_submit(*c, st, comp.response, comp.file->length, comp.file->length > 0);
                break;
            }
            if (comp.file) comp.response.body.clear();
            h2_whole(*c, st, comp.response);
            break;
        case Completion::Kind::head:
            if (const char* why = invalid_answer(comp.response)) {
                if (comp.stream) comp.stream->cancel();
                Response r = error_response(502, why);
                h2_whole(*c, st, r);
                break;
            }
            st.state = H2Stream::State::answering;
            st.deadline = 0;
            st.stream = comp.stream;
            st.eof = st.head_request || bodiless_status(comp.response.status);
            h2_submit(*c, st, comp.response, std::nullopt, !st.eof);
            break;
        case Completion::Kind::chunk: {
            if (st.eof) break;  // HEAD: the body is not sent
            const size_t n = comp.data.size();
            h2_queue(*c, st, std::make_shared<const std::string>(std::move(comp.data)));
            if (st.stream) st.stream->moved(n, st.out_bytes);
            break;
        }
        case Completion::Kind::end:
            if (comp.aborted) {
                // The body failed midway: the stream is reset, not ended as if whole.
                nghttp2_submit_rst_stream(c->h2->session, NGHTTP2_FLAG_NONE, st.id,
                                          NGHTTP2_INTERNAL_ERROR);
                break;
            }
            st.eof = true;
            h2_resume(*c, st);
            break;
        case Completion::Kind::hold: {
            const SlotRef slot = st.slot;
            if (bus_) on_bus_ready();  // the h frame first: subscribed before the head
            H2Stream* again = find_stream(slot);
            Conn* cc = find(conn);
            if (!again || !cc) return;
            h2_hold_head(*cc, *again, comp.response);
            break;
        }
    }
    if (Conn* cc = find(conn); cc && cc->phase == Phase::h2) h2_flush(*cc);
}

void Server::h2_hold_head(Conn& c, H2Stream& st, Response& r) {
    if (st.cors && st.cors->preflight && holds_.has(st.slot)) {
        // A preflight the application answered with a hold head: the
        // server's answer instead (http::CorsAsk), and no hold.
        holds_.release(st.slot);
        h2_whole(c, st, *st.cors->preflight);
        return;
    }
    if (st.poll && holds_.answers_once(st.slot)) {
        h2_poll(c, st, r);
        return;
    }
    if (!holds_.has(st.slot)) {
        M0_LOG(error, "hold completion for slot ", to_string(st.slot),
               " found no subscription (its h frame did not come first): answered whole");
        h2_whole(c, st, r);
        return;
    }
    if (const char* why = invalid_answer(r)) {
        holds_.release(st.slot);
        Response e = error_response(502, why);
        h2_whole(c, st, e);
        return;
    }
    cfg_.cors.apply(st.cors ? std::optional<std::string_view>(st.cors->origin) : std::nullopt,
                    r.headers);
    if (st.head_request) {
        // RFC 9110 §9.3.2: the head alone, and no hold.
        holds_.release(st.slot);
        r.body.clear();
        st.state = H2Stream::State::answering;
        st.eof = true;
        h2_submit(c, st, r, std::nullopt, false);
        return;
    }
    st.state = H2Stream::State::holding;
    st.deadline = 0;
    if (st.access) st.access->rec.hold = true;
    h2_queue(c, st, std::make_shared<const std::string>(std::move(r.body)));
    h2_submit(c, st, r, std::nullopt, true);
    metrics_.holds_total.fetch_add(1);
    const SlotRef slot = st.slot;
    if (!holds_.start(slot, monotonic_seconds())) return;  // a slow reader, closed
    if (shutting_down_ || c.h2->going_away) drop_hold(slot);
}

size_t Server::h2_write(SlotRef slot, const SharedBytes& bytes) {
    H2Stream* st = find_stream(slot);
    Conn* c = st ? find(st->conn) : nullptr;
    if (c && c->phase == Phase::h2 && !st->eof) h2_queue(*c, *st, bytes);
    return backlog(slot);  // the stream's queue: what the hold rule judges
}

void Server::h2_close_after_write(SlotRef slot) {
    H2Stream* st = find_stream(slot);
    Conn* c = st ? find(st->conn) : nullptr;
    if (!c || c->phase != Phase::h2 || st->state == H2Stream::State::closing) return;
    // Its last bytes (a retry hint) then END_STREAM; a reader that does not
    // take them within --hold-drain-timeout is reset (h2_tick).
    st->state = H2Stream::State::closing;
    st->eof = true;
    st->deadline = monotonic_seconds() + cfg_.hold_drain_timeout;
    h2_arm(*c, st->deadline);
    h2_resume(*c, *st);
}

}  // namespace m0::server
