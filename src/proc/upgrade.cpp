#include "proc/upgrade.hpp"

#include <fcntl.h>
#include <linux/close_range.h>
#include <sys/syscall.h>
#include <systemd/sd-daemon.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <string_view>

namespace m0::proc {

namespace {

constexpr const char* kUpgradeFd = "M0_UPGRADE_FD";  // the pipe to the old process
constexpr int kListenFdsStart = 3;                   // SD_LISTEN_FDS_START

// Main thread at start, read-only after.
std::string g_exe;
std::vector<std::string> g_argv;
std::string g_cwd;  // where it was started: relative arguments (--chdir) read from there
// The new process's side: the pipe's write end, until it serves (loop 0).
int g_ready_fd = -1;
bool g_upgrading = false;

// The child, between fork and exec: only async-signal-safe calls.
[[noreturn]] void exec_child(const std::vector<int>& fds, int ready_fd, char* const* argv,
                             char* const* envp, const char* exe, const char* cwd) {
    // Above every fd the numbering below will write to, so no dup2 clobbers
    // a socket not yet moved.
    const int high = static_cast<int>(fds.size()) + kListenFdsStart + 64;
    int moved[256];
    for (size_t i = 0; i < fds.size(); ++i) {
        moved[i] = ::fcntl(fds[i], F_DUPFD, high);
        if (moved[i] < 0) ::_exit(127);
    }
    int ready = ::fcntl(ready_fd, F_DUPFD, high);
    if (ready < 0) ::_exit(127);
    for (size_t i = 0; i < fds.size(); ++i)
        if (::dup2(moved[i], kListenFdsStart + static_cast<int>(i)) < 0) ::_exit(127);
    const int ready_at = kListenFdsStart + static_cast<int>(fds.size());
    if (::dup2(ready, ready_at) < 0) ::_exit(127);
    // Nothing else goes over: the old process's connections, its event
    // bases and pipes stay its own.
    ::syscall(SYS_close_range, ready_at + 1, ~0U, 0);
    // The folder it was started in, not the one --chdir made current: the
    // same arguments mean the same files.
    if (*cwd && ::chdir(cwd) != 0) ::_exit(127);
    ::execve(exe, argv, envp);
    ::_exit(127);
}

}  // namespace

void remember_command(int argc, char** argv) {
    char buf[PATH_MAX];
    ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
    g_exe = n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string(argv[0]);
    g_argv.assign(argv, argv + argc);
    if (char* here = ::getcwd(nullptr, 0)) {
        g_cwd = here;
        std::free(here);
    }
    if (const char* v = std::getenv(kUpgradeFd)) {
        g_upgrading = true;
        g_ready_fd = std::atoi(v);
        ::unsetenv(kUpgradeFd);
        ::fcntl(g_ready_fd, F_SETFD, FD_CLOEXEC);  // not passed on to a later upgrade
    }
}

bool upgrading() { return g_upgrading; }

void tell_upgrader_ready() {
    if (g_ready_fd < 0) return;
    char one = '1';
    (void)!::write(g_ready_fd, &one, 1);
    ::close(g_ready_fd);
    g_ready_fd = -1;
    std::string pid = "MAINPID=" + std::to_string(::getpid());
    ::sd_notify(0, pid.c_str());
}

bool start_upgrade(const std::vector<std::pair<int, std::string>>& sockets, Upgrade& out,
                   std::string& err) {
    if (sockets.empty() || sockets.size() > 200) {
        err = "no listening sockets to hand over";
        return false;
    }
    int pipefd[2];
    if (::pipe2(pipefd, O_CLOEXEC) != 0) {
        err = std::string("pipe: ") + std::strerror(errno);
        return false;
    }
    // Everything the child needs is made before the fork.
    std::vector<int> fds;
    std::string names;
    for (const auto& [fd, name] : sockets) {
        fds.push_back(fd);
        if (!names.empty()) names += ':';
        names += name.empty() ? "http" : name;
    }
    std::vector<std::string> env;
    for (char** e = environ; *e; ++e) {
        std::string_view v(*e);
        if (v.starts_with("LISTEN_") || v.starts_with(kUpgradeFd)) continue;
        env.emplace_back(v);
    }
    env.push_back("LISTEN_FDS=" + std::to_string(fds.size()));
    env.push_back("LISTEN_FDNAMES=" + names);
    env.push_back(std::string(kUpgradeFd) + "=" +
                  std::to_string(kListenFdsStart + static_cast<int>(fds.size())));
    // LISTEN_PID names the child itself (sd_listen_fds checks it): filled
    // in by the child, in this room made before the fork.
    char listen_pid[40] = "LISTEN_PID=";
    std::vector<char*> argv, envp;
    for (auto& a : g_argv) argv.push_back(a.data());
    argv.push_back(nullptr);
    for (auto& e : env) envp.push_back(e.data());
    envp.push_back(listen_pid);
    envp.push_back(nullptr);

    pid_t pid = ::fork();
    if (pid < 0) {
        err = std::string("fork: ") + std::strerror(errno);
        ::close(pipefd[0]);
        ::close(pipefd[1]);
        return false;
    }
    if (pid == 0) {
        char digits[24];
        int n = 0;
        for (long p = ::getpid(); p > 0; p /= 10) digits[n++] = static_cast<char>('0' + p % 10);
        char* at = listen_pid + std::strlen("LISTEN_PID=");
        while (n > 0) *at++ = digits[--n];
        *at = '\0';
        exec_child(fds, pipefd[1], argv.data(), envp.data(), g_exe.c_str(), g_cwd.c_str());
    }
    ::close(pipefd[1]);
    out.pid = pid;
    out.ready_fd = pipefd[0];
    return true;
}

}  // namespace m0::proc
