#include "mojo/ws_handler.hpp"

#include <nlohmann/json.hpp>

namespace m0::mojo {

namespace woh = http::woh;

namespace {
constexpr std::string_view kMetaPrefix = "Meta-";
}

WsContext::WsContext(const http::Request& req) : req_(req) {
    if (auto cid = req.headers.get("Connection-Id")) id_ = std::string(*cid);
}

void WsContext::send(std::string_view text) {
    if (!closed_) out_.push_back({"TEXT", "m:" + std::string(text)});
}

void WsContext::send_binary(std::string_view bytes) {
    if (!closed_) out_.push_back({"BINARY", "m:" + std::string(bytes)});
}

void WsContext::control(std::string_view type, std::string_view channel) {
    nlohmann::json j = {{"type", type}, {"channel", channel}};
    // A channel that is not UTF-8 cannot be a JSON string: the server would
    // refuse its name anyway.
    out_.push_back(
        {"TEXT", "c:" + j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)});
}

void WsContext::subscribe(std::string_view channel) {
    if (!closed_) control("subscribe", channel);
}

void WsContext::unsubscribe(std::string_view channel) {
    if (!closed_) control("unsubscribe", channel);
}

void WsContext::close(uint16_t code) {
    if (closed_) return;
    closed_ = true;
    out_.push_back({"CLOSE", woh::close_content(code, "")});
}

std::optional<std::string> WsContext::meta(std::string_view name) const {
    for (const auto& [k, v] : set_meta_)
        if (http::iequals(k, name)) return v.empty() ? std::nullopt : std::optional(v);
    if (auto v = req_.headers.get(std::string(kMetaPrefix) + std::string(name)))
        return std::string(*v);
    return std::nullopt;
}

void WsContext::set_meta(std::string_view name, std::string_view value) {
    set_meta_.emplace_back(std::string(name), std::string(value));
}

bool WsContext::read(std::vector<woh::Event>& events, http::Response& refusal) const {
    std::string err;
    auto ct = req_.headers.get("Content-Type");
    if (req_.method == "POST" && ct && *ct == woh::kContentType &&
        woh::decode_events(req_.body, events, err))
        return true;
    refusal =
        http::error_response(400, err.empty() ? "Request must contain WebSocket events" : err);
    return false;
}

http::Response WsContext::answer(bool opening) const {
    if (opening && !accepted_)
        return http::error_response(403, "the handler refused the WebSocket");
    http::Response r;
    r.headers.add("Content-Type", std::string(woh::kContentType));
    std::vector<woh::Event> events;
    if (opening) {
        r.headers.add("Sec-WebSocket-Extensions", "grip");
        events.push_back({"OPEN", std::nullopt});
    }
    events.insert(events.end(), out_.begin(), out_.end());
    r.body = woh::encode_events(events);
    for (const auto& [k, v] : set_meta_) r.headers.add("Set-Meta-" + k, v);
    return r;
}

}  // namespace m0::mojo
