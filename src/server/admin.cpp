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

AdminApi::AdminApi(std::string key, Metrics& metrics, bus::Bus* bus, CloseChannel close)
    : key_(std::move(key)), metrics_(metrics), bus_(bus), close_(std::move(close)) {}

Response AdminApi::handle(const Request& req) {
    if (req.path == "/metrics" && (req.method == "GET" || req.method == "HEAD")) {
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
        std::string want = "Bearer " + key_;
        if (!auth || auth->size() != want.size() ||
            CRYPTO_memcmp(auth->data(), want.data(), want.size()) != 0) {
            auto r = error_response(401, "bad or missing bearer key");
            r.headers.add("WWW-Authenticate", "Bearer");
            return r;
        }
        if (!bus_) return error_response(503, "the admin API needs --realtime");
        std::map<std::string, std::string> fields;
        std::string err;
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
        auto res = bus_->publish(fields["channel"], fields["data"], fields["event"]);
        switch (res.error) {
            case bus::PublishError::ok:
                break;
            case bus::PublishError::bad_name:
                return error_response(400, bus::reason(res));
            case bus::PublishError::too_large:
                return error_response(413, bus::reason(res));
            case bus::PublishError::refused:
                return error_response(503, "the bus channel is full");
        }
        r.body = "{\"id\": " + std::to_string(res.id) + "}\n";
        return r;
    }
    return error_response(404, "admin serves /metrics, /publish and /close");
}

}  // namespace m0::server
