#include "http/message.hpp"

#include <cctype>

#include "http/chars.hpp"

namespace m0::http {

bool iequals(std::string_view a, std::string_view b) {
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); ++i)
        if (ascii_lower(a[i]) != ascii_lower(b[i])) return false;
    return true;
}

std::string to_lower(std::string_view s) {
    std::string out(s);
    for (char& c : out) c = ascii_lower(c);
    return out;
}

std::string_view trim_ows(std::string_view v) {
    while (!v.empty() && (v.front() == ' ' || v.front() == '\t')) v.remove_prefix(1);
    while (!v.empty() && (v.back() == ' ' || v.back() == '\t')) v.remove_suffix(1);
    return v;
}

bool is_field_value(std::string_view v) {
    for (char ch : v) {
        const auto c = static_cast<unsigned char>(ch);
        if ((c < 0x20 && c != '\t') || c == 0x7f) return false;
    }
    return true;
}

std::optional<std::string_view> Headers::get(std::string_view name) const {
    for (const auto& [k, v] : items)
        if (iequals(k, name)) return std::string_view(v);
    return std::nullopt;
}

std::optional<std::string> Headers::get_joined(std::string_view name) const {
    std::optional<std::string> out;
    for (const auto& [k, v] : items) {
        if (!iequals(k, name)) continue;
        if (out)
            out->append(", ").append(v);
        else
            out = v;
    }
    return out;
}

void Headers::set(std::string_view name, std::string value) {
    remove(name);
    items.emplace_back(std::string(name), std::move(value));
}

size_t Headers::remove(std::string_view name) {
    size_t before = items.size();
    std::erase_if(items, [&](const auto& kv) { return iequals(kv.first, name); });
    return before - items.size();
}

static int hexval(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

std::string percent_decode(std::string_view s, bool plus_as_space) {
    std::string out;
    out.reserve(s.size());
    for (size_t i = 0; i < s.size(); ++i) {
        char c = s[i];
        if (c == '%' && i + 2 < s.size() && hexval(s[i + 1]) >= 0 && hexval(s[i + 2]) >= 0) {
            out.push_back(static_cast<char>(hexval(s[i + 1]) * 16 + hexval(s[i + 2])));
            i += 2;
        } else if (c == '+' && plus_as_space) {
            out.push_back(' ');
        } else {
            out.push_back(c);
        }
    }
    return out;
}

std::optional<std::string> Request::query_param(std::string_view key) const {
    std::string_view q = query;
    while (!q.empty()) {
        size_t amp = q.find('&');
        std::string_view pair = q.substr(0, amp);
        size_t eq = pair.find('=');
        std::string k = percent_decode(pair.substr(0, eq), true);
        if (k == key)
            return eq == std::string_view::npos ? std::string()
                                                : percent_decode(pair.substr(eq + 1), true);
        if (amp == std::string_view::npos) break;
        q.remove_prefix(amp + 1);
    }
    return std::nullopt;
}

const char* reason_phrase(int status) {
    switch (status) {
        case 100:
            return "Continue";
        case 101:
            return "Switching Protocols";
        case 200:
            return "OK";
        case 201:
            return "Created";
        case 202:
            return "Accepted";
        case 204:
            return "No Content";
        case 206:
            return "Partial Content";
        case 301:
            return "Moved Permanently";
        case 302:
            return "Found";
        case 303:
            return "See Other";
        case 304:
            return "Not Modified";
        case 307:
            return "Temporary Redirect";
        case 308:
            return "Permanent Redirect";
        case 400:
            return "Bad Request";
        case 401:
            return "Unauthorized";
        case 403:
            return "Forbidden";
        case 404:
            return "Not Found";
        case 405:
            return "Method Not Allowed";
        case 408:
            return "Request Timeout";
        case 409:
            return "Conflict";
        case 411:
            return "Length Required";
        case 413:
            return "Content Too Large";
        case 414:
            return "URI Too Long";
        case 417:
            return "Expectation Failed";
        case 426:
            return "Upgrade Required";
        case 429:
            return "Too Many Requests";
        case 431:
            return "Request Header Fields Too Large";
        case 500:
            return "Internal Server Error";
        case 501:
            return "Not Implemented";
        case 502:
            return "Bad Gateway";
        case 503:
            return "Service Unavailable";
        case 504:
            return "Gateway Timeout";
        case 505:
            return "HTTP Version Not Supported";
        default:
            return "Unknown";
    }
}

Response error_response(int status, std::string_view reason) {
    Response r;
    r.status = status;
    r.headers.add("Content-Type", "text/plain; charset=utf-8");
    r.body = std::string(reason) + "\n";
    return r;
}

}  // namespace m0::http
