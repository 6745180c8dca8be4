// m0serve as a library call: the whole program behind main().
#pragma once

namespace m0::app {

// Parses the command line, then serves (or supervises --workers) until
// stopped; returns the exit status. A bad flag exits 2 with one line.
int run(int argc, char** argv);

}  // namespace m0::app
