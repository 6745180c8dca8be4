#include "bus/subscriptions.hpp"

#include <cassert>

namespace m0::bus {

void Subscriptions::subscribe(Member& m, const std::vector<std::string>& channels) {
    if (!m.joined) {
        m.joined = true;
        ++members_;
    }
    for (const auto& c : channels) {
        auto [node, fresh] = by_channel_.try_emplace(c);
        std::vector<Member*>* list = &node->second;
        bool dup = false;
        for (const Member::Place& p : m.places) dup = dup || p.list == list;
        if (dup) continue;
        m.places.push_back({&node->first, list, static_cast<uint32_t>(list->size())});
        list->push_back(&m);
    }
}

size_t Subscriptions::unsubscribe_all(Member& m) {
    if (!m.joined) return 0;
    size_t n = 0;
    for (const Member::Place& p : m.places) {
        std::vector<Member*>& v = *p.list;
        assert(p.pos < v.size() && v[p.pos] == &m && "subscriptions: a place went stale");
        Member* moved = v.back();
        v[p.pos] = moved;
        v.pop_back();
        ++n;
        if (moved != &m) {
            // The list's last member took this place: it now sits at p.pos.
            for (Member::Place& q : moved->places)
                if (q.list == p.list) q.pos = p.pos;
        }
        if (v.empty()) {
            auto node = by_channel_.find(*p.channel);
            if (node != by_channel_.end()) by_channel_.erase(node);
        }
    }
    m.places.clear();
    m.places.shrink_to_fit();
    m.joined = false;
    --members_;
    return n;
}

const std::vector<Member*>& Subscriptions::subscribers(const std::string& channel) const {
    static const std::vector<Member*> none;
    auto it = by_channel_.find(channel);
    return it == by_channel_.end() ? none : it->second;
}

}  // namespace m0::bus
