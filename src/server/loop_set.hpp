// LoopSet: the loops of one process (--loops N). Each is a thread running
// its own Loop, which owns its own Server: connections, slots, the hold
// table and its subscriptions, its completion ring and its lane of the bus.
//
// DESIGN
// The pools are shared: a job carries the Handoff of the loop its request
// came from (its ring and bus lane), so its completion and its h frame reach
// that loop and no other. The in-process bus numbers every event once and
// puts it on every loop's lane in id order; an h frame goes onto its own
// loop's lane only (bus/channel.hpp), so each loop drains its frames before
// it writes a hold's head, exactly as one loop does. With a shared bus
// (Redis) each loop has its own links, and Redis fans out to each.
// Connections: loop 0 binds the listeners; every other loop binds each TCP
// one again on the same port with SO_REUSEPORT (the kernel spreads
// connections by their addresses) and shares a unix or systemd socket (a
// duplicate: whichever loop is free accepts). One --max-connections count.
// The admin listener is loop 0's; its /metrics reads counters every loop
// bumps (atomics), and its close reaches every loop (close_channel).
// Threads: the units are made, and their servers built, on the first thread
// before run(); after that each unit is its own loop's. Loops reach each
// other only through their inboxes (loop/inbox.hpp).
#pragma once
#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "bus/bus.hpp"
#include "hold/hold.hpp"
#include "loop/inbox.hpp"
#include "loop/loop.hpp"
#include "pool/completion.hpp"
#include "server/access_log.hpp"
#include "server/admin.hpp"
#include "server/server.hpp"

namespace m0::server {

struct LoopUnit {
    Loop loop;
    CompletionRing ring;
    Inbox inbox{loop};
    std::unique_ptr<bus::Bus> own_bus;  // a shared bus's links of this loop's own, if any
    bus::Bus* bus = nullptr;            // this loop's lane of the bus; null without --realtime
    hold::Handoff handoff;              // this loop's ring and lane, for the pools' jobs
    AccessLog access_log;               // this loop's own file descriptor (--access-log)
    std::unique_ptr<Server> server;
    std::thread thread;             // loops 1..: the thread that runs `loop`
    std::atomic<double> turned{0};  // when a timer of this loop last ran (the watchdog)
};

class LoopSet {
  public:
    explicit LoopSet(size_t loops);
    ~LoopSet();
    LoopSet(const LoopSet&) = delete;
    LoopSet& operator=(const LoopSet&) = delete;

    size_t size() const { return units_.size(); }
    LoopUnit& operator[](size_t i) { return *units_[i]; }

    // Once every unit has its server and unit 0 its listeners, before any
    // connection: each server's slots are tagged with its loop
    // (Server::tag_slots), the other servers join unit 0's (Server::join),
    // and unit 0's admin close reaches every loop. False with `err` set.
    bool join(std::string& err);
    // Loop 0's thread: `fn` runs on every loop's thread with its server, at
    // once on this one and through the others' inboxes.
    void on_every_loop(const std::function<void(Server&)>& fn);
    // Loop 0's thread: every loop closes its holds on `channel`; `done` gets
    // how many were closed in all, on loop 0, once every loop has answered.
    void close_channel(const std::string& channel, AdminApi::Closed done);
    // After run(): every server closes its connections and goes, the joined
    // ones before loop 0's (they count on its atomics). Also on destruction.
    void close_servers();
    // Each loop notes when its timer runs, every `every` seconds (the watchdog).
    void watch_turns(double every);
    // Whether every loop noted a turn within `within` seconds.
    bool all_turned(double within) const;
    // Runs loops 1.. on threads of their own and loop 0 on this one, until
    // every loop has ended (each ends when its server has shut down).
    void run();

  private:
    std::vector<std::unique_ptr<LoopUnit>> units_;
    std::vector<std::unique_ptr<Timer>> turn_timers_;  // each on its own loop
};

}  // namespace m0::server
