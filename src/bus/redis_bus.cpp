#include "bus/redis_bus.hpp"

#include <openssl/evp.h>
#include <poll.h>

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <cstring>

#include "bus/hiredis.hpp"
#include "bus/publish_lua.hpp"
#include "loop/log.hpp"

// The libevent adapter: static functions, in this file only.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wold-style-cast"
#pragma GCC diagnostic ignored "-Wconversion"
#pragma GCC diagnostic ignored "-Wsign-conversion"
#include <hiredis/adapters/libevent.h>
#pragma GCC diagnostic pop

namespace m0::bus {

using namespace redis;

namespace {

constexpr double kFirstBackoff = 0.05, kMaxBackoff = 2.0;  // seconds between reconnects
constexpr double kSweepSeconds = 1.0;
constexpr int kConnectSeconds = 5;  // an attempt that has not connected by then is given up  //
                                    // unsubscribing idle channels, refreshing the position

std::string sha1_hex(std::string_view text) {
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int n = 0;
    EVP_Digest(text.data(), text.size(), md, &n, EVP_sha1(), nullptr);
    std::string hex;
    char byte[3];
    for (unsigned i = 0; i < n; ++i) {
        std::snprintf(byte, sizeof byte, "%02x", md[i]);
        hex += byte;
    }
    return hex;
}

// A command's words, kept alive while hiredis reads them.
struct Argv {
    std::vector<std::string> words;
    std::vector<const char*> ptrs;
    std::vector<size_t> lens;
    void finish() {
        for (const auto& w : words) {
            ptrs.push_back(w.data());
            lens.push_back(w.size());
        }
    }
    int argc() const { return static_cast<int>(words.size()); }
};

// The first command on every link, whose answer says whether Redis takes
// this client: AUTH [USER] PASSWORD with a password, else PING (which a Redis
// that wants a password refuses with NOAUTH).
Argv hello_argv(const RedisUrl& u) {
    Argv a;
    if (u.password.empty()) {
        a.words = {"PING"};
    } else {
        a.words = {"AUTH"};
        if (!u.user.empty()) a.words.push_back(u.user);
        a.words.push_back(u.password);
    }
    a.finish();
    return a;
}

// EVALSHA of publish.lua for a batch (one event: a batch of one): each
// event's 5 keys, then each event's 5 arguments (the script's header).
Argv publish_argv(const std::string& sha, const RedisBusOptions& o,
                  const std::vector<PublishEvent>& events) {
    Argv a;
    a.words = {"EVALSHA", sha, std::to_string(5 * events.size())};
    a.words.reserve(3 + 10 * events.size());
    for (const auto& e : events)
        for (std::string key :
             {std::string(kCounterKey), std::string(kEpochKey), stream_key(e.channel),
              std::string(kHistoryKey), mark_key(e.channel)})
            a.words.push_back(std::move(key));
    const std::string history = std::to_string(o.history);
    for (const auto& e : events)
        for (std::string arg : {pubsub_prefix(o.url.db) + e.channel, history, e.event, e.data,
                                std::string(e.raw ? "1" : "")})
            a.words.push_back(std::move(arg));
    a.finish();
    return a;
}

// Runs the publish script on the blocking link `pub` (under pub_mu_): its
// reply, or null with `err` set. A link with no answer, or to a master that
// became a replica, is closed (`moved` tells the loop to ask the sentinels).
redisReply* run_script(redisContext*& pub, Argv a, std::string& err, std::atomic<bool>& moved) {
    auto* reply =
        static_cast<redisReply*>(redisCommandArgv(pub, a.argc(), a.ptrs.data(), a.lens.data()));
    if (!reply) {
        // No answer: whether Redis ran it is unknown, and the caller hears so.
        err = std::string("no answer: ") + pub->errstr;
        redisFree(pub);
        pub = nullptr;
    }
    if (reply && read_only(reply)) {
        // The master became a replica (a failover): this link goes, and the
        // loop asks the sentinels again at its next sweep.
        redisFree(pub);
        pub = nullptr;
        moved.store(true);
    }
    return reply;
}

}  // namespace

RedisBus::RedisBus(Loop& loop, RedisBusOptions options)
    : loop_(loop), opt_(std::move(options)), sha_(sha1_hex(kPublishLua)), queue_(opt_.capacity) {
    reconnect_timer_ = std::make_unique<Timer>(loop_, [this] { connect(); });
    connect_timer_ = std::make_unique<Timer>(loop_, [this] {
        if (!up_.load())
            link_lost(nullptr, "no connection within " + std::to_string(kConnectSeconds) + " s");
    });
    sweep_timer_ = std::make_unique<Timer>(
        loop_, [this] { sweep(); }, true);
    read_timer_ = std::make_unique<Timer>(loop_, [this] {
        auto reads = std::move(reads_);
        reads_.clear();
        for (auto& [key, req] : reads) send_read(req);
    });
}

RedisBus::~RedisBus() {
    closing_ = true;  // pending callbacks run now, with no reply: they call nobody
    for (redisAsyncContext** link : {&cmd_, &sub_, &asking_}) {
        if (redisAsyncContext* ac = *link) {
            *link = nullptr;
            redisAsyncFree(ac);
        }
    }
    std::lock_guard lock(pub_mu_);
    if (pub_) redisFree(pub_);
}

void RedisBus::raise_position(uint64_t id) {
    uint64_t seen = last_id_.load();
    while (seen < id && !last_id_.compare_exchange_weak(seen, id)) {
    }
}

bool RedisBus::start(double wait) {
    starting_ = true;
    connect();
    sweep_timer_->start(kSweepSeconds);
    loop_.run_until([this] { return up_.load() || !refusal_.empty(); },
                    std::chrono::milliseconds(static_cast<int64_t>(wait * 1000)));
    starting_ = false;
    return up_.load();
}

Bus::LinkStats RedisBus::link_stats() const {
    return {true, up_.load(), reconnects_.load(), publish_failures_.load()};
}

// ---- publishing ------------------------------------------------------------

PublishResult RedisBus::publish_result(const redisReply* reply, const std::string& why_none,
                                       size_t events) {
    PublishResult r;
    std::string why = why_none;
    if (reply && reply->type == REDIS_REPLY_INTEGER && reply->integer > 0) {
        r.id = static_cast<uint64_t>(reply->integer);  // a batch's first
        raise_position(r.id + events - 1);
        published.fetch_add(events);
        return r;
    }
    if (reply && reply->type == REDIS_REPLY_ERROR) why = std::string(reply->str, reply->len);
    if (reply && why.empty()) why = "an unexpected reply to the publish script";
    r.error = PublishError::unavailable;
    r.detail = "redis bus " + opt_.url.text + ": " + why;
    publish_failures_.fetch_add(1);
    return r;
}

bool RedisBus::publish_link_ready_locked(std::string& err) {
    // Where to: the URL's host, or the master the sentinels named last.
    RedisAddress to{opt_.url.host, opt_.url.port};
    if (opt_.url.sentinel()) {
        std::lock_guard addr_lock(master_mu_);
        to = master_;
    }
    if (pub_ && !pub_->err && to == pub_to_) {
        // An idle link has nothing to read; one that has (EOF: Redis went
        // away or restarted since) is replaced before it is used.
        pollfd p{pub_->fd, POLLIN | POLLRDHUP, 0};
        if (::poll(&p, 1, 0) == 0) return true;
    }
    if (pub_) redisFree(pub_);
    pub_ = nullptr;
    if (to.port == 0 && opt_.url.unix_path.empty()) {
        err = "no master known yet (asking the sentinels)";
        return false;
    }
    pub_to_ = to;
    const timeval tv = to_timeval(opt_.timeout);
    pub_ = opt_.url.unix_path.empty() ? redisConnectWithTimeout(to.host.c_str(), to.port, tv)
                                      : redisConnectUnixWithTimeout(opt_.url.unix_path.c_str(), tv);
    if (pub_ && !pub_->err) {
        redisSetTimeout(pub_, tv);
        Argv hello = hello_argv(opt_.url);
        auto* auth = static_cast<redisReply*>(
            redisCommandArgv(pub_, hello.argc(), hello.ptrs.data(), hello.lens.data()));
        const bool taken = auth && auth->type != REDIS_REPLY_ERROR;
        err = !auth    ? std::string(pub_->errstr)
              : !taken ? refusal_text(std::string(auth->str, auth->len))
                       : "";
        if (auth) freeReplyObject(auth);
        if (!taken) {
            redisFree(pub_);
            pub_ = nullptr;
            return false;
        }
        // The database, then the script (EVALSHA needs it loaded on this Redis).
        auto* sel = static_cast<redisReply*>(redisCommand(pub_, "SELECT %d", opt_.url.db));
        auto* load = static_cast<redisReply*>(
            redisCommand(pub_, "SCRIPT LOAD %b", kPublishLua, std::strlen(kPublishLua)));
        const bool ok = sel && sel->type != REDIS_REPLY_ERROR && load &&
                        load->type == REDIS_REPLY_STRING && sha_ == load->str;
        err = !sel || !load ? std::string(pub_->errstr)
              : !ok         ? "SELECT or SCRIPT LOAD refused"
                            : "";
        if (sel) freeReplyObject(sel);
        if (load) freeReplyObject(load);
        if (ok) return true;
    } else {
        err = pub_ ? pub_->errstr : "out of memory";
    }
    if (pub_) redisFree(pub_);
    pub_ = nullptr;
    return false;
}

PublishResult RedisBus::publish(std::string channel, std::string data, std::string event,
                                bool raw) {
    // A batch of one: the same checks and script.
    std::vector<PublishEvent> one;
    one.push_back({std::move(channel), std::move(data), std::move(event), raw});
    return single(publish_batch(std::move(one)));
}

void RedisBus::publish_later(std::string channel, std::string data, std::string event, bool raw,
                             PublishDone done) {
    std::vector<PublishEvent> one;
    one.push_back({std::move(channel), std::move(data), std::move(event), raw});
    publish_batch_later(std::move(one),
                        [done = std::move(done)](BatchResult b) { done(single(std::move(b))); });
}

BatchResult RedisBus::batch_result(const PublishResult& r, size_t events) {
    BatchResult b;
    if (r.ok()) {
        for (size_t i = 0; i < events; ++i) b.ids.push_back(r.id + i);
        return b;
    }
    // One script: Redis took every event or none; with no answer, nobody
    // knows which, and no id is claimed.
    b.error = r;
    if (events > 1)
        b.error.detail +=
            " (none of the batch's " + std::to_string(events) + " events answered as taken)";
    return b;
}

PublishResult RedisBus::single(BatchResult b) {
    if (!b.ok()) return std::move(b.error);
    PublishResult r;
    r.id = b.ids.front();
    return r;
}

BatchResult RedisBus::publish_batch(std::vector<PublishEvent> events) {
    BatchResult b = check_batch(events, opt_.max_event_size, opt_.codec);
    if (!b.ok() && b.error.error == PublishError::too_large) too_large.fetch_add(1);
    if (!b.ok() || events.empty()) return b;
    if (!up_.load())
        return batch_result(publish_result(nullptr, "not connected (reconnecting)"), events.size());
    std::lock_guard lock(pub_mu_);
    std::string err;
    if (!publish_link_ready_locked(err))
        return batch_result(publish_result(nullptr, err), events.size());
    // One script call for the batch: one round trip, one step in Redis.
    auto* reply = run_script(pub_, publish_argv(sha_, opt_, events), err, master_moved_);
    b = batch_result(publish_result(reply, err, events.size()), events.size());
    if (reply) freeReplyObject(reply);
    return b;
}

// A batch's script call on the command link: how many events, and who waits.
struct RedisBus::BatchCall {
    size_t events = 0;
    BatchDone done;
};

void RedisBus::publish_batch_later(std::vector<PublishEvent> events, BatchDone done) {
    BatchResult b = check_batch(events, opt_.max_event_size, opt_.codec);
    if (!b.ok() && b.error.error == PublishError::too_large) too_large.fetch_add(1);
    if (!b.ok() || events.empty()) return done(std::move(b));
    if (!up_.load() || !cmd_)
        return done(
            batch_result(publish_result(nullptr, "not connected (reconnecting)"), events.size()));
    Argv a = publish_argv(sha_, opt_, events);
    auto* pending = new BatchCall{events.size(), std::move(done)};
    if (redisAsyncCommandArgv(cmd_, on_batch_reply, pending, a.argc(), a.ptrs.data(),
                              a.lens.data()) != REDIS_OK) {
        std::unique_ptr<BatchCall> owned(pending);
        owned->done(batch_result(publish_result(nullptr, "the command link refused the publish"),
                                 owned->events));
    }
}

void RedisBus::on_batch_reply(redisAsyncContext* ac, void* reply, void* priv) {
    std::unique_ptr<BatchCall> call(static_cast<BatchCall*>(priv));
    auto* self = static_cast<RedisBus*>(ac->data);
    if (self->closing_) return;
    auto* r = static_cast<redisReply*>(reply);
    call->done(self->batch_result(
        self->publish_result(r, "the connection was lost before Redis answered", call->events),
        call->events));
    // A failover made this Redis a replica: ask where the master is now.
    if (r && read_only(r) && ac == self->cmd_)
        self->link_lost(nullptr, "the master answers READONLY (it became a replica)");
}

bool RedisBus::send(HoldFrame frame) {
    // Other processes publish too: the replay reads where it ends from Redis.
    frame.upto = kUptoUnknown;
    bool ok = queue_.push(Frame{std::move(frame)});
    if (!ok) refused.fetch_add(1);
    return ok;
}

// ---- the links ---------------------------------------------------------------

redisAsyncContext* RedisBus::open_link(const RedisAddress& to) {
    redisAsyncContext* ac = opt_.url.unix_path.empty()
                                ? redisAsyncConnect(to.host.c_str(), to.port)
                                : redisAsyncConnectUnix(opt_.url.unix_path.c_str());
    if (!ac) return nullptr;
    if (ac->err) {
        M0_LOG(debug, "redis bus: cannot open a link: ", ac->errstr);
        redisAsyncFree(ac);
        return nullptr;
    }
    ac->data = this;
    redisLibeventAttach(ac, loop_.base());
    redisAsyncSetConnectCallback(ac, on_connect);
    redisAsyncSetDisconnectCallback(ac, on_disconnect);
    return ac;
}

void RedisBus::connect() {
    if (closing_ || cmd_ || sub_ || asking_) return;
    // The whole attempt, sentinels included, has kConnectSeconds.
    connect_timer_->start(kConnectSeconds);
    if (opt_.url.sentinel())
        ask_sentinels();  // then open_links(the master)
    else
        open_links({opt_.url.host, opt_.url.port});
}

void RedisBus::open_links(const RedisAddress& to) {
    cmd_ready_ = sub_ready_ = false;
    cmd_ = open_link(to);
    sub_ = cmd_ ? open_link(to) : nullptr;
    if (!cmd_ || !sub_) {
        link_lost(nullptr, "cannot open a connection");
        return;
    }
    // Queued now, sent in this order once connected: AUTH (or PING) first,
    // whose answer makes the link ready (on_hello); from the sentinels'
    // master, ROLE too, which must say "master" (on_role).
    Argv hello = hello_argv(opt_.url);
    for (redisAsyncContext* ac : {cmd_, sub_})
        redisAsyncCommandArgv(ac, on_hello, nullptr, hello.argc(), hello.ptrs.data(),
                              hello.lens.data());
    if (opt_.url.sentinel()) redisAsyncCommand(cmd_, on_role, nullptr, "ROLE");
    redisAsyncCommand(cmd_, nullptr, nullptr, "SELECT %d", opt_.url.db);
    redisAsyncCommand(cmd_, nullptr, nullptr, "SCRIPT LOAD %b", kPublishLua,
                      std::strlen(kPublishLua));
    // Python publishers (m0/redis_bus.py) trim streams to this length too.
    redisAsyncCommand(cmd_, nullptr, nullptr, "SET %s %s", kHistoryKey,
                      std::to_string(opt_.history).c_str());
    redisAsyncCommand(cmd_, on_position_reply, nullptr, "GET %s", kCounterKey);
}

void RedisBus::on_connect(const redisAsyncContext* ac, int status) {
    auto* self = static_cast<RedisBus*>(ac->data);
    if (status != REDIS_OK) {
        // hiredis frees this context when the callback returns.
        self->link_lost(ac, std::string("cannot connect: ") + ac->errstr);
        return;
    }
    // Ready once Redis answers the AUTH (or PING): on_hello.
}

std::string RedisBus::refusal_text(const std::string& error) const {
    return std::string("Redis refused ") + (opt_.url.password.empty() ? "PING" : "AUTH") +
           (opt_.url.user.empty() ? "" : " as " + opt_.url.user) + ": " + error;
}

void RedisBus::on_hello(redisAsyncContext* ac, void* reply, void*) {
    auto* self = static_cast<RedisBus*>(ac->data);
    auto* r = static_cast<redisReply*>(reply);
    if (!r || self->closing_ || (ac != self->cmd_ && ac != self->sub_)) return;  // link going
    if (r->type == REDIS_REPLY_ERROR) {
        // A wrong password, an unknown or disabled user, or a password Redis
        // wants and was not given: start() reports it; later, the loop keeps
        // trying (the password may be put right on the Redis side).
        self->refusal_ = self->refusal_text(std::string(r->str, r->len));
        self->link_lost(nullptr, self->refusal_);
        return;
    }
    // From the sentinels' master, the command link waits for ROLE (on_role).
    if (ac == self->cmd_ && !self->opt_.url.sentinel()) self->cmd_ready_ = true;
    if (ac == self->sub_) self->sub_ready_ = true;
    if (self->cmd_ready_ && self->sub_ready_) self->on_up();
}

void RedisBus::on_disconnect(const redisAsyncContext* ac, int status) {
    auto* self = static_cast<RedisBus*>(ac->data);
    self->link_lost(ac, status == REDIS_OK ? std::string("connection closed")
                                           : std::string("connection lost: ") + ac->errstr);
}

void RedisBus::link_lost(const redisAsyncContext* ac, const std::string& why) {
    if (closing_) return;
    if (ac && ac != cmd_ && ac != sub_) return;  // a link already let go
    if (ac == cmd_) cmd_ = nullptr;              // hiredis frees it
    if (ac == sub_) sub_ = nullptr;
    // Both links go, and come back, together. Freeing one runs its pending
    // callbacks with no reply: publishes answer 503, replays are dropped (the
    // resync after the reconnect asks again).
    for (redisAsyncContext** link : {&cmd_, &sub_, &asking_}) {
        if (redisAsyncContext* other = *link) {
            *link = nullptr;
            redisAsyncFree(other);
        }
    }
    cmd_ready_ = sub_ready_ = false;
    up_.store(false);
    connect_timer_->stop();
    channels_.clear();
    reads_.clear();  // not sent: the resync asks again
    read_timer_->stop();
    ops_.clear();
    op_in_flight_ = false;
    if (down_since_ == 0) down_since_ = monotonic_seconds();
    if (starting_ && why == refusal_) {
        // start() reports it, in one line.
        M0_LOG(debug, "redis bus ", opt_.url.text, ": ", why);
    } else if (!outage_logged_) {
        M0_LOG(warn, "redis bus ", opt_.url.text, ": ", why,
               "; holds stay open, publishes fail until it is back; reconnecting");
        outage_logged_ = true;
        refusal_logged_ = why == refusal_;
    } else if (why == refusal_ && !refusal_logged_) {
        M0_LOG(error, "redis bus ", opt_.url.text, ": ", why, "; reconnecting");
        refusal_logged_ = true;
    } else {
        M0_LOG(debug, "redis bus ", opt_.url.text, ": ", why);
    }
    if (reconnect_timer_->pending()) return;
    backoff_ = backoff_ == 0 ? kFirstBackoff : std::min(backoff_ * 2, kMaxBackoff);
    reconnect_timer_->start(backoff_);
}

void RedisBus::on_up() {
    connect_timer_->stop();
    up_.store(true);
    backoff_ = 0;
    if (outage_logged_) {
        reconnects_.fetch_add(1);
        char secs[32];
        std::snprintf(secs, sizeof secs, "%.1f", monotonic_seconds() - down_since_);
        M0_LOG(info, "redis bus ", opt_.url.text, ": connected again after ", secs, " s");
    } else {
        M0_LOG(info, "redis bus: connected to ", opt_.url.text);
    }
    down_since_ = 0;
    outage_logged_ = refusal_logged_ = false;
    refusal_.clear();
    // What holds missed while the bus was down (or asked for meanwhile).
    if (hooks_.resync) hooks_.resync();
}

void RedisBus::on_position_reply(redisAsyncContext* ac, void* reply, void*) {
    auto* self = static_cast<RedisBus*>(ac->data);
    uint64_t id = reply_id(static_cast<redisReply*>(reply));
    self->raise_position(id);
}

void RedisBus::sweep() {
    if (!up_.load()) return;
    if (master_moved_.exchange(false) && opt_.url.sentinel()) {
        link_lost(nullptr, "the master answers READONLY (it became a replica)");
        return;
    }
    if (frames_lost_) {
        frames_lost_ = false;
        if (hooks_.resync) hooks_.resync();
    }
    // A channel no hold listens to any more is unsubscribed.
    for (auto& [channel, st] : channels_) {
        if (st.sub != ChannelState::Sub::subscribed || !st.waiters.empty()) continue;
        if (hooks_.held && hooks_.held(channel)) continue;
        st.sub = ChannelState::Sub::unsubscribing;
        ops_.push_back(Op{false, channel});
    }
    pump_ops();
    // Where a hold that starts now begins (position()): the shared counter.
    redisAsyncCommand(cmd_, on_position_reply, nullptr, "GET %s", kCounterKey);
}

}  // namespace m0::bus
