#include "hold/grip.hpp"

#include <algorithm>
#include <charconv>

#include "bus/names.hpp"
#include "grant/base64.hpp"

namespace m0::hold {

namespace {

std::string_view trim(std::string_view s) {
    while (!s.empty() && bus::is_ows(s.front())) s.remove_prefix(1);
    while (!s.empty() && bus::is_ows(s.back())) s.remove_suffix(1);
    return s;
}

// GRIP's cstring: backslash escapes \\ \r \n \t \" (what gripcontrol and
// django-grip write for keep-alive data); any other escape is refused.
bool cstring_decode(std::string_view in, std::string& out) {
    out.clear();
    for (size_t i = 0; i < in.size(); ++i) {
        if (in[i] != '\\') {
            out += in[i];
            continue;
        }
        if (++i == in.size()) return false;
        switch (in[i]) {
            case '\\':
                out += '\\';
                break;
            case 'r':
                out += '\r';
                break;
            case 'n':
                out += '\n';
                break;
            case 't':
                out += '\t';
                break;
            case '"':
                out += '"';
                break;
            default:
                return false;
        }
    }
    return true;
}

}  // namespace

std::vector<std::string> grip_channels(std::string_view list) {
    std::vector<std::string> out;
    while (true) {
        size_t comma = list.find(',');
        std::string_view item = list.substr(0, comma);
        out.emplace_back(trim(item.substr(0, item.find(';'))));
        if (comma == std::string_view::npos) break;
        list.remove_prefix(comma + 1);
    }
    return out;
}

uint64_t grip_prev_id(std::string_view list) {
    uint64_t lowest = 0;
    while (!list.empty()) {
        size_t comma = list.find(',');
        std::string_view item = list.substr(0, comma);
        list.remove_prefix(comma == std::string_view::npos ? list.size() : comma + 1);
        size_t semi = item.find(';');
        while (semi != std::string_view::npos) {
            item.remove_prefix(semi + 1);
            semi = item.find(';');
            std::string_view param = trim(item.substr(0, semi));
            size_t eq = param.find('=');
            if (eq == std::string_view::npos ||
                !http::iequals(trim(param.substr(0, eq)), "prev-id"))
                continue;
            std::string_view v = trim(param.substr(eq + 1));
            if (v.size() >= 2 && v.front() == '"' && v.back() == '"') v = v.substr(1, v.size() - 2);
            uint64_t n = 0;
            auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
            if (ec == std::errc() && p == v.data() + v.size() && n != 0 &&
                (lowest == 0 || n < lowest))
                lowest = n;
        }
    }
    return lowest;
}

bool grip_timeout(std::string_view value, uint32_t& seconds) {
    value = trim(value);
    uint32_t n = 0;
    auto [p, ec] = std::from_chars(value.data(), value.data() + value.size(), n);
    if (value.empty() || ec != std::errc() || p != value.data() + value.size() || n > 86400)
        return false;
    seconds = std::max<uint32_t>(n, 1);
    return true;
}

bool grip_keep_alive(std::string_view value, bus::KeepAlive& out, std::string& err) {
    size_t semi = value.find(';');
    std::string_view data = trim(value.substr(0, semi));
    std::string_view format = "raw";
    out = {};
    while (semi != std::string_view::npos) {
        value.remove_prefix(semi + 1);
        semi = value.find(';');
        std::string_view param = trim(value.substr(0, semi));
        size_t eq = param.find('=');
        std::string_view k = trim(param.substr(0, eq));
        std::string_view v = eq == std::string_view::npos ? "" : trim(param.substr(eq + 1));
        if (http::iequals(k, "format")) {
            format = v;
        } else if (http::iequals(k, "timeout")) {
            int seconds = 0;
            auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), seconds);
            if (ec != std::errc() || p != v.data() + v.size() || seconds < 1 || seconds > 86400) {
                err = "Grip-Keep-Alive timeout must be whole seconds from 1 to 86400";
                return false;
            }
            out.every = seconds;
        }
    }
    bool ok = true;
    if (http::iequals(format, "raw")) {
        out.bytes.assign(data);
    } else if (http::iequals(format, "cstring")) {
        ok = cstring_decode(data, out.bytes);
    } else if (http::iequals(format, "base64")) {
        auto bytes = grant::base64_decode(data, grant::Alphabet::standard);
        ok = bytes.has_value();
        if (ok) out.bytes = std::move(*bytes);
    } else {
        err = "Grip-Keep-Alive format must be raw, cstring or base64";
        return false;
    }
    if (!ok || out.bytes.empty()) {
        err = "Grip-Keep-Alive data is empty or not " + std::string(format);
        return false;
    }
    return true;
}

void remove_grip_headers(http::Headers& headers) {
    std::erase_if(headers.items, [](const auto& kv) {
        return kv.first.size() >= 5 &&
               http::iequals(std::string_view(kv.first).substr(0, 5), "Grip-");
    });
}

}  // namespace m0::hold
