#include "server/loop_set.hpp"

namespace m0::server {

LoopSet::LoopSet(size_t loops) {
    if (loops == 0) loops = 1;
    for (size_t i = 0; i < loops; ++i) units_.push_back(std::make_unique<LoopUnit>());
}

LoopSet::~LoopSet() {
    turn_timers_.clear();  // before the servers: they unwatch their loops, rings and lanes
    close_servers();
}

bool LoopSet::join(std::string& err) {
    for (size_t i = 0; i < units_.size(); ++i) units_[i]->server->tag_slots(uint32_t(i));
    for (size_t i = 1; i < units_.size(); ++i)
        if (!units_[i]->server->join(*units_[0]->server, err)) return false;
    if (units_.size() > 1)
        units_[0]->server->set_close_everywhere(
            [this](const std::string& channel, const AdminApi::Closed& done) {
                close_channel(channel, done);
            });
    return true;
}

void LoopSet::on_every_loop(const std::function<void(Server&)>& fn) {
    for (size_t i = 1; i < units_.size(); ++i) {
        Server* server = units_[i]->server.get();
        (void)units_[i]->inbox.post([fn, server] { fn(*server); });
    }
    fn(*units_[0]->server);
}

void LoopSet::close_channel(const std::string& channel, AdminApi::Closed done) {
    struct Tally {  // loop 0's thread
        size_t closed = 0, waiting = 0;
        AdminApi::Closed done;
    };
    auto tally = std::make_shared<Tally>();
    tally->waiting = units_.size();
    tally->done = std::move(done);
    auto add = [tally](size_t n) {
        tally->closed += n;
        if (--tally->waiting == 0) tally->done(tally->closed);
    };
    Inbox* home = &units_[0]->inbox;
    for (size_t i = 1; i < units_.size(); ++i) {
        Server* server = units_[i]->server.get();
        bool posted = units_[i]->inbox.post([server, channel, home, add] {
            size_t n = server->close_channel(channel);
            (void)home->post([add, n] { add(n); });
        });
        if (!posted) add(0);
    }
    add(units_[0]->server->close_channel(channel));
}

void LoopSet::close_servers() {
    // The joined servers first: they count their connections on the first's.
    for (size_t i = units_.size(); i-- > 0;) units_[i]->server.reset();
}

void LoopSet::watch_turns(double every) {
    for (auto& u : units_) {
        LoopUnit* unit = u.get();
        unit->turned.store(monotonic_seconds());
        turn_timers_.push_back(std::make_unique<Timer>(
            unit->loop, [unit] { unit->turned.store(monotonic_seconds()); }, true));
        turn_timers_.back()->start(every);
    }
}

bool LoopSet::all_turned(double within) const {
    double now = monotonic_seconds();
    for (const auto& u : units_)
        if (now - u->turned.load() > within) return false;
    return true;
}

void LoopSet::run() {
    for (size_t i = 1; i < units_.size(); ++i) {
        LoopUnit* unit = units_[i].get();
        unit->thread = std::thread([unit] { unit->loop.run(); });
    }
    units_[0]->loop.run();
    for (size_t i = 1; i < units_.size(); ++i) units_[i]->thread.join();
}

}  // namespace m0::server
