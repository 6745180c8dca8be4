// Redis Sentinel for tests: a master, a replica and three sentinels, each a
// real process on a free 127.0.0.1 port with its own temporary directory,
// stopped by its PID. Sentinel timings are short (down after 500 ms, a
// failover timeout of 2 s), so a failover takes a few seconds. Tests only.
#pragma once
#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "bus/hiredis.hpp"
#include "bus/test_redis_server.hpp"

namespace m0::testing {

// One redis-sentinel process monitoring `master` (at 127.0.0.1:port) as
// `name`, with `password` for it when not empty.
class SentinelProcess {
  public:
    SentinelProcess(const std::vector<std::pair<std::string, uint16_t>>& masters,
                    const std::string& password) {
        char tmpl[] = "/tmp/m0-sentinel-test-XXXXXX";
        if (!::mkdtemp(tmpl)) throw std::runtime_error("mkdtemp failed");
        dir_ = tmpl;
        port_ = RedisServer::free_port();
        // Sentinel rewrites its configuration file: it lives in dir_.
        std::ofstream conf(dir_ + "/sentinel.conf");
        conf << "port " << port_ << "\nbind 127.0.0.1\ndir " << dir_ << "\n";
        for (const auto& [name, port] : masters) {
            conf << "sentinel monitor " << name << " 127.0.0.1 " << port << " 2\n"
                 << "sentinel down-after-milliseconds " << name << " 500\n"
                 << "sentinel failover-timeout " << name << " 2000\n"
                 << "sentinel parallel-syncs " << name << " 1\n";
            if (!password.empty()) conf << "sentinel auth-pass " << name << " " << password << "\n";
        }
        conf.close();
        const std::string config = dir_ + "/sentinel.conf", log = dir_ + "/sentinel.log";
        const pid_t parent = ::getpid();
        pid_ = ::fork();
        if (pid_ == 0) {
            // Ends with the test, as RedisServer does (test_redis_server.hpp).
            ::prctl(PR_SET_PDEATHSIG, SIGKILL);
            if (::getppid() != parent) std::_Exit(127);
            std::freopen(log.c_str(), "a", stdout);
            ::execlp("redis-sentinel", "redis-sentinel", config.c_str(),
                     static_cast<char*>(nullptr));
            std::_Exit(127);
        }
        for (int i = 0; i < 500; ++i) {
            if (answers()) return;
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
        }
        throw std::runtime_error("redis-sentinel did not start (see " + log + ")");
    }
    ~SentinelProcess() {
        if (pid_ > 0) {
            ::kill(pid_, SIGKILL);
            ::waitpid(pid_, nullptr, 0);
        }
        std::error_code ec;
        std::filesystem::remove_all(dir_, ec);
    }
    SentinelProcess(const SentinelProcess&) = delete;
    SentinelProcess& operator=(const SentinelProcess&) = delete;

    uint16_t port() const { return port_; }
    // One command's reply as an integer (array: its length), -1 if none.
    long long count(const char* command) const {
        redisContext* c = redisConnect("127.0.0.1", port_);
        long long n = -1;
        if (c && !c->err) {
            if (auto* r = static_cast<redisReply*>(redisCommand(c, command))) {
                if (r->type == REDIS_REPLY_ARRAY) n = static_cast<long long>(r->elements);
                if (r->type == REDIS_REPLY_INTEGER) n = r->integer;
                freeReplyObject(r);
            }
        }
        if (c) redisFree(c);
        return n;
    }
    // The port SENTINEL get-master-addr-by-name names for `name`; 0 if none.
    uint16_t master_port(const std::string& name) const {
        redisContext* c = redisConnect("127.0.0.1", port_);
        uint16_t port = 0;
        if (c && !c->err) {
            auto* r = static_cast<redisReply*>(
                redisCommand(c, "SENTINEL get-master-addr-by-name %s", name.c_str()));
            if (r && r->type == REDIS_REPLY_ARRAY && r->elements == 2)
                port = static_cast<uint16_t>(std::stoi(std::string(r->element[1]->str)));
            if (r) freeReplyObject(r);
        }
        if (c) redisFree(c);
        return port;
    }

  private:
    bool answers() const { return count("SENTINEL masters") >= 0; }

    std::string dir_;
    uint16_t port_ = 0;
    pid_t pid_ = 0;
};

// A blocking command on a Redis at `port` with `password`; the reply's
// text (a status, a string, an error), or its integer, or the first
// element of an array, as text.
inline std::string redis_say(uint16_t port, const std::string& password,
                             const std::vector<std::string>& words) {
    redisContext* c = redisConnect("127.0.0.1", port);
    std::string out;
    if (c && !c->err) {
        if (!password.empty())
            if (auto* a = static_cast<redisReply*>(redisCommand(c, "AUTH %s", password.c_str())))
                freeReplyObject(a);
        std::vector<const char*> argv;
        std::vector<size_t> lens;
        for (const auto& w : words) {
            argv.push_back(w.data());
            lens.push_back(w.size());
        }
        auto* r = static_cast<redisReply*>(
            redisCommandArgv(c, static_cast<int>(argv.size()), argv.data(), lens.data()));
        if (r) {
            if (r->type == REDIS_REPLY_INTEGER) out = std::to_string(r->integer);
            if (r->type == REDIS_REPLY_STRING || r->type == REDIS_REPLY_STATUS ||
                r->type == REDIS_REPLY_ERROR)
                out.assign(r->str, r->len);
            if (r->type == REDIS_REPLY_ARRAY && r->elements > 0 && r->element[0]->str)
                out.assign(r->element[0]->str, r->element[0]->len);
            freeReplyObject(r);
        }
    }
    if (c) redisFree(c);
    return out;
}

// Waits up to `seconds` for `ready`, polling every 50 ms.
template <class F>
bool wait_until(F ready, double seconds) {
    for (int i = 0; i < static_cast<int>(seconds * 20); ++i) {
        if (ready()) return true;
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return ready();
}

// A master (with `password` when not empty), its replica, and three
// sentinels monitoring it as `kMaster`, each knowing the other two and the
// replica before the constructor returns.
struct SentinelRig {
    static constexpr char kMaster[] = "m0master";
    std::string password;
    std::unique_ptr<RedisServer> master, replica;
    std::vector<std::unique_ptr<SentinelProcess>> sentinels;

    explicit SentinelRig(std::string pw) : password(std::move(pw)) {
        std::vector<std::string> auth;
        if (!password.empty()) auth = {"--requirepass", password, "--masterauth", password};
        master = std::make_unique<RedisServer>(false, auth);
        auto rep = auth;
        rep.insert(rep.end(), {"--replicaof", "127.0.0.1", std::to_string(master->port())});
        replica = std::make_unique<RedisServer>(false, rep);
        if (!wait_until([&] { return replica_synced(); }, 10))
            throw std::runtime_error("the replica did not sync");
        for (int i = 0; i < 3; ++i)
            sentinels.push_back(std::make_unique<SentinelProcess>(
                std::vector<std::pair<std::string, uint16_t>>{{kMaster, master->port()}},
                password));
        const std::string replicas = std::string("SENTINEL replicas ") + kMaster,
                          others = std::string("SENTINEL sentinels ") + kMaster;
        for (auto& s : sentinels)
            if (!wait_until(
                    [&] {
                        return s->count(replicas.c_str()) == 1 && s->count(others.c_str()) == 2;
                    },
                    15))
                throw std::runtime_error("a sentinel did not see the replica and the others");
    }
    bool replica_synced() const {
        const std::string info = redis_say(replica->port(), password, {"INFO", "replication"});
        return info.find("master_link_status:up") != std::string::npos;
    }
    // redis+sentinel://[:PASSWORD@]S1,S2,S3/kMaster/0, `first` in front when given.
    std::string url(const std::string& first = {}) const {
        std::string u =
            "redis+sentinel://" + (password.empty() ? "" : ":" + password + "@") + first;
        for (const auto& s : sentinels)
            u += (u.back() == '@' || u.back() == '/' ? "" : ",") + std::string("127.0.0.1:") +
                 std::to_string(s->port());
        return u + "/" + kMaster + "/0";
    }
};

}  // namespace m0::testing
