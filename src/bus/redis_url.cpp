#include "bus/redis_url.hpp"

#include <cerrno>
#include <charconv>
#include <cstring>
#include <fstream>
#include <string_view>

namespace m0::bus {

namespace {

constexpr std::string_view kTcp = "redis://", kUnix = "redis+unix://",
                           kSentinel = "redis+sentinel://";

int parse_db(std::string_view s) {
    int db = -1;
    auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), db);
    return ec == std::errc() && p == s.data() + s.size() && db >= 0 && db <= 1000000 ? db : -1;
}

int hex(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

// %XX decoded; false for a '%' not followed by two hex digits.
bool percent_decode(std::string_view s, std::string& out) {
    out.clear();
    for (size_t i = 0; i < s.size(); ++i) {
        if (s[i] != '%') {
            out += s[i];
            continue;
        }
        if (i + 2 >= s.size() || hex(s[i + 1]) < 0 || hex(s[i + 2]) < 0) return false;
        out += static_cast<char>(hex(s[i + 1]) * 16 + hex(s[i + 2]));
        i += 2;
    }
    return true;
}

// HOST[:PORT] or [V6][:PORT]; an empty string when fine, else why not.
std::string parse_hostport(std::string_view hp, uint16_t default_port, RedisAddress& out) {
    size_t colon = hp.rfind(':');
    if (!hp.empty() && hp[0] == '[') {
        size_t close = hp.find(']');
        if (close == std::string_view::npos) return "an unclosed '[' in the host";
        out.host = std::string(hp.substr(1, close - 1));
        colon = close + 1 < hp.size() && hp[close + 1] == ':' ? close + 1 : std::string_view::npos;
        if (colon == std::string_view::npos && close + 1 != hp.size()) return "junk after ']'";
    } else {
        out.host = std::string(hp.substr(0, colon));
    }
    if (out.host.empty()) return "no host";
    out.port = default_port;
    if (colon != std::string_view::npos) {
        std::string_view p = hp.substr(colon + 1);
        unsigned port = 0;
        auto [end, ec] = std::from_chars(p.data(), p.data() + p.size(), port);
        if (ec != std::errc() || end != p.data() + p.size() || port == 0 || port > 65535)
            return "the port must be a number from 1 to 65535";
        out.port = static_cast<uint16_t>(port);
    }
    return {};
}

}  // namespace

std::optional<RedisUrl> parse_redis_url(const std::string& text, std::string& err) {
    RedisUrl u;
    std::string_view s = text, scheme;
    for (std::string_view sch : {kUnix, kSentinel, kTcp})
        if (s.starts_with(sch)) scheme = sch;
    s.remove_prefix(scheme.size());
    // The authority ends at the first '/' (a '/' in a password is %2F).
    size_t slash = s.find('/');
    std::string_view authority = s.substr(0, slash), rest = s.substr(authority.size());
    size_t at = authority.rfind('@');
    std::string_view userinfo;
    if (at != std::string_view::npos) {
        userinfo = authority.substr(0, at);
        authority.remove_prefix(at + 1);
    }
    // The text every message shows: the password masked.
    size_t colon = userinfo.find(':');
    u.text = std::string(scheme);
    if (at != std::string_view::npos) {
        u.text += std::string(userinfo.substr(0, colon));
        if (colon != std::string_view::npos) u.text += ":***";
        u.text += "@";
    }
    u.text += std::string(authority) + std::string(rest);
    if (scheme.empty()) u.text = text.find('@') == std::string::npos ? text : "(a URL)";
    auto bad = [&](const std::string& why) -> std::optional<RedisUrl> {
        err = "--bus " + u.text + ": " + why;
        return std::nullopt;
    };
    if (scheme.empty())
        return bad(
            "wants redis://[USER:PASSWORD@]HOST[:PORT][/DB], "
            "redis+unix://[USER:PASSWORD@]/PATH[?db=N] or "
            "redis+sentinel://[USER:PASSWORD@]HOST:PORT[,HOST:PORT...]/MASTER[/DB]");
    if (at != std::string_view::npos) {
        if (!percent_decode(userinfo.substr(0, colon), u.user))
            return bad("a '%' in the user not followed by two hex digits");
        if (colon != std::string_view::npos) {
            if (!percent_decode(userinfo.substr(colon + 1), u.password))
                return bad("a '%' in the password not followed by two hex digits");
            if (u.password.empty()) return bad("an empty password after ':'");
            u.password_in_url = true;
        }
        if (u.user.find_first_of(" \r\n") != std::string::npos)
            return bad("a space or line end in the user");
    }
    if (scheme == kUnix) {
        if (!authority.empty()) return bad("wants redis+unix:///PATH[?db=N], the path absolute");
        size_t q = rest.find('?');
        u.unix_path = std::string(rest.substr(0, q));
        if (u.unix_path.empty() || u.unix_path[0] != '/')
            return bad("wants redis+unix:///PATH[?db=N], the path absolute");
        if (q != std::string_view::npos) {
            std::string_view query = rest.substr(q + 1);
            if (!query.starts_with("db=") || (u.db = parse_db(query.substr(3))) < 0)
                return bad("the only query is db=N (N a number)");
        }
        return u;
    }
    if (scheme == kSentinel) {
        // HOST:PORT,HOST:PORT/MASTER[/DB]
        for (size_t from = 0; from <= authority.size();) {
            size_t comma = authority.find(',', from);
            if (comma == std::string_view::npos) comma = authority.size();
            RedisAddress a;
            std::string why = parse_hostport(authority.substr(from, comma - from), 26379, a);
            if (!why.empty())
                return bad("sentinel " + std::to_string(u.sentinels.size() + 1) + ": " + why);
            u.sentinels.push_back(std::move(a));
            from = comma + 1;
        }
        if (rest.size() < 2) return bad("no master name after the sentinels (.../MASTER[/DB])");
        rest.remove_prefix(1);
        size_t db_slash = rest.find('/');
        u.master = std::string(rest.substr(0, db_slash));
        if (u.master.empty() || u.master.find_first_of(" \r\n?") != std::string::npos)
            return bad("the master name must be one word");
        if (db_slash != std::string_view::npos && (u.db = parse_db(rest.substr(db_slash + 1))) < 0)
            return bad("the database after the master's name must be a number");
        u.port = 0;
        return u;
    }
    if (!rest.empty() && (u.db = parse_db(rest.substr(1))) < 0)
        return bad("the database after '/' must be a number");
    RedisAddress a;
    if (std::string why = parse_hostport(authority, 6379, a); !why.empty()) return bad(why);
    u.host = a.host;
    u.port = a.port;
    return u;
}

bool read_redis_password(RedisUrl& url, const std::string& path, std::string& err) {
    if (url.password_in_url) {
        err = "--bus " + url.text + " carries a password already; give it once";
        return false;
    }
    std::ifstream in(path);
    if (!in) {
        err = "cannot read " + path + ": " + std::strerror(errno);
        return false;
    }
    std::string line;
    std::getline(in, line);
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty()) {
        err = path + ": the first line is empty (it is the password)";
        return false;
    }
    url.password = std::move(line);
    return true;
}

}  // namespace m0::bus
