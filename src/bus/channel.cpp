#include "bus/channel.hpp"

namespace m0::bus {

PublishResult BusChannel::publish(std::string channel, std::string data, std::string event) {
    PublishResult r;
    r.name_error = check_channel(channel);
    if (r.name_error == NameError::ok) r.name_error = check_event(event);
    if (r.name_error != NameError::ok) return r;
    uint64_t id = 0;
    bool ok = queue_.push_with([&] {
        // Under the queue lock: the id order is the queue order.
        id = ++counter_;
        last_id_.store(id);
        return Frame{PublishFrame{id, std::move(channel), std::move(event), std::move(data)}};
    });
    if (!ok) {
        r.refused = true;
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
