#!/usr/bin/python3
"""smoke-roll: deploying new code without dropping anyone.

Phase 1: GET /ready on the admin listener of one process: 200 while it
serves, 503 once SIGTERM began the drain (a request still running), and
--max-requests without --workers refused at start.

Phase 2: a graceful roll under load. A redis-server (free port, its own
directory, stopped by its PID) and

    m0serve --listen 127.0.0.1:P --chdir fixtures/djangoproj \\
            --mount /=djangoproj.wsgi:application --mount /native=mojo \\
            --realtime --bus redis://127.0.0.1:R/0 --workers 2 \\
            --admin-listen 127.0.0.1:P2 --admin-open

While clients request GET /hello (two on keep-alive connections, two on a
new connection a request, one in bursts of 32 connections queued together
before any answer is read), M0_ROLL_HOLDS holds (default 400) over
8 channels read events published straight to Redis, and a probe asks
GET /ready, the parent gets SIGHUP: each worker is replaced by a new one
that imports the app again, the old one retired once the new one serves.
Checked: no connection refused, no request failed (a keep-alive request
whose connection the retiring worker closed while idle is sent again on a
new connection, as HTTP clients do, and counted apart), the probe always
answered, and every hold, reconnecting with Last-Event-ID after its retry
hint, got every event of its channel exactly once and in order.

Phase 3: --max-requests 150 --max-requests-jitter 50 with --workers 2:
each worker is replaced past its count, and no request fails.

Phase 4: what is queued on a worker's socket is the new worker's: both
workers stopped (SIGSTOP), 40 requests queued, SIGHUP; the new workers
answer all 40 while the old ones are still stopped.
"""

import os
import selectors
import signal
import socket
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from m0smoke import DJANGO_ARGS, ROOT, Smoke, check, http, short, wait_for  # noqa: E402
from m0redis import RedisServer  # noqa: E402

sys.path.insert(0, os.path.join(ROOT, "src", "wsgi"))
from m0 import redis_bus  # noqa: E402

SCRIPT = "94-roll"
HOLDS = int(os.environ.get("M0_ROLL_HOLDS", "400"))
CHANNELS = 8

smoke = Smoke(SCRIPT, __doc__, phase_timeout=90.0)


def redis_for(ctx):
    r = RedisServer("%s-phase%d" % (SCRIPT, ctx.number))
    ctx.finalizers.append(r.stop)
    return r


def read_response(sock, buf=b""):
    """(status, rest) of one response with Content-Length; status 0 when the
    connection ended before any byte of it came."""
    while b"\r\n\r\n" not in buf:
        data = sock.recv(65536)
        if not data:
            if buf:
                raise OSError("connection ended inside a response head: %r" % buf[:100])
            return 0, b""
        buf += data
    head, _, rest = buf.partition(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    status = int(lines[0].split()[1])
    length = 0
    for line in lines[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    while len(rest) < length:
        data = sock.recv(65536)
        if not data:
            raise OSError("connection ended inside a response body")
        rest += data
    return status, rest[length:]


class Load(threading.Thread):
    """GET /hello in a loop until stopped: on one keep-alive connection, or a
    new connection a request. Counts answers, failures, refusals, and the
    keep-alive requests sent again because the server closed the idle
    connection as they were sent."""

    def __init__(self, addr, keepalive, stop):
        super().__init__(daemon=True)
        self.addr, self.keepalive, self.stop = addr, keepalive, stop
        self.ok = self.failed = self.refused = self.resent = 0
        self.errors = []

    def connect(self):
        try:
            return socket.create_connection(self.addr, timeout=10)
        except ConnectionRefusedError:
            self.refused += 1
            raise

    def run(self):
        req = b"GET /hello HTTP/1.1\r\nHost: localhost\r\n%s\r\n" % (
            b"" if self.keepalive else b"Connection: close\r\n")
        sock = None
        while not self.stop.is_set():
            fresh = sock is None
            try:
                if fresh:
                    sock = self.connect()
                try:
                    sock.sendall(req)
                    status, _ = read_response(sock)
                except (ConnectionResetError, BrokenPipeError):
                    if fresh:
                        raise
                    status = 0  # closed while idle; the request reached an unread buffer
                if status == 0 and not fresh:
                    # Closed while idle as the request went out: nothing of
                    # it was read, so it is sent again on a new connection.
                    self.resent += 1
                    sock.close()
                    sock = self.connect()
                    sock.sendall(req)
                    status, _ = read_response(sock)
                if status == 200:
                    self.ok += 1
                else:
                    self.failed += 1
                    self.errors.append("status %d" % status)
            except OSError as e:
                self.failed += 1
                self.errors.append(repr(e))
                if sock:
                    sock.close()
                sock = None
                continue
            if not self.keepalive:
                sock.close()
                sock = None
        if sock:
            sock.close()


class Burst(Load):
    """Bursts of 32 connections, each connected and its request sent before
    any answer is read: they wait in the accept backlog together, so a
    worker whose listening socket closed with them queued would reset them."""

    def run(self):
        req = b"GET /hello HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"
        while not self.stop.is_set():
            socks = []
            for _ in range(32):
                try:
                    s = self.connect()
                    s.sendall(req)
                    socks.append(s)
                except OSError as e:
                    self.failed += 1
                    self.errors.append("burst connect: %r" % e)
            for s in socks:
                try:
                    status, _ = read_response(s)
                    if status == 200:
                        self.ok += 1
                    else:
                        self.failed += 1
                        self.errors.append("burst: status %d" % status)
                except OSError as e:
                    self.failed += 1
                    self.errors.append("burst: %r" % e)
                s.close()


class Holds(threading.Thread):
    """HOLDS holds on /native/hold, read through one selector. A hold that
    ends (the retry hint of a worker being retired) connects again with
    Last-Event-ID. Records each hold's (id, data) pairs in order."""

    def __init__(self, addr, n):
        super().__init__(daemon=True)
        self.addr = addr
        self.sel = selectors.DefaultSelector()
        self.got = [[] for _ in range(n)]
        self.buf = [b""] * n
        self.head = [False] * n
        self.reconnects = self.refused = 0
        self.errors = []
        self.stop = threading.Event()
        self.lock = threading.Lock()
        for i in range(n):
            self.open(i)

    def channel(self, i):
        return "roll%d" % (i % CHANNELS)

    def open(self, i):
        headers = ""
        if self.got[i]:
            headers = "Last-Event-ID: %d\r\n" % self.got[i][-1][0]
        for attempt in range(50):
            try:
                s = socket.create_connection(self.addr, timeout=5)
                break
            except ConnectionRefusedError:
                self.refused += 1
                time.sleep(0.05)
        s.sendall(("GET /native/hold?channel=%s HTTP/1.1\r\nHost: localhost\r\n%s\r\n" % (
            self.channel(i), headers)).encode())
        s.setblocking(False)
        self.buf[i] = b""
        self.head[i] = False
        self.sel.register(s, selectors.EVENT_READ, i)

    def feed(self, i):
        b = self.buf[i]
        if not self.head[i]:
            if b"\r\n\r\n" not in b:
                return
            head, _, b = b.partition(b"\r\n\r\n")
            if not head.startswith(b"HTTP/1.1 200"):
                self.errors.append("hold %d: %r" % (i, head[:60]))
            self.head[i] = True
        while b"\n\n" in b:
            block, _, b = b.partition(b"\n\n")
            eid = data = None
            for line in block.split(b"\n"):
                if line.startswith(b"id:"):
                    eid = int(line[3:].strip())
                elif line.startswith(b"data:"):
                    data = line[5:].strip().decode()
            if eid is not None:
                with self.lock:
                    self.got[i].append((eid, data))
        self.buf[i] = b

    def ready(self):
        return all(self.head)

    def run(self):
        while not self.stop.is_set():
            for key, _ in self.sel.select(0.1):
                i = key.data
                try:
                    data = key.fileobj.recv(65536)
                except BlockingIOError:
                    continue
                except OSError as e:
                    self.errors.append("hold %d: %r" % (i, e))
                    data = b""
                if data:
                    self.buf[i] += data
                    self.feed(i)
                    continue
                self.sel.unregister(key.fileobj)
                key.fileobj.close()
                if self.stop.is_set():
                    continue
                self.reconnects += 1
                self.open(i)

    def close(self):
        self.stop.set()
        self.join(5)
        for key in list(self.sel.get_map().values()):
            key.fileobj.close()


class Publisher(threading.Thread):
    """Publishes straight to Redis, one event every 10 ms over the CHANNELS
    channels, until `stop`; `published` keeps each channel's (id, data)."""

    def __init__(self, url, stop):
        super().__init__(daemon=True)
        self.url, self.stop = url, stop
        self.published = {"roll%d" % i: [] for i in range(CHANNELS)}

    def run(self):
        n = 0
        while not self.stop.is_set():
            ch = "roll%d" % (n % CHANNELS)
            self.published[ch].append((redis_bus.publish(self.url, ch, "e%d" % n), "e%d" % n))
            n += 1
            time.sleep(0.01)


def check_moved(what, took, holds, published, loads, extra=""):
    """After a roll or an upgrade (the loads and the publisher stopped): every
    hold catches up, then no connection was refused, no request failed, every
    hold moved and got every event of its channel once and in order. Prints
    the figures."""
    want = {ch: v[-1][0] for ch, v in published.items() if v}

    def caught_up():
        with holds.lock:
            return all(g and g[-1][0] == want[holds.channel(i)] for i, g in enumerate(holds.got))

    wait_for(caught_up, 15.0, what="every hold has its channel's last event")
    holds.close()
    bad = []
    for i, g in enumerate(holds.got):
        if g != published[holds.channel(i)]:
            ids = [e for e, _ in g]
            bad.append("hold %d: %d events, want %d (%d duplicates)" % (
                i, len(g), len(published[holds.channel(i)]), len(ids) - len(set(ids))))
    ok = sum(t.ok for t in loads)
    failed = sum(t.failed for t in loads)
    refused = sum(t.refused for t in loads) + holds.refused
    resent = sum(t.resent for t in loads)
    sys.stderr.write(
        "  %s: %.1fs; requests %d ok, %d failed, %d refused, %d keep-alive resent; "
        "holds %d, %d reconnects; events published %d, deliveries %d%s\n" % (
            what, took, ok, failed, refused, resent, len(holds.got), holds.reconnects,
            sum(len(v) for v in published.values()), sum(len(g) for g in holds.got), extra))
    check(refused == 0, "%d connections refused during the %s" % (refused, what))
    check(failed == 0, "%d requests failed during the %s: %s" % (
        failed, what, [e for t in loads for e in t.errors][:5]))
    check(ok > 100, "only %d requests answered" % ok)
    check(not holds.errors, "holds: %s" % holds.errors[:5])
    check(holds.reconnects >= len(holds.got), "%d reconnects for %d holds: not every hold was moved" % (
        holds.reconnects, len(holds.got)))
    check(not bad, "%d holds lost or doubled events: %s" % (len(bad), bad[:5]))


class Probe(threading.Thread):
    """GET /ready on the admin listener every 50 ms: answers by status, and failures."""

    def __init__(self, admin, stop):
        super().__init__(daemon=True)
        self.admin, self.stop = admin, stop
        self.status = {}
        self.errors = []

    def run(self):
        while not self.stop.is_set():
            try:
                r = http(self.admin, "GET", "/ready", timeout=5)
                self.status[r.status] = self.status.get(r.status, 0) + 1
            except Exception as e:  # noqa: BLE001 - counted
                self.errors.append(repr(e))
            time.sleep(0.05)


@smoke.phase(1, "GET /ready: 200 while serving, 503 once SIGTERM began the drain; --max-requests "
                "without --workers is one line and exit code 2")
def phase1(ctx):
    srv = ctx.server(DJANGO_ARGS + ["--admin-open"], admin=True)
    srv.require_own("it sends SIGTERM")
    r = http(srv.admin, "GET", "/ready")
    check(r.status == 200 and r.body == b"ready\n", "GET /ready while serving: %s" % r.summary())
    slow = socket.create_connection(srv.addr, timeout=10)
    slow.sendall(b"GET /slow?s=2 HTTP/1.1\r\nHost: localhost\r\n\r\n")
    time.sleep(0.3)
    srv.terminate()
    r = wait_for(lambda: (lambda a: a.status == 503 and a)(http(srv.admin, "GET", "/ready")), 3.0,
                 what="GET /ready answering 503 while draining")
    check(r.header("Retry-After") == "1", "503 /ready without Retry-After: 1: %s" % r.summary())
    status, _ = read_response(slow)
    check(status == 200, "the request in flight at SIGTERM: status %d" % status)
    slow.close()
    check(srv.wait_exit(10) == 0, "the server did not exit 0 after its drain")
    rc, _, err = ctx.run_binary(DJANGO_ARGS + ["--max-requests", "100"])
    check(rc == 2 and err.strip().count("\n") == 0 and "--max-requests needs --workers" in err,
          "--max-requests without --workers: rc %r, %s" % (rc, short(err)))


@smoke.phase(2, "SIGHUP with --workers 2 under load: each worker replaced once its new one serves; "
                "no refused connection, no failed request, /ready always answered, every hold "
                "back with each event of its channel exactly once")
def phase2(ctx):
    redis = redis_for(ctx)
    srv = ctx.server(DJANGO_ARGS + ["--realtime", "--bus", redis.url, "--workers", "2",
                                    "--heartbeat", "30", "--admin-open"], admin=True)
    srv.require_own("it sends SIGHUP to the parent")
    wait_for(lambda: "as worker 1" in srv.log_text() and "as worker 0" in srv.log_text(), 60.0,
             what="both workers listening")
    holds = Holds(srv.addr, HOLDS)
    ctx.finalizers.insert(0, holds.close)
    holds.start()
    wait_for(holds.ready, 20.0, what="every hold's head")
    stop = threading.Event()
    loads = [Load(srv.addr, keepalive, stop) for keepalive in (True, True, False, False)]
    loads.append(Burst(srv.addr, False, stop))
    probe = Probe(srv.admin, stop)
    publisher = Publisher(redis.url, stop)
    for t in loads + [probe, publisher]:
        t.start()
    time.sleep(1.0)
    started = time.monotonic()
    os.kill(srv.proc.pid, signal.SIGHUP)
    wait_for(lambda: srv.log_text().count(") retired") == 2, 40.0, what="both old workers retired")
    took = time.monotonic() - started
    time.sleep(1.0)
    stop.set()
    for t in loads + [probe, publisher]:
        t.join(10)
    check_moved("roll of 2 workers", took, holds, publisher.published, loads,
                "; /ready %r, %d errors" % (probe.status, len(probe.errors)))
    check(not probe.errors and probe.status.get(200, 0) > 0,
          "/ready during the roll: %r, errors %s" % (probe.status, probe.errors[:3]))
    check(srv.alive(), "the parent ended during the roll")


@smoke.phase(3, "--max-requests 150 --max-requests-jitter 50 with --workers 2: each worker is "
                "replaced past its count, and no request fails")
def phase3(ctx):
    srv = ctx.server(DJANGO_ARGS + ["--workers", "2", "--max-requests", "150",
                                    "--max-requests-jitter", "50"])
    wait_for(lambda: "as worker 1" in srv.log_text() and "as worker 0" in srv.log_text(), 60.0,
             what="both workers listening")
    stop = threading.Event()
    loads = [Load(srv.addr, keepalive, stop) for keepalive in (True, False, False)]
    for t in loads:
        t.start()
    wait_for(lambda: srv.log_text().count(") retired") >= 2, 40.0,
             what="two workers replaced past --max-requests")
    stop.set()
    for t in loads:
        t.join(10)
    log = srv.log_text()
    failed = sum(t.failed for t in loads) + sum(t.refused for t in loads)
    sys.stderr.write("  --max-requests: %d requests ok, %d failed, %d keep-alive resent; %d "
                     "replacements asked\n" % (sum(t.ok for t in loads), failed,
                                               sum(t.resent for t in loads),
                                               log.count("asks to be replaced")))
    check(failed == 0, "%d requests failed: %s" % (failed, [e for t in loads for e in t.errors][:5]))
    check(log.count("asks to be replaced") >= 2, "no worker asked to be replaced")



def children(pid):
    out = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True).stdout
    return sorted(int(p) for p in out.split())


@smoke.phase(4, "--workers 2, both workers stopped (SIGSTOP) with 40 requests queued on their "
                "sockets: SIGHUP's new workers answer every one while the old ones are still "
                "stopped (they accept on the same sockets); the old ones, continued, retire")
def phase4(ctx):
    srv = ctx.server(DJANGO_ARGS + ["--workers", "2"])
    srv.require_own("it signals the parent and its workers")
    wait_for(lambda: "as worker 1" in srv.log_text() and "as worker 0" in srv.log_text(), 60.0,
             what="both workers listening")
    old = wait_for(lambda: len(children(srv.proc.pid)) == 2 and children(srv.proc.pid), 5.0,
                   what="two workers")
    for pid in old:
        os.kill(pid, signal.SIGSTOP)
    try:
        queued = []
        for _ in range(40):
            s = socket.create_connection(srv.addr, timeout=20)
            s.sendall(b"GET /hello HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
            queued.append(s)
        os.kill(srv.proc.pid, signal.SIGHUP)
        answered = 0
        for s in queued:
            status, _ = read_response(s)
            answered += status == 200
            s.close()
        alive = [p for p in old if os.path.exists("/proc/%d" % p)]
        check(answered == 40, "%d of 40 queued requests answered by the new workers" % answered)
        check(alive == old, "an old worker ended while stopped: %r of %r" % (alive, old))
    finally:
        for pid in old:
            os.kill(pid, signal.SIGCONT)
    wait_for(lambda: srv.log_text().count(") retired") == 2, 20.0, what="both old workers retired")
    check(srv.alive(), "the parent ended during the roll")

if __name__ == "__main__":
    sys.exit(smoke.main())
