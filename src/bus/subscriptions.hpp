// Subscriptions: which slots hear which channels. Loop thread only.
#pragma once
#include <string>
#include <unordered_map>
#include <vector>

#include "pool/slot.hpp"

namespace m0::bus {

class Subscriptions {
  public:
    // Subscribes `slot` to each channel (duplicates ignored).
    void subscribe(SlotRef slot, const std::vector<std::string>& channels);
    // Removes every subscription of `slot`; returns how many were removed.
    size_t unsubscribe_all(SlotRef slot);
    // The slots subscribed to `channel`, in subscription order (empty if none).
    const std::vector<SlotRef>& subscribers(const std::string& channel) const;
    bool subscribed(SlotRef slot) const;
    size_t channels() const { return by_channel_.size(); }
    size_t slots() const { return by_slot_.size(); }

  private:
    std::unordered_map<std::string, std::vector<SlotRef>> by_channel_;
    std::unordered_map<uint32_t, std::pair<uint32_t, std::vector<std::string>>> by_slot_;
};

}  // namespace m0::bus
