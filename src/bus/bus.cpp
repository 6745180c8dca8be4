#include "bus/bus.hpp"

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

PublishResult check_publish(const std::string& channel, const std::string& event,
                            const std::string& data, size_t max_event_size, const Codec& codec,
                            bool raw) {
    PublishResult r;
    r.name_error = check_channel(channel);
    if (r.name_error == NameError::ok) r.name_error = check_event(event);
    if (r.name_error != NameError::ok) {
        r.error = PublishError::bad_name;
        return r;
    }
    size_t size = raw             ? data.size()
                  : codec.measure ? codec.measure(event, data)
                                  : event.size() + data.size();
    if (size > max_event_size) {
        r.error = PublishError::too_large;
        r.size = size;
        r.limit = max_event_size;
    }
    return r;
}

BatchResult check_batch(std::vector<PublishEvent>& events, size_t max_event_size,
                        const Codec& codec) {
    BatchResult b;
    for (size_t i = 0; i < events.size(); ++i) {
        auto& e = events[i];
        keep_format(e.raw, e.event);
        b.error = check_publish(e.channel, e.event, e.data, max_event_size, codec, e.raw);
        if (!b.error.ok()) {
            b.failed = i;
            return b;
        }
    }
    return b;
}

BatchResult Bus::publish_batch(std::vector<PublishEvent> events) {
    BatchResult b = check_batch(events, max_event_size(), codec());
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
