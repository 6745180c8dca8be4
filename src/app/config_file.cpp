#include "app/config_file.hpp"

#include <toml++/toml.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <set>

#include "app/flags.hpp"

namespace m0::app {

namespace {

// What the command line gives: the flags it names, and whether it has an APP.
struct CommandLine {
    std::set<std::string> named;
    bool app = false;
};

CommandLine scan(const std::vector<std::string>& cli) {
    CommandLine out;
    for (size_t i = 1; i < cli.size(); ++i) {
        const std::string& a = cli[i];
        if (!a.starts_with("-")) {
            out.app = true;
            continue;
        }
        if (!a.starts_with("--")) continue;
        size_t eq = a.find('=');
        std::string name = a.substr(2, eq == std::string::npos ? std::string::npos : eq - 2);
        out.named.insert(name);
        const Flag* f = find_flag(name);
        if (f && f->kind != Flag::toggle && eq == std::string::npos) ++i;  // its value
    }
    return out;
}

std::string where(const std::string& path, const toml::node& n) {
    return path + ":" + std::to_string(n.source().begin.line);
}

// A scalar as the flag's text: a string as it is, a number in decimal.
std::optional<std::string> scalar(const toml::node& n) {
    if (auto s = n.value<std::string>()) return *s;
    if (n.is_integer()) return std::to_string(*n.value<int64_t>());
    if (n.is_floating_point()) {
        char buf[64];
        std::snprintf(buf, sizeof buf, "%.17g", *n.value<double>());
        return std::string(buf);
    }
    return std::nullopt;
}

}  // namespace

std::vector<std::string> config_args(const std::string& path, const std::vector<std::string>& cli,
                                     std::vector<std::string>* origins) {
    toml::table doc;
    try {
        doc = toml::parse_file(path);
    } catch (const toml::parse_error& e) {
        const auto& at = e.source().begin;
        if (at.line == 0)
            throw OptionError("--config " + path + ": " + std::string(e.description()));
        throw OptionError("--config " + path + ":" + std::to_string(at.line) + ":" +
                          std::to_string(at.column) + ": " + std::string(e.description()));
    }
    const CommandLine given = scan(cli);
    std::vector<std::string> out;
    // In the file's order, so an error names the first bad line.
    std::vector<std::pair<std::string, const toml::node*>> keys;
    for (const auto& [k, v] : doc) keys.emplace_back(std::string(k.str()), &v);
    std::stable_sort(keys.begin(), keys.end(), [](const auto& a, const auto& b) {
        return a.second->source().begin < b.second->source().begin;
    });
    // Each flag's key as first written, and its line: `max_holds` and
    // `max-holds` are one flag, and a second spelling would silently win.
    std::map<std::string, std::pair<std::string, uint32_t>> seen;
    std::vector<std::pair<size_t, std::string>> starts;  // first argument of a key, its origin
    for (const auto& [key, node] : keys) {
        std::string name = key;
        std::replace(name.begin(), name.end(), '_', '-');
        const std::string at = where(path, *node);
        auto bad = [&](const std::string& why) -> OptionError {
            return OptionError(at + ": '" + key + "' " + why);
        };
        auto [first, fresh] = seen.try_emplace(name, key, node->source().begin.line);
        if (!fresh)
            throw bad("is given twice: also as '" + first->second.first + "' on line " +
                      std::to_string(first->second.second) + " (keep one)");
        // The arguments from out.size() on are this key's.
        starts.emplace_back(out.size(), at + ": " + key);
        if (name == "app") {
            auto v = node->value<std::string>();
            if (!v) throw bad("wants a string (module.path or module.path:callable)");
            if (!given.app) out.push_back(*v);
            continue;
        }
        const Flag* f = find_flag(name);
        if (!f) {
            std::string near = nearest_flag(name, true);
            throw bad("is not a flag m0serve knows (" +
                      (near.empty() ? "" : "did you mean '" + near + "'? ") + "see --help)");
        }
        if (f->cli_only) throw bad("is a command-line flag only");
        const std::string flag = "--" + name;
        switch (f->kind) {
            case Flag::toggle: {
                auto v = node->value<bool>();
                if (!node->is_boolean() || !v) throw bad("wants true or false");
                if (*v) out.push_back(flag);
                break;
            }
            case Flag::value: {
                auto v = scalar(*node);
                if (!v) throw bad("wants a string or a number");
                out.push_back(flag);
                out.push_back(*v);
                break;
            }
            case Flag::positional:  // not a key: `app` above
                break;
            case Flag::list: {
                std::vector<std::string> items;
                if (auto v = node->value<std::string>()) {
                    items.push_back(*v);
                } else if (const toml::array* arr = node->as_array()) {
                    for (const auto& item : *arr) {
                        auto s = item.value<std::string>();
                        if (!s) throw bad("wants a string or an array of strings");
                        items.push_back(*s);
                    }
                } else {
                    throw bad("wants a string or an array of strings");
                }
                if (given.named.count(name)) break;  // the command line's replace these
                for (auto& item : items) {
                    out.push_back(flag);
                    out.push_back(std::move(item));
                }
                break;
            }
        }
    }
    if (origins)
        for (size_t k = 0; k < starts.size(); ++k) {
            size_t end = k + 1 < starts.size() ? starts[k + 1].first : out.size();
            origins->resize(origins->size() + end - starts[k].first, starts[k].second);
        }
    return out;
}

}  // namespace m0::app
