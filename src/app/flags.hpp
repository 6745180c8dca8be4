// The flag table: one row a flag, and everything made from it.
//
// Each row of flags() (flags.cpp) says all there is about one flag: its name,
// whether it is a switch, takes a value or repeats, its metavar, its --help
// text, its README text, the default as shown, and where its value goes (a
// Target: the range or the allowed values it checks, and the field of
// Options it sets). From the table come the parser (options.cpp), --help
// and the README's flag table (flag_text.cpp), and the keys --config FILE
// accepts (config_file.cpp). A new flag is one row, plus the code that uses
// its field.
//
// Threads: the main thread only, before anything else starts.
#pragma once

#include <charconv>
#include <cstdio>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "app/options.hpp"

namespace m0::app {

// What the parser holds while it reads the flags: the Options, and what
// is settled only once every flag is read.
struct Parsing {
    Options o;
    const std::vector<std::string>& known_mojo;  // the mojo mounts a --mount may name
    std::optional<std::string> app;              // the positional APP
    std::string forwarded = "127.0.0.1,::1";     // --forwarded-allow-ips (gunicorn's default)
    std::vector<std::string> cors_origins;       // --cors-origin
    bool cors_credentials = false;
    std::vector<std::string> ws_origins;  // --ws-origin
};

// Where a flag's value goes: `set` checks it (a bad one throws OptionError
// with one line naming the flag) and stores it; `shown` is the default as
// the README shows it, read from a default Options where it can be.
struct Target {
    using Set = std::function<void(Parsing&, const std::string& flag, const std::string& value)>;
    Set set;
    std::string shown;
};

struct Flag {
    // A switch; a flag that takes a value; one that repeats (a list in the
    // config file); the positional APP.
    enum Kind { toggle, value, list, positional };
    std::string_view name;  // without "--"; "APP" for the positional
    Kind kind = value;
    std::string_view metavar;  // "N", "HOST:PORT|unix:PATH" ('|': either form); none for a switch
    std::string shown;         // the default as shown (Markdown); empty: the target's
    // --help's text, its lines split by '\n'; {default} stands for the
    // default as shown, without its Markdown backticks.
    std::string_view help;
    std::string_view doc;   // the README's "meaning" column (Markdown)
    Target to;              // where its value goes
    bool cli_only = false;  // not a --config key (--check, --config, --help...)

    // The default as shown: the row's, else the target's.
    const std::string& default_shown() const { return shown.empty() ? to.shown : shown; }
};

// Every flag, in --help's order.
const std::vector<Flag>& flags();
// `rows` with `more` inserted after the row named `after` (at the end when none).
std::vector<Flag> insert_after(std::vector<Flag> rows, std::string_view after,
                               std::vector<Flag> more);
// `rows` with TLS's rows (flags_tls.cpp) after the unix-owner one.
std::vector<Flag> with_tls_rows(std::vector<Flag> rows);
// `rows` with WebSocket's rows (flags_ws.cpp) after the cors-origin one.
std::vector<Flag> with_ws_rows(std::vector<Flag> rows);
// `rows` with HTTP/2's rows (flags_h2.cpp) after the tls-handshake-timeout one.
std::vector<Flag> with_h2_rows(std::vector<Flag> rows);
// `rows` with a request's limits and timeouts (flags_limits.cpp) after the
// forwarded-allow-ips one.
std::vector<Flag> with_request_rows(std::vector<Flag> rows);
// The row of --NAME (NAME without the dashes; not the positional); null when none.
const Flag* find_flag(std::string_view name);
// The flag (its name, no dashes) a name m0serve does not know is nearest to,
// by edit distance or a few other servers' names (bind: listen); empty when
// none is near. `config_key`: not a command-line-only flag (near_miss.cpp).
std::string nearest_flag(std::string_view name, bool config_key);

// --help's text.
std::string usage();
// The README's table of flags (--help-markdown): a Markdown table, one row a flag.
std::string flags_markdown();

// ---- targets: what the rows' `.to` are made of (flag_targets.cpp) ---------

[[noreturn]] void fail(const std::string& why);

// A number from `lo` to `hi`: "--flag wants a number from LO to HI, got 'V'".
template <class T>
T parse_number(const std::string& flag, const std::string& v, T lo, T hi) {
    T n{};
    auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
    if (ec != std::errc() || p != v.data() + v.size() || n < lo || n > hi)
        fail(flag + " wants a number from " + std::to_string(lo) + " to " + std::to_string(hi) +
             ", got '" + v + "'");
    return n;
}

// A default as the README shows it: 4, 0.001, 3600.
template <class T>
std::string shown_number(T v) {
    if constexpr (std::is_floating_point_v<T>) {
        char buf[32];
        std::snprintf(buf, sizeof buf, "%g", v);
        return buf;
    } else {
        return std::to_string(v);
    }
}

// A number from `lo` to `hi` into the field `at` names; shown: its default.
template <class T>
Target number(T& (*at)(Options&), std::type_identity_t<T> lo, std::type_identity_t<T> hi) {
    Options defaults;
    return {[=](Parsing& p, const std::string& flag, const std::string& v) {
                at(p.o) = parse_number<T>(flag, v, lo, hi);
            },
            shown_number(at(defaults))};
}
// Seconds above 0, at most a day.
Target seconds(double& (*at)(Options&));
// Seconds from 0 to `most` (written `most_text` in the message).
Target short_seconds(double& (*at)(Options&), double most, const char* most_text);
Target text(std::string& (*at)(Options&));
Target append(std::vector<std::string>& (*at)(Options&));
Target on(bool& (*at)(Options&));  // a switch; shown "off"
Target custom(Target::Set set, std::string shown = "");

// The flags whose checks are their own (flag_targets.cpp).
namespace set {
void app(Parsing&, const std::string&, const std::string&);
void listen(Parsing&, const std::string&, const std::string&);
void unix_mode(Parsing&, const std::string&, const std::string&);
void unix_owner(Parsing&, const std::string&, const std::string&);
void virtualenv(Parsing&, const std::string&, const std::string&);
void mount(Parsing&, const std::string&, const std::string&);
void log_level(Parsing&, const std::string&, const std::string&);
void access_log(Parsing&, const std::string&, const std::string&);
void forwarded(Parsing&, const std::string&, const std::string&);
void max_connections(Parsing&, const std::string&, const std::string&);
void bus(Parsing&, const std::string&, const std::string&);
void cors_origin(Parsing&, const std::string&, const std::string&);
void cors_credentials(Parsing&, const std::string&, const std::string&);
void ws_origin(Parsing&, const std::string&, const std::string&);
void ws_over_http(Parsing&, const std::string&, const std::string&);
void admin_listen(Parsing&, const std::string&, const std::string&);
void listen_plain(Parsing&, const std::string&, const std::string&);
void help(Parsing&, const std::string&, const std::string&);
void help_markdown(Parsing&, const std::string&, const std::string&);
void version(Parsing&, const std::string&, const std::string&);
void nothing(Parsing&, const std::string&, const std::string&);  // --config: taken out before
}  // namespace set

}  // namespace m0::app
