// RedisBus: the bus that every m0serve process on one Redis shares
// (--bus redis://HOST:PORT/DB). The in-process bus (channel.hpp) stays the
// default.
//
// DESIGN
// Redis holds the truth: the id counter, each channel's history (a stream
// whose entry ids are the m0 ids, "<id>-0", trimmed to --history), and the
// live fan-out (pub/sub). One Lua script, src/bus/publish.lua (embedded at
// build time; the Python m0 package runs the same file), numbers, appends and
// publishes in one atomic step, so id order is publish order across
// processes. Three links:
//   publish link   blocking hiredis, under pub_mu_: publish() from pool
//                  threads (blocking threads may wait one round trip); the id,
//                  or PublishError::unavailable, never silence.
//   command link   hiredis async on the loop (libevent adapter): the admin
//                  API's publish_later() (the loop never waits on Redis), the
//                  replay reads, the position refresh.
//   subscriber     hiredis async on the loop: SUBSCRIBE/UNSUBSCRIBE, one at a
//                  time (hiredis 0.14 keeps one callback per channel, and an
//                  UNSUBSCRIBE reply would drop the callback of a SUBSCRIBE
//                  sent behind it), each naming the channel and its readers'
//                  name together, and the messages, queued as PublishFrames
//                  on the local queue the loop drains with h frames.
// Live messages (redis_message.hpp): a batch goes out in id order, one
// message a run of it on one channel (batched, at most 256 KiB, where every
// subscriber of the channel reads that form; else one single message an
// event, the form an m0serve from before batched messages reads). Redis
// sends one script's messages to a subscriber back to back, and each
// message's events are queued in one push: the loop sees a process's events
// in id order across channels, as with one message an event.
// The seam, a hold's replay against its live events: replay_later() first
// makes sure every channel is subscribed (its SUBSCRIBE answered), then
// reads in one MULTI/EXEC the counter (`upto`), the epoch, each channel's
// mark and each stream after `after`. Everything published after the
// subscription took effect arrives live; everything published before the
// read is in the streams; the hold mutes live ids <= upto, so each event
// reaches it once, in id order (HoldTable::replayed).
// A reconnect storm (thousands of holds back with the same Last-Event-ID)
// asks the same replay thousands of times. A read is not sent at once: it
// waits for the end of the loop's turn (a drained queue of h frames asks
// for many), and a request with the same channels and cursor meanwhile
// joins it. That keeps the seam: each request's hold listens for live
// events, and each of its channels is subscribed, before the read it joined
// is sent. A read already sent is never joined: a hold that began listening
// after it could miss what was published between that read and its start.
// The read's events are encoded once (the codec's PublishFrame::forms) and every hold
// that joined shares them: one XRANGE, and one copy of the bytes, a turn.
// Gaps (m0-reset): a cursor below a channel's mark (the newest id trimmed
// from its stream), or below the epoch (the first id this Redis's data has:
// Redis lost its data), or any cursor when the counter does not exist.
// Redis down: publishes fail loudly, holds stay open, the loop reconnects
// with backoff (logged once per outage), and once both async links are up
// calls LoopHooks::resync: every hold is replayed from its last id, which
// subscribes its channels again.
// Who: every link sends AUTH [USER] PASSWORD first when the URL (or
// --bus-password-file) gives a password, else PING; an async link is up
// when Redis answers it (on_hello), and an error answer is a refusal that
// start() reports (refusal()). Where: the URL's host, or with
// redis+sentinel:// the master the sentinels name, asked again on every
// reconnect, and taken only when ROLE says master (redis_sentinel.cpp).
// Threads: publish(), position(), send(), drain(), the counters and `up_`:
// any thread. The async links, the channel table, the operations queue,
// the timers: the loop thread.
#pragma once
#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "bus/bus.hpp"
#include "bus/redis_url.hpp"
#include "loop/loop.hpp"
#include "loop/notify_queue.hpp"

struct redisAsyncContext;
struct redisContext;
struct redisReply;

namespace m0::bus {

// Points where a test may act (RedisBusOptions::hook), each right after the
// step it names, before the loop sends what that step queued.
enum class RedisPoint {
    subscribing,  // a SUBSCRIBE is queued on the subscriber link
    subscribed,   // a SUBSCRIBE was answered; the replay read is not yet queued
    reading,      // a replay read (MULTI ... EXEC) is queued
    replayed,     // a replay was handed to its hold
};

struct RedisBusOptions {
    RedisUrl url;
    size_t capacity = 65536;                       // local frames before send() refuses (503)
    size_t max_event_size = kDefaultMaxEventSize;  // --max-event-size
    size_t history = HistoryLimits{}.per_channel;  // --history: each stream's length
    double timeout = 2;                    // the publish link's connect and reply bound, seconds
    Codec codec;                           // the server's (server/codec.hpp); none: no forms
    std::function<void(RedisPoint)> hook;  // tests only; loop thread
};

class RedisBus final : public Bus {
  public:
    RedisBus(Loop& loop, RedisBusOptions options);
    ~RedisBus() override;
    RedisBus(const RedisBus&) = delete;
    RedisBus& operator=(const RedisBus&) = delete;

    // Loop thread: connects, waiting up to `wait` seconds for Redis; false
    // when it is not there yet or refused this client (refusal() says so);
    // the loop keeps trying, with backoff.
    bool start(double wait);
    // Loop thread: why Redis refused the last attempt (a wrong password, an
    // unknown user, NOAUTH), without the password; empty once connected.
    const std::string& refusal() const { return refusal_; }

    PublishResult publish(std::string channel, std::string data, std::string event = {},
                          bool raw = false) override;
    void publish_later(std::string channel, std::string data, std::string event, bool raw,
                       PublishDone done) override;
    // A batch is one call of the publish script carrying every event: one
    // round trip, one atomic step in Redis (consecutive ids from the shared
    // counter, in the batch's order). Taken whole or not at all; a lost
    // answer is an error claiming no id.
    BatchResult publish_batch(std::vector<PublishEvent> events) override;
    void publish_batch_later(std::vector<PublishEvent> events, BatchDone done) override;
    uint64_t position() const override { return last_id_.load(); }
    bool send(HoldFrame frame) override;
    size_t drain(std::deque<Frame>& out) override { return queue_.drain(out); }
    int fd() const override { return queue_.fd(); }
    void replay_later(const std::vector<std::string>& channels, uint64_t after, uint64_t upto,
                      ReplayDone done) override;
    size_t max_event_size() const override { return opt_.max_event_size; }
    const Codec& codec() const override { return opt_.codec; }
    // Redis keeps the history: nothing is counted here.
    HistoryStats history_stats() const override { return {}; }
    void attach(LoopHooks hooks) override { hooks_ = std::move(hooks); }
    LinkStats link_stats() const override;

    bool up() const { return up_.load(); }
    // Any thread: the master the sentinels named last (redis+sentinel://);
    // port 0 before any did.
    RedisAddress master() const {
        std::lock_guard lock(master_mu_);
        return master_;
    }
    // Loop thread: channels subscribed or being subscribed (tests).
    size_t channels() const { return channels_.size(); }

  private:
    struct ReplayRequest {
        std::vector<std::string> channels;  // distinct
        uint64_t after = 0;
        // This request's, then those of the identical requests that joined
        // its read.
        std::vector<ReplayDone> done;
        size_t waiting = 0;  // channels whose SUBSCRIBE is not yet answered
        std::string key;     // in reads_: the sorted channels and the cursor
    };
    struct ChannelState {
        enum class Sub { subscribing, subscribed, unsubscribing } sub = Sub::subscribing;
        std::vector<std::shared_ptr<ReplayRequest>> waiters;  // replays waiting for SUBSCRIBE
    };
    struct Op {
        bool subscribe = true;
        std::string channel;
    };

    // Loop thread: the async links.
    void connect();
    void open_links(const RedisAddress& to);
    redisAsyncContext* open_link(const RedisAddress& to);
    // redis+sentinel:// (redis_sentinel.cpp): asks each sentinel in turn for
    // the master's address, then open_links() there.
    void ask_sentinels();
    void ask_next();
    void ask_failed(const std::string& why);
    static void on_ask_connect(const redisAsyncContext* ac, int status);
    static void on_ask_disconnect(const redisAsyncContext* ac, int status);
    static void on_ask_reply(redisAsyncContext* ac, void* reply, void* priv);
    static void on_role(redisAsyncContext* ac, void* reply, void* priv);
    void link_lost(const redisAsyncContext* ac, const std::string& why);
    void schedule_reconnect();
    void on_up();
    static void on_connect(const redisAsyncContext* ac, int status);
    static void on_disconnect(const redisAsyncContext* ac, int status);
    static void on_hello(redisAsyncContext* ac, void* reply, void* priv);
    // Any thread: the line that says Redis refused this client's AUTH (or PING).
    std::string refusal_text(const std::string& error) const;
    static void on_sub_reply(redisAsyncContext* ac, void* reply, void* priv);
    struct BatchCall;
    static void on_batch_reply(redisAsyncContext* ac, void* reply, void* priv);
    // A batch's answer from its script's: every id, or the error.
    static BatchResult batch_result(const PublishResult& r, size_t events);
    // A batch of one's answer as publish() gives it.
    static PublishResult single(BatchResult b);
    static void on_replay_reply(redisAsyncContext* ac, void* reply, void* priv);
    static void on_position_reply(redisAsyncContext* ac, void* reply, void* priv);
    void on_message(const std::string& channel, const redisReply& payload);
    // Any thread: position() becomes at least `id`.
    void raise_position(uint64_t id);
    void on_subscribed(const std::string& channel);
    void pump_ops();
    // A request whose channels are subscribed: joins the read of this turn
    // with its key, or makes it.
    void read_replay(const std::shared_ptr<ReplayRequest>& req);
    void send_read(const std::shared_ptr<ReplayRequest>& req);
    void sweep();
    void at(RedisPoint p) const {
        if (opt_.hook) opt_.hook(p);
    }
    // Any thread: what publish answers from a reply (or its absence).
    // `events`: how many the script carried (the reply is the first's id).
    PublishResult publish_result(const redisReply* reply, const std::string& why_none,
                                 size_t events = 1);
    // Publish link, under pub_mu_: a connected, fresh link, or false with `err`.
    bool publish_link_ready_locked(std::string& err);

    Loop& loop_;
    const RedisBusOptions opt_;  // immutable after construction: any thread
    const std::string sha_;      // the script's SHA-1: any thread
    NotifyQueue<Frame> queue_;   // any thread pushes; the loop drains
    std::atomic<uint64_t> last_id_{0};
    std::atomic<bool> up_{false};  // written by the loop: both async links connected
    std::atomic<uint64_t> reconnects_{0}, publish_failures_{0};

    std::mutex pub_mu_;
    redisContext* pub_ = nullptr;  // guarded by pub_mu_
    RedisAddress pub_to_;          // guarded by pub_mu_: where pub_ is connected

    // redis+sentinel://: the master's address, written by the loop when a
    // sentinel names it, read by the publish link (any thread).
    mutable std::mutex master_mu_;
    RedisAddress master_;  // guarded by master_mu_
    // Set by the publish link (any thread) on a READONLY answer; the loop's
    // sweep asks the sentinels again.
    std::atomic<bool> master_moved_{false};

    // Loop thread only from here on.
    LoopHooks hooks_;
    redisAsyncContext* cmd_ = nullptr;
    redisAsyncContext* sub_ = nullptr;
    redisAsyncContext* asking_ = nullptr;  // the sentinel being asked, if any
    size_t ask_first_ = 0;                 // the sentinel asked first: the one that answered last
    size_t ask_tried_ = 0;                 // sentinels asked in this attempt
    std::string ask_why_;                  // why the last sentinel asked gave no master
    bool cmd_ready_ = false, sub_ready_ = false;
    bool closing_ = false;         // the destructor runs: callbacks call nobody
    double down_since_ = 0;        // monotonic seconds of this outage's start; 0: up
    bool outage_logged_ = false;   // one warning an outage
    std::string refusal_;          // the last attempt's refusal (refusal()); empty when none
    bool refusal_logged_ = false;  // a refusal is logged once an outage, at error
    bool starting_ = false;        // inside start(), which reports a refusal itself
    double backoff_ = 0;
    std::unordered_map<std::string, ChannelState> channels_;  // by m0 channel name
    // Replay reads to send at the end of this turn (read_timer_), by key:
    // a request with the same key joins one.
    std::unordered_map<std::string, std::shared_ptr<ReplayRequest>> reads_;
    std::deque<Op> ops_;
    bool op_in_flight_ = false;
    bool frames_lost_ = false;  // a message did not fit the local queue: resync
    // reconnect_timer_: the next attempt; connect_timer_: an attempt that
    // hangs (hiredis's async connect has no timeout of its own).
    std::unique_ptr<Timer> reconnect_timer_, connect_timer_, sweep_timer_, read_timer_;
};

}  // namespace m0::bus
