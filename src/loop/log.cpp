#include "loop/log.hpp"

#include <unistd.h>

#include <atomic>

namespace m0::log {
namespace {
std::atomic<int> g_level{static_cast<int>(Level::info)};
const char* name(Level l) {
    switch (l) {
        case Level::debug:
            return "debug";
        case Level::info:
            return "info";
        case Level::warn:
            return "warn";
        case Level::error:
            return "error";
    }
    return "?";
}
}  // namespace

void set_level(Level l) { g_level.store(static_cast<int>(l)); }
Level level() { return static_cast<Level>(g_level.load(std::memory_order_relaxed)); }

bool parse_level(std::string_view t, Level& out) {
    for (Level l : {Level::debug, Level::info, Level::warn, Level::error})
        if (t == name(l)) {
            out = l;
            return true;
        }
    return false;
}

void write(Level l, std::string_view line) {
    std::string out = "m0serve: ";
    if (l != Level::info) out.append(name(l)).append(": ");
    out.append(line);
    out.push_back('\n');
    // One write(2) per line: lines from several threads do not interleave.
    ssize_t ignored = ::write(2, out.data(), out.size());
    (void)ignored;
}

}  // namespace m0::log
