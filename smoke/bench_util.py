"""bench_util: what the bench's parts share: free ports, waiting for a
listener, starting and stopping a server by its PID, reading its CPU from
/proc, medians."""

import os
import signal
import socket
import statistics
import subprocess
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CLK_TCK = os.sysconf("SC_CLK_TCK")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def free_ports(n):
    """n distinct free ports: each socket stays bound until all are chosen
    (one after the other, the kernel may hand out the same port again)."""
    socks = [socket.socket() for _ in range(n)]
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def wait_port(port, proc, what, timeout=20.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit("bench: %s exited %s before listening" % (what, proc.returncode))
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    raise SystemExit("bench: %s is not listening on %d after %.0fs" % (what, port, timeout))


def start(cmd, log_path, **kw):
    """Starts cmd in its own session, its output to log_path; returns
    (process, log file)."""
    log = open(log_path, "wb")
    proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                            start_new_session=True, **kw)
    return proc, log


def stop(proc, sig=signal.SIGTERM, timeout=15):
    """Stops one process this bench started, by its PID: sig, then SIGKILL
    after timeout."""
    if proc is None or proc.poll() is not None:
        return
    proc.send_signal(sig)
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def with_descendants(roots):
    """roots and every process below them, from /proc."""
    parent = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % name) as f:
                line = f.read()
        except OSError:
            continue
        parent[int(name)] = int(line[line.rfind(")") + 2:].split()[1])
    out = list(roots)
    for pid in out:
        out += [p for p, pp in parent.items() if pp == pid and p not in out]
    return out


def cpu_seconds(pids):
    """utime + stime of pids (every thread of each), in seconds; a process
    gone meanwhile counts 0."""
    total = 0.0
    for pid in pids:
        try:
            with open("/proc/%d/stat" % pid) as f:
                line = f.read()
        except OSError:
            continue
        fields = line[line.rfind(")") + 2:].split()
        total += (int(fields[11]) + int(fields[12])) / CLK_TCK
    return total


def task_files(pids, name):
    """The text of /proc/PID/task/TID/name for every thread of pids; a thread
    or process gone meanwhile is left out."""
    for pid in pids:
        try:
            tasks = os.listdir("/proc/%d/task" % pid)
        except OSError:
            continue
        for tid in tasks:
            try:
                with open("/proc/%d/task/%s/%s" % (pid, tid, name)) as f:
                    yield f.read()
            except OSError:
                continue


def task_switches(pids):
    """Voluntary plus involuntary context switches of every thread of pids
    (/proc/PID/task/*/status)."""
    total = 0
    for text in task_files(pids, "status"):
        for line in text.splitlines():
            if "ctxt_switches:" in line:  # voluntary_ and nonvoluntary_
                total += int(line.split()[1])
    return total


def cpu_ns(pids):
    """Time on a CPU of every thread of pids, in ns (/proc/PID/task/*/schedstat:
    finer than /proc/PID/stat's 10 ms ticks, which an idle Redis's few
    events fall under)."""
    return sum(int(text.split()[0]) for text in task_files(pids, "schedstat"))


def median(rows, key):
    vals = [r[key] for r in rows if r.get(key) is not None]
    return statistics.median(vals) if vals else None


def fmt(v):
    return "-" if v is None else ("%.3g" % v)


def rss_kib(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def rss_growth(proc, open_conns, n):
    """(before, after): the server's RSS in KiB before and after `open_conns(n)`
    (which returns sockets), 50 opened first to warm its allocator; every
    socket closed after."""
    warm = open_conns(50)
    time.sleep(0.5)
    before = rss_kib(proc.pid)
    socks = open_conns(n)
    time.sleep(1.0)
    after = rss_kib(proc.pid)
    for s in socks + warm:
        s.close()
    return before, after
