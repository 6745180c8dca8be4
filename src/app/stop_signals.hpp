// What SIGTERM and SIGINT do: once serving, the drain (a second one ends
// the process at once); while starting, see catch_stop_while_starting.
//
// SIGTERM or SIGINT while the process starts (its listeners may already
// take connections into their backlog while Django loads), before the
// loop's handlers are in place: the first is kept and acted on once they
// are (the drain then answers what waits in the backlog), a second ends the
// process at once (exit 0, or 130 for SIGINT). Without this the signal's
// default action ended it, and a supervisor saw a kill rather than an exit.
#pragma once
#include <event2/util.h>

namespace m0 {
struct Metrics;
namespace server {
class LoopSet;
}
}  // namespace m0

namespace m0::app {

// What SIGTERM and SIGINT stop: the loops, counted by the process's metrics.
struct Stopping {
    m0::server::LoopSet* loops;
    const m0::Metrics* metrics;
};
// The loop's handler of SIGTERM, SIGINT and (a --workers worker's)
// proc::kRetireSignal; `arg` is a Stopping. Loop 0's thread.
void on_stop_signal(evutil_socket_t sig, short, void* arg);

// Puts the start-up handler on SIGTERM and SIGINT (the loop's own replace it
// when serve adds them). Main thread, before any other thread starts.
void catch_stop_while_starting();
// The signal that came while starting, or 0. Main thread, once the loop's
// handlers are in place.
int stop_while_starting();

}  // namespace m0::app
