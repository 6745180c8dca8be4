// Where the Redis bus is, and who it is there: the --bus URL (and M0_BUS,
// which m0/redis_bus.py parses by the same rules).
//
//   redis://[USER[:PASSWORD]@]HOST[:PORT][/DB]            PORT 6379, DB 0
//   redis+unix://[USER[:PASSWORD]@]/PATH[?db=N]
//   redis+sentinel://[USER[:PASSWORD]@]HOST[:PORT][,HOST[:PORT]...]/MASTER[/DB]
//                                                         PORT 26379
//
// USER and PASSWORD are percent-decoded (a ':', '@' or '/' in a password is
// %3A, %40, %2F). With no USER, AUTH names the default user (requirepass).
// The password may come from a file instead (--bus-password-file), so that
// it is not on the command line: with_password() sets it. `text`, the form
// every message and log line shows, never holds the password: it is masked
// as `***`. For Sentinel, the credentials are the master's (and its
// replicas'); the sentinels are asked without AUTH.
//
// Threads: parsed on the main thread before anything starts; immutable after.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace m0::bus {

struct RedisAddress {
    std::string host;
    uint16_t port = 0;
    bool operator==(const RedisAddress&) const = default;
};

struct RedisUrl {
    std::string host;  // empty for a unix socket and for Sentinel
    uint16_t port = 6379;
    std::string unix_path;  // set for redis+unix://
    int db = 0;
    std::string user;      // the ACL user AUTH names; empty: the default user
    std::string password;  // empty: no AUTH. Never written anywhere
    bool password_in_url = false;
    std::vector<RedisAddress> sentinels;  // set for redis+sentinel://
    std::string master;                   // the master's name the sentinels know
    std::string text;                     // as given, the password masked: for messages

    bool sentinel() const { return !sentinels.empty(); }
};

// The parsed URL, or nullopt with `err` set to one line naming what is wrong
// (and never the password).
std::optional<RedisUrl> parse_redis_url(const std::string& text, std::string& err);

// The first line of `path` (its line end removed) as the URL's password, or
// false with `err` set. A URL that carries a password already, an empty or
// unreadable file: false.
bool read_redis_password(RedisUrl& url, const std::string& path, std::string& err);

}  // namespace m0::bus
