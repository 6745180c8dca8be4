// The compile-time list of mojo mounts. A new mount: a type satisfying
// MojoMount, listed in kMounts.
#include <tuple>

#include "mojo/builtin.hpp"
#include "mojo/mojo.hpp"

namespace m0::mojo {

namespace {
template <MojoMount... Ms>
struct MountList {
    static std::unique_ptr<Handler> make(std::string_view name, const MojoEnv& env) {
        std::unique_ptr<Handler> out;
        ((name == Ms::name && !out ? (out = std::make_unique<HandlerFor<Ms>>(env), 0) : 0), ...);
        return out;
    }
    static std::vector<std::string> names() { return {std::string(Ms::name)...}; }
};
using kMounts = MountList<BuiltinMount>;
}  // namespace

std::unique_ptr<Handler> make_mount(std::string_view name, const MojoEnv& env) {
    return kMounts::make(name, env);
}

std::vector<std::string> mount_names() { return kMounts::names(); }

}  // namespace m0::mojo
