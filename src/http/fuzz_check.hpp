// FUZZ_CHECK(cond), the fuzzers' check (src/*/fuzz_*.cpp; tests, so any
// folder's fuzzer may include it): when `cond` is false, prints
// "fuzz_WHAT: FILE:LINE: cond", the fuzzer's name first as fuzz/run.sh looks
// for it in the log, and aborts, which libFuzzer reports as a crash.
#pragma once
#include <cstdio>
#include <cstdlib>
#include <string_view>

namespace m0::fuzz {

// Prints the failed check, named by its fuzzer (the file's name without
// .cpp), and aborts.
[[noreturn]] inline void check_failed(const char* file, int line, const char* cond) {
    std::string_view name(file);
    if (auto slash = name.rfind('/'); slash != std::string_view::npos)
        name.remove_prefix(slash + 1);
    if (name.ends_with(".cpp")) name.remove_suffix(4);
    std::fprintf(stderr, "%.*s: %s:%d: %s\n", static_cast<int>(name.size()), name.data(), file,
                 line, cond);
    std::abort();
}

}  // namespace m0::fuzz

#define FUZZ_CHECK(cond)                                                  \
    do {                                                                  \
        if (!(cond)) ::m0::fuzz::check_failed(__FILE__, __LINE__, #cond); \
    } while (0)
