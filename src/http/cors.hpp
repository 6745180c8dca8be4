// CORS for holds: which cross-origin pages may read a stream (--cors-origin,
// --cors-credentials). Pure functions and a read-only policy: any thread.
//
// DESIGN
// A browser's EventSource to another origin is a CORS request (WHATWG HTML
// §9.2: the fetch's mode is "cors"); it sends `Origin` and reads the stream
// only when the head names that origin (or `*`) in
// Access-Control-Allow-Origin. An EventSource sets no custom header, so there
// is no preflight: the hold's head alone decides. The policy is a list of
// origins compared in one spelling (normalize_origin: scheme and host in
// lower case, the scheme's default port left out), and the head echoes the
// request's Origin as sent. An Origin not in the list gets no CORS header at
// all, so the browser refuses the stream.
// A page that reads a stream with fetch() and headers of its own (a
// fetch-based EventSource sending Last-Event-ID or Authorization) is
// preflighted first (Fetch §4.8): an OPTIONS with Access-Control-Request-
// Method. The server answers those for its mojo mounts (preflight(), on the
// loop); a WSGI app's are the app's, as its ordinary answers are, unless it
// answers one with a hold head (CorsAsk).
#pragma once
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "http/message.hpp"

namespace m0::http {

// `text` as an origin in one spelling: "scheme://host[:port]" with scheme and
// host lower-cased and the port dropped when it is the scheme's default (80
// for http, 443 for https). nullopt when `text` is not of that form: no
// scheme, an empty host, a path (a trailing "/" too), a query, userinfo, a
// port that is not 1..65535, or bytes outside a host name or [IPv6] literal.
std::optional<std::string> normalize_origin(std::string_view text);

// Fetch §4.8: a CORS preflight is an OPTIONS request with Origin and
// Access-Control-Request-Method.
bool is_preflight(const Request& req);
// A preflight of a GET or HEAD: a request that could read a hold. One of
// another method (a mount's own API) is left to the mount.
bool preflight_reads(const Request& req);

// How long a browser may keep a preflight's answer (Access-Control-Max-Age),
// in seconds: a stream that reconnects within it is not preflighted again.
inline constexpr int kPreflightMaxAge = 600;

// What a request asked of the CORS policy, kept (with --cors-origin, when it
// carries an Origin) for its hold head: the Origin, and for a preflight the
// answer the policy gives it. A WSGI app that answers a preflight with a hold
// head (a view that holds whatever the method) is answered that instead: the
// server owns a hold's CORS fields, so it owns the preflight that asks for
// them. Owned by the connection's (or stream's) loop thread.
struct CorsAsk {
    std::string origin;
    std::unique_ptr<Response> preflight;  // is_preflight requests only
};

class CorsPolicy {
  public:
    // From the --cors-origin values ("*" allows any origin) and
    // --cors-credentials. nullopt with `err` set when an origin is malformed
    // (naming it), or when "*" is combined with credentials (the Fetch
    // standard refuses `Access-Control-Allow-Origin: *` on a credentialed
    // request). No origins: a policy that never adds a header.
    static std::optional<CorsPolicy> make(const std::vector<std::string>& origins, bool credentials,
                                          std::string& err);
    bool enabled() const { return any_ || !origins_.empty(); }
    bool credentials() const { return credentials_; }
    // The Access-Control-Allow-Origin value for a request whose Origin header
    // is `origin` (nullopt: none sent): "*" with "*" configured, the request's
    // Origin as sent when it is in the list, else nullopt (no CORS header).
    std::optional<std::string> allow_origin(std::optional<std::string_view> origin) const;
    // Sets a hold head's CORS fields for a request whose Origin is `origin`:
    // any Access-Control-Allow-Origin/-Credentials the handler set is
    // replaced by the policy's answer (or removed when the origin is not
    // allowed); with a list of origins, `Vary: Origin` is added. A disabled
    // policy leaves `head` unchanged.
    void apply(std::optional<std::string_view> origin, Headers& head) const;
    // The answer to a preflight (is_preflight) of a request that would read
    // a hold: 204 with the CORS fields apply() sets, Access-Control-Allow-
    // Methods `GET, HEAD` (what a hold is read with), the requested headers
    // allowed and kPreflightMaxAge; 403 with a reason when the origin is not
    // one of the policy's or the method is not GET or HEAD; 400 when
    // Access-Control-Request-Headers is not a list of field names. The
    // policy must be enabled.
    Response preflight(const Request& req) const;
    // What `req` asks (its Origin, and preflight()'s answer when it is a
    // preflight of a GET or HEAD); null when the policy is off or `req` has
    // no Origin.
    std::unique_ptr<CorsAsk> ask(const Request& req) const;
    // For the start-up log: "none", "*", or the normalized origins
    // comma-separated, then " with credentials" when so.
    std::string describe() const;

  private:
    bool any_ = false;
    bool credentials_ = false;
    std::vector<std::string> origins_;  // normalized
};

}  // namespace m0::http
