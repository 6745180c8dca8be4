// m0serve: the binary, serving the built-in mount. Everything is in src/app
// (m0::app::run); an application's own binary is this file with its mount
// types added to the registry (see app/app.hpp).
#include "app/app.hpp"
#include "mojo/builtin.hpp"

int main(int argc, char** argv) {
    return m0::app::run(argc, argv, m0::mojo::registry<m0::mojo::BuiltinMount>());
}
