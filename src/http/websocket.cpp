#include "http/websocket.hpp"

#include <openssl/evp.h>
#include <openssl/sha.h>

#include <nlohmann/json.hpp>

#include "grant/base64.hpp"

namespace m0::http::ws {

// The comma-separated items of every `name` field, trimmed, empty ones left out.
std::vector<std::string> list_items(const Headers& h, std::string_view name) {
    std::vector<std::string> out;
    auto joined = h.get_joined(name);
    if (!joined) return out;
    std::string_view rest = *joined;
    while (true) {
        size_t comma = rest.find(',');
        std::string_view item = trim_ows(rest.substr(0, comma));
        if (!item.empty()) out.emplace_back(item);
        if (comma == std::string_view::npos) break;
        rest.remove_prefix(comma + 1);
    }
    return out;
}

namespace {

// RFC 6455 §1.3: the GUID the server appends to the key.
constexpr std::string_view kGuid = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";

bool has_token(const Headers& h, std::string_view name, std::string_view token) {
    for (const auto& item : list_items(h, name))
        if (iequals(item, token)) return true;
    return false;
}

Upgrade refuse(Upgrade u, int status, std::string reason) {
    u.status = status;
    u.reason = std::move(reason);
    return u;
}

}  // namespace

std::optional<OriginCheck> OriginCheck::make(const std::vector<std::string>& origins,
                                             std::string& err) {
    auto p = CorsPolicy::make(origins, false, err);
    if (!p) return std::nullopt;
    OriginCheck c;
    c.policy_ = std::move(*p);
    return c;
}

bool OriginCheck::allows(const Request& req) const {
    auto origin = req.headers.get("Origin");
    if (!origin) return true;  // not a browser
    if (policy_.allow_origin(*origin)) return true;
    // The server's own origin: the page came from the host it connects to.
    auto normal = normalize_origin(*origin);
    auto host = req.headers.get("Host");
    if (!normal || !host) return false;
    for (const char* scheme : {"http://", "https://"}) {
        auto self = normalize_origin(std::string(scheme) + std::string(*host));
        if (self && *self == *normal) return true;
    }
    return false;
}

bool asks_upgrade(const Request& req) {
    // Only a GET: Pushpin's WebSocket-over-HTTP requests (POSTs to the view)
    // carry the client's handshake fields, Sec-WebSocket-Key among them.
    return has_token(req.headers, "Upgrade", "websocket") ||
           (req.method == "GET" && req.headers.has("Sec-WebSocket-Key"));
}

Upgrade check_upgrade(const Request& req, const OriginCheck& origins) {
    Upgrade u;
    if (!asks_upgrade(req)) return u;
    u.asked = true;
    // "3. An |Upgrade| header field containing the value "websocket"". A
    // Sec-WebSocket-Key without it is a WebSocket client's handshake that
    // lost its Upgrade on the way (a proxy passes no hop-by-hop field on
    // unless told to): said so, where a plain GET would reach the view.
    if (!has_token(req.headers, "Upgrade", "websocket"))
        return refuse(u, 400,
                      "a WebSocket handshake needs Upgrade: websocket (a proxy in front may "
                      "not pass it on: README, Behind nginx)");
    // RFC 6455 §4.2.1: "1. An HTTP/1.1 or higher GET request".
    if (req.method != "GET") return refuse(u, 400, "a WebSocket handshake is a GET request");
    if (req.version_major != 1 || req.version_minor < 1)
        return refuse(u, 400, "a WebSocket handshake needs HTTP/1.1");
    // "2. A |Host| header field".
    if (!req.headers.has("Host")) return refuse(u, 400, "a WebSocket handshake needs Host");
    // "4. A |Connection| header field that includes the token "Upgrade"".
    if (!has_token(req.headers, "Connection", "Upgrade"))
        return refuse(u, 400, "a WebSocket handshake needs Connection: Upgrade");
    // "6. A |Sec-WebSocket-Version| header field, with a value of 13". §4.4: a
    // version the server does not speak is answered with the versions it does.
    auto version = req.headers.get_joined("Sec-WebSocket-Version");
    if (!version || trim_ows(*version) != "13")
        return refuse(u, 426, "Sec-WebSocket-Version must be 13");
    // "5. A |Sec-WebSocket-Key| header field with a base64-encoded value that,
    // when decoded, is 16 bytes in length."
    auto key = req.headers.get_joined("Sec-WebSocket-Key");
    std::string_view k = key ? trim_ows(*key) : std::string_view();
    auto raw = key ? grant::base64_decode(k, grant::Alphabet::standard) : std::nullopt;
    if (!raw || raw->size() != 16)
        return refuse(u, 400, "Sec-WebSocket-Key must be 16 bytes in base64");
    // RFC 6455 §10.2: the Origin tells a browser's page from another site
    // (cross-site WebSocket hijacking: the browser sends its cookies along).
    if (!origins.allows(req)) return refuse(u, 403, "this Origin may not open a WebSocket here");
    u.accept = accept_key(k);
    if (u.accept.empty()) return refuse(u, 500, "OpenSSL's SHA-1 could not be loaded");
    u.protocols = list_items(req.headers, "Sec-WebSocket-Protocol");
    return u;
}

Response refusal(const Upgrade& u) {
    Response r = error_response(u.status, u.reason);
    if (u.status == 426) r.headers.add("Sec-WebSocket-Version", "13");
    return r;
}

namespace {
// SHA-1 fetched from OpenSSL's default provider once: OpenSSL 3's one-shot
// SHA1() fetches it on every call, and the first fetch in a process loads
// the provider (about 2 MB of RSS, measured: smoke/bench_ws.py's rows).
const EVP_MD* sha1() {
    static EVP_MD* md = EVP_MD_fetch(nullptr, "SHA1", nullptr);  // thread-safe once
    return md;
}
}  // namespace

void prepare() { (void)sha1(); }

std::string accept_key(std::string_view key) {
    std::string in(key);
    in += kGuid;
    unsigned char digest[EVP_MAX_MD_SIZE];
    unsigned int n = 0;
    const EVP_MD* md = sha1();
    if (!md || EVP_Digest(in.data(), in.size(), digest, &n, md, nullptr) != 1 ||
        n != SHA_DIGEST_LENGTH) {
        return {};  // the provider could not be loaded: check_upgrade refuses 500
    }
    return grant::base64_encode(
        std::string_view(reinterpret_cast<const char*>(digest), SHA_DIGEST_LENGTH));
}

std::string event_message(uint64_t id, std::string_view event, std::string_view data) {
    nlohmann::ordered_json j = nlohmann::ordered_json::object();
    if (id != 0) j["id"] = std::to_string(id);
    if (!event.empty()) j["event"] = std::string(event);
    j["data"] = std::string(data);
    return j.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

namespace {

// A JSON string's size as event_message writes it (quotes included), or
// SIZE_MAX when a byte is not ASCII (its UTF-8 is checked and replaced as it
// is written: counted by building it).
size_t json_string_size(std::string_view s) {
    size_t n = 2;
    for (char ch : s) {
        const auto c = static_cast<unsigned char>(ch);
        if (c >= 0x80) return SIZE_MAX;
        if (c == '"' || c == '\\' || c == '\b' || c == '\f' || c == '\n' || c == '\r' || c == '\t')
            n += 2;
        else if (c < 0x20)
            n += 6;  // \u00XX
        else
            n += 1;
    }
    return n;
}

size_t frame_size(size_t payload) {
    return payload + (payload < 126 ? 2 : payload <= 0xFFFF ? 4 : 10);
}

}  // namespace

size_t event_frame_size(uint64_t id, std::string_view event, std::string_view data) {
    const size_t e = event.empty() ? 0 : json_string_size(event);
    const size_t d = json_string_size(data);
    if (e == SIZE_MAX || d == SIZE_MAX) return frame_size(event_message(id, event, data).size());
    // {"id":"N","event":E,"data":D}
    size_t n = 2 + 7 + d;                                     // the braces, "data": and D
    if (id != 0) n += 5 + 2 + std::to_string(id).size() + 1;  // "id": and "N" and a comma
    if (!event.empty()) n += 8 + e + 1;                       // "event": and E and a comma
    return frame_size(n);
}

std::string server_frame(Opcode op, std::string_view payload) {
    // RFC 6455 §5.2: FIN, RSV1-3 zero, the opcode; MASK zero; the length in
    // 7 bits, or 126 and 16 bits, or 127 and 64 bits (network byte order).
    std::string f;
    f.reserve(payload.size() + 10);
    f += static_cast<char>(0x80 | static_cast<uint8_t>(op));
    const uint64_t n = payload.size();
    if (n < 126) {
        f += static_cast<char>(n);
    } else if (n <= 0xFFFF) {
        f += static_cast<char>(126);
        f += static_cast<char>(n >> 8);
        f += static_cast<char>(n & 0xFF);
    } else {
        f += static_cast<char>(127);
        for (int shift = 56; shift >= 0; shift -= 8) f += static_cast<char>((n >> shift) & 0xFF);
    }
    f += payload;
    return f;
}

std::string close_frame(uint16_t code, std::string_view reason) {
    // §5.5: a control frame's payload is at most 125 bytes.
    std::string body;
    body += static_cast<char>(code >> 8);
    body += static_cast<char>(code & 0xFF);
    body += reason.substr(0, 123);
    return server_frame(Opcode::close, body);
}

bool Utf8Validator::feed(std::string_view bytes) {
    // RFC 3629 §4: UTF8-2 = %xC2-DF tail; UTF8-3 = %xE0 %xA0-BF tail /
    // %xE1-EC 2tail / %xED %x80-9F tail / %xEE-EF 2tail; UTF8-4 = %xF0
    // %x90-BF 2tail / %xF1-F3 3tail / %xF4 %x80-8F 2tail.
    for (char ch : bytes) {
        if (!ok_) return false;
        const auto b = static_cast<uint8_t>(ch);
        if (need_ > 0) {
            if (b < lo_ || b > hi_) {
                ok_ = false;
                return false;
            }
            lo_ = 0x80;
            hi_ = 0xBF;
            --need_;
            continue;
        }
        if (b < 0x80) continue;
        if (b >= 0xC2 && b <= 0xDF) {
            need_ = 1;
        } else if (b >= 0xE0 && b <= 0xEF) {
            need_ = 2;
            if (b == 0xE0) lo_ = 0xA0;  // no overlong
            if (b == 0xED) hi_ = 0x9F;  // no surrogate
        } else if (b >= 0xF0 && b <= 0xF4) {
            need_ = 3;
            if (b == 0xF0) lo_ = 0x90;  // no overlong
            if (b == 0xF4) hi_ = 0x8F;  // nothing past U+10FFFF
        } else {
            ok_ = false;  // 0x80-0xC1 (a lone tail, an overlong lead), 0xF5-0xFF
            return false;
        }
    }
    return ok_;
}

}  // namespace m0::http::ws
