#include "http/forwarded.hpp"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>

#include <algorithm>
#include <cctype>

namespace m0::http {

namespace {

// The address's 4 or 16 bytes; false when `text` is not an address.
bool to_bytes(std::string_view text, std::array<uint8_t, 16>& out, bool& v6) {
    if (text.empty() || text.size() > 45) return false;
    std::string s(text);
    if (inet_pton(AF_INET, s.c_str(), out.data()) == 1) {
        v6 = false;
        return true;
    }
    if (inet_pton(AF_INET6, s.c_str(), out.data()) == 1) {
        v6 = true;
        return true;
    }
    return false;
}

// Splits a comma-separated list into trimmed, non-empty items.
std::vector<std::string_view> items(std::string_view list) {
    std::vector<std::string_view> out;
    while (true) {
        size_t comma = list.find(',');
        auto item = trim_ows(list.substr(0, comma));
        if (!item.empty()) out.push_back(item);
        if (comma == std::string_view::npos) return out;
        list.remove_prefix(comma + 1);
    }
}

}  // namespace

std::optional<TrustedProxies> TrustedProxies::parse(std::string_view list, std::string& err) {
    TrustedProxies t;
    for (auto item : items(list)) {
        if (item == "*") {
            t.all_ = true;
            continue;
        }
        Net n;
        auto slash = item.find('/');
        if (!to_bytes(item.substr(0, slash), n.bytes, n.v6)) {
            err = "'" + std::string(item) + "' is not an address, a CIDR block or *";
            return std::nullopt;
        }
        const int bits = n.v6 ? 128 : 32;
        n.prefix = bits;
        if (slash != std::string_view::npos) {
            auto p = item.substr(slash + 1);
            int v = 0;
            bool ok = !p.empty() && p.size() <= 3;
            for (char c : p) ok = ok && c >= '0' && c <= '9' && (v = v * 10 + (c - '0')) <= bits;
            if (!ok) {
                err = "'" + std::string(item) + "' has a prefix length that is not 0 to " +
                      std::to_string(bits);
                return std::nullopt;
            }
            n.prefix = v;
        }
        t.nets_.push_back(n);
    }
    return t;
}

bool TrustedProxies::trusts(std::string_view addr) const {
    if (all_) return true;
    std::array<uint8_t, 16> b{};
    bool v6 = false;
    if (!to_bytes(addr, b, v6)) return false;
    return std::any_of(nets_.begin(), nets_.end(), [&](const Net& n) {
        if (n.v6 != v6) return false;
        int whole = n.prefix / 8, rest = n.prefix % 8;
        if (!std::equal(b.begin(), b.begin() + whole, n.bytes.begin())) return false;
        if (rest == 0) return true;
        uint8_t mask = uint8_t(0xff << (8 - rest));
        return (b[size_t(whole)] & mask) == (n.bytes[size_t(whole)] & mask);
    });
}

bool loopback_only(std::string host) {
    if (host.size() > 2 && host.front() == '[' && host.back() == ']')
        host = host.substr(1, host.size() - 2);
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE;
    addrinfo* res = nullptr;
    if (getaddrinfo(host.c_str(), nullptr, &hints, &res) != 0 || !res) return false;
    bool all = true;
    for (addrinfo* a = res; a; a = a->ai_next) {
        if (a->ai_family == AF_INET) {
            uint32_t ip = ntohl(reinterpret_cast<const sockaddr_in*>(a->ai_addr)->sin_addr.s_addr);
            all = all && (ip >> 24) == 127;
        } else if (a->ai_family == AF_INET6) {
            const in6_addr& ip = reinterpret_cast<const sockaddr_in6*>(a->ai_addr)->sin6_addr;
            all = all && (IN6_IS_ADDR_LOOPBACK(&ip) ||
                          (IN6_IS_ADDR_V4MAPPED(&ip) && ip.s6_addr[12] == 127));
        } else {
            all = false;
        }
    }
    freeaddrinfo(res);
    return all;
}

void apply_forwarded(Request& req, const TrustedProxies& trusted) {
    // Most requests carry neither header: no address is parsed for them.
    auto xff = req.headers.get_joined("X-Forwarded-For");
    auto proto = req.headers.get_joined("X-Forwarded-Proto");
    if ((!xff && !proto) || !trusted.trusts(req.remote_addr)) return;
    if (xff) {
        auto hops = items(*xff);
        // From the right, past every trusted proxy; the leftmost when all are.
        std::string_view client;
        for (auto it = hops.rbegin(); it != hops.rend(); ++it) {
            client = *it;
            if (!trusted.trusts(*it)) break;
        }
        std::array<uint8_t, 16> b{};
        bool v6 = false;
        if (!client.empty() && to_bytes(client, b, v6)) req.remote_addr = std::string(client);
    }
    if (proto) {
        auto values = items(*proto);
        if (!values.empty()) {
            std::string last(values.back());
            std::transform(last.begin(), last.end(), last.begin(),
                           [](unsigned char c) { return char(std::tolower(c)); });
            if (last == "http" || last == "https") req.scheme = last;
        }
    }
}

}  // namespace m0::http
