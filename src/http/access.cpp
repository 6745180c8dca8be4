#include "http/access.hpp"

#include <array>
#include <cstdio>

#include "http/message.hpp"

namespace m0::http {

namespace {

constexpr std::array<std::string_view, 9> kSecretParams{
    "grant", "token", "access_token", "jwt", "key", "signature", "sig", "password", "secret"};

bool secret_name(std::string_view name) {
    for (auto s : kSecretParams)
        if (iequals(name, s)) return true;
    return false;
}

void quoted(std::string& out, std::string_view v) {
    out.push_back('"');
    if (v.empty()) out.push_back('-');
    for (char c : v) {
        auto ch = static_cast<unsigned char>(c);
        if (ch == '"' || ch == '\\' || ch < 0x20 || ch >= 0x7f) {
            char buf[5];
            std::snprintf(buf, sizeof buf, "\\x%02X", ch);
            out.append(buf);
        } else {
            out.push_back(c);
        }
    }
    out.push_back('"');
}

// The client's address is ours (a peer address or one a trusted proxy gave,
// checked as an address), but is escaped all the same.
void bare(std::string& out, std::string_view v) {
    if (v.empty()) {
        out.push_back('-');
        return;
    }
    for (char c : v) {
        auto ch = static_cast<unsigned char>(c);
        out.push_back(ch > 0x20 && ch < 0x7f && ch != '"' && ch != '\\' ? c : '?');
    }
}

}  // namespace

std::string redact_target(std::string_view target) {
    size_t q = target.find('?');
    if (q == std::string_view::npos) return std::string(target);
    std::string out(target.substr(0, q + 1));
    std::string_view query = target.substr(q + 1);
    while (true) {
        size_t amp = query.find('&');
        std::string_view part = query.substr(0, amp);
        size_t eq = part.find('=');
        if (eq != std::string_view::npos && secret_name(part.substr(0, eq)))
            out.append(part.substr(0, eq + 1)).append("[redacted]");
        else
            out.append(part);
        if (amp == std::string_view::npos) break;
        out.push_back('&');
        query = query.substr(amp + 1);
    }
    return out;
}

std::string format_access(const AccessRecord& r) {
    std::string out;
    out.reserve(200 + r.request.size() + r.user_agent.size());
    bare(out, r.remote);
    tm t{};
    localtime_r(&r.received, &t);
    char when[64];
    std::strftime(when, sizeof when, " - - [%d/%b/%Y:%H:%M:%S %z] ", &t);
    out.append(when);
    quoted(out, r.request);
    char nums[96];
    std::snprintf(nums, sizeof nums, " %d %llu ", r.status,
                  static_cast<unsigned long long>(r.bytes));
    out.append(nums);
    quoted(out, r.referer);
    out.push_back(' ');
    quoted(out, r.user_agent);
    std::snprintf(nums, sizeof nums, " rt=%.3f", r.seconds);
    out.append(nums);
    if (r.hold) {
        std::snprintf(nums, sizeof nums, " hold=%.3f events=%llu", r.hold_seconds,
                      static_cast<unsigned long long>(r.events));
        out.append(nums);
    }
    return out;
}

}  // namespace m0::http
