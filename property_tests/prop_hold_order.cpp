// Properties of the hold mechanism, over the real classes, with 1 to 3 event
// loops (--loops N) in one process: per loop a server::Server on its own real
// m0::Loop, with its own completion ring and its lane of one bus::BusChannel
// hub, and ONE mojo::MojoPool with real threads shared by every loop (a job
// carries the Handoff of the loop its request came from); connections on
// socketpairs, each adopted by the loop the test picks.
//
// Determinism: every pool thread parks at each hand-off point (Handoff::hook:
// handler_start, frame_sent, completion_posted) until a command releases it,
// so only one thread moves at a time, and the loops have no threads: the
// test thread steps each one (run_once, a ring drain, a bus drain), so each
// interleaving RapidCheck generates of connect (on a loop), request, hold
// decision, frame, completion, publish, loop iteration, ring drain, bus drain
// (each on one loop) and disconnect is reproducible from its seed
// (RC_PARAMS="seed=N"). A failure prints the shrunk command list.
//
// A hold is an SSE stream or a WebSocket (the request an upgrade, the
// handler's answer `M0-Hold: websocket`, the cursor in ?lastEventID=): the
// same properties hold for both.
// Checked after every command, on every client's byte stream:
//   - the head comes first and nothing precedes it (a close-delimited SSE
//     head, or a 101 followed by unmasked text frames, one event each);
//   - event ids strictly increase, none is at or below the client's cursor,
//     each is on one of its channels;
//   - what it received is, in order, a prefix of the events on its channels
//     published after its handler began (the position read before it), or,
//     with a cursor, every one above the cursor, replayed from history first
//     (none lost, none twice, none early: no gap and no duplicate at the
//     replay/live boundary);
//   - the server never closes a hold whose client is still there;
//   - a departed slot is released and holds no subscription once its job
//     ended (asked of its own loop's server, once every ring and lane is empty).
// At the end, with every job released and every loop's queues drained, each
// client received exactly those events.
// With several loops this pins the hub's lanes (bus/channel.hpp): an h frame
// goes onto its own loop's lane (another loop would drop it, or hold a
// different client on the same slot number), each loop drains its own lane
// before it writes a hold's head (the subscription exists before the head on
// every loop), and a publish reaches the holds on every loop, in one id order.
#include <fcntl.h>
#include <rapidcheck.h>
#include <rapidcheck/state.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <csignal>
#include <map>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>

#include "bus/channel.hpp"
#include "mojo/mojo_pool.hpp"
#include "server/codec.hpp"
#include "server/server.hpp"

using namespace m0;
using namespace std::chrono_literals;

namespace {

constexpr int kThreads = 3;  // pool threads, shared by the loops: at most this many jobs in flight
constexpr size_t kMaxLoops = 3;
constexpr int kMaxClients = 6;
const std::vector<std::string> kChannels = {"a", "b", "c"};

// A mount that holds every request on the channels its query names.
struct HoldMount {
    static constexpr std::string_view name = "prop";
    explicit HoldMount(const mojo::MojoEnv&) {}
    http::Response serve(const http::Request& req) {
        http::Response r;
        if (req.query_param("plain")) {  // the handler decides: no hold
            r.body = "plain\n";
            return r;
        }
        r.headers.add("M0-Hold", req.query_param("ws") ? "websocket" : "stream");
        r.headers.add("M0-Channel", req.query_param("c").value_or("a"));
        r.body = ": hold\n\n";
        return r;
    }
};

// A job: the loop its request came from and its slot there (each loop's
// server numbers its own slots, so two loops may hand out the same one).
using JobKey = std::pair<size_t, uint64_t>;
JobKey key(size_t loop, SlotRef s) { return {loop, (uint64_t(s.index) << 32) | s.gen}; }

// Parks pool threads at hand-off points; the test thread releases them one step at a time.
class Stepper {
  public:
    struct Job {
        std::vector<hold::Point> seen;
        bool parked = false;
        bool release = false;
    };

    void hook(hold::Point p, JobKey k) {
        std::unique_lock l(mu_);
        Job& j = jobs_[k];
        j.seen.push_back(p);
        j.parked = true;
        cv_.notify_all();
        cv_.wait(l, [&] { return j.release; });
        j.release = false;
        j.parked = false;
    }
    // Waits until the job `k` is parked; false after the deadline.
    bool wait_parked(JobKey k) {
        std::unique_lock l(mu_);
        return cv_.wait_for(l, 5s, [&] { return jobs_[k].parked; });
    }
    // Releases the parked job `k`; waits until it parks again or `finished()`.
    bool advance(JobKey k, const std::function<bool()>& finished) {
        std::unique_lock l(mu_);
        Job& j = jobs_[k];
        if (!j.parked) return false;
        j.release = true;
        j.parked = false;
        cv_.notify_all();
        // The pool does not signal this cv when a job returns: poll, bounded.
        auto deadline = std::chrono::steady_clock::now() + 5s;
        while (!j.parked && !finished()) {
            if (std::chrono::steady_clock::now() > deadline) return false;
            cv_.wait_for(l, 200us);
        }
        return true;
    }
    std::vector<hold::Point> seen(JobKey k) {
        std::lock_guard l(mu_);
        return jobs_[k].seen;
    }
    void notify() { cv_.notify_all(); }

  private:
    std::mutex mu_;
    std::condition_variable cv_;
    std::map<JobKey, Job> jobs_;
};

struct Client {
    int fd = -1;
    size_t loop = 0;  // the loop that adopted the connection
    SlotRef slot;
    bool connected = true;
    bool requested = false;   // any request sent
    bool busy = false;        // its job has not returned
    int plain_requested = 0;  // requests answered without a hold
    int plain_seen = 0;
    bool hold = false;  // a hold was requested (the last request on the connection)
    bool ws = false;    // ... as a WebSocket
    uint64_t cursor = 0;
    std::set<std::string> channels;
    bool started = false;            // its hold's start position is read (at handler_start)
    std::vector<uint64_t> expected;  // ids it must receive, in order
    std::string bytes;               // what it read
    bool eof = false;
    size_t parsed = 0;     // bytes of `bytes` already checked
    bool in_hold = false;  // the hold's head was read
    std::vector<uint64_t> received;
};

// One loop of the process, as server/loop_set.hpp's LoopUnit, without a thread.
struct Unit {
    Loop loop;
    CompletionRing ring;
    hold::Handoff handoff;  // this loop's ring and lane, for the pool's jobs
    std::unique_ptr<server::Server> server;
};

// The loops (each with its ring, its lane of the one bus and its server)
// and one threaded mojo pool they share, whose threads park at every
// hand-off point.
struct Sut {
    Stepper stepper;
    Metrics metrics;
    bus::BusChannel bus;
    std::vector<std::unique_ptr<Unit>> units;
    std::unique_ptr<mojo::HandlerFor<HoldMount>> handler;
    std::unique_ptr<mojo::MojoPool> pool;
    std::vector<Client> clients;
    std::map<uint64_t, std::string> channel_of;  // id -> channel

    static server::ServerConfig config() {
        server::ServerConfig cfg;
        cfg.heartbeat = 3600;  // no heartbeats in the byte streams
        cfg.header_timeout = 3600;
        cfg.keepalive_timeout = 3600;
        return cfg;
    }
    explicit Sut(size_t loops)
        : bus(bus::BusOptions{.history = {.per_channel = 100000}, .codec = server::codec()},
              loops) {
        // A write to a closed peer must be an error return, not a signal.
        std::signal(SIGPIPE, SIG_IGN);
        for (size_t i = 0; i < loops; ++i) {
            auto u = std::make_unique<Unit>();
            u->handoff.ring = &u->ring;
            u->handoff.bus = &bus.lane(i);
            u->handoff.metrics = &metrics;
            u->handoff.hook = [this, i](hold::Point p, SlotRef s) { stepper.hook(p, key(i, s)); };
            units.push_back(std::move(u));
        }
        handler = std::make_unique<mojo::HandlerFor<HoldMount>>(mojo::MojoEnv{});
        // The pool's own handoff is never used: every submit names its loop's.
        pool = std::make_unique<mojo::MojoPool>(kThreads, units[0]->handoff);
        for (size_t i = 0; i < loops; ++i) {
            Unit& u = *units[i];
            u.server =
                std::make_unique<server::Server>(u.loop, config(), u.ring, &bus.lane(i), metrics);
            const hold::Handoff* via = &u.handoff;
            u.server->add_mount("/m", [this, via](SlotRef s, http::Request&& r) {
                return pool->submit(*handler, s, std::move(r), via);
            });
        }
    }
    ~Sut() {
        // Free every parked thread, then stop.
        for (auto& c : clients)
            for (int i = 0; i < 6 && c.busy; ++i) {
                uint64_t done_before = pool->pool().completed.load();
                stepper.advance(key(c.loop, c.slot),
                                [&] { return pool->pool().completed.load() > done_before; });
                if (pool->pool().completed.load() > done_before) c.busy = false;
            }
        for (auto& u : units) u->server.reset();
        pool.reset();
        for (auto& c : clients)
            if (c.fd >= 0) ::close(c.fd);
    }
    Sut(const Sut&) = delete;
    Sut& operator=(const Sut&) = delete;

    size_t loops() const { return units.size(); }
    server::Server& server_of(const Client& c) { return *units[c.loop]->server; }

    // A client whose socketpair end loop `i`'s server adopts; false if
    // socketpair failed.
    bool connect(size_t i, Client& c) {
        int sv[2];
        if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) return false;
        ::fcntl(sv[1], F_SETFL, ::fcntl(sv[1], F_GETFL) | O_NONBLOCK);
        c.fd = sv[1];
        c.loop = i;
        c.slot = units[i]->server->adopt(sv[0], "127.0.0.1", 1);
        return true;
    }

    // Releases the client's job one step; records what it queued. The job is
    // done when the pool's completed count moves (only one thread moves at a
    // time), whatever order its hand-off points came in.
    void advance(Client& c) {
        if (!c.busy) return;
        uint64_t done_before = pool->pool().completed.load();
        bool moved = stepper.advance(key(c.loop, c.slot),
                                     [&] { return pool->pool().completed.load() > done_before; });
        RC_ASSERT(moved);
        if (pool->pool().completed.load() > done_before) c.busy = false;
    }

    void read_all() {
        for (auto& c : clients) {
            if (!c.connected || c.eof) continue;
            char buf[65536];
            for (;;) {
                ssize_t n = ::recv(c.fd, buf, sizeof buf, MSG_DONTWAIT);
                if (n > 0) {
                    c.bytes.append(buf, static_cast<size_t>(n));
                    continue;
                }
                if (n == 0) c.eof = true;
                break;
            }
        }
    }

    // Runs loop `i` `n` iterations, then reads every client.
    void step_loop(size_t i, int n = 3) {
        for (int k = 0; k < n; ++k) units[i]->loop.run_once();
        read_all();
    }

    // Checks every client's stream so far (RC_ASSERT: fails the property).
    void check(Client& c) {
        if (!c.requested) {
            RC_ASSERT(c.bytes.empty());
            return;
        }
        // Plain answers (Content-Length), then at most one hold's head.
        while (!c.in_hold) {
            size_t end = c.bytes.find("\r\n\r\n", c.parsed);
            if (end == std::string::npos) {
                // Nothing precedes a head.
                std::string rest = c.bytes.substr(c.parsed);
                size_t n = std::min<size_t>(9, rest.size());
                RC_ASSERT(rest.substr(0, n) == std::string("HTTP/1.1 ").substr(0, n));
                RC_ASSERT(!c.eof);
                return;
            }
            std::string head = c.bytes.substr(c.parsed, end - c.parsed);
            if (head.rfind("HTTP/1.1 101 Switching Protocols\r\n", 0) == 0) {
                RC_ASSERT(c.hold && c.ws);
                RC_ASSERT(c.plain_seen == c.plain_requested);
                RC_ASSERT(head.find("\r\nUpgrade: websocket") != std::string::npos);
                c.in_hold = true;
                c.parsed = end + 4;
                break;
            }
            RC_ASSERT(head.rfind("HTTP/1.1 200 OK\r\n", 0) == 0);
            if (head.find("Content-Type: text/event-stream") != std::string::npos) {
                RC_ASSERT(c.hold && !c.ws);
                RC_ASSERT(c.plain_seen == c.plain_requested);  // answers in order
                RC_ASSERT(head.find("Transfer-Encoding") == std::string::npos);
                RC_ASSERT(head.find("Content-Length") == std::string::npos);
                RC_ASSERT(head.find("Connection: close") != std::string::npos);
                c.in_hold = true;
                c.parsed = end + 4;
                break;
            }
            RC_ASSERT((head + "\r\n").find("\r\nContent-Length: 6\r\n") != std::string::npos);
            if (c.bytes.size() < end + 4 + 6) return;
            RC_ASSERT(c.bytes.substr(end + 4, 6) == "plain\n");
            c.parsed = end + 4 + 6;
            ++c.plain_seen;
            RC_ASSERT(c.plain_seen <= c.plain_requested);
        }
        const auto take = [&](uint64_t id) {
            RC_ASSERT(id > c.cursor);
            if (!c.received.empty())
                RC_ASSERT(id > c.received.back());  // (RC_ASSERT evaluates both sides of ||)
            RC_ASSERT(c.channels.count(channel_of[id]) == 1);
            c.received.push_back(id);
        };
        // A WebSocket: after the 101, one text frame an event, unmasked, its
        // message {"id":"N","data":"x"}.
        while (c.ws && c.parsed + 2 <= c.bytes.size()) {
            RC_ASSERT(uint8_t(c.bytes[c.parsed]) == 0x81);  // FIN, text
            size_t n = uint8_t(c.bytes[c.parsed + 1]), at = c.parsed + 2;
            RC_ASSERT(n < 126);  // unmasked, and short
            if (at + n > c.bytes.size()) break;
            const std::string msg = c.bytes.substr(at, n);
            c.parsed = at + n;
            RC_ASSERT(msg.rfind("{\"id\":\"", 0) == 0);
            const size_t q = msg.find('"', 7);
            RC_ASSERT(q != std::string::npos && msg.substr(q) == "\",\"data\":\"x\"}");
            take(std::stoull(msg.substr(7, q - 7)));
        }
        // An SSE stream: the head's ": hold\n\n", then events.
        while (!c.ws && c.parsed < c.bytes.size()) {
            size_t end = c.bytes.find("\n\n", c.parsed);
            if (end == std::string::npos) break;
            std::string block = c.bytes.substr(c.parsed, end - c.parsed);
            c.parsed = end + 2;
            if (block == ": hold") continue;
            RC_ASSERT(block.rfind("id: ", 0) == 0);
            size_t nl = block.find('\n');
            uint64_t id = std::stoull(block.substr(4, nl - 4));
            std::string data = block.substr(nl + 1);
            RC_ASSERT(data.rfind("data: ", 0) == 0);
            take(id);
        }
        // In order, a prefix of what it must receive.
        RC_ASSERT(c.received.size() <= c.expected.size());
        for (size_t i = 0; i < c.received.size(); ++i) RC_ASSERT(c.received[i] == c.expected[i]);
        // A connection, held or kept alive, is never closed under a client that is
        // still there.
        RC_ASSERT(!c.eof);
    }

    void check_all() {
        for (auto& c : clients)
            if (c.connected) check(c);
        // A departed slot is released once nothing for it is left in the
        // queues: every loop's ring and every lane of the bus.
        bool queues_empty = true;
        for (size_t i = 0; i < loops(); ++i)
            queues_empty = queues_empty && units[i]->ring.size() == 0 && bus.queued(i) == 0;
        for (auto& c : clients)
            if (queues_empty && !c.connected && !c.busy) {
                RC_ASSERT(!server_of(c).alive(c.slot));
                RC_ASSERT(!server_of(c).subscribed(c.slot));
            }
        // Every subscription is a live hold's: a released one left in a
        // channel's list would point at a freed record.
        for (size_t i = 0; i < loops(); ++i)
            RC_ASSERT(units[i]->server->subscriptions().members() <=
                      units[i]->server->hold_records());
    }
};

struct Model {
    struct C {
        bool connected = true;
        bool busy = false;  // a job in flight
        int steps = 0;      // its hand-off points passed
        int total = 0;      // its hand-off points: 3 for a hold, 2 for a plain answer
        bool held = false;  // asked for a hold: no further request on the connection
    };
    std::vector<C> clients;
    size_t loops = 1;        // the Sut's, fixed for the test case
    uint64_t published = 0;  // the shared counter's value
    int in_flight() const {
        int n = 0;
        for (const auto& c : clients) n += c.busy;
        return n;
    }
};

using Cmd = rc::state::Command<Model, Sut>;

// A loop a command acts on: generated, then taken modulo the loop count.
size_t pick_loop(const Model& m) { return *rc::gen::inRange<size_t>(0, kMaxLoops) % m.loops; }

struct Connect : Cmd {
    size_t loop;
    explicit Connect(const Model& m) : loop(pick_loop(m)) {}
    void checkPreconditions(const Model& m) const override {
        RC_PRE(m.clients.size() < static_cast<size_t>(kMaxClients));
    }
    void apply(Model& m) const override { m.clients.push_back({}); }
    void run(const Model&, Sut& s) const override {
        Client c;
        RC_ASSERT(s.connect(loop, c));
        s.clients.push_back(std::move(c));
        s.check_all();
    }
    void show(std::ostream& os) const override { os << "Connect(loop " << loop << ")"; }
};

struct Request : Cmd {
    size_t who = *rc::gen::inRange<size_t>(0, kMaxClients);
    // The handler decides: mostly a hold, sometimes a plain answer (and the
    // connection is kept alive for another request).
    bool hold = *rc::gen::weightedElement<bool>({{4, true}, {1, false}});
    // A hold asked as a WebSocket upgrade (an upgrade answered otherwise
    // closes the connection: only holds are).
    bool ws = hold && *rc::gen::arbitrary<bool>();
    std::vector<std::string> channels =
        *rc::gen::unique<std::vector<std::string>>(rc::gen::elementOf(kChannels)).as("channels");
    uint64_t cursor;
    // The cursor lands near the counter: behind it, at it, or ahead of it (a
    // client that saw ids this server has not handed out yet).
    explicit Request(const Model& m) {
        int64_t c = static_cast<int64_t>(m.published) + *rc::gen::inRange<int64_t>(-1, 3);
        cursor = static_cast<uint64_t>(c < 0 ? 0 : c);
    }

    void checkPreconditions(const Model& m) const override {
        RC_PRE(who < m.clients.size());
        const auto& c = m.clients[who];
        RC_PRE(c.connected && !c.busy && !c.held);
        RC_PRE(!channels.empty());
        RC_PRE(m.in_flight() < kThreads);
    }
    void apply(Model& m) const override {
        auto& c = m.clients[who];
        c.busy = true;
        c.steps = 0;
        c.total = hold ? 3 : 2;
        c.held = hold;
    }
    void run(const Model&, Sut& s) const override {
        Client& c = s.clients[who];
        std::string list;
        for (const auto& ch : channels) list += (list.empty() ? "" : ",") + ch;
        std::string req = "GET /m/h?c=" + list + (hold ? "" : "&plain=1") + (ws ? "&ws=1" : "");
        if (ws && cursor) req += "&lastEventID=" + std::to_string(cursor);
        req += " HTTP/1.1\r\nHost: p\r\n";
        if (ws)
            req +=
                "Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\n"
                "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n";
        else if (cursor)
            req += "Last-Event-ID: " + std::to_string(cursor) + "\r\n";
        req += "\r\n";
        const JobKey job = key(c.loop, c.slot);
        const size_t before = s.stepper.seen(job).size();
        RC_ASSERT(::send(c.fd, req.data(), req.size(), MSG_NOSIGNAL) ==
                  static_cast<ssize_t>(req.size()));
        c.requested = true;
        c.busy = true;
        if (hold) {
            c.hold = true;
            c.ws = ws;
            c.cursor = cursor;
            c.channels = {channels.begin(), channels.end()};
            // A cursor is replayed what history keeps after it (all of it here:
            // the rig's history outlasts any run).
            if (cursor != 0)
                for (const auto& [id, ch] : s.channel_of)
                    if (id > cursor && c.channels.count(ch)) c.expected.push_back(id);
        } else {
            ++c.plain_requested;
        }
        // Its loop reads and dispatches; the pool thread parks at handler_start.
        auto deadline = std::chrono::steady_clock::now() + 5s;
        while (s.stepper.seen(job).size() == before &&
               std::chrono::steady_clock::now() < deadline) {
            s.units[c.loop]->loop.run_once();
            std::this_thread::sleep_for(50us);
        }
        RC_ASSERT(s.stepper.wait_parked(job));
        // Parked at handler_start: the bus position was read before it, so
        // whatever is published from now on is this hold's (the snapshot gap
        // is closed by replay).
        if (hold) c.started = true;
        s.read_all();
        s.check_all();
    }
    void show(std::ostream& os) const override {
        os << "Request(client " << who
           << (ws     ? ", WebSocket on"
               : hold ? ", hold on"
                      : ", plain answer; channels");
        for (const auto& c : channels) os << " " << c;
        os << ", Last-Event-ID " << cursor << ")";
    }
};

struct Advance : Cmd {
    size_t who = *rc::gen::inRange<size_t>(0, kMaxClients);
    void checkPreconditions(const Model& m) const override {
        RC_PRE(who < m.clients.size());
        RC_PRE(m.clients[who].busy);
    }
    void apply(Model& m) const override {
        auto& c = m.clients[who];
        if (++c.steps == c.total) c.busy = false;
    }
    void run(const Model&, Sut& s) const override {
        s.advance(s.clients[who]);
        s.read_all();
        s.check_all();
    }
    void show(std::ostream& os) const override { os << "Advance(client " << who << ")"; }
};

struct Publish : Cmd {
    std::string channel = *rc::gen::elementOf(kChannels);
    void apply(Model& m) const override { ++m.published; }
    void run(const Model&, Sut& s) const override {
        // One publish on the hub (as a pool thread or the admin API would): it
        // reaches every loop's lane.
        auto r = s.bus.publish(channel, "x");
        RC_ASSERT(r.ok());
        s.channel_of[r.id] = channel;
        for (auto& c : s.clients)
            if (c.connected && c.started && c.channels.count(channel) && r.id > c.cursor)
                c.expected.push_back(r.id);
        s.check_all();
    }
    void show(std::ostream& os) const override { os << "Publish(" << channel << ")"; }
};

struct LoopStep : Cmd {
    size_t loop;
    explicit LoopStep(const Model& m) : loop(pick_loop(m)) {}
    void apply(Model&) const override {}
    void run(const Model&, Sut& s) const override {
        s.step_loop(loop, 1);
        s.check_all();
    }
    void show(std::ostream& os) const override { os << "LoopStep(loop " << loop << ")"; }
};

struct DrainRing : Cmd {
    size_t loop;
    explicit DrainRing(const Model& m) : loop(pick_loop(m)) {}
    void apply(Model&) const override {}
    void run(const Model&, Sut& s) const override {
        s.units[loop]->server->on_completions_ready();
        s.step_loop(loop, 2);
        s.check_all();
    }
    void show(std::ostream& os) const override { os << "DrainRing(loop " << loop << ")"; }
};

struct DrainBus : Cmd {
    size_t loop;
    explicit DrainBus(const Model& m) : loop(pick_loop(m)) {}
    void apply(Model&) const override {}
    void run(const Model&, Sut& s) const override {
        s.units[loop]->server->on_bus_ready();
        s.step_loop(loop, 2);
        s.check_all();
    }
    void show(std::ostream& os) const override { os << "DrainBus(loop " << loop << ")"; }
};

struct Disconnect : Cmd {
    size_t who = *rc::gen::inRange<size_t>(0, kMaxClients);
    void checkPreconditions(const Model& m) const override {
        RC_PRE(who < m.clients.size());
        RC_PRE(m.clients[who].connected);
    }
    void apply(Model& m) const override { m.clients[who].connected = false; }
    void run(const Model&, Sut& s) const override {
        Client& c = s.clients[who];
        c.connected = false;
        ::close(c.fd);
        c.fd = -1;
        if (!c.busy) {
            // Nothing in flight: its loop releases the slot at once.
            for (int i = 0; i < 2000 && s.server_of(c).alive(c.slot); ++i) {
                s.units[c.loop]->loop.run_once();
                std::this_thread::sleep_for(50us);
            }
        } else {
            s.step_loop(c.loop, 2);
        }
        s.check_all();
    }
    void show(std::ostream& os) const override { os << "Disconnect(client " << who << ")"; }
};

// Releases every job, drains every loop, and requires exact delivery.
void finish(Sut& s) {
    for (auto& c : s.clients)
        for (int i = 0; i < 6 && c.busy; ++i) s.advance(c);
    for (auto& c : s.clients) RC_ASSERT(!c.busy);
    for (int round = 0; round < 50; ++round) {
        for (size_t i = 0; i < s.loops(); ++i) s.step_loop(i, 3);
        std::this_thread::sleep_for(100us);
    }
    s.check_all();
    for (auto& c : s.clients) {
        if (!c.connected || !c.requested) continue;
        RC_ASSERT(c.plain_seen == c.plain_requested);
        if (!c.hold) {
            RC_ASSERT(s.server_of(c).alive(c.slot));  // kept alive for the next request
            continue;
        }
        RC_ASSERT(c.in_hold);
        RC_ASSERT(c.received == c.expected);
        RC_ASSERT(s.server_of(c).holding(c.slot));
    }
    for (auto& c : s.clients)
        if (!c.connected) {
            // Its job ended; the departed slot is gone and unsubscribed.
            for (int i = 0; i < 2000 && s.server_of(c).alive(c.slot); ++i) {
                s.units[c.loop]->loop.run_once();
                std::this_thread::sleep_for(50us);
            }
            RC_ASSERT(!s.server_of(c).alive(c.slot));
            RC_ASSERT(!s.server_of(c).subscribed(c.slot));
        }
    for (size_t i = 0; i < s.loops(); ++i)
        RC_ASSERT(s.units[i]->server->subscriptions().members() <=
                  s.units[i]->server->hold_records());
}

}  // namespace

int main() {
    bool ok = rc::check(
        "holds (SSE streams and WebSockets) on 1 to 3 loops: head first, no event lost or "
        "early, ids increase past the cursor, slots released",
        [] {
            const size_t loops = *rc::gen::inRange<size_t>(1, kMaxLoops + 1).as("loops");
            RC_TAG(loops);
            Model model;
            model.loops = loops;
            Sut sut(loops);
            rc::state::check(
                model, sut,
                rc::state::gen::execOneOfWithArgs<Connect, Connect, Request, Request, Advance,
                                                  Advance, Advance, Publish, Publish, LoopStep,
                                                  DrainRing, DrainBus, Disconnect>());
            finish(sut);
        });
    return ok ? 0 : 1;
}
