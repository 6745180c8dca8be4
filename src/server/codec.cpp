#include "server/codec.hpp"

#include <algorithm>
#include <cstdint>

#include "http/json.hpp"
#include "http/sse.hpp"
#include "http/websocket.hpp"

namespace m0::server {

std::shared_ptr<const std::string> sse_bytes(const bus::PublishFrame& f) {
    if (f.raw && f.event == bus::kResponseFormat) {
        // A long-poll's answer: stream holds get its http-stream content, if any.
        http::ResponseItem item;
        if (!http::decode_response_item(f.data, item) || !item.stream) return nullptr;
        return std::make_shared<const std::string>(std::move(*item.stream));
    }
    if (bus::ws_message(f)) return nullptr;  // a WebSocket subscriber's only
    return std::make_shared<const std::string>(f.raw ? f.data
                                                     : sse::encode_event(f.id, f.event, f.data));
}

std::shared_ptr<const std::string> ws_bytes(const bus::PublishFrame& f) {
    namespace ws = http::ws;
    if (f.raw && f.event == bus::kResponseFormat) {
        // An http-response item that had a ws-message: WebSockets get its content.
        http::ResponseItem item;
        if (!http::decode_response_item(f.data, item) || !item.ws) return nullptr;
        return std::make_shared<const std::string>(
            ws::server_frame(item.ws_binary ? ws::Opcode::binary : ws::Opcode::text, *item.ws));
    }
    if (bus::ws_message(f))
        return std::make_shared<const std::string>(ws::server_frame(
            f.event == bus::kWsTextFormat ? ws::Opcode::text : ws::Opcode::binary, f.data));
    if (f.raw) return nullptr;
    return std::make_shared<const std::string>(
        ws::server_frame(ws::Opcode::text, ws::event_message(f.id, f.event, f.data)));
}

size_t measure(std::string_view event, std::string_view data) {
    return std::max(sse::encoded_size(UINT64_MAX, event, data),
                    http::ws::event_frame_size(UINT64_MAX, event, data));
}

void encode(bus::PublishFrame& f) {
    f.forms[static_cast<size_t>(Form::sse)] = sse_bytes(f);
    f.forms[static_cast<size_t>(Form::ws)] = ws_bytes(f);
}

}  // namespace m0::server
