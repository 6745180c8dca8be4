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

// A worker process as the parent sees it. Parent only.
struct Worker {
    enum class State { starting, serving, retiring };
    pid_t pid = 0;
    int index = 0;
    double started = 0;
    State state = State::starting;
    pid_t replaces = 0;  // a roll's new worker: the old one it retires once it serves
};

// Whether this process is a worker (set in the child right after fork).
bool g_worker = false;

// Forks worker `index`; in the child, runs it and exits. -1 when fork fails.
// `mask`: the signal mask the parent had before it blocked its own.
pid_t start_worker(int index, const std::function<int(int)>& run, const sigset_t& mask) {
    pid_t pid = ::fork();
    if (pid != 0) return pid;
    // The child: the signals are its own again, and it ends with its parent.
    // SIGHUP, SIGUSR1 and kRetireSignal stay blocked until its loop handles
    // them (serve unblocks them): one sent while the worker starts waits for
    // it, rather than killing the worker or being lost.
    g_worker = true;
    sigset_t own = mask;
    for (int sig : {SIGHUP, SIGUSR1, kRetireSignal}) ::sigaddset(&own, sig);
    ::sigprocmask(SIG_SETMASK, &own, nullptr);
    ::prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (::getppid() == 1) std::_Exit(0);  // the parent is already gone
    int rc = run(index);
    std::fflush(nullptr);
    std::exit(rc);
}

std::string describe(int status) {
    return WIFSIGNALED(status) ? "killed by signal " + std::to_string(WTERMSIG(status))
                               : "exited with " + std::to_string(WEXITSTATUS(status));
}

// The parent's state and what it does on each event. Parent only.
struct Parent {
    const std::function<int(int)>& run;
    sigset_t before;  // the mask to give each child
    std::vector<Worker> pool;
    std::vector<int> to_roll;  // indexes waiting for a new worker, in order
    int stop = 0;              // the signal that asked the parent to stop; 0: none
    bool forwarded = false, all_ok = true;
    int code = 0;  // kStartupFailure once a worker could not start

    Worker* find(pid_t pid) {
        for (auto& w : pool)
            if (w.pid == pid) return &w;
        return nullptr;
    }
    bool rolling() const {
        for (const auto& w : pool)
            if (w.replaces != 0) return true;
        return false;
    }
    // Forks a worker for `index`; false when fork failed (logged).
    bool fork_worker(int index, pid_t replaces) {
        pid_t pid = start_worker(index, run, before);
        if (pid < 0) {
            M0_LOG(error, "--workers: fork failed: ", std::strerror(errno));
            return false;
        }
        pool.push_back({pid, index, now_seconds(), Worker::State::starting, replaces});
        return true;
    }
    // The next index of a roll, when no new worker is starting.
    void roll_next() {
        while (!stop && !rolling() && !to_roll.empty()) {
            int index = to_roll.front();
            to_roll.erase(to_roll.begin());
            pid_t old = 0;
            for (const auto& w : pool)
                if (w.index == index && w.state != Worker::State::retiring) old = w.pid;
            if (old == 0) continue;  // none to replace: a restart is under way
            if (!fork_worker(index, old)) {
                to_roll.clear();
                return;
            }
        }
    }
    void roll(int index) {
        for (int i : to_roll)
            if (i == index) return;
        to_roll.push_back(index);
    }
    // A worker said it serves: the one it replaces is retired.
    void on_ready(pid_t pid) {
        Worker* w = find(pid);
        if (!w || w->state != Worker::State::starting) return;
        w->state = Worker::State::serving;
        pid_t old = w->replaces;
        w->replaces = 0;
        if (Worker* o = old ? find(old) : nullptr; o && o->state != Worker::State::retiring) {
            M0_LOG(info, "worker ", std::to_string(w->index), " (pid ", std::to_string(pid),
                   ") serves: retiring pid ", std::to_string(old));
            o->state = Worker::State::retiring;
            ::kill(old, kRetireSignal);
        }
        roll_next();
    }
    // Worker `w` ended with `status` while the parent does not stop.
    void on_exit(Worker w, int status) {
        if (w.state == Worker::State::retiring) {
            if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
                M0_LOG(info, "worker ", std::to_string(w.index), " (pid ", std::to_string(w.pid),
                       ") retired");
            else
                M0_LOG(warn, "worker ", std::to_string(w.index), " (pid ", std::to_string(w.pid),
                       ") retired: ", describe(status));
            return;
        }
        if (w.replaces != 0) {
            // The new code does not start (it printed why): the old workers serve on.
            M0_LOG(error, "worker ", std::to_string(w.index), "'s replacement (pid ",
                   std::to_string(w.pid), ") ", describe(status),
                   " before it served: the roll stops, the workers in place serve on");
            to_roll.clear();
            return;
        }
        if (WIFEXITED(status) && WEXITSTATUS(status) == kStartupFailure) {
            // It printed why (a port in use, an app that does not import):
            // starting it again would only fail again.
            M0_LOG(error, "worker ", std::to_string(w.index), " could not start: stopping");
            stop = SIGTERM;
            code = kStartupFailure;
            return;
        }
        M0_LOG(warn, "worker ", std::to_string(w.index), " (pid ", std::to_string(w.pid), ") ",
               describe(status), ": starting it again");
        // At most one restart a second: a worker that cannot start does not
        // spin (signals wait, blocked, meanwhile).
        double wait = w.started + 1.0 - now_seconds();
        if (wait > 0) ::usleep(static_cast<useconds_t>(wait * 1e6));
        sigset_t pending;
        ::sigpending(&pending);
        if (::sigismember(&pending, SIGTERM) || ::sigismember(&pending, SIGINT))
            return;  // stopping: the signal is taken below
        if (!fork_worker(w.index, 0)) stop = SIGTERM;
    }
    void reap() {
        for (;;) {
            int status = 0;
            pid_t pid = ::waitpid(-1, &status, WNOHANG);
            if (pid <= 0) return;  // none ended, or none left
            Worker* found = find(pid);
            if (!found) continue;
            Worker w = *found;
            pool.erase(pool.begin() + (found - pool.data()));
            // The stop's verdict: every worker exits 0 (one still starting,
            // a roll's or a restart's, ends of the SIGTERM before it handles it).
            bool starting_ended = w.state == Worker::State::starting && WIFSIGNALED(status) &&
                                  WTERMSIG(status) == SIGTERM;
            if (stop)
                all_ok =
                    all_ok && (starting_ended || (WIFEXITED(status) && WEXITSTATUS(status) == 0));
            else
                on_exit(w, status);
        }
    }
};

}  // namespace

void tell_parent_ready() {
    if (g_worker) ::sigqueue(::getppid(), ready_signal(), sigval{});
}

void ask_replacement() {
    if (g_worker) ::sigqueue(::getppid(), replace_signal(), sigval{});
}

bool supervised() { return g_worker; }

int supervise(int workers, const std::vector<int>& listeners, const std::function<int(int)>& run) {
    // The parent takes its signals by sigwaitinfo, never by a handler, so
    // none can arrive between a look at what happened and the wait (supervisor.hpp
    // says what each does). SIGHUP's and SIGUSR1's default action would end the
    // parent, and every worker with it.
    sigset_t waited;
    ::sigemptyset(&waited);
    for (int sig :
         {SIGTERM, SIGINT, SIGHUP, SIGUSR1, SIGUSR2, SIGCHLD, ready_signal(), replace_signal()})
        ::sigaddset(&waited, sig);
    Parent p{run, {}, {}, {}, 0, false, true, 0};
    ::sigprocmask(SIG_BLOCK, &waited, &p.before);
    for (int i = 0; i < workers && !p.stop; ++i)
        if (!p.fork_worker(i, 0)) p.stop = SIGTERM;
    M0_LOG(info, "supervising ", std::to_string(workers), " workers");
    for (;;) {
        if (p.stop && !p.forwarded) {
            M0_LOG(info, "signal ", p.stop == SIGINT ? "SIGINT" : "SIGTERM",
                   ": stopping the workers");
            // Those being retired drain already (a second SIGTERM would end them at once).
            for (auto& w : p.pool)
                if (w.state != Worker::State::retiring) ::kill(w.pid, SIGTERM);
            // Once every worker has closed its copies, a new client is refused.
            for (int fd : listeners) ::close(fd);
            p.to_roll.clear();
            p.forwarded = true;
        }
        p.reap();
        if (p.stop && !p.forwarded) continue;  // a start-up failure: stop the rest first
        p.roll_next();
        if (p.pool.empty()) break;
        siginfo_t info{};
        int sig = ::sigwaitinfo(&waited, &info);
        if (sig == SIGTERM || sig == SIGINT) {
            if (!p.stop) p.stop = sig;
        } else if (p.stop) {
            continue;  // stopping: nothing else is started or sent on
        } else if (sig == SIGHUP) {
            M0_LOG(info, "SIGHUP: rolling the workers (each replaced once its new one serves)");
            p.to_roll.clear();
            for (int i = 0; i < workers; ++i) p.roll(i);
        } else if (sig == SIGUSR2) {
            // A binary upgrade is one process's (upgrade.hpp); its default
            // action would end the parent and every worker with it.
            M0_LOG(warn,
                   "SIGUSR2: the binary upgrade is for one process; with --workers, "
                   "SIGHUP rolls the workers (on this binary), a restart runs a new one");
        } else if (sig == SIGUSR1) {
            M0_LOG(info, "SIGUSR1: sent on to the workers");
            for (auto& w : p.pool) ::kill(w.pid, SIGUSR1);
        } else if (sig == ready_signal()) {
            p.on_ready(info.si_pid);
        } else if (sig == replace_signal()) {
            Worker* w = p.find(info.si_pid);
            if (w && w->state == Worker::State::serving) {
                M0_LOG(info, "worker ", std::to_string(w->index), " (pid ", std::to_string(w->pid),
                       ") asks to be replaced (--max-requests)");
                p.roll(w->index);
            }
        }
    }
    M0_LOG(info, "every worker stopped");
    ::sigprocmask(SIG_SETMASK, &p.before, nullptr);
    return p.code != 0 ? p.code : p.all_ok ? 0 : 1;
}

}  // namespace m0::proc
