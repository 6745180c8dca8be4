#include "loop/log.hpp"

#include <unistd.h>

#include <atomic>

namespace m0::log {
namespace {
std::atomic<int> g_level{static_cast<int>(Level::info)};
std::string& g_prefix() {
    static std::string p = "m0serve";  // set before threads start, read after
    return p;
}
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

std::string format_line(std::string_view line) {
    static constexpr char kHex[] = "0123456789abcdef";
    std::string out;
    out.reserve(line.size());
    for (char ch : line) {
        auto c = static_cast<unsigned char>(ch);
        if (c == '\n') {
            out.append("\n  | ");
        } else if (c < 0x20 || c == 0x7f) {
            out.append("\\x").push_back(kHex[c >> 4]);
            out.push_back(kHex[c & 15]);
        } else {
            out.push_back(ch);
        }
    }
    return out;
}

void set_worker(int worker) { g_prefix() = "m0serve worker=" + std::to_string(worker); }

const std::string& prefix() { return g_prefix(); }

void write(Level l, std::string_view line) {
    std::string out = g_prefix() + ": ";
    if (l != Level::info) out.append(name(l)).append(": ");
    while (!line.empty() && line.back() == '\n') line.remove_suffix(1);
    out.append(format_line(line));
    out.push_back('\n');
    // One write(2) per line: lines from several threads do not interleave.
    ssize_t ignored = ::write(2, out.data(), out.size());
    (void)ignored;
}

}  // namespace m0::log
