// sse_load's HTTP/2 client (--streams N): one connection carries N holds,
// as a page's EventSources share one, through libnghttp2's client session:
// h2 by ALPN over TLS, h2c with prior knowledge over TCP (RFC 9113 §3.3).
//
// Each stream reports to the run as an HTTP/1.1 stream does: stream_head on
// its final :status, stream_data with each DATA frame's payload, stream_gone
// once it is closed or reset or its connection ends (then Conn::h2 is null,
// so it is reported once). The session answers flow control itself
// (WINDOW_UPDATE as DATA is read), with windows opened wide at the start as
// a browser's are. One thread, the run's loop.
#include <event2/buffer.h>
#include <nghttp2/nghttp2.h>

#include <charconv>
#include <cstdio>
#include <string>

#include "sse_load.hpp"

namespace sse {

struct H2Link {
    Run* run = nullptr;
    bufferevent* bev = nullptr;
    nghttp2_session* session = nullptr;
    std::vector<Conn*> streams;
};

namespace {

constexpr int32_t kStreamWindow = 1 << 20;  // SETTINGS_INITIAL_WINDOW_SIZE
constexpr int32_t kConnWindow = 16 << 20;   // the connection's window

Conn* stream_of(nghttp2_session* s, int32_t id) {
    auto* c = static_cast<Conn*>(nghttp2_session_get_stream_user_data(s, id));
    return c && c->h2 ? c : nullptr;
}

ssize_t on_send(nghttp2_session*, const uint8_t* data, size_t n, int, void* arg) {
    bufferevent_write(static_cast<H2Link*>(arg)->bev, data, n);
    return ssize_t(n);
}

int on_header(nghttp2_session* s, const nghttp2_frame* f, const uint8_t* name, size_t namelen,
              const uint8_t* value, size_t valuelen, uint8_t, void*) {
    if (f->hd.type != NGHTTP2_HEADERS ||
        std::string_view(reinterpret_cast<const char*>(name), namelen) != ":status")
        return 0;
    int status = 0;
    const auto* v = reinterpret_cast<const char*>(value);
    std::from_chars(v, v + valuelen, status);
    if (Conn* c = stream_of(s, f->hd.stream_id); c && status >= 200) stream_head(*c, status);
    return 0;
}

int on_data(nghttp2_session* s, uint8_t, int32_t id, const uint8_t* data, size_t n, void*) {
    if (Conn* c = stream_of(s, id))
        stream_data(*c, std::string_view(reinterpret_cast<const char*>(data), n));
    return 0;
}

int on_close(nghttp2_session* s, int32_t id, uint32_t, void*) {
    if (Conn* c = stream_of(s, id)) {
        c->h2 = nullptr;
        stream_gone(*c);
    }
    return 0;
}

nghttp2_session_callbacks* callbacks() {
    static nghttp2_session_callbacks* cbs = [] {
        nghttp2_session_callbacks* c = nullptr;
        if (nghttp2_session_callbacks_new(&c) != 0) die("nghttp2_session_callbacks_new failed");
        nghttp2_session_callbacks_set_send_callback(c, on_send);
        nghttp2_session_callbacks_set_on_header_callback(c, on_header);
        nghttp2_session_callbacks_set_on_data_chunk_recv_callback(c, on_data);
        nghttp2_session_callbacks_set_on_stream_close_callback(c, on_close);
        return c;
    }();
    return cbs;
}

// The connection ended: every stream still on it is gone. The link stays
// allocated (the run keeps no list of them), its session and socket freed.
void link_gone(H2Link* l) {
    for (Conn* c : l->streams)
        if (c->h2) {
            c->h2 = nullptr;
            stream_gone(*c);
        }
    nghttp2_session_del(l->session);
    l->session = nullptr;
    bufferevent_free(l->bev);
    l->bev = nullptr;
}

void on_read(bufferevent* bev, void* arg) {
    auto* l = static_cast<H2Link*>(arg);
    evbuffer* in = bufferevent_get_input(bev);
    while (evbuffer_get_length(in) > 0) {
        const size_t n = evbuffer_get_contiguous_space(in);
        const ssize_t used =
            nghttp2_session_mem_recv(l->session, evbuffer_pullup(in, ssize_t(n)), n);
        if (used < 0) {
            std::fprintf(stderr, "sse_load: HTTP/2: %s\n", nghttp2_strerror(int(used)));
            return link_gone(l);
        }
        evbuffer_drain(in, n);
    }
    if (nghttp2_session_send(l->session) != 0 ||
        (!nghttp2_session_want_read(l->session) && !nghttp2_session_want_write(l->session)))
        link_gone(l);
}

void on_event(bufferevent* bev, short what, void* arg) {
    auto* l = static_cast<H2Link*>(arg);
    if (what & BEV_EVENT_CONNECTED) {
        if (l->run->stream.tls && tls_alpn(bev) != "h2")
            die("--streams: the server chose '" + tls_alpn(bev) + "' by ALPN, not h2");
        return;
    }
    link_gone(l);
}

// Both views outlive the request's submission (literals, or the caller's strings).
nghttp2_nv header(std::string_view name, std::string_view value) {
    return {reinterpret_cast<uint8_t*>(const_cast<char*>(name.data())),
            reinterpret_cast<uint8_t*>(const_cast<char*>(value.data())), name.size(), value.size(),
            NGHTTP2_NV_FLAG_NONE};
}

}  // namespace

void h2_open(Run& r, const std::vector<Conn*>& streams, int source) {
    auto* l = new H2Link;
    l->run = &r;
    l->streams = streams;
    l->bev = dial(r, r.stream, source, r.tls_h2);
    bufferevent_setcb(l->bev, on_read, nullptr, on_event, l);
    bufferevent_enable(l->bev, EV_READ);
    if (nghttp2_session_client_new(&l->session, callbacks(), l) != 0)
        die("nghttp2_session_client_new failed");
    const nghttp2_settings_entry settings[] = {
        {NGHTTP2_SETTINGS_ENABLE_PUSH, 0}, {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, kStreamWindow}};
    nghttp2_submit_settings(l->session, NGHTTP2_FLAG_NONE, settings, 2);
    nghttp2_session_set_local_window_size(l->session, NGHTTP2_FLAG_NONE, 0, kConnWindow);
    const std::string scheme = r.stream.tls ? "https" : "http";
    const std::string authority = r.stream.host + ":" + std::to_string(r.stream.port);
    for (Conn* c : streams) {
        c->h2 = l;
        const std::string path = stream_path(r, c->channel);
        std::vector<nghttp2_nv> nv = {header(":method", "GET"), header(":scheme", scheme),
                                      header(":authority", authority), header(":path", path),
                                      header("accept", "text/event-stream")};
        if (!r.first_id.empty()) nv.push_back(header("last-event-id", r.first_id));
        // The session copies the names and values.
        if (nghttp2_submit_request(l->session, nullptr, nv.data(), nv.size(), nullptr, c) < 0)
            die("nghttp2_submit_request failed");
    }
    if (nghttp2_session_send(l->session) != 0) die("nghttp2_session_send failed");
}

}  // namespace sse
