#include "proc/supervisor.hpp"

#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>
#include <vector>

#include "loop/log.hpp"

namespace m0::proc {

namespace {

constexpr int kStartupFailure = 2;  // a worker's exit code for a start-up failure (die())

double now_seconds() {
    timespec ts{};
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) / 1e9;
}

struct Worker {
    pid_t pid = 0;
    double started = 0;
};

// Forks worker `index`; in the child, runs it and exits. -1 when fork fails.
// `mask`: the signal mask the parent had before it blocked its own.
pid_t start_worker(int index, const std::function<int(int)>& run, const sigset_t& mask) {
    pid_t pid = ::fork();
    if (pid != 0) return pid;
    // The child: the signals are its own again, and it ends with its parent.
    // SIGHUP stays blocked until its loop handles it (serve unblocks it): one
    // sent on while the worker starts waits for it, rather than killing the
    // worker or being lost.
    sigset_t own = mask;
    ::sigaddset(&own, SIGHUP);
    ::sigprocmask(SIG_SETMASK, &own, nullptr);
    ::prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (::getppid() == 1) std::_Exit(0);  // the parent is already gone
    int rc = run(index);
    std::fflush(nullptr);
    std::exit(rc);
}

}  // namespace

int supervise(int workers, const std::function<int(int)>& run) {
    // The parent takes its signals by sigwaitinfo, never by a handler, so
    // none can arrive between a look at what happened and the wait: SIGTERM
    // and SIGINT stop the workers; SIGHUP (logrotate's postrotate, systemd's
    // ExecReload) is sent on to them (each reads its key files again and
    // reopens its access log; its default action would end the parent, and
    // every worker with it); SIGCHLD says a worker ended.
    sigset_t waited, before;
    ::sigemptyset(&waited);
    for (int sig : {SIGTERM, SIGINT, SIGHUP, SIGCHLD}) ::sigaddset(&waited, sig);
    ::sigprocmask(SIG_BLOCK, &waited, &before);
    int stop = 0;  // the signal that asked the parent to stop; 0: none
    std::vector<Worker> pool(static_cast<size_t>(workers));
    for (int i = 0; i < workers; ++i) {
        pool[static_cast<size_t>(i)] = {start_worker(i, run, before), now_seconds()};
        if (pool[static_cast<size_t>(i)].pid < 0) {
            M0_LOG(error, "--workers: fork failed: ", std::strerror(errno));
            stop = SIGTERM;
        }
    }
    M0_LOG(info, "supervising ", std::to_string(workers), " workers");
    bool forwarded = false, all_ok = true;
    int code = 0;  // kStartupFailure once a worker could not start
    for (;;) {
        if (stop && !forwarded) {
            M0_LOG(info, "signal ", stop == SIGINT ? "SIGINT" : "SIGTERM",
                   ": stopping the workers");
            for (auto& w : pool)
                if (w.pid > 0) ::kill(w.pid, SIGTERM);
            forwarded = true;
        }
        // Every worker that ended, reaped.
        for (;;) {
            int status = 0;
            pid_t pid = ::waitpid(-1, &status, WNOHANG);
            if (pid <= 0) break;  // none ended, or none left
            for (size_t i = 0; i < pool.size(); ++i) {
                Worker& w = pool[i];
                if (w.pid != pid) continue;
                w.pid = 0;
                if (stop) {  // the stop's verdict: every worker exits 0
                    all_ok = all_ok && WIFEXITED(status) && WEXITSTATUS(status) == 0;
                    break;
                }
                if (WIFEXITED(status) && WEXITSTATUS(status) == kStartupFailure) {
                    // It printed why (a port in use, an app that does not
                    // import): starting it again would only fail again.
                    M0_LOG(error, "worker ", std::to_string(i), " could not start: stopping");
                    stop = SIGTERM;
                    code = kStartupFailure;
                    break;
                }
                M0_LOG(warn, "worker ", std::to_string(i), " (pid ", std::to_string(pid), ") ",
                       WIFSIGNALED(status) ? "killed by signal " + std::to_string(WTERMSIG(status))
                                           : "exited with " + std::to_string(WEXITSTATUS(status)),
                       ": starting it again");
                // At most one restart a second: a worker that cannot start
                // does not spin (signals wait, blocked, meanwhile).
                double wait = w.started + 1.0 - now_seconds();
                if (wait > 0) ::usleep(static_cast<useconds_t>(wait * 1e6));
                sigset_t pending;
                ::sigpending(&pending);
                if (::sigismember(&pending, SIGTERM) || ::sigismember(&pending, SIGINT))
                    break;  // stopping: the signal is taken below
                w = {start_worker(static_cast<int>(i), run, before), now_seconds()};
                break;
            }
        }
        if (stop && !forwarded) continue;  // a start-up failure: stop the rest first
        bool any = false;
        for (auto& w : pool) any = any || w.pid > 0;
        if (!any) break;
        siginfo_t info{};
        int sig = ::sigwaitinfo(&waited, &info);
        if (sig == SIGTERM || sig == SIGINT) {
            if (!stop) stop = sig;
        } else if (sig == SIGHUP && !stop) {
            M0_LOG(info, "SIGHUP: sent on to the workers");
            for (auto& w : pool)
                if (w.pid > 0) ::kill(w.pid, SIGHUP);
        }
    }
    M0_LOG(info, "every worker stopped");
    ::sigprocmask(SIG_SETMASK, &before, nullptr);
    return code != 0 ? code : all_ok ? 0 : 1;
}

}  // namespace m0::proc
