// The mojo mounts one program serves, by name: what `--mount PREFIX=NAME`
// may say.
//
// DESIGN
// A Registry is a list of {name, factory}, filled before the server starts
// and read-only after (any thread may read it then). The factory makes the
// mount's Handler once, at start-up, on the main thread; the mojo pool's
// threads then call that Handler. m0serve's own main() hands
// m0::app::run a registry of BuiltinMount; an application built against the
// installed library lists its own types beside it:
//
//     m0::mojo::registry<m0::mojo::BuiltinMount, myapp::LiveMount>()
//
// A name given twice is not an exception (registries are built in main(),
// before anything could report one): the Registry keeps the first, and
// m0::app::run refuses to start, naming the duplicate, with exit code 2.
// Installed with the library: includes only mojo/mojo.hpp.
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "mojo/mojo.hpp"

namespace m0::mojo {

using MountFactory = std::function<std::unique_ptr<Handler>(const MojoEnv&)>;

class Registry {
  public:
    // Adds `name`; false (and the name recorded in duplicates()) when the
    // registry has it already, whose factory is then kept.
    bool add(std::string name, MountFactory make);

    // Adds the type M under M::name.
    template <MojoMount M>
    bool add() {
        return add(std::string(M::name), [](const MojoEnv& env) -> std::unique_ptr<Handler> {
            return std::make_unique<HandlerFor<M>>(env);
        });
    }

    // The Handler of the mount named `name`, or null when none is.
    std::unique_ptr<Handler> make(std::string_view name, const MojoEnv& env) const;
    // Every name, in the order added.
    std::vector<std::string> names() const;
    // The names add() refused, in the order given; empty when all differ.
    const std::vector<std::string>& duplicates() const { return duplicates_; }

  private:
    struct Entry {
        std::string name;
        MountFactory make;
    };
    std::vector<Entry> entries_;
    std::vector<std::string> duplicates_;
};

// A registry of the types Ms, in that order.
template <MojoMount... Ms>
Registry registry() {
    Registry r;
    (r.add<Ms>(), ...);
    return r;
}

}  // namespace m0::mojo
