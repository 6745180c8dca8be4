#include "server/admin.hpp"

#include <openssl/crypto.h>

#include <map>

#include "bus/names.hpp"
#include "http/json.hpp"
#include "server/metrics_text.hpp"

namespace m0::server {

using http::error_response;
using http::Request;
using http::Response;

namespace {

// RFC 9110 §11.4: credentials = auth-scheme [ 1*SP ( token68 / #auth-param ) ],
// and §11.1: the auth-scheme is "a case-insensitive token". The key is compared
// in constant time; its length is not secret.
bool bearer_matches(std::string_view auth, std::string_view key) {
    constexpr std::string_view kScheme = "Bearer";
    if (auth.size() <= kScheme.size() || !http::iequals(auth.substr(0, kScheme.size()), kScheme) ||
        auth[kScheme.size()] != ' ')
        return false;
    auth.remove_prefix(kScheme.size());
    while (!auth.empty() && auth.front() == ' ') auth.remove_prefix(1);
    return auth.size() == key.size() && CRYPTO_memcmp(auth.data(), key.data(), key.size()) == 0;
}

// RFC 8259 §8.1: "JSON text exchanged between systems that are not part of a
// closed ecosystem MUST be encoded using UTF-8"; a channel name or event that
// is not would reach every subscriber's event stream as it is.
bool valid_utf8(std::string_view s) {
    for (size_t i = 0; i < s.size();) {
        const auto c = static_cast<unsigned char>(s[i]);
        size_t n;
        uint32_t cp;
        if (c < 0x80) {
            ++i;
            continue;
        } else if ((c & 0xE0) == 0xC0) {
            n = 1;
            cp = c & 0x1Fu;
        } else if ((c & 0xF0) == 0xE0) {
            n = 2;
            cp = c & 0x0Fu;
        } else if ((c & 0xF8) == 0xF0) {
            n = 3;
            cp = c & 0x07u;
        } else {
            return false;
        }
        if (s.size() - i <= n) return false;
        for (size_t k = 1; k <= n; ++k) {
            const auto d = static_cast<unsigned char>(s[i + k]);
            if ((d & 0xC0) != 0x80) return false;
            cp = (cp << 6) | (d & 0x3Fu);
        }
        // RFC 3629 §3: no overlong forms, no surrogates, nothing past U+10FFFF.
        if ((n == 1 && cp < 0x80) || (n == 2 && cp < 0x800) || (n == 3 && cp < 0x10000) ||
            (cp >= 0xD800 && cp <= 0xDFFF) || cp > 0x10FFFF)
            return false;
        i += n + 1;
    }
    return true;
}

}  // namespace

AdminApi::AdminApi(std::string key, Metrics& metrics, bus::Bus* bus, CloseChannel close)
    : key_(std::move(key)), metrics_(metrics), bus_(bus), close_(std::move(close)) {}

Response AdminApi::handle(const Request& req) {
    Response out = error_response(500, "the admin answer did not come at once");
    handle(req, [&out](Response r) { out = std::move(r); });
    return out;
}

namespace {
// A publish's answer: its id, or why it was refused.
Response publish_answer(const bus::PublishResult& res) {
    switch (res.error) {
        case bus::PublishError::ok:
            break;
        case bus::PublishError::bad_name:
            return error_response(400, bus::reason(res));
        case bus::PublishError::too_large:
            return error_response(413, bus::reason(res));
        case bus::PublishError::refused:
            return error_response(503, "the bus channel is full");
        case bus::PublishError::unavailable:
            return error_response(503, bus::reason(res));
    }
    Response r;
    r.headers.add("Content-Type", "application/json");
    r.body = "{\"id\": " + std::to_string(res.id) + "}\n";
    return r;
}
}  // namespace

void AdminApi::handle(const Request& req, Answer answer) {
    std::map<std::string, std::string> publish;
    Response r = answer_now(req, publish);
    if (publish.empty()) {
        answer(std::move(r));
        return;
    }
    // The bus answers at once (in process) or after a round trip (Redis): the
    // loop does not wait for it.
    bus_->publish_later(publish["channel"], publish["data"], publish["event"],
                        [answer](bus::PublishResult res) { answer(publish_answer(res)); });
}

Response AdminApi::answer_now(const Request& req, std::map<std::string, std::string>& publish) {
    if (req.path == "/metrics") {
        // RFC 9110 §15.5.6: "The origin server MUST generate an Allow header
        // field in a 405 response".
        if (req.method != "GET" && req.method != "HEAD") {
            auto r = error_response(405, "use GET");
            r.headers.add("Allow", "GET, HEAD");
            return r;
        }
        Response r;
        r.headers.add("Content-Type", "text/plain; version=0.0.4; charset=utf-8");
        r.body = render_metrics(metrics_, pools_, bus_);
        return r;
    }
    if (req.path == "/publish" || req.path == "/close") {
        if (req.method != "POST") {
            auto r = error_response(405, "use POST");
            r.headers.add("Allow", "POST");
            return r;
        }
        if (key_.empty()) return error_response(403, "the admin API needs --admin-key-file");
        auto auth = req.headers.get("Authorization");
        if (!auth || !bearer_matches(*auth, key_)) {
            auto r = error_response(401, "bad or missing bearer key");
            r.headers.add("WWW-Authenticate", "Bearer");
            return r;
        }
        if (!bus_) return error_response(503, "the admin API needs --realtime");
        std::map<std::string, std::string> fields;
        std::string err;
        if (!valid_utf8(req.body)) return error_response(400, "body is not UTF-8");
        if (!http::parse_flat_json(req.body, fields, err)) return error_response(400, err);
        if (!fields.count("channel")) return error_response(400, "missing channel");
        Response r;
        r.headers.add("Content-Type", "application/json");
        if (req.path == "/close") {
            auto e = bus::check_channel(fields["channel"]);
            if (e != bus::NameError::ok) return error_response(400, bus::reason(e));
            r.body = "{\"closed\": " + std::to_string(close_(fields["channel"])) + "}\n";
            return r;
        }
        publish = std::move(fields);  // handle() publishes it
        return r;
    }
    return error_response(404, "admin serves /metrics, /publish and /close");
}

}  // namespace m0::server
