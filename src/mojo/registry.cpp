// The mojo mount registry (see registry.hpp).
#include "mojo/registry.hpp"

#include <algorithm>

namespace m0::mojo {

bool Registry::add(std::string name, MountFactory make) {
    auto same = [&name](const Entry& e) { return e.name == name; };
    if (std::any_of(entries_.begin(), entries_.end(), same)) {
        duplicates_.push_back(std::move(name));
        return false;
    }
    entries_.push_back({std::move(name), std::move(make)});
    return true;
}

std::unique_ptr<Handler> Registry::make(std::string_view name, const MojoEnv& env) const {
    for (const Entry& e : entries_)
        if (e.name == name) return e.make(env);
    return nullptr;
}

std::vector<std::string> Registry::names() const {
    std::vector<std::string> out;
    out.reserve(entries_.size());
    for (const Entry& e : entries_) out.push_back(e.name);
    return out;
}

}  // namespace m0::mojo
