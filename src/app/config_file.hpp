// --config FILE: a TOML file whose keys are the flags' names (without the
// dashes; `_` may stand for `-`), read into the arguments they stand for.
// Main thread, before anything starts.
//
//   app = "config.wsgi"            # the positional APP
//   listen = ["127.0.0.1:8000", "unix:/run/m0serve/http.sock"]
//   blocking-threads = 8
//   realtime = true
//   heartbeat = 15.0
//
// A value flag takes a string or a number, a switch true or false, a
// repeatable flag a string or an array of strings. The command line wins:
// its value flags come later, and a repeatable flag or APP it gives
// replaces the file's. An unknown key (with the nearest flag, if one is
// near), a key given twice in its two spellings, or a value of the wrong
// type, is an OptionError naming the file, the line and the key.
#pragma once
#include <string>
#include <vector>

namespace m0::app {

// The arguments FILE stands for, to go before the command line's. `cli` is
// the command line (argv[0] first, --config taken out).
// `origins`, when given, gets "FILE:LINE: key" for each argument returned.
std::vector<std::string> config_args(const std::string& path, const std::vector<std::string>& cli,
                                     std::vector<std::string>* origins = nullptr);

}  // namespace m0::app
