// sse_load's WebSocket subscriber (a ws:// or wss:// --url): one connection
// a hold, the RFC 6455 §4.1 handshake, then frames through Debian's libwslay
// in client mode.
//
// The GET offers no extension (no permessage-deflate) and no subprotocol;
// its Sec-WebSocket-Key is 16 random bytes in base64. The answer's head is
// read up to its blank line: a 101 whose Sec-WebSocket-Accept is
// base64(SHA-1(key + RFC 6455's GUID)) (OpenSSL's SHA-1 and base64) opens
// the hold (stream_head 200); any other status is that status (a 200, an
// answer that is no WebSocket, fails as 0), and a 101 with a wrong accept
// key fails the hold (status 0, said once on stderr).
// After the head, wslay reads the frames (unbuffered: a message in one
// piece is read where it lies): each text message is one event
// (stream_event: m0serve's {"id", "event", "data"} JSON and nchan's bare
// data alike hold `seq=N t=NS`); pings are answered by wslay's own pongs,
// masked as a client's frames must be; a close ends the hold (stream_gone).
// One thread, the run's loop.
#include <event2/buffer.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <openssl/sha.h>
#include <strings.h>
#include <wslay/wslay.h>

#include <cstdio>
#include <cstring>
#include <string>

#include "sse_load.hpp"

namespace sse {

struct WsLink {
    Conn* conn = nullptr;
    wslay_event_context_ptr ctx = nullptr;  // once the 101 is checked
    std::string accept;                     // the Sec-WebSocket-Accept expected
    // A text message's data as wslay hands it over in pieces (no buffering:
    // a message in one piece, as nearly all are, is read where it lies).
    bool text = false;       // the message being read is text
    bool whole = false;      // its one frame's payload may arrive in one piece
    uint64_t length = 0;     // that frame's payload length
    bool delivered = false;  // it did, and was read where it lay
    std::string pending;     // its pieces so far, when it came in more than one
};

namespace {

constexpr const char* kGuid = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";

std::string base64(const unsigned char* p, size_t n) {
    std::string out(4 * ((n + 2) / 3), '\0');
    EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()), p, int(n));
    return out;
}

ssize_t on_recv(wslay_event_context_ptr ctx, uint8_t* buf, size_t len, int, void* arg) {
    auto* l = static_cast<WsLink*>(arg);
    const int n = evbuffer_remove(bufferevent_get_input(l->conn->bev), buf, len);
    if (n > 0) return n;
    wslay_event_set_error(ctx, WSLAY_ERR_WOULDBLOCK);
    return -1;
}

ssize_t on_send(wslay_event_context_ptr, const uint8_t* data, size_t len, int, void* arg) {
    bufferevent_write(static_cast<WsLink*>(arg)->conn->bev, data, len);
    return ssize_t(len);
}

int on_genmask(wslay_event_context_ptr, uint8_t* buf, size_t len, void*) {
    return RAND_bytes(buf, int(len)) == 1 ? 0 : -1;
}

// Data frames come unbuffered (wslay_event_config_set_no_buffering): each
// piece as wslay reads it, so a delivery costs the driver no allocation or
// copy of wslay's, as an SSE event read from the stream's buffer does not.
// wslay still checks the framing, answers pings and closes.
void on_frame_start(wslay_event_context_ptr, const wslay_event_on_frame_recv_start_arg* a,
                    void* arg) {
    auto* l = static_cast<WsLink*>(arg);
    if (a->opcode == WSLAY_TEXT_FRAME || a->opcode == WSLAY_BINARY_FRAME) {
        l->text = a->opcode == WSLAY_TEXT_FRAME;
        l->whole = a->fin;
        l->length = a->payload_length;
        l->delivered = false;
        l->pending.clear();
    } else if (a->opcode == WSLAY_CONTINUATION_FRAME) {
        l->whole = false;
    }
}

void on_frame_chunk(wslay_event_context_ptr, const wslay_event_on_frame_recv_chunk_arg* a,
                    void* arg) {
    auto* l = static_cast<WsLink*>(arg);
    if (!l->text) return;
    if (l->whole && l->pending.empty() && a->data_length == l->length) {
        stream_event(*l->conn,
                     std::string_view(reinterpret_cast<const char*>(a->data), a->data_length));
        l->delivered = true;
        return;
    }
    l->pending.append(reinterpret_cast<const char*>(a->data), a->data_length);
}

void on_message(wslay_event_context_ptr, const wslay_event_on_msg_recv_arg* m, void* arg) {
    // A data message's end (its pieces are in `pending`); control frames
    // come whole in m->msg.
    auto* l = static_cast<WsLink*>(arg);
    if (m->opcode == WSLAY_TEXT_FRAME && !l->delivered) stream_event(*l->conn, l->pending);
}

const wslay_event_callbacks kCallbacks = {on_recv,        on_send, on_genmask, on_frame_start,
                                          on_frame_chunk, nullptr, on_message};

// The connection ended (closed, reset or refused): the hold is gone.
void link_gone(WsLink* l) {
    Conn& c = *l->conn;
    if (l->ctx) wslay_event_context_free(l->ctx);
    bufferevent_free(c.bev);
    c.bev = nullptr;
    c.ws = nullptr;
    delete l;
    stream_gone(c);
}

// The head's status, and whether it names the accept key expected.
int check_head(const WsLink& l, const std::string& head) {
    int status = 0;
    if (std::sscanf(head.c_str(), "HTTP/1.1 %d", &status) != 1) return 0;
    if (status != 101) return status == 200 ? 0 : status;  // a 200 is no WebSocket
    for (size_t at = head.find("\r\n"); at != std::string::npos; at = head.find("\r\n", at + 2)) {
        constexpr std::string_view name = "sec-websocket-accept:";
        if (strncasecmp(head.c_str() + at + 2, name.data(), name.size()) != 0) continue;
        size_t v = head.find_first_not_of(' ', at + 2 + name.size());
        if (v != std::string::npos && head.compare(v, l.accept.size(), l.accept) == 0 &&
            head.compare(v + l.accept.size(), 2, "\r\n") == 0)
            return 200;
    }
    static bool said = false;
    if (!said) std::fprintf(stderr, "sse_load: a 101 without the Sec-WebSocket-Accept expected\n");
    said = true;
    return 0;
}

void on_read(bufferevent* bev, void* arg) {
    auto* l = static_cast<WsLink*>(arg);
    Conn& c = *l->conn;
    evbuffer* in = bufferevent_get_input(bev);
    if (!l->ctx) {
        const evbuffer_ptr end = evbuffer_search(in, "\r\n\r\n", 4, nullptr);
        if (end.pos < 0) return;
        std::string head(size_t(end.pos) + 4, '\0');
        evbuffer_remove(in, head.data(), head.size());
        const int status = check_head(*l, head);
        stream_head(c, status);
        if (status != 200) return link_gone(l);
        if (wslay_event_context_client_init(&l->ctx, &kCallbacks, l) != 0)
            die("wslay_event_context_client_init failed");
        wslay_event_config_set_no_buffering(l->ctx, 1);
    }
    if (wslay_event_recv(l->ctx) != 0 || wslay_event_send(l->ctx) != 0 ||
        (!wslay_event_want_read(l->ctx) && !wslay_event_want_write(l->ctx)))
        link_gone(l);
}

void on_event(bufferevent*, short what, void* arg) {
    if (what & BEV_EVENT_CONNECTED) return;
    link_gone(static_cast<WsLink*>(arg));
}

}  // namespace

void ws_open(Run& r, Conn& c, int source) {
    auto* l = new WsLink;
    l->conn = &c;
    c.ws = l;
    unsigned char nonce[16];
    if (RAND_bytes(nonce, sizeof nonce) != 1) die("RAND_bytes failed");
    const std::string key = base64(nonce, sizeof nonce);
    unsigned char digest[SHA_DIGEST_LENGTH];
    const std::string keyed = key + kGuid;
    SHA1(reinterpret_cast<const unsigned char*>(keyed.data()), keyed.size(), digest);
    l->accept = base64(digest, sizeof digest);
    c.bev = dial(r, r.stream, source, r.tls_h1);
    bufferevent_setcb(c.bev, on_read, nullptr, on_event, l);
    bufferevent_enable(c.bev, EV_READ);
    const std::string req = "GET " + stream_path(r, c.channel) +
                            " HTTP/1.1\r\nHost: " + r.stream.host + ":" +
                            std::to_string(r.stream.port) +
                            "\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                            "Sec-WebSocket-Key: " +
                            key + "\r\nSec-WebSocket-Version: 13\r\n\r\n";
    bufferevent_write(c.bev, req.data(), req.size());
}

}  // namespace sse
