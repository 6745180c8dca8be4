#include "bus/bus.hpp"

#include "http/json.hpp"
#include "http/sse.hpp"
#include "http/websocket.hpp"

namespace m0::bus {

std::string reason(const PublishResult& r) {
    switch (r.error) {
        case PublishError::ok:
            return "ok";
        case PublishError::bad_name:
            return reason(r.name_error);
        case PublishError::too_large:
            return "event is " + std::to_string(r.size) + " bytes, over --max-event-size " +
                   std::to_string(r.limit);
        case PublishError::refused:
            return "the bus channel is full or closed";
        case PublishError::unavailable:
            return r.detail;
    }
    return "refused";
}

void keep_format(bool raw, std::string& event) {
    if (raw && event != kResponseFormat && event != kWsTextFormat && event != kWsBinaryFormat)
        event.clear();
}

std::shared_ptr<const std::string> wire_bytes(const PublishFrame& f) {
    if (f.raw && f.event == kResponseFormat) {
        // A long-poll's answer: stream holds get its http-stream content, if any.
        http::ResponseItem item;
        if (!http::decode_response_item(f.data, item) || !item.stream) return nullptr;
        return std::make_shared<const std::string>(std::move(*item.stream));
    }
    if (ws_message(f)) return nullptr;  // a WebSocket subscriber's only
    return std::make_shared<const std::string>(f.raw ? f.data
                                                     : sse::encode_event(f.id, f.event, f.data));
}

std::shared_ptr<const std::string> ws_bytes(const PublishFrame& f) {
    if (f.raw && f.event == kResponseFormat) {
        // An http-response item that had a ws-message: WebSockets get its content.
        http::ResponseItem item;
        if (!http::decode_response_item(f.data, item) || !item.ws) return nullptr;
        return std::make_shared<const std::string>(http::ws::server_frame(
            item.ws_binary ? http::ws::Opcode::binary : http::ws::Opcode::text, *item.ws));
    }
    if (ws_message(f))
        return std::make_shared<const std::string>(http::ws::server_frame(
            f.event == kWsTextFormat ? http::ws::Opcode::text : http::ws::Opcode::binary, f.data));
    if (f.raw) return nullptr;
    return std::make_shared<const std::string>(http::ws::server_frame(
        http::ws::Opcode::text, http::ws::event_message(f.id, f.event, f.data)));
}

PublishResult check_publish(const std::string& channel, const std::string& event,
                            const std::string& data, size_t max_event_size, bool raw) {
    PublishResult r;
    r.name_error = check_channel(channel);
    if (r.name_error == NameError::ok) r.name_error = check_event(event);
    if (r.name_error != NameError::ok) {
        r.error = PublishError::bad_name;
        return r;
    }
    // Counted before the event is numbered: the widest id, so the verdict does
    // not depend on which id it would get.
    size_t size = raw ? data.size() : sse::encoded_size(UINT64_MAX, event, data);
    if (size > max_event_size) {
        r.error = PublishError::too_large;
        r.size = size;
        r.limit = max_event_size;
    }
    return r;
}

BatchResult check_batch(std::vector<PublishEvent>& events, size_t max_event_size) {
    BatchResult b;
    for (size_t i = 0; i < events.size(); ++i) {
        auto& e = events[i];
        keep_format(e.raw, e.event);
        b.error = check_publish(e.channel, e.event, e.data, max_event_size, e.raw);
        if (!b.error.ok()) {
            b.failed = i;
            return b;
        }
    }
    return b;
}

BatchResult Bus::publish_batch(std::vector<PublishEvent> events) {
    BatchResult b = check_batch(events, max_event_size());
    if (!b.ok()) {
        if (b.error.error == PublishError::too_large) too_large.fetch_add(1);
        return b;
    }
    for (size_t i = 0; i < events.size(); ++i) {
        auto& e = events[i];
        PublishResult r =
            publish(std::move(e.channel), std::move(e.data), std::move(e.event), e.raw);
        if (!r.ok()) {
            b.error = std::move(r);
            b.failed = i;
            return b;
        }
        b.ids.push_back(r.id);
    }
    return b;
}

}  // namespace m0::bus
