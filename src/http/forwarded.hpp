// Forwarded: the client's address and scheme as a trusted proxy reports them
// (X-Forwarded-For, X-Forwarded-Proto), gunicorn's --forwarded-allow-ips.
// Pure functions and a read-only list: any thread.
//
// DESIGN
// Only a peer in the list may speak for the client; from anyone else the
// headers are ignored, since any client can send them. X-Forwarded-For is
// read from the right: each proxy appends the address it received from, so
// the rightmost entry that is not itself a trusted proxy is the client (the
// entries left of it were written by whoever sent them, and are not
// believed). X-Forwarded-Proto sets the scheme when it is http or https.
#pragma once
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "http/message.hpp"

namespace m0::http {

class TrustedProxies {
  public:
    // A comma-separated list of addresses and CIDR blocks (IPv4 or IPv6), or
    // "*" for every peer; "" trusts none. nullopt with `err` set when an item
    // is neither.
    static std::optional<TrustedProxies> parse(std::string_view list, std::string& err);
    // Whether `addr` (a textual IPv4 or IPv6 address) is trusted.
    bool trusts(std::string_view addr) const;
    bool any() const { return all_ || !nets_.empty(); }

  private:
    struct Net {
        std::array<uint8_t, 16> bytes{};
        bool v6 = false;
        int prefix = 0;  // bits that must match
    };
    bool all_ = false;
    std::vector<Net> nets_;
};

// When `req.remote_addr` (the peer) is trusted: sets remote_addr from
// X-Forwarded-For and scheme from X-Forwarded-Proto, where they hold a valid
// address and http/https. Otherwise leaves `req` as it is.
void apply_forwarded(Request& req, const TrustedProxies& trusted);

// True when every address `host` resolves to (as a listener resolves it) is
// loopback: 127.0.0.0/8 or ::1 (an IPv4-mapped ::ffff:127.x too); a name
// that does not resolve is not. --admin-open is allowed only then.
bool loopback_only(std::string host);

}  // namespace m0::http
