// An HTTP/2 client for the server tests: nghttp2's own client session over
// a rig's socketpair (prior knowledge: the preface is its first bytes).
// Test thread only; the test steps the loop and calls pump().
#pragma once
#include <nghttp2/nghttp2.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "server/test_rig.hpp"

namespace m0::testing {

struct H2Client {
    struct Stream {
        std::vector<std::pair<std::string, std::string>> headers;
        std::string data;
        bool closed = false;
        uint32_t error = 0;  // the RST_STREAM's code (NGHTTP2_NO_ERROR when it ended well)
        std::string header(const std::string& name) const {
            for (const auto& [k, v] : headers)
                if (k == name) return v;
            return {};
        }
    };
    SocketClient& sock;
    nghttp2_session* session = nullptr;
    std::map<int32_t, Stream> streams;
    struct Upload {
        std::string pending;
        bool done = false;
    };
    std::map<int32_t, std::unique_ptr<Upload>> uploads;
    bool goaway = false;
    uint32_t goaway_error = 0;
    // With `manual_window`, DATA read is not acknowledged until consume().
    explicit H2Client(SocketClient& s, bool manual_window = false,
                      std::vector<nghttp2_settings_entry> settings = {})
        : sock(s) {
        nghttp2_session_callbacks* cb;
        nghttp2_session_callbacks_new(&cb);
        nghttp2_session_callbacks_set_on_header_callback(
            cb, [](nghttp2_session*, const nghttp2_frame* f, const uint8_t* n, size_t nl,
                   const uint8_t* v, size_t vl, uint8_t, void* p) {
                self(p).streams[f->hd.stream_id].headers.emplace_back(
                    std::string(reinterpret_cast<const char*>(n), nl),
                    std::string(reinterpret_cast<const char*>(v), vl));
                return 0;
            });
        nghttp2_session_callbacks_set_on_data_chunk_recv_callback(
            cb, [](nghttp2_session*, uint8_t, int32_t id, const uint8_t* d, size_t n, void* p) {
                self(p).streams[id].data.append(reinterpret_cast<const char*>(d), n);
                return 0;
            });
        nghttp2_session_callbacks_set_on_stream_close_callback(
            cb, [](nghttp2_session*, int32_t id, uint32_t code, void* p) {
                self(p).streams[id].closed = true;
                self(p).streams[id].error = code;
                return 0;
            });
        nghttp2_session_callbacks_set_on_frame_recv_callback(
            cb, [](nghttp2_session*, const nghttp2_frame* f, void* p) {
                if (f->hd.type == NGHTTP2_GOAWAY) {
                    self(p).goaway = true;
                    self(p).goaway_error = f->goaway.error_code;
                }
                return 0;
            });
        nghttp2_option* opt;
        nghttp2_option_new(&opt);
        if (manual_window) nghttp2_option_set_no_auto_window_update(opt, 1);
        nghttp2_session_client_new2(&session, cb, this, opt);
        nghttp2_option_del(opt);
        nghttp2_session_callbacks_del(cb);
        nghttp2_submit_settings(session, NGHTTP2_FLAG_NONE, settings.data(), settings.size());
    }
    ~H2Client() { nghttp2_session_del(session); }
    H2Client(const H2Client&) = delete;
    H2Client& operator=(const H2Client&) = delete;
    static H2Client& self(void* p) { return *static_cast<H2Client*>(p); }

    // A request; its stream id. `body`: sent as DATA.
    int32_t request(const std::string& method, const std::string& path,
                    std::vector<std::pair<std::string, std::string>> extra = {},
                    const std::string* body = nullptr) {
        nghttp2_data_provider prd{};
        if (body) {
            prd.source.ptr = const_cast<std::string*>(body);
            prd.read_callback = [](nghttp2_session*, int32_t, uint8_t* buf, size_t len,
                                   uint32_t* flags, nghttp2_data_source* src, void*) -> ssize_t {
                auto& b = *static_cast<std::string*>(src->ptr);
                const size_t n = std::min(len, b.size());
                std::memcpy(buf, b.data(), n);
                b.erase(0, n);
                if (b.empty()) *flags |= NGHTTP2_DATA_FLAG_EOF;
                return static_cast<ssize_t>(n);
            };
        }
        return submit(method, path, std::move(extra), body ? &prd : nullptr);
    }
    // A request whose body the test sends piece by piece (send_body); its id.
    int32_t upload(const std::string& method, const std::string& path,
                   std::vector<std::pair<std::string, std::string>> extra = {}) {
        auto up = std::make_unique<Upload>();
        nghttp2_data_provider prd{};
        prd.source.ptr = up.get();
        prd.read_callback = [](nghttp2_session*, int32_t, uint8_t* buf, size_t len, uint32_t* flags,
                               nghttp2_data_source* src, void*) -> ssize_t {
            auto& u = *static_cast<Upload*>(src->ptr);
            if (u.pending.empty() && !u.done) return NGHTTP2_ERR_DEFERRED;
            const size_t n = std::min(len, u.pending.size());
            std::memcpy(buf, u.pending.data(), n);
            u.pending.erase(0, n);
            if (u.pending.empty() && u.done) *flags |= NGHTTP2_DATA_FLAG_EOF;
            return static_cast<ssize_t>(n);
        };
        const int32_t id = submit(method, path, std::move(extra), &prd);
        uploads[id] = std::move(up);
        return id;
    }
    // HEADERS for `method` `path` (and `extra`), with `prd`'s DATA if given.
    int32_t submit(const std::string& method, const std::string& path,
                   std::vector<std::pair<std::string, std::string>> extra,
                   const nghttp2_data_provider* prd) {
        std::vector<std::pair<std::string, std::string>> h = {{":method", method},
                                                              {":scheme", "http"},
                                                              {":authority", "example.test"},
                                                              {":path", path}};
        h.insert(h.end(), extra.begin(), extra.end());
        std::vector<nghttp2_nv> nv;
        for (auto& [k, v] : h)
            nv.push_back({reinterpret_cast<uint8_t*>(k.data()),
                          reinterpret_cast<uint8_t*>(v.data()), k.size(), v.size(),
                          NGHTTP2_NV_FLAG_NONE});
        const int32_t id =
            nghttp2_submit_request(session, nullptr, nv.data(), nv.size(), prd, nullptr);
        streams[id];
        return id;
    }
    // More of an upload's body; `last`: its end.
    void send_body(int32_t id, const std::string& piece, bool last) {
        Upload& u = *uploads.at(id);
        u.pending += piece;
        u.done = last;
        nghttp2_session_resume_data(session, id);
    }
    void reset(int32_t id) {
        nghttp2_submit_rst_stream(session, NGHTTP2_FLAG_NONE, id, NGHTTP2_CANCEL);
    }
    // The window of stream `id` (and the connection's) opened by `n` bytes.
    void consume(int32_t id, size_t n) { nghttp2_session_consume(session, id, n); }
    // Sends what the session has, reads what came. False once the session failed.
    bool pump() {
        for (;;) {
            const uint8_t* out = nullptr;
            const ssize_t n = nghttp2_session_mem_send(session, &out);
            if (n <= 0) break;
            if (!sock.send(std::string_view(reinterpret_cast<const char*>(out), size_t(n))))
                return false;
        }
        sock.pump();
        if (!sock.in.empty()) {
            const ssize_t r = nghttp2_session_mem_recv(
                session, reinterpret_cast<const uint8_t*>(sock.in.data()), sock.in.size());
            sock.in.clear();
            if (r < 0) return false;
        }
        return true;
    }
    // Steps `rig` (pumping) until `done`.
    bool until(ServerRig& rig, const std::function<bool()>& done,
               std::chrono::milliseconds t = std::chrono::milliseconds(3000)) {
        return rig.step_until(
            [&] {
                pump();
                return done();
            },
            t);
    }
};

// Frames written by hand, for a client that does what nghttp2's would not.
// A frame: its 9-byte header (RFC 9113 §4.1) and `payload`.
inline std::string frame(uint8_t type, uint8_t flags, int32_t id, const std::string& payload) {
    const size_t n = payload.size();
    const char head[9] = {char(n >> 16),  char(n >> 8),   char(n),       char(type), char(flags),
                          char(id >> 24), char(id >> 16), char(id >> 8), char(id)};
    return std::string(head, 9) + payload;
}
inline const std::string kEmptySettings = frame(NGHTTP2_SETTINGS, 0, 0, "");

// An HPACK block of `fields` (a fresh encoder: no dynamic table references).
inline std::string hpack(std::vector<std::pair<std::string, std::string>> fields) {
    nghttp2_hd_deflater* hd;
    if (nghttp2_hd_deflate_new(&hd, 4096) != 0) return {};
    std::vector<nghttp2_nv> nv;
    for (auto& [k, v] : fields)
        nv.push_back({reinterpret_cast<uint8_t*>(k.data()), reinterpret_cast<uint8_t*>(v.data()),
                      k.size(), v.size(), NGHTTP2_NV_FLAG_NONE});
    std::string block(nghttp2_hd_deflate_bound(hd, nv.data(), nv.size()), '\0');
    const ssize_t n = nghttp2_hd_deflate_hd(hd, reinterpret_cast<uint8_t*>(block.data()),
                                            block.size(), nv.data(), nv.size());
    nghttp2_hd_deflate_del(hd);
    block.resize(n > 0 ? size_t(n) : 0);
    return block;
}

// A HEADERS frame (END_STREAM, END_HEADERS) for GET `path` on stream `id`.
inline std::string raw_get(int32_t id, const std::string& path) {
    return frame(
        NGHTTP2_HEADERS, NGHTTP2_FLAG_END_STREAM | NGHTTP2_FLAG_END_HEADERS, id,
        hpack({{":method", "GET"}, {":scheme", "http"}, {":authority", "t"}, {":path", path}}));
}

}  // namespace m0::testing
