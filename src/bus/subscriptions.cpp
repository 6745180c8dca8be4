#include "bus/subscriptions.hpp"

#include <algorithm>

namespace m0::bus {

void Subscriptions::subscribe(SlotRef slot, const std::vector<std::string>& channels) {
    auto old = by_slot_.find(slot.index);
    if (old != by_slot_.end() && old->second.first != slot.gen)
        unsubscribe_all(SlotRef{slot.index, old->second.first});  // a stale generation's leftovers
    auto& entry = by_slot_[slot.index];
    entry.first = slot.gen;
    for (const auto& c : channels) {
        if (std::find(entry.second.begin(), entry.second.end(), c) != entry.second.end()) continue;
        entry.second.push_back(c);
        by_channel_[c].push_back(slot);
    }
}

size_t Subscriptions::unsubscribe_all(SlotRef slot) {
    auto it = by_slot_.find(slot.index);
    if (it == by_slot_.end() || it->second.first != slot.gen) return 0;
    size_t n = 0;
    for (const auto& c : it->second.second) {
        auto ch = by_channel_.find(c);
        if (ch == by_channel_.end()) continue;
        auto& v = ch->second;
        n += static_cast<size_t>(std::erase(v, slot));
        if (v.empty()) by_channel_.erase(ch);
    }
    by_slot_.erase(it);
    return n;
}

const std::vector<SlotRef>& Subscriptions::subscribers(const std::string& channel) const {
    static const std::vector<SlotRef> none;
    auto it = by_channel_.find(channel);
    return it == by_channel_.end() ? none : it->second;
}

bool Subscriptions::subscribed(SlotRef slot) const {
    auto it = by_slot_.find(slot.index);
    return it != by_slot_.end() && it->second.first == slot.gen;
}

}  // namespace m0::bus
