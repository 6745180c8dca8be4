#!/usr/bin/python3
"""smoke-upgrade: one process's binary upgrade (SIGUSR2), as nginx's and
gunicorn's USR2. The binary is copied to a folder of the phase's own and
started from there:

    DIR/m0serve --listen 127.0.0.1:P --mount /native=mojo --realtime \\
                --heartbeat 60 --admin-listen 127.0.0.1:P2 --admin-open

Phase 1: under load (two clients, a new connection a request) and with 20
holds open, SIGUSR2: the new process takes over the listening sockets; no
connection is refused and no request fails; the old process drains (each
hold gets its retry hint) and exits 0; the holds come back to the new
process with their Last-Event-ID, are told of the gap the new process's
in-process history cannot fill (m0-reset), and hear what is published next.

Phase 2: the file at the binary's path is replaced by a program that exits
3: SIGUSR2 ends the upgrade, the old process says so and keeps serving; the
real binary put back, SIGUSR2 upgrades.

Phase 3: with --workers 2, SIGUSR2 to the parent is a warning, not its end.

Phase 4: the same upgrade on a Redis bus (a redis-server of its own), with
smoke-roll's clients and the Django fixture mounted beside the mojo one (the
new process imports it while the old one serves): M0_UPGRADE_HOLDS holds
(200) on 8 channels that come back with Last-Event-ID, three loads of
Django's GET /hello (one keep-alive), events
published straight to Redis every 10 ms: no refused connection, no failed
request, every hold gets every event of its channel once and in order.
"""

import importlib.util
import json
import os
import re
import shutil
import signal
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from m0smoke import DJANGO_ARGS, LOG_DIR, Conn, Fail, Server, Smoke, check, http, short, wait_for  # noqa: E402
from m0redis import RedisServer  # noqa: E402


# smoke-roll's clients: the holds that come back with Last-Event-ID and
# record every event, and the request loads.
_spec = importlib.util.spec_from_file_location(
    "roll", os.path.join(os.path.dirname(os.path.abspath(__file__)), "94-roll.py"))
roll = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(roll)
HOLDS = int(os.environ.get("M0_UPGRADE_HOLDS", "200"))

SCRIPT = "95-upgrade"
ARGS = ["--mount", "/native=mojo", "--realtime", "--heartbeat", "60", "--admin-open"] + os.environ.get("M0_UPGRADE_ARGS", "").split()

smoke = Smoke(SCRIPT, __doc__, phase_timeout=90.0)


def own_binary(ctx):
    """A copy of the binary in a folder of the phase's own: what is at that
    path when SIGUSR2 comes is what the upgrade runs."""
    d = os.path.join(LOG_DIR, "%s-phase%d-bin" % (SCRIPT, ctx.number))
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    path = os.path.join(d, "m0serve")
    shutil.copy2(ctx.binary, path)
    return d, path


def start(ctx, path):
    srv = Server(ctx, path, ARGS, "%s-phase%d-1" % (SCRIPT, ctx.number), admin=True)
    ctx.servers.append(srv)
    return srv.start()


def gone(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().split(") ")[-1].startswith("Z")  # a zombie has exited
    except OSError:
        return True


def wait_upgraded(srv, before, timeout=20.0):
    """The new process's pid, once the old one says it serves."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        m = re.findall(r"upgrade: process (\d+) serves", srv.log_text())
        if len(m) > before:
            return int(m[-1])
        check(srv.alive(), "the old process exited first: %s" % srv.log_tail(8))
        time.sleep(0.05)
    raise Fail("no upgrade within %.0fs: %s" % (timeout, srv.log_tail(8)))


def stop_new(ctx, pid):
    """SIGTERM to the new process (not this script's child), by its PID."""
    def stop():
        if gone(pid):
            return
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + 15
        while not gone(pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        if not gone(pid):
            os.kill(pid, signal.SIGKILL)
            raise Fail("the new process did not stop within 15 s of SIGTERM (killed)")
    ctx.finalizers.append(stop)


def publish(srv, channel, data):
    r = http(srv.admin, "POST", "/publish", [("Content-Type", "application/json")],
             json.dumps({"channel": channel, "data": data}).encode())
    check(r.status == 200, "publish: %s %s" % (r.summary(), short(r.body)))
    return r.json()["id"]


class Load:
    """Clients requesting GET /native/hello, a new connection each, until stopped."""

    def __init__(self, addr, clients=2):
        self.addr, self.ok, self.failed, self.stop = addr, 0, [], False
        self.threads = [threading.Thread(target=self.run, daemon=True) for _ in range(clients)]
        for t in self.threads:
            t.start()

    def run(self):
        while not self.stop:
            c = None
            try:
                c = Conn(self.addr, 10)
                r = c.request("GET", "/native/hello", (), b"", 10)
                if r.status == 200:
                    self.ok += 1
                else:
                    self.failed.append(r.summary())
            except (Fail, OSError) as e:
                self.failed.append("%s (%s at %.3f)" % (e, "reset" if c and c.reset else "closed",
                                                       time.monotonic()))
            finally:
                if c:
                    c.close()

    def end(self):
        self.stop = True
        for t in self.threads:
            t.join(15)
        return self.ok, self.failed


@smoke.phase(1, "SIGUSR2 under load with 20 holds: the new binary takes the sockets, no refused connection or failed request, the old drains and exits 0, the holds come back")
def phase1(ctx):
    _, path = own_binary(ctx)
    srv = start(ctx, path)
    holds = []
    for _ in range(20):
        c, head = ctx.hold(srv, "/native/hold?channel=up")
        check(head.status == 200, "hold head %s" % head.summary())
        holds.append(c)
    first = publish(srv, "up", "before")
    for c in holds:
        check(c.read_until(lambda b: b"data: before" in b, 5), "a hold missed 'before': %s" % short(c.buf))
    load = Load(srv.addr)
    time.sleep(0.5)
    t_signal = time.monotonic()
    os.kill(srv.proc.pid, signal.SIGUSR2)
    new_pid = wait_upgraded(srv, 0)
    t_serves = time.monotonic()
    stop_new(ctx, new_pid)
    check(srv.wait_exit(20) == 0, "the old process did not exit 0 after draining: %s" % srv.log_tail(8))
    for c in holds:
        check(c.wait_eof(10), "a hold was not ended by the drain")
        check(b"retry: " in c.buf, "a hold ended without its retry hint: %s" % short(c.buf))
    time.sleep(0.5)  # requests to the new process only
    ok, failed = load.end()
    check(not failed, "%d requests failed across the upgrade (of %d; SIGUSR2 at %.3f, serving seen at %.3f): %s" % (
        len(failed), ok + len(failed), t_signal, t_serves, failed[:3]))
    check(ok > 20, "only %d requests were made" % ok)
    back = []
    for _ in holds:
        c, head = ctx.hold(srv, "/native/hold?channel=up", [("Last-Event-ID", str(first))])
        check(head.status == 200, "a hold back: %s" % head.summary())
        check(c.read_until(lambda b: b"event: m0-reset" in b, 5),
              "the new process's history cannot fill the gap: want an m0-reset, got %s" % short(c.buf))
        back.append(c)
    publish(srv, "up", "after")
    for c in back:
        check(c.read_until(lambda b: b"data: after" in b, 5), "a hold back missed 'after': %s" % short(c.buf))
    check(http(srv.addr, "GET", "/native/hello").status == 200, "the new process serves")
    sys.stderr.write("  upgrade under load: %d requests, none failed; 20 holds back\n" % ok)


@smoke.phase(2, "a binary that does not start ends the upgrade: the old process says why and keeps serving; the real one put back upgrades")
def phase2(ctx):
    d, path = own_binary(ctx)
    srv = start(ctx, path)
    real = os.path.join(d, "m0serve.real")
    os.rename(path, real)
    with open(path, "w") as f:
        f.write("#!/bin/sh\necho 'a new binary that does not start' >&2\nexit 3\n")
    os.chmod(path, 0o755)
    os.kill(srv.proc.pid, signal.SIGUSR2)
    deadline = time.monotonic() + 10
    while "ended before it served (exit code 3" not in srv.log_text():
        check(time.monotonic() < deadline, "the failed upgrade is not reported: %s" % srv.log_tail(6))
        time.sleep(0.05)
    check(srv.alive(), "the old process exited")
    check(http(srv.addr, "GET", "/native/hello").status == 200, "the old process stopped serving")
    os.replace(real, path)
    os.kill(srv.proc.pid, signal.SIGUSR2)
    new_pid = wait_upgraded(srv, 0)
    stop_new(ctx, new_pid)
    check(srv.wait_exit(20) == 0, "the old process did not exit 0: %s" % srv.log_tail(8))
    check(http(srv.addr, "GET", "/native/hello").status == 200, "the new process serves")
    check(http(srv.admin, "GET", "/ready").status == 200, "the new process's admin listener")


@smoke.phase(3, "with --workers 2 the parent takes SIGUSR2 with a warning (a binary upgrade is one process's) and serves on")
def phase3(ctx):
    srv = ctx.server(["--mount", "/native=mojo", "--workers", "2"])
    srv.require_own("this phase signals the server's parent")
    os.kill(srv.proc.pid, signal.SIGUSR2)
    deadline = time.monotonic() + 5
    while "SIGUSR2: the binary upgrade is for one process" not in srv.log_text():
        check(srv.alive(), "the parent died of SIGUSR2: %s" % srv.log_tail(5))
        check(time.monotonic() < deadline, "no warning for SIGUSR2: %s" % srv.log_tail(5))
        time.sleep(0.05)
    for i in range(10):
        check(http(srv.addr, "GET", "/native/hello").status == 200, "GET %d after SIGUSR2" % i)
    check(srv.alive(), "the parent exited")



@smoke.phase(4, "on the Redis bus, under load with M0_UPGRADE_HOLDS holds (200) and events flowing: no refused connection, no failed request, every hold back with every event once, in order")
def phase4(ctx):
    redis = RedisServer("%s-phase%d" % (SCRIPT, ctx.number))
    ctx.finalizers.append(redis.stop)
    _, path = own_binary(ctx)
    # Django too: the new process imports it while the old one serves.
    srv = Server(ctx, path, DJANGO_ARGS + ARGS[2:] + ["--bus", redis.url], "%s-phase4-1" % SCRIPT,
                 admin=True)
    ctx.servers.append(srv)
    srv.start()
    holds = roll.Holds(srv.addr, HOLDS)
    ctx.finalizers.insert(0, holds.close)
    holds.start()
    wait_for(holds.ready, 20.0, what="every hold's head")
    stop = threading.Event()
    loads = [roll.Load(srv.addr, keepalive, stop) for keepalive in (True, False, False)]
    publisher = roll.Publisher(redis.url, stop)
    for t in loads + [publisher]:
        t.start()
    time.sleep(1.0)
    started = time.monotonic()
    os.kill(srv.proc.pid, signal.SIGUSR2)
    new_pid = wait_upgraded(srv, 0)
    stop_new(ctx, new_pid)
    check(srv.wait_exit(20) == 0, "the old process did not exit 0: %s" % srv.log_tail(8))
    took = time.monotonic() - started
    time.sleep(1.0)
    stop.set()
    for t in loads + [publisher]:
        t.join(10)
    roll.check_moved("upgrade (to the old process's exit)", took, holds, publisher.published, loads)


if __name__ == "__main__":
    sys.exit(smoke.main())
