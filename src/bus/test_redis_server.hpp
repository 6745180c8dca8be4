// A real redis-server for tests: started on a free 127.0.0.1 port with a
// temporary directory, stopped by its PID. Tests only.
#pragma once
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "bus/redis_bus.hpp"
#include "server/codec.hpp"

namespace m0::testing {

class RedisServer {
  public:
    // `persist`: appendonly yes, so the data survives a restart. `extra`:
    // more of redis-server's arguments (`--requirepass`, `--user`, ...).
    explicit RedisServer(bool persist = false, std::vector<std::string> extra = {})
        : persist_(persist), extra_(std::move(extra)) {
        char tmpl[] = "/tmp/m0-redis-test-XXXXXX";
        if (!::mkdtemp(tmpl)) throw std::runtime_error("mkdtemp failed");
        dir_ = tmpl;
        port_ = free_port();
        start();
    }
    ~RedisServer() {
        stop();
        std::error_code ec;
        std::filesystem::remove_all(dir_, ec);
    }
    RedisServer(const RedisServer&) = delete;
    RedisServer& operator=(const RedisServer&) = delete;

    // Starts it (again: the same port and directory) and waits until it accepts.
    void start() {
        const std::string port = std::to_string(port_), log = dir_ + "/redis.log";
        const pid_t parent = ::getpid();
        pid_ = ::fork();
        if (pid_ == 0) {
            // Ends with the test: one that crashes (a sabotage mutation can
            // make it) never runs the destructor that stops this server.
            ::prctl(PR_SET_PDEATHSIG, SIGKILL);
            if (::getppid() != parent) std::_Exit(127);
            std::freopen(log.c_str(), "a", stdout);
            std::vector<std::string> args{"redis-server",
                                          "--port",
                                          port,
                                          "--bind",
                                          "127.0.0.1",
                                          "--dir",
                                          dir_,
                                          "--save",
                                          "",
                                          "--appendonly",
                                          persist_ ? "yes" : "no"};
            args.insert(args.end(), extra_.begin(), extra_.end());
            std::vector<char*> argv;
            for (auto& a : args) argv.push_back(a.data());
            argv.push_back(nullptr);
            ::execvp("redis-server", argv.data());
            std::_Exit(127);
        }
        for (int i = 0; i < 500; ++i) {
            if (accepts()) return;
            int status = 0;
            if (::waitpid(pid_, &status, WNOHANG) == pid_) break;
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
        }
        throw std::runtime_error("redis-server did not start (see " + log + ")");
    }
    // SIGTERM by PID, then waits for it (SIGKILL after 5 s).
    void stop() {
        if (pid_ <= 0) return;
        ::kill(pid_, SIGTERM);
        for (int i = 0; i < 500; ++i) {
            if (::waitpid(pid_, nullptr, WNOHANG) == pid_) {
                pid_ = 0;
                return;
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
        }
        ::kill(pid_, SIGKILL);
        ::waitpid(pid_, nullptr, 0);
        pid_ = 0;
    }
    // SIGKILL by PID: a crash, nothing written, no client told.
    void crash() {
        if (pid_ <= 0) return;
        ::kill(pid_, SIGKILL);
        ::waitpid(pid_, nullptr, 0);
        pid_ = 0;
    }
    std::string url() const { return "redis://127.0.0.1:" + std::to_string(port_) + "/0"; }
    uint16_t port() const { return port_; }
    const std::string& dir() const { return dir_; }
    pid_t pid() const { return pid_; }

    static uint16_t free_port() {
        int fd = ::socket(AF_INET, SOCK_STREAM, 0);
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        socklen_t len = sizeof a;
        ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
        ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
        ::close(fd);
        return ntohs(a.sin_port);
    }

  private:
    bool accepts() const {
        int fd = ::socket(AF_INET, SOCK_STREAM, 0);
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        a.sin_port = htons(port_);
        bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
        ::close(fd);
        return ok;
    }

    bool persist_;
    std::vector<std::string> extra_;
    std::string dir_;
    uint16_t port_ = 0;
    pid_t pid_ = 0;
};

// Options for a RedisBus on `redis`.
inline bus::RedisBusOptions bus_options(const RedisServer& redis, size_t history = 64) {
    std::string err;
    bus::RedisBusOptions o;
    o.url = *bus::parse_redis_url(redis.url(), err);
    o.history = history;
    o.codec = server::codec();  // as the binary's bus (serve.cpp)
    return o;
}

// The ids of the events in an SSE stream, in order.
inline std::vector<uint64_t> ids_in(const std::string& stream) {
    // Each complete line `id: DIGITS`.
    std::vector<uint64_t> out;
    for (size_t at = 0, lf; (lf = stream.find('\n', at)) != std::string::npos; at = lf + 1) {
        std::string_view line(stream.data() + at, lf - at);
        if (!line.starts_with("id: ") || line.size() == 4 ||
            line.find_first_not_of("0123456789", 4) != std::string_view::npos)
            continue;
        out.push_back(std::stoull(std::string(line.substr(4))));
    }
    return out;
}

}  // namespace m0::testing
