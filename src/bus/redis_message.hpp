// The live messages of the Redis bus: what publish.lua publishes on a
// channel's pub/sub name (m0:DB:e:CHANNEL) and the subscriber link reads
// (redis_subscribe.cpp). Pure functions: any thread.
//
// DESIGN
// Two forms (publish.lua's header has the same text):
//   single   "ID\nEVENT\nRAW\nDATA": one event (RAW "1" or empty). The only
//            form before batched messages; kept byte for byte, so an m0serve
//            from before them reads what it is sent during a rolling deploy.
//   batched  "*1\n", then per event "ID ELEN DLEN RAW\n" EVENT DATA (ELEN and
//            DLEN the byte lengths, RAW "1" or "0"): two or more consecutive
//            events of one batch on one channel, in id order, at most
//            kMaxBatchedMessage bytes in all.
// A batched message goes only where every subscriber reads it: a reader
// subscribes to the channel's readers' name (m0:DB:r:CHANNEL) in the same
// SUBSCRIBE as the channel, and the script compares the two counts (PUBSUB
// NUMSUB); any other subscriber of the channel (an older m0serve, a
// monitoring client) makes them differ, and the channel gets one single
// message an event. An older reader that met the batched form anyway (it
// subscribed by pattern, which NUMSUB does not count) reads its id as 0,
// which every hold mutes: never an event with wrong data.
#pragma once
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "bus/frames.hpp"

namespace m0::bus::redis {

// The most bytes publish.lua puts in one batched message (its `limit`): a
// longer run of events is cut into several messages, and an event that does
// not fit with another goes alone, in the single form. The default
// --max-event-size: a batched message is never larger than the largest
// single event may be by default, far under Redis's pub/sub output limit
// (client-output-buffer-limit pubsub, 8 MB soft / 32 MB hard).
inline constexpr size_t kMaxBatchedMessage = 256 * 1024;

// The readers' name a channel's pub/sub name goes with (see DESIGN).
inline std::string readers_prefix(int db) { return "m0:" + std::to_string(db) + ":r:"; }

// Appends the events of one message on `channel`, in the message's order, to
// `out`. False, with `out` as it was, for a message that is neither form
// (truncated, a length past its end, a batched form of another version).
bool parse_message(std::string_view payload, const std::string& channel,
                   std::vector<PublishFrame>& out);

}  // namespace m0::bus::redis
