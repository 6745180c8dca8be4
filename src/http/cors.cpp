#include "http/cors.hpp"

#include <algorithm>
#include <charconv>
#include <cstdint>

#include "http/chars.hpp"

namespace m0::http {

namespace {

char lower(char c) { return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c; }
bool alpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
bool digit(char c) { return c >= '0' && c <= '9'; }

// RFC 3986 §3.1: scheme = ALPHA *( ALPHA / DIGIT / "+" / "-" / "." )
bool valid_scheme(std::string_view s) {
    if (s.empty() || !alpha(s[0])) return false;
    return std::all_of(s.begin(), s.end(), [](char c) {
        return alpha(c) || digit(c) || c == '+' || c == '-' || c == '.';
    });
}

// A host as a browser serializes it into Origin: a name or IPv4 address
// (letters, digits, '-', '.', '_'; punycode for other scripts), or an IPv6
// literal in brackets.
bool valid_origin_host(std::string_view h) {
    if (h.empty()) return false;
    if (h.front() == '[') {
        if (h.size() < 3 || h.back() != ']') return false;
        return std::all_of(h.begin() + 1, h.end() - 1, [](char c) {
            return digit(c) || (lower(c) >= 'a' && lower(c) <= 'f') || c == ':' || c == '.';
        });
    }
    return std::all_of(h.begin(), h.end(), [](char c) {
        return alpha(c) || digit(c) || c == '-' || c == '.' || c == '_';
    });
}

// Whether a Vary value already covers Origin: it names it (any case) or is "*".
bool lists_origin(std::string_view vary) {
    std::string low;
    for (char c : vary) low += lower(c);
    return low == "*" || low.find("origin") != std::string::npos;
}

}  // namespace

std::optional<std::string> normalize_origin(std::string_view text) {
    size_t sep = text.find("://");
    if (sep == std::string_view::npos) return std::nullopt;
    std::string_view scheme = text.substr(0, sep), rest = text.substr(sep + 3);
    if (!valid_scheme(scheme)) return std::nullopt;
    // The port's colon is the last one after any IPv6 literal.
    size_t close = rest.rfind(']');
    size_t colon = rest.find(':', close == std::string_view::npos ? 0 : close);
    std::string_view host = rest.substr(0, colon);
    if (!valid_origin_host(host)) return std::nullopt;
    std::string out;
    for (char c : scheme) out += lower(c);
    out += "://";
    for (char c : host) out += lower(c);
    if (colon == std::string_view::npos) return out;
    std::string_view port = rest.substr(colon + 1);
    unsigned n = 0;
    auto [p, ec] = std::from_chars(port.data(), port.data() + port.size(), n);
    if (port.empty() || ec != std::errc() || p != port.data() + port.size() || n < 1 || n > 65535)
        return std::nullopt;
    const bool default_port =
        (n == 80 && out.starts_with("http://")) || (n == 443 && out.starts_with("https://"));
    if (!default_port) out += ":" + std::to_string(n);
    return out;
}

std::optional<CorsPolicy> CorsPolicy::make(const std::vector<std::string>& origins,
                                           bool credentials, std::string& err) {
    CorsPolicy p;
    p.credentials_ = credentials;
    for (const auto& o : origins) {
        if (o == "*") {
            p.any_ = true;
            continue;
        }
        auto n = normalize_origin(o);
        if (!n) {
            err = "'" + o + "' is not an origin: scheme://host[:port], no path (or *)";
            return std::nullopt;
        }
        if (std::find(p.origins_.begin(), p.origins_.end(), *n) == p.origins_.end())
            p.origins_.push_back(std::move(*n));
    }
    if (p.any_ && credentials) {
        // Fetch standard, CORS check: a credentialed request fails when
        // Access-Control-Allow-Origin is `*`.
        err = "'*' cannot be combined with --cors-credentials (browsers refuse it)";
        return std::nullopt;
    }
    if (credentials && !p.enabled()) {
        err = "--cors-credentials needs --cors-origin";
        return std::nullopt;
    }
    return p;
}

std::optional<std::string> CorsPolicy::allow_origin(std::optional<std::string_view> origin) const {
    if (any_) return std::string("*");
    if (!origin) return std::nullopt;
    auto n = normalize_origin(*origin);
    if (!n || std::find(origins_.begin(), origins_.end(), *n) == origins_.end())
        return std::nullopt;
    return std::string(*origin);
}

void CorsPolicy::apply(std::optional<std::string_view> origin, Headers& head) const {
    if (!enabled()) return;
    auto allow = allow_origin(origin);
    head.remove("Access-Control-Allow-Origin");
    head.remove("Access-Control-Allow-Credentials");
    // The answer depends on Origin unless every origin gets "*".
    if (!any_) {
        auto vary = head.get_joined("Vary");
        if (!vary) {
            head.add("Vary", "Origin");
        } else if (!lists_origin(*vary)) {
            head.set("Vary", *vary + ", Origin");
        }
    }
    if (!allow) return;
    head.add("Access-Control-Allow-Origin", std::move(*allow));
    if (credentials_) head.add("Access-Control-Allow-Credentials", "true");
}

bool is_preflight(const Request& req) {
    return req.method == "OPTIONS" && req.headers.has("Origin") &&
           req.headers.has("Access-Control-Request-Method");
}

bool preflight_reads(const Request& req) {
    if (!is_preflight(req)) return false;
    auto m = req.headers.get_joined("Access-Control-Request-Method");
    return m == "GET" || m == "HEAD";
}

namespace {

// Access-Control-Request-Headers: field names separated by commas and
// optional whitespace (Fetch sends them lower-cased and sorted). Written back
// as `name, name`; nullopt when an element is not a token.
std::optional<std::string> header_list(std::string_view v) {
    std::string out;
    while (!v.empty()) {
        size_t comma = v.find(',');
        std::string_view item = v.substr(0, comma);
        while (!item.empty() && (item.front() == ' ' || item.front() == '\t'))
            item.remove_prefix(1);
        while (!item.empty() && (item.back() == ' ' || item.back() == '\t')) item.remove_suffix(1);
        if (!item.empty()) {
            if (!std::all_of(item.begin(), item.end(), is_tchar)) return std::nullopt;
            out += (out.empty() ? "" : ", ") + std::string(item);
        }
        if (comma == std::string_view::npos) break;
        v.remove_prefix(comma + 1);
    }
    return out;
}

}  // namespace

Response CorsPolicy::preflight(const Request& req) const {
    auto origin = req.headers.get("Origin");
    const std::string method = req.headers.get_joined("Access-Control-Request-Method").value_or("");
    Response r;
    if (!allow_origin(origin)) {
        r = error_response(403, "origin not allowed to read holds (--cors-origin)");
    } else if (method != "GET" && method != "HEAD") {
        r = error_response(403, "a hold is read with GET, not " + method);
    } else {
        std::optional<std::string> names = std::string();
        if (auto asked = req.headers.get_joined("Access-Control-Request-Headers"))
            names = header_list(*asked);
        if (!names) {
            r = error_response(400, "Access-Control-Request-Headers is not a list of field names");
        } else {
            r.status = 204;
            r.headers.add("Access-Control-Allow-Methods", "GET, HEAD");
            if (!names->empty()) r.headers.add("Access-Control-Allow-Headers", *names);
            r.headers.add("Access-Control-Max-Age", std::to_string(kPreflightMaxAge));
        }
    }
    // The refusals carry no Access-Control-Allow-Origin: the browser fails
    // the preflight, and the request is never made.
    if (r.status == 204) apply(origin, r.headers);
    return r;
}

std::unique_ptr<CorsAsk> CorsPolicy::ask(const Request& req) const {
    auto origin = req.headers.get("Origin");
    if (!enabled() || !origin) return nullptr;
    auto a = std::make_unique<CorsAsk>();
    a->origin = std::string(*origin);
    if (preflight_reads(req)) a->preflight = std::make_unique<Response>(preflight(req));
    return a;
}

std::string CorsPolicy::describe() const {
    if (!enabled()) return "none";
    std::string out = any_ ? "*" : "";
    for (const auto& o : origins_) out += (out.empty() ? "" : ", ") + o;
    return credentials_ ? out + " with credentials" : out;
}

}  // namespace m0::http
