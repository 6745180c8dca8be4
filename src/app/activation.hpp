// Socket activation against the flags: under systemd's LISTEN_FDS the
// passed sockets are the listeners, and --listen / --admin-listen are not
// bound. A --listen or --admin-listen the passed sockets do not cover would
// be dropped without a word (no admin listener: publishing stops), so it is
// refused. Main thread, before anything binds.
#pragma once
#include <string>

#include "app/options.hpp"

namespace m0::app {

// Empty when every --listen given is the address of a passed client socket
// and an --admin-listen given is the address of the passed socket named
// `admin`; otherwise one line saying which is not and what to do.
std::string activation_conflict(const Options& o);

}  // namespace m0::app
