// Subscriptions: which members (holds, each named by its slot) hear which
// channels. Loop thread only.
//
// Each member remembers where it sits in each of its channels' lists, so
// unsubscribing is O(channels of the member): the list's last entry takes the
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

// A subscriber's own record of where it sits in its channels' lists. Its
// owner keeps it (the hold table's hold is one: a hold is one record, its
// cursor, its queue and its subscriptions together) and must neither move
// nor free it while it is subscribed: the lists point at it. Loop thread.
struct Member {
    SlotRef slot;
    // One subscription: its channel's list (unordered_map nodes do not move,
    // so the pointers stay valid while the channel exists) and the member's
    // index in it.
    struct Place {
        const std::string* channel;  // the key of its by_channel_ node
        std::vector<Member*>* list;
        uint32_t pos;
    };
    std::vector<Place> places;
    bool joined = false;  // subscribe() was called, unsubscribe_all() not since
};

class Subscriptions {
  public:
    // Subscribes `m` to each channel (duplicates ignored).
    void subscribe(Member& m, const std::vector<std::string>& channels);
    // Removes every subscription of `m`; returns how many were removed.
    // It edits the lists subscribers() returns: not while one is iterated.
    size_t unsubscribe_all(Member& m);
    // The members subscribed to `channel`, in no set order (empty if none).
    const std::vector<Member*>& subscribers(const std::string& channel) const;
    size_t channels() const { return by_channel_.size(); }
    // Members subscribed (to any number of channels, none included).
    size_t members() const { return members_; }

  private:
    std::unordered_map<std::string, std::vector<Member*>> by_channel_;
    size_t members_ = 0;
};

}  // namespace m0::bus
