#include "bus/channel.hpp"

#include <cstdint>

#include "http/sse.hpp"

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
    }
    return "refused";
}

PublishResult BusChannel::publish(std::string channel, std::string data, std::string event) {
    PublishResult r;
    r.name_error = check_channel(channel);
    if (r.name_error == NameError::ok) r.name_error = check_event(event);
    if (r.name_error != NameError::ok) {
        r.error = PublishError::bad_name;
        return r;
    }
    // Counted before the event is numbered: the widest id, so the verdict does
    // not depend on which id it would get.
    size_t size = sse::encoded_size(UINT64_MAX, event, data);
    if (size > max_event_size_) {
        r.error = PublishError::too_large;
        r.size = size;
        r.limit = max_event_size_;
        too_large.fetch_add(1);
        return r;
    }
    uint64_t id = 0;
    bool ok = queue_.push_with([&] {
        // Under the queue lock: the id order is the queue order.
        id = ++counter_;
        last_id_.store(id);
        return Frame{PublishFrame{id, std::move(channel), std::move(event), std::move(data)}};
    });
    if (!ok) {
        r.error = PublishError::refused;
        refused.fetch_add(1);
        return r;
    }
    published.fetch_add(1);
    r.id = id;
    return r;
}

bool BusChannel::send(HoldFrame frame) {
    bool ok = queue_.push(Frame{std::move(frame)});
    if (!ok) refused.fetch_add(1);
    return ok;
}

}  // namespace m0::bus
