// m0serve as a library call: the whole program behind main().
//
// An application with its own mojo mounts builds its own server from the
// installed library (`make install`, then find_package(m0serve) and
// target_link_libraries(APP PRIVATE m0serve::m0app)) with a main() of its own:
//
//     #include "app/app.hpp"
//     #include "mojo/builtin.hpp"
//     #include "live_mount.hpp"
//     int main(int argc, char** argv) {
//         return m0::app::run(argc, argv,
//                             m0::mojo::registry<m0::mojo::BuiltinMount, myapp::LiveMount>());
//     }
//
// Installed with the library: includes only mojo/registry.hpp.
#pragma once
#include <string>

#include "mojo/registry.hpp"

// Where the `m0` Python package is, for whoever links m0app: the source tree's
// src/wsgi for m0serve in the build tree, PREFIX/share/m0serve/python once
// installed (the package config's m0serve::m0app says so). m0app's own files
// (M0_BUILDING_APP) need no path: none is compiled into them, so that they
// compile alike in any copy of the tree (the sabotage lanes' ccache hits).
#if !defined(M0_PYTHON_PACKAGE_DIR) && !defined(M0_BUILDING_APP)
#error "M0_PYTHON_PACKAGE_DIR comes with the m0app target: link m0serve::m0app"
#endif

namespace m0::app {

// Parses the command line, then serves (or supervises --workers) until
// stopped; returns the exit status. `--mount PREFIX=NAME` may name any mount
// of `mounts`. A bad flag, or a name `mounts` holds twice, exits 2 with one
// line. The `m0` Python package is looked for in M0_PYTHON_PACKAGE_DIR from the
// environment, else in PREFIX/share/m0serve/python when the program runs as
// PREFIX/bin/NAME and that folder holds it, else in `python_package_dir`.
int run(int argc, char** argv, const mojo::Registry& mounts, std::string python_package_dir);

#ifdef M0_PYTHON_PACKAGE_DIR
// The same, with the package where this program was built to find it.
inline int run(int argc, char** argv, const mojo::Registry& mounts) {
    return run(argc, argv, mounts, M0_PYTHON_PACKAGE_DIR);
}
#endif

}  // namespace m0::app
