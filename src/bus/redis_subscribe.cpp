// RedisBus, the loop side: subscriptions, live messages and replays (the
// seam; see redis_bus.hpp). Loop thread only.
#include <algorithm>

#include "bus/hiredis.hpp"
#include "bus/redis_bus.hpp"
#include "bus/redis_message.hpp"
#include "loop/log.hpp"

namespace m0::bus {

using namespace redis;

namespace {}  // namespace

void RedisBus::replay_later(const std::vector<std::string>& channels, uint64_t after, uint64_t,
                            ReplayDone done) {
    // Down: dropped. The resync once the bus is back asks again for every hold.
    if (!up_.load() || !sub_ || !cmd_) return;
    auto req = std::make_shared<ReplayRequest>();
    for (const auto& c : channels)
        if (std::find(req->channels.begin(), req->channels.end(), c) == req->channels.end())
            req->channels.push_back(c);
    req->after = after;
    req->done.push_back(std::move(done));
    // The read waits until every channel is subscribed: from then on each
    // event reaches this process live, and the read finds every earlier one.
    for (const auto& c : req->channels) {
        auto [it, fresh] = channels_.try_emplace(c);
        ChannelState& st = it->second;
        if (!fresh && st.sub == ChannelState::Sub::subscribed) continue;
        st.waiters.push_back(req);
        ++req->waiting;
        if (fresh || st.sub == ChannelState::Sub::unsubscribing) {
            st.sub = ChannelState::Sub::subscribing;
            ops_.push_back(Op{true, c});
        }
    }
    pump_ops();
    if (req->waiting == 0) read_replay(req);
}

void RedisBus::pump_ops() {
    // One SUBSCRIBE or UNSUBSCRIBE in flight at a time (see the DESIGN note).
    // Each names the channel and its readers' name together, so Redis counts
    // this reader on both or neither, at every instant (redis_message.hpp):
    // the readers' name's answer, the second, completes the operation.
    while (!op_in_flight_ && !ops_.empty() && sub_) {
        Op op = std::move(ops_.front());
        ops_.pop_front();
        const std::string name = pubsub_prefix(opt_.url.db) + op.channel;
        const std::string readers = readers_prefix(opt_.url.db) + op.channel;
        int rc = redisAsyncCommand(sub_, on_sub_reply, this,
                                   op.subscribe ? "SUBSCRIBE %b %b" : "UNSUBSCRIBE %b %b",
                                   name.data(), name.size(), readers.data(), readers.size());
        if (rc != REDIS_OK) {
            M0_LOG(warn, "redis bus: ", op.subscribe ? "SUBSCRIBE " : "UNSUBSCRIBE ", op.channel,
                   " not sent");
            if (!op.subscribe) channels_.erase(op.channel);
            continue;
        }
        op_in_flight_ = true;
        if (op.subscribe) at(RedisPoint::subscribing);
    }
}

void RedisBus::on_sub_reply(redisAsyncContext* ac, void* reply, void*) {
    auto* self = static_cast<RedisBus*>(ac->data);
    auto* r = static_cast<redisReply*>(reply);
    if (!r || self->closing_ || ac != self->sub_) return;  // the link is going
    if (r->type != REDIS_REPLY_ARRAY || r->elements < 3) return;
    const std::string_view kind = redis::reply_text(r->element[0]);
    const std::string prefix = pubsub_prefix(self->opt_.url.db);
    const std::string readers = readers_prefix(self->opt_.url.db);
    std::string_view name = redis::reply_text(r->element[1]);
    if (name.starts_with(prefix)) {
        // The channel's own name: its messages. Its (UN)SUBSCRIBE answer
        // comes first; the readers' name's completes the operation.
        name.remove_prefix(prefix.size());
        if (kind == "message") self->on_message(std::string(name), *r->element[2]);
        return;
    }
    if (!name.starts_with(readers)) return;
    name.remove_prefix(readers.size());
    if (kind == "subscribe") {
        self->op_in_flight_ = false;
        self->on_subscribed(std::string(name));
        self->pump_ops();
    } else if (kind == "unsubscribe") {
        self->op_in_flight_ = false;
        auto it = self->channels_.find(std::string(name));
        if (it != self->channels_.end() && it->second.sub == ChannelState::Sub::unsubscribing)
            self->channels_.erase(it);
        self->pump_ops();
    }
}

void RedisBus::on_message(const std::string& channel, const redisReply& payload) {
    // After a message that did not fit, none is queued until the resync: a
    // hold's last id must stay below what it lost, so the replay brings it.
    if (frames_lost_) return;
    // One event (the single form), or a run of a batch in id order (the
    // batched form): redis_message.hpp.
    std::vector<PublishFrame> frames;
    if (!parse_message(redis::reply_text(&payload), channel, frames)) {
        M0_LOG(warn, "redis bus: a malformed message on ", channel, " dropped");
        return;
    }
    raise_position(frames.back().id);
    // All of a message or none: a hold never hears part of it before the resync.
    if (!queue_.push_many(frames.size(),
                          [&frames](size_t i) { return Frame{std::move(frames[i])}; })) {
        // The loop is far behind: the holds are replayed from their last ids.
        M0_LOG(error, "redis bus: the local queue is full: resyncing holds");
        frames_lost_ = true;
    }
}

void RedisBus::on_subscribed(const std::string& channel) {
    auto it = channels_.find(channel);
    if (it == channels_.end() || it->second.sub != ChannelState::Sub::subscribing) return;
    it->second.sub = ChannelState::Sub::subscribed;
    auto waiters = std::move(it->second.waiters);
    it->second.waiters.clear();
    at(RedisPoint::subscribed);
    for (auto& w : waiters)
        if (--w->waiting == 0) read_replay(w);
}

void RedisBus::read_replay(const std::shared_ptr<ReplayRequest>& req) {
    if (!cmd_) return;  // dropped: the resync asks again
    std::vector<std::string> sorted = req->channels;
    std::sort(sorted.begin(), sorted.end());
    for (const auto& c : sorted) {
        req->key += c;
        req->key += '\n';
    }
    req->key += std::to_string(req->after);
    if (auto it = reads_.find(req->key); it != reads_.end()) {
        for (auto& d : req->done) it->second->done.push_back(std::move(d));
        return;
    }
    reads_.emplace(req->key, req);
    if (!read_timer_->pending()) read_timer_->start(0);  // after this turn's callbacks
}

void RedisBus::send_read(const std::shared_ptr<ReplayRequest>& req) {
    if (!cmd_) return;  // dropped: the resync asks again
    // One transaction: the counter, the epoch, the marks and the streams all
    // at one instant, so `upto` divides replayed from live for every channel.
    const std::string from = std::to_string(req->after + 1) + "-0";
    redisAsyncCommand(cmd_, nullptr, nullptr, "MULTI");
    redisAsyncCommand(cmd_, nullptr, nullptr, "GET %s", kCounterKey);
    redisAsyncCommand(cmd_, nullptr, nullptr, "GET %s", kEpochKey);
    for (const auto& c : req->channels) {
        const std::string key = mark_key(c);
        redisAsyncCommand(cmd_, nullptr, nullptr, "GET %b", key.data(), key.size());
    }
    for (const auto& c : req->channels) {
        const std::string key = stream_key(c);
        redisAsyncCommand(cmd_, nullptr, nullptr, "XRANGE %b %s +", key.data(), key.size(),
                          from.c_str());
    }
    redisAsyncCommand(cmd_, on_replay_reply, new std::shared_ptr<ReplayRequest>(req), "EXEC");
    at(RedisPoint::reading);
}

void RedisBus::on_replay_reply(redisAsyncContext* ac, void* reply, void* priv) {
    std::unique_ptr<std::shared_ptr<ReplayRequest>> owned(
        static_cast<std::shared_ptr<ReplayRequest>*>(priv));
    auto* self = static_cast<RedisBus*>(ac->data);
    auto* r = static_cast<redisReply*>(reply);
    if (!r || self->closing_) return;  // the link went: the resync asks again
    ReplayRequest& req = **owned;
    // Every request that joined this read is answered with it.
    auto answer = [&req](Replay&& out) {
        auto done = std::move(req.done);
        for (size_t i = 0; i + 1 < done.size(); ++i) done[i](Replay(out));
        if (!done.empty()) done.back()(std::move(out));
    };
    const size_t n = req.channels.size();
    Replay out;
    if (r->type != REDIS_REPLY_ARRAY || r->elements != 2 + 2 * n) {
        // Redis refused the read: the hold hears that its history is lost.
        M0_LOG(warn, "redis bus: a replay read failed: ",
               r->type == REDIS_REPLY_ERROR ? std::string(r->str, r->len) : "unexpected reply");
        out.gap = true;
        out.upto = self->last_id_.load();
        answer(std::move(out));
        return;
    }
    const uint64_t after = req.after;
    const redisReply* counter = r->element[0];
    out.upto = reply_id(counter);
    const uint64_t epoch = reply_id(r->element[1]);
    // No counter: this Redis never numbered an event (or lost its data): a
    // cursor names events it does not have. Below the epoch: the same.
    if (after != 0 && (counter->type != REDIS_REPLY_STRING || after < epoch)) out.gap = true;
    for (size_t i = 0; i < n; ++i)
        if (reply_id(r->element[2 + i]) > after) out.gap = true;  // trimmed past the cursor
    for (size_t i = 0; i < n; ++i) {
        const redisReply* entries = r->element[2 + n + i];
        if (entries->type != REDIS_REPLY_ARRAY) continue;
        for (size_t k = 0; k < entries->elements; ++k) {
            const redisReply* e = entries->element[k];
            if (e->type != REDIS_REPLY_ARRAY || e->elements != 2) continue;
            PublishFrame f{reply_id(e->element[0]), req.channels[i], {}, {}};
            const redisReply* fields = e->element[1];
            for (size_t j = 0; fields->type == REDIS_REPLY_ARRAY && j + 1 < fields->elements;
                 j += 2) {
                std::string_view name = redis::reply_text(fields->element[j]);
                std::string value(redis::reply_text(fields->element[j + 1]));
                if (name == "e") f.event = std::move(value);
                if (name == "d") f.data = std::move(value);
                if (name == "r") f.raw = value == "1";
            }
            if (f.id <= after || f.id > out.upto) continue;
            // Encoded once for every hold this read answers; the bytes are
            // all a replay writes (see Replay), and a long-poll reads its
            // data back from them. An http-response item is kept whole: its
            // bytes are only its http-stream content.
            if (self->opt_.codec.encode) self->opt_.codec.encode(f);
            if (f.encoded() && !kept_whole(f)) {
                f.event.clear();
                f.data.clear();
            }
            out.events.push_back(std::move(f));
        }
    }
    // Merged across channels in id order.
    std::sort(out.events.begin(), out.events.end(),
              [](const PublishFrame& a, const PublishFrame& b) { return a.id < b.id; });
    if (!out.events.empty()) out.oldest = out.events.front().id;
    self->raise_position(out.upto);
    answer(std::move(out));
    self->at(RedisPoint::replayed);
}

}  // namespace m0::bus
