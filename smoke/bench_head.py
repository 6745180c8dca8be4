"""bench_head: a mojo hold's head behind busy Python threads
(mojo-mount-hold-head-s, bench.py's head rows).

m0serve serves fixtures/djangoproj with --blocking-threads 2 and the mojo
mount, with --realtime. Two clients keep both Python threads inside
/slow?s=5 (asking again as each answers); the admin listener's /metrics
must show the wsgi pool's two threads busy before any try. Then one client
opens GET /native/hold 200 times, one after the other: each try connects,
sends the request, and times until the head's blank line arrives, then
leaves. The figures are p50/p99/max of those times.

    idle    nothing else on the server
    loaded  first build/sse_load opens N holds on 10 channels and publishes
            20 events/s to them through the admin API for as long as the
            tries last (it is stopped by its PID afterwards)
"""

import os
import re
import secrets
import socket
import sys
import threading
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_util import ROOT, free_ports, start, stop, wait_port  # noqa: E402

DJANGO = os.path.join(ROOT, "fixtures", "djangoproj")
SLOW_S = 5


def metrics(admin_port):
    with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % admin_port, timeout=5) as r:
        return r.read().decode()


def metric(text, name):
    m = re.search(r"^%s (\S+)$" % re.escape(name), text, re.M)
    return float(m.group(1)) if m else None


def wait_metric(admin_port, name, want, timeout, proc, what):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise SystemExit("bench: %s exited %s while waiting for %s" % (what, proc.returncode, name))
        value = metric(metrics(admin_port), name)
        if value is not None and value >= want:
            return value
        time.sleep(0.2)
    raise SystemExit("bench: %s stayed below %g after %.0fs (%s)" % (name, want, timeout, what))


class BusyPython:
    """Two clients that keep /slow?s=5 running, one each, until stopped."""

    def __init__(self, port):
        self.port, self.done = port, threading.Event()
        self.threads = [threading.Thread(target=self.loop, daemon=True) for _ in range(2)]
        for t in self.threads:
            t.start()

    def loop(self):
        req = ("GET /slow?s=%d HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n" % SLOW_S).encode()
        while not self.done.is_set():
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=SLOW_S + 10) as s:
                    s.sendall(req)
                    while not self.done.is_set():
                        chunk = s.recv(65536)
                        if not chunk or chunk.endswith(b"}"):  # {"slept": 5.0}
                            break
            except OSError:
                time.sleep(0.1)

    def stop(self):
        self.done.set()


def head_time(port):
    """Seconds from connect to the end of a /native/hold head."""
    t0 = time.perf_counter()
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        s.sendall(b"GET /native/hold?channel=headprobe HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        buf = b""
        while b"\r\n\r\n" not in buf:
            chunk = s.recv(4096)
            if not chunk:
                raise SystemExit("bench: a /native/hold closed before its head: %r" % buf[:80])
            buf += chunk
        took = time.perf_counter() - t0
    if not buf.startswith(b"HTTP/1.1 200"):
        raise SystemExit("bench: /native/hold answered %r" % buf[:60])
    return took


def percentile(values, p):
    v = sorted(values)
    return v[min(len(v) - 1, int(p * len(v)))]


def measure(binary, driver, holds, tries, tmp):
    """One server, fresh; holds = 0 for the idle case. Returns figures."""
    port, admin = free_ports(2)
    key = secrets.token_hex(24)
    keyfile = os.path.join(tmp, "admin.key")
    with open(keyfile, "w") as f:
        f.write(key + "\n")
    cmd = [binary, "--listen", "127.0.0.1:%d" % port, "--realtime", "--chdir", DJANGO,
           "--mount", "/=djangoproj.wsgi:application", "--mount", "/native=mojo",
           "--blocking-threads", "2", "--admin-listen", "127.0.0.1:%d" % admin,
           "--admin-key-file", keyfile, "--max-connections", str(holds + 256),
           "--max-holds", str(holds + 64), "--grace", "1", "--log-level", "warn"]
    proc, log = start(cmd, os.path.join(tmp, "m0serve.log"))
    busy = load = load_log = None
    try:
        wait_port(port, proc, "m0serve")
        busy = BusyPython(port)
        wait_metric(admin, 'm0_pool_busy_threads{pool="wsgi"}', 2, 10, proc, "m0serve")
        if holds:
            load, load_log = start([
                driver, "--url", "http://127.0.0.1:%d/native/hold?channel={ch}" % port,
                "--holds", str(holds), "--channels", "10", "--rate", "20", "--seconds", "3600",
                "--server-pid", str(proc.pid), "--label", "head-load",
                "--publish-url", "http://127.0.0.1:%d/publish" % admin,
                "--publish-header", "Authorization: Bearer " + key,
                "--publish-header", "Content-Type: application/json",
                "--publish-body", '{"channel": "{ch}", "data": "{data}"}'],
                os.path.join(tmp, "sse_load.log"))
            wait_metric(admin, "m0_holds_open", holds, 120, load, "sse_load")
            # Events flow once the driver has its holds: wait for the first.
            wait_metric(admin, "m0_events_published_total", 1, 10, load, "sse_load")
        text = metrics(admin)
        if metric(text, 'm0_pool_busy_threads{pool="wsgi"}') != 2:
            raise SystemExit("bench: the two Python threads were not both busy")
        times = []
        for _ in range(tries):
            times.append(head_time(port))
            time.sleep(0.005)
        text = metrics(admin)
        busy_after = metric(text, 'm0_pool_busy_threads{pool="wsgi"}')
        open_after = metric(text, "m0_holds_open")
        published = metric(text, "m0_events_published_total")
        if load is not None and load.poll() is not None:
            raise SystemExit("bench: sse_load exited %s during the tries" % load.returncode)
    finally:
        if busy:
            busy.stop()
        if load is not None:
            stop(load)
            load_log.close()
        stop(proc)
        log.close()
    return {"holds": holds, "tries": tries, "python_busy": busy_after, "holds_open": open_after,
            "events_published": published,
            "p50_ms": round(percentile(times, 0.5) * 1e3, 3),
            "p99_ms": round(percentile(times, 0.99) * 1e3, 3),
            "max_ms": round(max(times) * 1e3, 3)}
