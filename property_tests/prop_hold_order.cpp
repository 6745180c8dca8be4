// Properties of the hold mechanism, over the real classes: server::Server on a
// real m0::Loop, mojo::MojoPool with real threads, bus::BusChannel, the
// completion ring, and connections on socketpairs.
//
// Determinism: every pool thread parks at each hand-off point (Handoff::hook:
// handler_start, frame_sent, completion_posted) until a command releases it,
// so only one thread moves at a time and each interleaving RapidCheck
// generates of connect, request, hold decision, frame, completion, publish,
// loop iteration, ring drain, bus drain and disconnect is reproducible from
// its seed (RC_PARAMS="seed=N"). A failure prints the shrunk command list.
//
// Checked after every command, on every client's byte stream:
//   - the head comes first and nothing precedes it (a close-delimited SSE head);
//   - event ids strictly increase, none is at or below the client's cursor,
//     each is on one of its channels;
//   - what it received is, in order, a prefix of the events on its channels
//     published after its handler began (the position read before it), or,
//     with a cursor, every one above the cursor, replayed from history first
//     (none lost, none twice, none early: no gap and no duplicate at the
//     replay/live boundary);
//   - the server never closes a hold whose client is still there;
//   - a departed slot is released and holds no subscription once its job ended.
// At the end, with every job released and the queues drained, each client
// received exactly those events.
#include <fcntl.h>
#include <rapidcheck.h>
#include <rapidcheck/state.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>

#include "mojo/mojo_pool.hpp"
#include "server/test_rig.hpp"

using namespace m0;
using namespace std::chrono_literals;

namespace {

constexpr int kThreads = 3;  // pool threads: at most this many jobs in flight
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
        r.headers.add("M0-Hold", "stream");
        r.headers.add("M0-Channel", req.query_param("c").value_or("a"));
        r.body = ": hold\n\n";
        return r;
    }
};

uint64_t key(SlotRef s) { return (uint64_t(s.index) << 32) | s.gen; }

// Parks pool threads at hand-off points; the test thread releases them one step at a time.
class Stepper {
  public:
    struct Job {
        std::vector<hold::Point> seen;
        bool parked = false;
        bool release = false;
    };

    void hook(hold::Point p, SlotRef s) {
        std::unique_lock l(mu_);
        Job& j = jobs_[key(s)];
        j.seen.push_back(p);
        j.parked = true;
        cv_.notify_all();
        cv_.wait(l, [&] { return j.release; });
        j.release = false;
        j.parked = false;
    }
    // Waits until the job of `s` is parked; false after the deadline.
    bool wait_parked(SlotRef s) {
        std::unique_lock l(mu_);
        return cv_.wait_for(l, 5s, [&] { return jobs_[key(s)].parked; });
    }
    // Releases the parked job of `s`; waits until it parks again or `finished()`.
    bool advance(SlotRef s, const std::function<bool()>& finished) {
        std::unique_lock l(mu_);
        Job& j = jobs_[key(s)];
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
    std::vector<hold::Point> seen(SlotRef s) {
        std::lock_guard l(mu_);
        return jobs_[key(s)].seen;
    }
    void notify() { cv_.notify_all(); }

  private:
    std::mutex mu_;
    std::condition_variable cv_;
    std::map<uint64_t, Job> jobs_;
};

struct Client {
    int fd = -1;
    SlotRef slot;
    bool connected = true;
    bool requested = false;   // any request sent
    bool busy = false;        // its job has not returned
    int plain_requested = 0;  // requests answered without a hold
    int plain_seen = 0;
    bool hold = false;  // a hold was requested (the last request on the connection)
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

// The shared rig (loop, queues, bus, server) with a threaded mojo pool whose
// threads park at every hand-off point.
struct Sut : testing::ServerRig {
    Stepper stepper;
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
    Sut() : ServerRig(config(), true, bus::BusOptions{.history = {.per_channel = 100000}}) {
        hold::Handoff h;
        h.ring = &ring;
        h.bus = &bus;
        h.metrics = &metrics;
        h.hook = [this](hold::Point p, SlotRef s) { stepper.hook(p, s); };
        handler = std::make_unique<mojo::HandlerFor<HoldMount>>(mojo::MojoEnv{});
        pool = std::make_unique<mojo::MojoPool>(kThreads, h);
        server->add_mount("/m", [this](SlotRef s, http::Request&& r) {
            return pool->submit(*handler, s, std::move(r));
        });
    }
    ~Sut() override {
        // Free every parked thread, then stop.
        for (auto& c : clients)
            for (int i = 0; i < 6 && c.busy; ++i) {
                uint64_t done_before = pool->pool().completed.load();
                stepper.advance(c.slot,
                                [&] { return pool->pool().completed.load() > done_before; });
                if (pool->pool().completed.load() > done_before) c.busy = false;
            }
        server.reset();
        pool.reset();
        for (auto& c : clients)
            if (c.fd >= 0) ::close(c.fd);
    }

    // Releases the client's job one step; records what it queued. The job is
    // done when the pool's completed count moves (only one thread moves at a
    // time), whatever order its hand-off points came in.
    void advance(Client& c) {
        if (!c.busy) return;
        uint64_t done_before = pool->pool().completed.load();
        bool moved =
            stepper.advance(c.slot, [&] { return pool->pool().completed.load() > done_before; });
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

    void step_loop(int n = 3) {
        for (int i = 0; i < n; ++i) loop.run_once();
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
            RC_ASSERT(head.rfind("HTTP/1.1 200 OK\r\n", 0) == 0);
            if (head.find("Content-Type: text/event-stream") != std::string::npos) {
                RC_ASSERT(c.hold);
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
        // The body: the head's ": hold\n\n", then events.
        while (c.parsed < c.bytes.size()) {
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
            RC_ASSERT(id > c.cursor);
            if (!c.received.empty())
                RC_ASSERT(id > c.received.back());  // (RC_ASSERT evaluates both sides of ||)
            RC_ASSERT(c.channels.count(channel_of[id]) == 1);
            c.received.push_back(id);
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
        // A departed slot is released once nothing for it is left in the queues.
        bool queues_empty = ring.size() == 0 && bus.queued() == 0;
        for (auto& c : clients)
            if (queues_empty && !c.connected && !c.busy) {
                RC_ASSERT(!server->alive(c.slot));
                RC_ASSERT(!server->subscribed(c.slot));
            }
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
    uint64_t published = 0;  // the shared counter's value
    int in_flight() const {
        int n = 0;
        for (const auto& c : clients) n += c.busy;
        return n;
    }
};

using Cmd = rc::state::Command<Model, Sut>;

struct Connect : Cmd {
    void checkPreconditions(const Model& m) const override {
        RC_PRE(m.clients.size() < static_cast<size_t>(kMaxClients));
    }
    void apply(Model& m) const override { m.clients.push_back({}); }
    void run(const Model&, Sut& s) const override {
        auto end = s.connect();
        RC_ASSERT(end != nullptr);
        Client c;
        c.fd = end->fd;
        c.slot = end->slot;
        end->fd = -1;  // the model's client owns the fd from here
        s.clients.push_back(std::move(c));
        s.check_all();
    }
    void show(std::ostream& os) const override { os << "Connect"; }
};

struct Request : Cmd {
    size_t who = *rc::gen::inRange<size_t>(0, kMaxClients);
    // The handler decides: mostly a hold, sometimes a plain answer (and the
    // connection is kept alive for another request).
    bool hold = *rc::gen::weightedElement<bool>({{4, true}, {1, false}});
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
        std::string req =
            "GET /m/h?c=" + list + (hold ? "" : "&plain=1") + " HTTP/1.1\r\nHost: p\r\n";
        if (cursor) req += "Last-Event-ID: " + std::to_string(cursor) + "\r\n";
        req += "\r\n";
        const size_t before = s.stepper.seen(c.slot).size();
        RC_ASSERT(::send(c.fd, req.data(), req.size(), MSG_NOSIGNAL) ==
                  static_cast<ssize_t>(req.size()));
        c.requested = true;
        c.busy = true;
        if (hold) {
            c.hold = true;
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
        // The loop reads and dispatches; the pool thread parks at handler_start.
        auto deadline = std::chrono::steady_clock::now() + 5s;
        while (s.stepper.seen(c.slot).size() == before &&
               std::chrono::steady_clock::now() < deadline) {
            s.loop.run_once();
            std::this_thread::sleep_for(50us);
        }
        RC_ASSERT(s.stepper.wait_parked(c.slot));
        // Parked at handler_start: the bus position was read before it, so
        // whatever is published from now on is this hold's (the snapshot gap
        // is closed by replay).
        if (hold) c.started = true;
        s.read_all();
        s.check_all();
    }
    void show(std::ostream& os) const override {
        os << "Request(client " << who << (hold ? ", hold on" : ", plain answer; channels");
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
    void apply(Model&) const override {}
    void run(const Model&, Sut& s) const override {
        s.step_loop(1);
        s.check_all();
    }
    void show(std::ostream& os) const override { os << "LoopStep"; }
};

struct DrainRing : Cmd {
    void apply(Model&) const override {}
    void run(const Model&, Sut& s) const override {
        s.server->on_completions_ready();
        s.step_loop(2);
        s.check_all();
    }
    void show(std::ostream& os) const override { os << "DrainRing"; }
};

struct DrainBus : Cmd {
    void apply(Model&) const override {}
    void run(const Model&, Sut& s) const override {
        s.server->on_bus_ready();
        s.step_loop(2);
        s.check_all();
    }
    void show(std::ostream& os) const override { os << "DrainBus"; }
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
            // Nothing in flight: the slot is released at once.
            for (int i = 0; i < 2000 && s.server->alive(c.slot); ++i) {
                s.loop.run_once();
                std::this_thread::sleep_for(50us);
            }
        } else {
            s.step_loop(2);
        }
        s.check_all();
    }
    void show(std::ostream& os) const override { os << "Disconnect(client " << who << ")"; }
};

// Releases every job, drains everything, and requires exact delivery.
void finish(Sut& s) {
    for (auto& c : s.clients)
        for (int i = 0; i < 6 && c.busy; ++i) s.advance(c);
    for (auto& c : s.clients) RC_ASSERT(!c.busy);
    for (int round = 0; round < 50; ++round) {
        s.step_loop(3);
        std::this_thread::sleep_for(100us);
    }
    s.check_all();
    for (auto& c : s.clients) {
        if (!c.connected || !c.requested) continue;
        RC_ASSERT(c.plain_seen == c.plain_requested);
        if (!c.hold) {
            RC_ASSERT(s.server->alive(c.slot));  // kept alive for the next request
            continue;
        }
        RC_ASSERT(c.in_hold);
        RC_ASSERT(c.received == c.expected);
        RC_ASSERT(s.server->holding(c.slot));
    }
    for (auto& c : s.clients)
        if (!c.connected) {
            // Its job ended; the departed slot is gone and unsubscribed.
            for (int i = 0; i < 2000 && s.server->alive(c.slot); ++i) {
                s.loop.run_once();
                std::this_thread::sleep_for(50us);
            }
            RC_ASSERT(!s.server->alive(c.slot));
            RC_ASSERT(!s.server->subscribed(c.slot));
        }
}

}  // namespace

int main() {
    bool ok = rc::check(
        "holds: head first, no event lost or early, ids increase past the cursor, slots released",
        [] {
            Model model;
            Sut sut;
            rc::state::check(
                model, sut,
                rc::state::gen::execOneOfWithArgs<Connect, Connect, Request, Request, Advance,
                                                  Advance, Advance, Publish, Publish, LoopStep,
                                                  DrainRing, DrainBus, Disconnect>());
            finish(sut);
        });
    return ok ? 0 : 1;
}
