// hiredis's C headers, included with the warnings this project builds with
// turned off for them (they are not written for -Wold-style-cast and
// -Wconversion). Private to the Redis bus.
#pragma once
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wold-style-cast"
#pragma GCC diagnostic ignored "-Wconversion"
#pragma GCC diagnostic ignored "-Wsign-conversion"
#pragma GCC diagnostic ignored "-Wcast-align"
#pragma GCC diagnostic ignored "-Wpedantic"
#include <hiredis/async.h>
#include <hiredis/hiredis.h>
#pragma GCC diagnostic pop

#include <charconv>
#include <cstdint>
#include <string>
#include <string_view>

namespace m0::bus::redis {

// The keys, shared with m0/redis_bus.py (and named in publish.lua's header).
inline constexpr char kCounterKey[] = "m0:id";
inline constexpr char kEpochKey[] = "m0:epoch";
inline constexpr char kHistoryKey[] = "m0:history";
inline std::string stream_key(const std::string& channel) { return "m0:s:" + channel; }
inline std::string mark_key(const std::string& channel) { return "m0:m:" + channel; }
// Pub/sub channels are not per database: the database is in the name.
inline std::string pubsub_prefix(int db) { return "m0:" + std::to_string(db) + ":e:"; }

// A decimal id ("123", or a stream entry id "123-0"); 0 if there is none.
inline uint64_t parse_id(const char* s, size_t n) {
    uint64_t v = 0;
    std::from_chars(s, s + n, v);
    return v;
}

// A Redis that became a replica refuses writes with READONLY.
inline bool read_only(const redisReply* r) {
    return r && r->type == REDIS_REPLY_ERROR && r->len >= 8 &&
           std::string_view(r->str, 8) == "READONLY";
}

// A string or status reply's text; empty for any other reply.
inline std::string_view reply_text(const redisReply* r) {
    return r && (r->type == REDIS_REPLY_STRING || r->type == REDIS_REPLY_STATUS)
               ? std::string_view(r->str, r->len)
               : std::string_view();
}

inline uint64_t reply_id(const redisReply* r) {
    return r && r->type == REDIS_REPLY_STRING ? parse_id(r->str, r->len) : 0;
}

}  // namespace m0::bus::redis
