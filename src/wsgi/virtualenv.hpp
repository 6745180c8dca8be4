// The project's virtualenv (--virtualenv DIR, else VIRTUAL_ENV): which one,
// and whether the embedded interpreter can run in it.
//
// DESIGN
// A venv is a folder with a pyvenv.cfg (PEP 405). The interpreter is not
// told its site-packages: it starts as if it were the venv's bin/python3
// (interpreter.cpp sets PyConfig's program_name to it), and Python's own
// getpath finds pyvenv.cfg beside it, sets sys.prefix to the venv, and its
// site module adds the venv's site-packages (running their .pth files) and
// keeps or drops the system's as include-system-site-packages says, as for
// `DIR/bin/python3` itself. What this module adds is the check before that:
// the folder is a venv, made for the Python m0serve embeds (a venv's
// site-packages holds compiled modules of its own version).
// Threads: the main thread, before the interpreter starts.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace m0::wsgi {

struct Virtualenv {
    std::string dir;           // absolute, no trailing '/'
    std::string python;        // dir + "/bin/python3": the interpreter's program_name
    std::string version;       // pyvenv.cfg's version (or version_info); empty: none given
    bool system_site = false;  // include-system-site-packages = true
};

// Reads DIR/pyvenv.cfg (DIR absolute). Returns the venv, or nullopt with
// `err` set to one line when DIR has no pyvenv.cfg or it was made for
// another Python X.Y than `embedded` ("3.11.2": the patch level may differ).
std::optional<Virtualenv> read_virtualenv(const std::string& dir, std::string_view embedded,
                                          std::string& err);

// The version of the Python m0serve embeds, "X.Y.Z" (safe before start()).
std::string embedded_version();

// Which venv: the --virtualenv flag's DIR, else VIRTUAL_ENV's (an activated
// venv, as `pip` and `python` honour it); `from` names the one that won and
// `unused` the other when both were given. An empty dir: none.
struct VirtualenvChoice {
    std::string dir;
    std::string from;    // "--virtualenv", "VIRTUAL_ENV", or empty
    std::string unused;  // VIRTUAL_ENV's value when --virtualenv won over it
};
VirtualenvChoice choose_virtualenv(const std::string& flag, const char* env);

}  // namespace m0::wsgi
