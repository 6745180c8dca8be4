// Request and Response: plain values handed between the loop and the pools.
// A Request is built by the loop's parser and moved into a pool job; a
// Response is built on a pool thread and moved back through the completion ring.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace m0::http {

bool iequals(std::string_view a, std::string_view b);
std::string to_lower(std::string_view s);
// RFC 9110 §5.5: a field value without the whitespace (SP, HTAB) around it,
// which a field line may carry but which is not part of the value. Written
// as given it is legal HTTP/1.1, but an HTTP/2 field value must not begin
// or end with it (RFC 9113 §8.2.1: clients reset the stream), and WSGI apps
// give it (Django's Set-Cookie values begin with a space).
std::string_view trim_ows(std::string_view v);
// RFC 9110 §5.5: field-value = *field-char of VCHAR, obs-text, SP and HTAB;
// false when `v` has any other control character (CR, LF, NUL among them).
bool is_field_value(std::string_view v);

struct Headers {
    std::vector<std::pair<std::string, std::string>> items;

    // First value of `name` (case-insensitive), or nullopt.
    std::optional<std::string_view> get(std::string_view name) const;
    // Every value of `name` joined with ", " (RFC 9110 §5.3), or nullopt.
    std::optional<std::string> get_joined(std::string_view name) const;
    bool has(std::string_view name) const { return get(name).has_value(); }
    void add(std::string name, std::string value) {
        items.emplace_back(std::move(name), std::move(value));
    }
    // Replaces every `name` with one value.
    void set(std::string_view name, std::string value);
    // Removes every `name`; returns how many were removed.
    size_t remove(std::string_view name);
};

class BodyCharge;  // body_budget.hpp

struct Request {
    std::string method;
    std::string target;  // as sent: path?query
    std::string path;    // percent-decoded? no: raw path, without the query
    std::string query;
    int version_major = 1;
    int version_minor = 1;
    Headers headers;
    std::string body;
    // The body's share of --max-body-total (body_budget.hpp), given back when
    // the last copy of the request is gone; null for a request with no body.
    std::shared_ptr<BodyCharge> body_charge;
    bool keep_alive = true;
    std::string remote_addr;  // the peer's, or a trusted proxy's client (http/forwarded.hpp)
    uint16_t remote_port = 0;
    std::string scheme = "http";  // wsgi.url_scheme: https only from a trusted proxy
    std::string server_name;      // the listener's host
    uint16_t server_port = 0;
    // Set by routing: the mount prefix (SCRIPT_NAME) and the rest (PATH_INFO).
    std::string script_name;
    std::string path_info;

    bool is_head() const { return method == "HEAD"; }
    std::string protocol() const {
        if (version_major == 2) return "HTTP/2";  // RFC 9113 §1: no minor version
        return "HTTP/" + std::to_string(version_major) + "." + std::to_string(version_minor);
    }
    // Value of the query parameter `key` (first occurrence, %-decoded), or nullopt.
    std::optional<std::string> query_param(std::string_view key) const;
};

// A producer of a streamed body, for mojo responses: called on the pool thread
// until it returns false. Only a hold may stream from a mojo mount; anything
// else is refused 409 (see mojo/mojo_pool.cpp).
using BodyProducer = std::function<bool(std::string& chunk)>;

struct Response {
    int status = 200;
    Headers headers;
    std::string body;
    BodyProducer stream;  // set: the body is streamed (not a hold => refused on mojo)
};

const char* reason_phrase(int status);

// An error response with a one-line text/plain reason body.
Response error_response(int status, std::string_view reason);

std::string percent_decode(std::string_view s, bool plus_as_space);

}  // namespace m0::http
