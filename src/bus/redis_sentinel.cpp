// RedisBus and Redis Sentinel (redis+sentinel://HOST:PORT,.../MASTER): the
// master is found by asking the sentinels, and found again after every lost
// connection, so the bus follows a failover. Loop thread only, but for
// master_ (under master_mu_), which the publish link reads.
//
// One attempt: the sentinels are asked in turn (the one that answered last
// first) `SENTINEL get-master-addr-by-name MASTER`; the first address named
// is where the command and subscriber links go (open_links). Before the
// links count as up, the command link asks that Redis `ROLE`: a sentinel
// that has not yet seen a failover may name the old master, now a replica,
// and a replica is no place to publish (on_role). A sentinel that cannot be
// reached, does not know MASTER or answers an error: the next one. None:
// the attempt fails like any lost connection (link_lost), and the loop tries
// again with its backoff. connect_timer_ bounds the whole attempt.
//
// A failover reaches the bus as a lost connection (the master died, or
// Sentinel's reconfiguration of the old master closed its clients), or as a
// READONLY answer to a publish (the publish link or the admin API's publish
// on the command link): in each case the links go, and the reconnect asks the
// sentinels again. Holds stay open; once both links are up again the resync
// replays every hold from its last id, as after any outage.
#include "bus/hiredis.hpp"
#include "bus/redis_bus.hpp"
#include "loop/log.hpp"

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wold-style-cast"
#pragma GCC diagnostic ignored "-Wconversion"
#pragma GCC diagnostic ignored "-Wsign-conversion"
#include <hiredis/adapters/libevent.h>
#pragma GCC diagnostic pop

namespace m0::bus {

namespace {

std::string name(const RedisAddress& a) { return a.host + ":" + std::to_string(a.port); }

}  // namespace

void RedisBus::ask_sentinels() {
    ask_tried_ = 0;
    ask_why_.clear();
    ask_next();
}

void RedisBus::ask_next() {
    const auto& list = opt_.url.sentinels;
    while (ask_tried_ < list.size()) {
        const size_t i = (ask_first_ + ask_tried_++) % list.size();
        redisAsyncContext* ac = redisAsyncConnect(list[i].host.c_str(), list[i].port);
        if (!ac) continue;
        if (ac->err) {
            ask_why_ = "sentinel " + name(list[i]) + ": " + ac->errstr;
            redisAsyncFree(ac);
            continue;
        }
        ac->data = this;
        redisLibeventAttach(ac, loop_.base());
        redisAsyncSetConnectCallback(ac, on_ask_connect);
        redisAsyncSetDisconnectCallback(ac, on_ask_disconnect);
        redisAsyncCommand(ac, on_ask_reply, reinterpret_cast<void*>(i),
                          "SENTINEL get-master-addr-by-name %b", opt_.url.master.data(),
                          opt_.url.master.size());
        asking_ = ac;
        return;
    }
    link_lost(nullptr, "no sentinel named master " + opt_.url.master +
                           (ask_why_.empty() ? "" : " (" + ask_why_ + ")"));
}

void RedisBus::ask_failed(const std::string& why) {
    // The link in asking_ is going (hiredis frees it, or it was freed).
    asking_ = nullptr;
    ask_why_ = why;
    ask_next();
}

void RedisBus::on_ask_connect(const redisAsyncContext* ac, int status) {
    auto* self = static_cast<RedisBus*>(ac->data);
    if (status == REDIS_OK || self->closing_ || ac != self->asking_) return;
    // hiredis frees this context when the callback returns.
    self->ask_failed(std::string("a sentinel: cannot connect: ") + ac->errstr);
}

void RedisBus::on_ask_disconnect(const redisAsyncContext* ac, int) {
    auto* self = static_cast<RedisBus*>(ac->data);
    if (self->closing_ || ac != self->asking_) return;  // answered, or let go
    self->ask_failed("a sentinel closed the connection before it answered");
}

void RedisBus::on_ask_reply(redisAsyncContext* ac, void* reply, void* priv) {
    auto* self = static_cast<RedisBus*>(ac->data);
    auto* r = static_cast<redisReply*>(reply);
    if (!r || self->closing_ || ac != self->asking_) return;  // the link is going
    const size_t i = reinterpret_cast<size_t>(priv);
    const RedisAddress& sentinel = self->opt_.url.sentinels[i];
    // Done with this sentinel either way (freed once this callback returns).
    self->asking_ = nullptr;
    redisAsyncFree(ac);
    RedisAddress m;
    if (r->type == REDIS_REPLY_ARRAY && r->elements == 2) {
        m.host = std::string(redis::reply_text(r->element[0]));
        unsigned port = 0;
        std::string_view p = redis::reply_text(r->element[1]);
        std::from_chars(p.data(), p.data() + p.size(), port);
        m.port = port <= 65535 ? static_cast<uint16_t>(port) : 0;
    }
    if (m.host.empty() || m.port == 0) {
        const std::string why =
            r->type == REDIS_REPLY_ERROR ? std::string(r->str, r->len) : "does not know it";
        self->ask_failed("sentinel " + name(sentinel) + ": " + why);
        return;
    }
    self->ask_first_ = i;
    {
        std::lock_guard lock(self->master_mu_);
        if (!(self->master_ == m))
            M0_LOG(info, "redis bus ", self->opt_.url.text, ": sentinel ", name(sentinel),
                   " names master ", self->opt_.url.master, " at ", name(m));
        self->master_ = m;
    }
    self->open_links(m);
}

void RedisBus::on_role(redisAsyncContext* ac, void* reply, void*) {
    auto* self = static_cast<RedisBus*>(ac->data);
    auto* r = static_cast<redisReply*>(reply);
    if (!r || self->closing_ || ac != self->cmd_) return;  // the link is going
    if (r->type == REDIS_REPLY_ERROR) {
        // The ACL user lacks ROLE (see the README's ACL line).
        self->refusal_ = "Redis refused ROLE: " + std::string(r->str, r->len);
        self->link_lost(nullptr, self->refusal_);
        return;
    }
    const std::string_view role =
        r->type == REDIS_REPLY_ARRAY && r->elements > 0 ? redis::reply_text(r->element[0]) : "";
    if (role != "master") {
        // A sentinel named a Redis that is not (or no longer) the master:
        // ask again after the backoff.
        self->link_lost(nullptr, name(self->master()) + " is not the master (ROLE: " +
                                     std::string(role.empty() ? "?" : role) + ")");
        return;
    }
    self->cmd_ready_ = true;
    if (self->cmd_ready_ && self->sub_ready_) self->on_up();
}

}  // namespace m0::bus
