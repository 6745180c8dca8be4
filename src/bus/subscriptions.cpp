#include "bus/subscriptions.hpp"

#include <cassert>

namespace m0::bus {

void Subscriptions::subscribe(SlotRef slot, const std::vector<std::string>& channels) {
    auto old = by_slot_.find(slot.index);
    if (old != by_slot_.end() && old->second.gen != slot.gen)
        unsubscribe_all(SlotRef{slot.index, old->second.gen});  // a stale generation's leftovers
    Entry& entry = by_slot_[slot.index];
    entry.gen = slot.gen;
    for (const auto& c : channels) {
        auto [node, fresh] = by_channel_.try_emplace(c);
        std::vector<SlotRef>* list = &node->second;
        bool dup = false;
        for (const Place& p : entry.places) dup = dup || p.list == list;
        if (dup) continue;
        entry.places.push_back({&node->first, list, static_cast<uint32_t>(list->size())});
        list->push_back(slot);
    }
}

size_t Subscriptions::unsubscribe_all(SlotRef slot) {
    auto it = by_slot_.find(slot.index);
    if (it == by_slot_.end() || it->second.gen != slot.gen) return 0;
    size_t n = 0;
    for (const Place& p : it->second.places) {
        std::vector<SlotRef>& v = *p.list;
        assert(p.pos < v.size() && v[p.pos] == slot && "subscriptions: a place went stale");
        SlotRef moved = v.back();
        v[p.pos] = moved;
        v.pop_back();
        ++n;
        if (moved != slot) {
            // The list's last slot took this place: it now sits at p.pos.
            for (Place& q : by_slot_[moved.index].places)
                if (q.list == p.list) q.pos = p.pos;
        }
        if (v.empty()) by_channel_.erase(by_channel_.find(*p.channel));
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
    return it != by_slot_.end() && it->second.gen == slot.gen;
}

}  // namespace m0::bus
