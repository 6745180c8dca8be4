// Subscriptions: which slots hear which channels. Loop thread only.
//
// Each slot remembers where it sits in each of its channels' lists, so
// unsubscribing is O(channels of the slot): the list's last entry takes the
// removed one's place. A list's order is therefore not subscription order;
// nothing depends on it (each hold gets its events in id order whatever the
// list order).
#pragma once
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "loop/slot.hpp"

namespace m0::bus {

class Subscriptions {
  public:
    // Subscribes `slot` to each channel (duplicates ignored).
    void subscribe(SlotRef slot, const std::vector<std::string>& channels);
    // Removes every subscription of `slot`; returns how many were removed.
    // It edits the lists subscribers() returns: not while one is iterated.
    size_t unsubscribe_all(SlotRef slot);
    // The slots subscribed to `channel`, in no set order (empty if none).
    const std::vector<SlotRef>& subscribers(const std::string& channel) const;
    bool subscribed(SlotRef slot) const;
    size_t channels() const { return by_channel_.size(); }
    size_t slots() const { return by_slot_.size(); }

  private:
    // One subscription of a slot: its channel's list (unordered_map nodes do
    // not move, so the pointer stays valid while the channel exists) and the
    // slot's index in it.
    struct Place {
        const std::string* channel;  // the key of its by_channel_ node
        std::vector<SlotRef>* list;
        uint32_t pos;
    };
    struct Entry {
        uint32_t gen = 0;
        std::vector<Place> places;
    };
    std::unordered_map<std::string, std::vector<SlotRef>> by_channel_;
    std::unordered_map<uint32_t, Entry> by_slot_;
};

}  // namespace m0::bus
