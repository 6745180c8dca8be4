// Writing answers: heads (framing, Date, Server, Connection belong to the
// server), whole bodies, streamed bodies. Loop thread.
#include <event2/buffer.h>

#include <charconv>
#include <cstdio>
#include <ctime>

#include "server/conn.hpp"

namespace m0::server {

using namespace m0::http;

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

std::string Server::head_text(const Conn& c, const Response& r, std::string_view framing) {
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
        h.append(k).append(": ").append(v).append("\r\n");
    }
    h.append("Date: ").append(date_header()).append("\r\n");
    if (!has_server) h.append("Server: ").append(cfg_.server_header).append("\r\n");
    h.append(framing);
    if (!c.keep_alive)
        h.append("Connection: close\r\n");
    else if (c.version_minor == 0)
        h.append("Connection: keep-alive\r\n");
    h.append("\r\n");
    return h;
}

static bool bodiless(int status) {
    return (status >= 100 && status < 200) || status == 204 || status == 304;
}

void Server::send_whole(Conn& c, Response& r) {
    std::string framing;
    if (!bodiless(r.status)) {
        size_t len = r.body.size();
        if (c.head_request) {
            // HEAD: the Content-Length the GET would have had (a malformed one is
            // ignored: nothing may throw on the loop thread).
            if (auto v = r.headers.get("Content-Length"))
                std::from_chars(v->data(), v->data() + v->size(), len);
        }
        framing = "Content-Length: " + std::to_string(len) + "\r\n";
    }
    std::string head = head_text(c, r, framing);
    evbuffer* out = bufferevent_get_output(c.bev);
    evbuffer_add(out, head.data(), head.size());
    if (!c.head_request && !bodiless(r.status)) evbuffer_add(out, r.body.data(), r.body.size());
}

void Server::start_stream(Conn& c, Response& r, std::shared_ptr<StreamState> st) {
    c.stream = std::move(st);
    c.phase = Phase::streaming;
    std::string framing;
    c.chunked = false;
    if (auto cl = r.headers.get("Content-Length")) {
        framing = "Content-Length: " + std::string(*cl) + "\r\n";
    } else if (c.version_minor >= 1 && !c.head_request) {
        framing = "Transfer-Encoding: chunked\r\n";
        c.chunked = true;
    } else {
        c.keep_alive = false;  // HTTP/1.0: the body ends when the connection does
    }
    std::string head = head_text(c, r, framing);
    evbuffer* out = bufferevent_get_output(c.bev);
    evbuffer_add(out, head.data(), head.size());
    if (!r.body.empty()) stream_chunk(c, r.body);
    bufferevent_setwatermark(c.bev, EV_WRITE, cfg_.stream_high_water / 2, 0);
}

void Server::stream_chunk(Conn& c, std::string& data) {
    evbuffer* out = bufferevent_get_output(c.bev);
    if (!data.empty() && !c.head_request) {
        if (c.chunked) {
            char size[32];
            int n = snprintf(size, sizeof size, "%zx\r\n", data.size());
            evbuffer_add(out, size, static_cast<size_t>(n));
            evbuffer_add(out, data.data(), data.size());
            evbuffer_add(out, "\r\n", 2);
        } else {
            evbuffer_add(out, data.data(), data.size());
        }
    }
    if (c.stream) c.stream->moved(data.size(), evbuffer_get_length(out));
}

void Server::end_stream(Conn& c, bool aborted) {
    bufferevent_setwatermark(c.bev, EV_WRITE, 0, 0);
    c.stream.reset();
    if (aborted) {
        // The body failed midway: a truncated body must not look complete.
        c.keep_alive = false;
        close_after_write(c);
        return;
    }
    if (c.chunked && !c.head_request) evbuffer_add(bufferevent_get_output(c.bev), "0\r\n\r\n", 5);
    finish_request(c);
}

}  // namespace m0::server
