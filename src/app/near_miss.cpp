// Did-you-mean for a flag or config key m0serve does not know: the flag of
// the table nearest to it by edit distance, or the one a few names used by
// other servers stand for. Main thread, before anything starts.
#include <algorithm>
#include <cctype>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "app/flags.hpp"

namespace m0::app {

namespace {

// Names other servers (gunicorn, uWSGI) give these flags, and words that
// are no edit away from ours, with the flag each stands for.
constexpr std::pair<std::string_view, std::string_view> kAliases[] = {
    {"bind", "listen"},
    {"http", "listen"},
    {"http-socket", "listen"},
    {"threads", "blocking-threads"},
    {"timeout", "request-timeout"},
    {"graceful-timeout", "grace"},
    {"keep-alive", "keepalive-timeout"},
    {"keepalive", "keepalive-timeout"},
    {"access-logfile", "access-log"},
    {"home", "virtualenv"},
    {"venv", "virtualenv"},
    {"processes", "workers"},
    {"limit-request-field-size", "max-header-size"},
    {"limit-request-fields", "max-headers"},
    {"log", "log-level"},
    {"loglevel", "log-level"},
};

// Levenshtein distance, with a swap of two neighbours counting one (the
// optimal string alignment distance).
size_t distance(std::string_view a, std::string_view b) {
    const size_t n = a.size(), m = b.size();
    std::vector<std::vector<size_t>> d(n + 1, std::vector<size_t>(m + 1));
    for (size_t i = 0; i <= n; ++i) d[i][0] = i;
    for (size_t j = 0; j <= m; ++j) d[0][j] = j;
    for (size_t i = 1; i <= n; ++i)
        for (size_t j = 1; j <= m; ++j) {
            size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
            d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
                d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
        }
    return d[n][m];
}

}  // namespace

std::string nearest_flag(std::string_view name, bool config_key) {
    std::string n(name);
    std::replace(n.begin(), n.end(), '_', '-');
    std::transform(n.begin(), n.end(), n.begin(), [](unsigned char c) { return std::tolower(c); });
    auto usable = [&](const Flag& f) {
        return f.kind != Flag::positional && !(config_key && f.cli_only);
    };
    for (const auto& [alias, flag] : kAliases)
        if (n == alias) return std::string(flag);
    // Close enough: at most 2 edits, and fewer than a third of the name.
    const Flag* best = nullptr;
    size_t best_d = 3;
    for (const Flag& f : flags()) {
        if (!usable(f)) continue;
        size_t d = distance(n, f.name);
        if (d < best_d && d * 3 <= std::max(n.size(), f.name.size())) best = &f, best_d = d;
    }
    if (best) return std::string(best->name);
    // A flag that begins with the name (--admin-key: --admin-key-file).
    for (const Flag& f : flags())
        if (usable(f) && n.size() >= 4 && std::string_view(f.name).starts_with(n))
            return std::string(f.name);
    return "";
}

}  // namespace m0::app
