// The Redis fault rig: a TCP proxy between a RedisBus and a real
// redis-server (test_redis_server.hpp), on a free 127.0.0.1 port, that can
// on command stall what Redis answers, delay it, cut a connection in the
// middle of a reply, or drop (close) connections. Tests only.
//
// DESIGN
// One thread of its own runs a poll() loop over the listener and every pair
// of sockets (client side, Redis side), 10 ms at a time, and stops by itself
// when the proxy is destroyed or its lifetime is over (every socket closed).
// Client-to-Redis bytes always pass; Redis-to-client bytes pass, wait, or
// cut the connection according to the rules in force. A rule names a link by
// a marker: a string the client has sent on that connection (the links of a
// RedisBus say who they are by their first commands: kCommandLink, ...), so
// a fault hits the link a test means however the bus reconnects; an empty
// marker means every link. Threads: the pairs, their buffers and the
// listener belong to the proxy thread; the rules and what is held (for
// held_contains) to mu_; the counters are atomics.
#pragma once
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <deque>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace m0::testing {

// Markers of a RedisBus's links: commands as they go on the wire (RESP),
// which only that link sends (the script's text names EVALSHA and the keys).
inline constexpr char kCommandLink[] = "SET\r\n$10\r\nm0:history";  // the async command link
inline constexpr char kSubscriberLink[] = "$9\r\nSUBSCRIBE\r\n";    // the subscriber link
// A link that has published: publish()'s blocking one, or the command link
// once it ran a publish_later().
inline constexpr char kPublishing[] = "$7\r\nEVALSHA\r\n";

class RedisFaultProxy {
  public:
    // Forwards to Redis on 127.0.0.1:`upstream` for at most `lifetime` seconds.
    explicit RedisFaultProxy(uint16_t upstream, double lifetime = 120) : upstream_(upstream) {
        listener_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        sockaddr_in a = loopback(0);
        socklen_t len = sizeof a;
        if (listener_ < 0 || ::bind(listener_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
            ::listen(listener_, 64) != 0 ||
            ::getsockname(listener_, reinterpret_cast<sockaddr*>(&a), &len) != 0)
            throw std::runtime_error("the fault proxy cannot listen");
        port_ = ntohs(a.sin_port);
        const auto until = std::chrono::steady_clock::now() +
                           std::chrono::milliseconds(static_cast<int64_t>(lifetime * 1000));
        thread_ = std::thread([this, until] { run(until); });
    }
    ~RedisFaultProxy() {
        stop_.store(true);
        thread_.join();
    }
    RedisFaultProxy(const RedisFaultProxy&) = delete;
    RedisFaultProxy& operator=(const RedisFaultProxy&) = delete;

    uint16_t port() const { return port_; }
    std::string url() const { return "redis://127.0.0.1:" + std::to_string(port_) + "/0"; }

    // Any thread. Redis's answers to the links that sent `marker` are held
    // (not forwarded) until release().
    void stall(std::string marker) { add({std::move(marker), Rule::stall, 0}); }
    // Redis's answers to those links are forwarded `seconds` after they came.
    void delay(std::string marker, double seconds) {
        add({std::move(marker), Rule::delay, seconds});
    }
    // The next answer on one such link: its first half is forwarded, then the
    // connection is closed on both sides (once).
    void cut_mid_reply(std::string marker) { add({std::move(marker), Rule::cut, 0}); }
    // Closes every such connection now (the proxy thread does, within 10 ms).
    void drop(std::string marker) { add({std::move(marker), Rule::drop, 0}); }
    // The rules naming `marker` end (every rule, when it is empty); what
    // they held goes on, in order.
    void release(const std::string& marker = {}) {
        std::lock_guard lock(mu_);
        std::erase_if(rules_, [&](const Rule& r) { return marker.empty() || r.marker == marker; });
        if (rules_.empty()) held_.clear();
    }
    // How many times the bytes stalls have held contain `needle`.
    size_t held_count(const std::string& needle) const {
        std::lock_guard lock(mu_);
        size_t n = 0;
        for (size_t at = held_.find(needle); at != std::string::npos;
             at = held_.find(needle, at + needle.size()))
            ++n;
        return n;
    }
    bool held_contains(const std::string& needle) const { return held_count(needle) > 0; }
    size_t accepted() const { return accepted_.load(); }
    size_t cuts() const { return cuts_.load(); }

  private:
    struct Rule {
        enum Kind { stall, delay, cut, drop };
        std::string marker;
        Kind kind = stall;
        double seconds = 0;
    };
    struct Chunk {
        std::chrono::steady_clock::time_point at;  // forwarded no earlier
        std::string bytes;
    };
    // Proxy thread only.
    struct Pair {
        int client = -1, redis = -1;
        std::string said;  // what the client sent (its first 64 KiB)
        std::string to_client, to_redis;
        std::deque<Chunk> held;  // from Redis, waiting for a rule to end
        bool closing = false;
    };

    static sockaddr_in loopback(uint16_t port) {
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        a.sin_port = htons(port);
        return a;
    }
    void add(Rule r) {
        std::lock_guard lock(mu_);
        rules_.push_back(std::move(r));
    }
    static bool matches(const Rule& r, const Pair& p) {
        return r.marker.empty() || p.said.find(r.marker) != std::string::npos;
    }
    // Under mu_: the rule in force for `p` (stall, delay or cut), or null.
    const Rule* rule_for_locked(const Pair& p) const {
        for (const Rule& r : rules_)
            if (r.kind != Rule::drop && matches(r, p)) return &r;
        return nullptr;
    }
    static bool flush(int fd, std::string& out) {
        while (!out.empty()) {
            ssize_t n = ::send(fd, out.data(), out.size(), MSG_NOSIGNAL);
            if (n > 0) {
                out.erase(0, size_t(n));
                continue;
            }
            return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR);
        }
        return true;
    }
    // False on EOF or an error.
    static bool take(int fd, std::string& into) {
        char buf[65536];
        for (;;) {
            ssize_t n = ::recv(fd, buf, sizeof buf, MSG_DONTWAIT);
            if (n > 0) {
                into.append(buf, size_t(n));
                continue;
            }
            return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR);
        }
    }
    void accept_one() {
        int c = ::accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (c < 0) return;
        int r = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        sockaddr_in a = loopback(upstream_);
        if (r < 0 || ::connect(r, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
            ::close(c);
            if (r >= 0) ::close(r);
            return;
        }
        ::fcntl(r, F_SETFL, ::fcntl(r, F_GETFL) | O_NONBLOCK);
        accepted_.fetch_add(1);
        pairs_.push_back(Pair{c, r, {}, {}, {}, {}, false});
    }
    // What came from Redis for `p`: forwarded, held, or cut (false: close).
    bool from_redis(Pair& p, std::string bytes, std::chrono::steady_clock::time_point now) {
        std::lock_guard lock(mu_);
        const Rule* r = rule_for_locked(p);
        if (r && r->kind == Rule::cut) {
            p.to_client += bytes.substr(0, bytes.size() / 2);
            rules_.erase(rules_.begin() + (r - rules_.data()));
            cuts_.fetch_add(1);
            return false;
        }
        if (r || !p.held.empty()) {
            auto at = r && r->kind == Rule::delay
                          ? now + std::chrono::milliseconds(static_cast<int64_t>(r->seconds * 1000))
                          : now;
            if (r && r->kind == Rule::stall) held_ += bytes;
            p.held.push_back({at, std::move(bytes)});
            return true;
        }
        p.to_client += bytes;
        return true;
    }
    void release_due(Pair& p, std::chrono::steady_clock::time_point now) {
        std::lock_guard lock(mu_);
        const Rule* r = rule_for_locked(p);
        if (r && r->kind == Rule::stall) return;
        while (!p.held.empty() && p.held.front().at <= now) {
            p.to_client += p.held.front().bytes;
            p.held.pop_front();
        }
    }
    void apply_drops() {
        std::lock_guard lock(mu_);
        for (auto it = rules_.begin(); it != rules_.end();) {
            if (it->kind != Rule::drop) {
                ++it;
                continue;
            }
            for (Pair& p : pairs_)
                if (matches(*it, p)) p.closing = true;
            it = rules_.erase(it);
        }
    }
    void run(std::chrono::steady_clock::time_point until) {
        while (!stop_.load() && std::chrono::steady_clock::now() < until) {
            std::vector<pollfd> fds{{listener_, POLLIN, 0}};
            for (const Pair& p : pairs_) {
                fds.push_back({p.client, short(POLLIN | (p.to_client.empty() ? 0 : POLLOUT)), 0});
                fds.push_back({p.redis, short(POLLIN | (p.to_redis.empty() ? 0 : POLLOUT)), 0});
            }
            ::poll(fds.data(), fds.size(), 10);
            if (fds[0].revents & POLLIN) accept_one();
            apply_drops();
            const auto now = std::chrono::steady_clock::now();
            for (Pair& p : pairs_) {
                if (p.closing) continue;
                std::string in;
                bool open = take(p.client, in);
                if (p.said.size() < 65536) p.said += in;
                p.to_redis += in;
                std::string back;
                open = take(p.redis, back) && open;
                if (!back.empty() && !from_redis(p, std::move(back), now)) open = false;
                release_due(p, now);
                open = flush(p.client, p.to_client) && flush(p.redis, p.to_redis) && open;
                if (!open) p.closing = true;
            }
            for (auto it = pairs_.begin(); it != pairs_.end();) {
                if (!it->closing) {
                    ++it;
                    continue;
                }
                flush(it->client, it->to_client);  // a cut's half reply
                ::close(it->client);
                ::close(it->redis);
                it = pairs_.erase(it);
            }
        }
        for (Pair& p : pairs_) {
            ::close(p.client);
            ::close(p.redis);
        }
        pairs_.clear();
        ::close(listener_);
    }

    const uint16_t upstream_;
    uint16_t port_ = 0;        // written before the thread starts
    int listener_ = -1;        // proxy thread (after the constructor)
    std::vector<Pair> pairs_;  // proxy thread
    mutable std::mutex mu_;
    std::vector<Rule> rules_;        // guarded by mu_
    std::string held_;               // guarded by mu_: bytes stalls hold now
    std::atomic<bool> stop_{false};  // any thread
    std::atomic<size_t> accepted_{0}, cuts_{0};
    std::thread thread_;  // last: it starts once the rest is built
};

}  // namespace m0::testing
