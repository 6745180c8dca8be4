// Logging: one line per call to stderr, with a level filter.
// Any thread may log; a line is written with one write(2) so lines do not interleave.
#pragma once
#include <string>
#include <string_view>

namespace m0::log {

enum class Level { debug = 0, info = 1, warn = 2, error = 3 };

// Sets the lowest level written (default info). Call before threads start.
void set_level(Level level);
Level level();
// Parses "debug", "info", "warn", "error"; false on anything else.
bool parse_level(std::string_view text, Level& out);

// Under --workers each worker's lines say which worker wrote them:
// "m0serve worker=N: ...". Call once, in the worker process, before any
// thread of it starts.
void set_worker(int worker);
// "m0serve", or "m0serve worker=N" in a worker: what every line starts with.
const std::string& prefix();

// Writes prefix() + ": [LEVEL: ]" + format_line(line) + LF.
void write(Level level, std::string_view line);
// What write() makes of a message that may carry client input: every control
// byte (below 0x20, and 0x7f) but LF is written \xNN, and each LF starts a
// continuation line "  | ", so no input can forge a log line or send escape
// sequences to a terminal.
std::string format_line(std::string_view line);

template <class... A>
std::string cat(A&&... parts) {
    std::string out;
    (out.append(std::string_view(parts)), ...);
    return out;
}

inline bool enabled(Level l) { return static_cast<int>(l) >= static_cast<int>(level()); }

#define M0_LOG(lvl, ...)                                                          \
    do {                                                                          \
        if (::m0::log::enabled(::m0::log::Level::lvl))                            \
            ::m0::log::write(::m0::log::Level::lvl, ::m0::log::cat(__VA_ARGS__)); \
    } while (0)

}  // namespace m0::log
