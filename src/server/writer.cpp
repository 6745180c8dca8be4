// A connection's answers (Server::Conn's): heads (framing, Date, Server,
// Connection belong to the server), whole bodies, files, streamed bodies.
// Loop thread.
#include <event2/buffer.h>
#include <sys/uio.h>

#include <cerrno>
#include <charconv>
#include <cstdio>
#include <ctime>

#include "http/body_length.hpp"
#include "loop/log.hpp"
#include "server/conn.hpp"

namespace m0::server {

using namespace m0::http;

// A connection sending a file writes up to this much a loop turn (one
// sendfile(2)); the kernel's socket buffer bounds it too.
constexpr size_t kFileWriteMax = 512 * 1024;

namespace {
// RFC 9112 §9.6: a handler that answers `Connection: close` ends its
// connection after the answer (gunicorn does so for a WSGI app); the field
// itself is the server's to write (head_text leaves the handler's out).
bool asks_close(const Response& r) {
    for (const auto& item : ws::list_items(r.headers, "Connection"))
        if (iequals(item, "close")) return true;
    return false;
}
}  // namespace

const std::string& Server::date_header() {
    time_t now = std::time(nullptr);
    if (now != date_time_) {
        date_time_ = now;
        tm g;
        gmtime_r(&now, &g);
        char buf[64];
        // RFC 9110 §5.6.7: IMF-fixdate.
        strftime(buf, sizeof buf, "%a, %d %b %Y %H:%M:%S GMT", &g);
        date_ = buf;
    }
    return date_;
}

std::string Server::Conn::head_text(const Response& r, std::string_view framing) const {
    std::string h;
    h.reserve(256);
    h.append("HTTP/1.1 ")
        .append(std::to_string(r.status))
        .append(" ")
        .append(reason_phrase(r.status));
    h.append("\r\n");
    bool has_server = false;
    for (const auto& [k, v] : r.headers.items) {
        // Framing and connection management belong to the server.
        if (iequals(k, "Content-Length") || iequals(k, "Transfer-Encoding") ||
            iequals(k, "Connection") || iequals(k, "Date") || iequals(k, "Keep-Alive"))
            continue;
        if (iequals(k, "Server")) has_server = true;
        h.append(k).append(": ").append(trim_ows(v)).append("\r\n");
    }
    h.append("Date: ").append(server->date_header()).append("\r\n");
    if (!has_server) h.append("Server: ").append(server->cfg_.server_header).append("\r\n");
    h.append(framing);
    if (!keep_alive)
        h.append("Connection: close\r\n");
    else if (version_minor == 0)
        h.append("Connection: keep-alive\r\n");
    h.append("\r\n");
    return h;
}

const char* Server::invalid_answer(const Response& r) {
    // RFC 9110 §15: "Values outside the range 100..599 are invalid", and a 1xx
    // is interim (§15.2): as the final answer it would leave the client
    // waiting for another, and the next answer on the connection taken for it.
    if (r.status < 200 || r.status > 599) return "the handler answered an invalid status code";
    for (const auto& [k, v] : r.headers.items) {
        // RFC 9110 §5.1: field-name = token. RFC 9110 §5.5: "Field values
        // containing CR, LF, or NUL characters are invalid and dangerous, due to
        // the varying ways that implementations might parse and interpret those
        // characters": written as they are, they would end the field (or the
        // head) where the handler chose, and split the response. Any other
        // control character is no field-char either, and an HTTP/2 client
        // resets the stream that carries one (RFC 9113 §8.2.1).
        if (!is_token(k)) return "the handler answered a header field name that is not a token";
        if (!is_field_value(v))
            return "the handler answered a control character (CR, LF, NUL or another) in a "
                   "header field value";
    }
    return nullptr;
}

void Server::Conn::refuse_answer(const char* why) {
    M0_LOG(error, "answer for slot ", to_string(slot), " refused 502: ", why);
    keep_alive = false;
    Response r = error_response(502, why);
    send_whole(r);
    close_after_write();
}

void Server::Conn::send_now(std::string_view head, std::string_view body) {
    evbuffer* output = bufferevent_get_output(bev);
    size_t taken = 0;
    if (!tls && evbuffer_get_length(output) == 0) {
        iovec iov[2] = {{const_cast<char*>(head.data()), head.size()},
                        {const_cast<char*>(body.data()), body.size()}};
        ssize_t n;
        do n = ::writev(fd, iov, body.empty() ? 1 : 2);
        while (n < 0 && errno == EINTR);
        // Whatever the socket did not take (all of it on EAGAIN or an error,
        // which the bufferevent's own write then meets and reports) goes on
        // from the output.
        if (n > 0) taken = static_cast<size_t>(n);
    }
    if (taken < head.size()) evbuffer_add(output, head.data() + taken, head.size() - taken);
    taken = taken > head.size() ? taken - head.size() : 0;
    if (taken < body.size()) evbuffer_add(output, body.data() + taken, body.size() - taken);
}

void Server::Conn::send_whole(Response& r) {
    if (const char* why = invalid_answer(r)) {
        // The connection stays usable: the 502 is whole and framed.
        M0_LOG(error, "answer for slot ", to_string(slot), " refused 502: ", why);
        r = error_response(502, why);
    }
    if (asks_close(r)) keep_alive = false;
    std::string framing;
    if (!bodiless_status(r.status)) {
        size_t len = r.body.size();
        if (head_request) {
            // HEAD: the Content-Length the GET would have had (a malformed one is
            // ignored: nothing may throw on the loop thread).
            if (auto v = r.headers.get("Content-Length"))
                std::from_chars(v->data(), v->data() + v->size(), len);
        }
        framing = "Content-Length: " + std::to_string(len) + "\r\n";
    }
    std::string head = head_text(r, framing);
    const bool body = !head_request && !bodiless_status(r.status);
    send_now(head, body ? std::string_view(r.body) : std::string_view());
    if (server->access_log_)
        server->access_answer(*this, r.status, head.size() + (body ? r.body.size() : 0));
}

void Server::Conn::send_file(Response& r, FileBody& f) {
    if (const char* why = invalid_answer(r)) {
        refuse_answer(why);
        return;
    }
    if (asks_close(r)) keep_alive = false;
    const bool body = !head_request && !bodiless_status(r.status);
    std::string framing;
    if (!bodiless_status(r.status)) {
        // The length the pool declared for the file (its Content-Length, or
        // the file's own when the app gave none).
        auto v = r.headers.get("Content-Length");
        framing = "Content-Length: " + std::string(v ? *v : std::to_string(f.length)) + "\r\n";
    }
    std::string head = head_text(r, framing);
    evbuffer* output = bufferevent_get_output(bev);
    evbuffer_add(output, head.data(), head.size());
    size_t sent = head.size();
    if (body && f.length > 0) {
        // libevent owns the descriptor from here and closes it once sent, or
        // when the connection goes; sendfile(2) writes at most this much a
        // turn (its default, 16 KiB, costs a loop turn per 16 KiB).
        if (evbuffer_add_file(output, f.fd, static_cast<ev_off_t>(f.offset),
                              static_cast<ev_off_t>(f.length)) == 0) {
            f.fd = -1;
            sent += f.length;
            bufferevent_set_max_single_write(bev, kFileWriteMax);
        } else {
            M0_LOG(error, "answer for slot ", to_string(slot), ": the file could not be queued");
            f.cut = true;
        }
    }
    if (server->access_log_) server->access_answer(*this, r.status, sent);
    if (body && f.cut) {
        // PEP 3333: short of its Content-Length, the connection closes (the
        // pool logged it).
        keep_alive = false;
        close_after_write();
        return;
    }
    finish_request();
}

void Server::Conn::start_stream(Response& r, std::shared_ptr<StreamState> st) {
    const char* why = invalid_answer(r);
    auto cl = r.headers.get("Content-Length");
    std::optional<uint64_t> declared;
    // RFC 9110 §8.6: Content-Length = 1*DIGIT; it is written as the framing.
    if (!why && cl && !(declared = parse_content_length(*cl)))
        why = "the handler answered a Content-Length that is not a number";
    if (why) {
        if (st) st->cancel();  // its chunks and end find the connection closing: dropped
        refuse_answer(why);
        return;
    }
    if (asks_close(r)) keep_alive = false;
    stream = std::move(st);
    phase = Phase::streaming;
    std::string framing;
    chunked = false;
    // RFC 9110 §9.3.2, §15.4.5, §6.4.1: a HEAD's answer, a 1xx, 204 or 304
    // has no body to frame, so the connection stays usable without a length.
    stream_body = !head_request && !bodiless_status(r.status);
    stream_left.reset();
    if (cl) {
        framing = "Content-Length: " + std::string(*cl) + "\r\n";
        if (stream_body) stream_left = declared;
    } else if (!stream_body) {
        // nothing to frame
    } else if (version_minor >= 1) {
        framing = "Transfer-Encoding: chunked\r\n";
        chunked = true;
    } else {
        keep_alive = false;  // HTTP/1.0: the body ends when the connection does
    }
    std::string head = head_text(r, framing);
    evbuffer* output = bufferevent_get_output(bev);
    evbuffer_add(output, head.data(), head.size());
    if (access) server->access_answer(*this, r.status, head.size());
    if (!r.body.empty()) stream_chunk(r.body);
    bufferevent_setwatermark(bev, EV_WRITE, server->cfg_.stream_high_water / 2, 0);
}

void Server::Conn::stream_chunk(std::string& data) {
    evbuffer* output = bufferevent_get_output(bev);
    size_t n = data.size();
    if (stream_left && n > *stream_left) {
        // RFC 9112 §6.3: a byte past the Content-Length would be read as the
        // start of the next answer. The producer was to stop (the WSGI pool
        // does); whatever comes is dropped here, whoever sent it.
        M0_LOG(error, "answer for slot ", to_string(slot), ": ", std::to_string(n - *stream_left),
               " bytes past its Content-Length dropped");
        n = static_cast<size_t>(*stream_left);
    }
    if (stream_left) *stream_left -= n;
    if (n > 0 && stream_body) {
        if (chunked) {
            char size[32];
            int line = snprintf(size, sizeof size, "%zx\r\n", n);
            evbuffer_add(output, size, static_cast<size_t>(line));
            evbuffer_add(output, data.data(), n);
            evbuffer_add(output, "\r\n", 2);
            if (access) server->access_bytes(*this, static_cast<size_t>(line) + n + 2);
        } else {
            evbuffer_add(output, data.data(), n);
            if (access) server->access_bytes(*this, n);
        }
    }
    if (stream) stream->moved(data.size(), evbuffer_get_length(output));
}

void Server::Conn::end_stream(bool aborted) {
    bufferevent_setwatermark(bev, EV_WRITE, 0, 0);
    stream.reset();
    if (!aborted && stream_left && *stream_left > 0) {
        // PEP 3333: a body short of its Content-Length closes the connection,
        // or the client would wait for the rest, or take the next answer's
        // bytes for it.
        M0_LOG(error, "answer for slot ", to_string(slot), " ended ", std::to_string(*stream_left),
               " bytes short of its Content-Length: closed");
        aborted = true;
    }
    stream_left.reset();
    if (aborted) {
        // The body failed midway: a truncated body must not look complete.
        keep_alive = false;
        close_after_write();
        return;
    }
    if (chunked) {
        evbuffer_add(bufferevent_get_output(bev), "0\r\n\r\n", 5);
        if (access) server->access_bytes(*this, 5);
    }
    finish_request();
}

}  // namespace m0::server
