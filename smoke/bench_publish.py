#!/usr/bin/python3
"""bench_publish: how many events a second reach the bus (bench.py's part
`publish`: `make bench BENCH_PARTS=publish`, or
`/usr/bin/python3 smoke/bench.py --parts publish --runs 3`).

Each server starts fresh for each row, in its own temporary folder, stopped
by its PID; --publish-holds streams (0 and 1000 by default) listen on the one
channel, opened first, and every event must reach every one of them (each
hold's `data:` lines are counted; a row whose holds did not all count every
event within 60 s is marked unclean). Figures: events published a second
(the publisher's first request to its last answer) and, with holds, events
delivered a second (deliveries over the time until the last hold counted
its last event). On m0serve rows, the CPU each event cost m0serve and, on
Redis, redis-server (µs an event, /proc's utime + stime over the row: the
publishes and the deliveries).

    m0         m0serve, the in-process bus (--loops: one per core)
    m0-redis   m0serve on a Redis bus of its own (a redis-server in the folder)
    nchan      nginx + nchan, two workers (bench.py's configuration)
    pushpin    Pushpin with message_rate / message_hwm off (pushpin-unlimited)

    admin-single    POST /publish, one event each, 50 requests in flight on
                    one keep-alive connection (pipelined)
    admin-batch     POST /publish, a JSON array of --publish-batch events each,
                    4 in flight
    pushpin-items   POST /publish/ (Pushpin's format), --publish-batch items
                    each, 4 in flight; on Pushpin's control port too, one at
                    a time (it closes the connection after each answer)
    m0.publish      a Python process outside the server, m0.publish once an
                    event (M0_BUS on Redis, M0_ADMIN_URL in process: a
                    connection each), a tenth as many events
    m0.publish_many the same with m0.publish_many, --publish-batch at a time
    view-publish    a Django view in m0serve (fixtures/djangoproj's
                    /publish-burst) calling m0.publish once an event; the
                    view's own time (its m0.publish calls)
    view-publish_many  the same view with m0.publish_many, --publish-batch at
                    a time
    nchan-single    nchan's POST /pub/CHANNEL, one event each, 50 in flight
"""

import json
import os
import selectors
import socket
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_util import ROOT, cpu_seconds, free_ports, start, stop, wait_port  # noqa: E402

KINDS = ("m0", "m0-redis", "nchan", "pushpin")
MODES = {
    "m0": ("admin-single", "admin-batch", "pushpin-items", "m0.publish", "m0.publish_many",
           "view-publish", "view-publish_many"),
    "m0-redis": ("admin-single", "admin-batch", "pushpin-items", "m0.publish", "m0.publish_many",
                 "view-publish", "view-publish_many"),
    "nchan": ("nchan-single",),
    "pushpin": ("pushpin-items",),
}
DATA = "x" * 32


class PublishServer:
    """One server under test, with the URL its holds open and the port it
    takes publishes on."""

    def __init__(self, kind, binary, holds, tmp, nginx_conf, nchan_module):
        self.kind, self.procs, self.logs = kind, [], []
        port, self.pub_port, rport = free_ports(3)
        self.port = port
        if kind == "pushpin":
            from bench_pushpin import PushpinServer

            self.pushpin = PushpinServer("pushpin-unlimited", holds, tmp)
            self.port, self.pub_port = self.pushpin.port, self.pushpin.pub_port
            self.path = "/hold?channel=c"
            return
        self.pushpin = None
        if kind == "nchan":
            conf = os.path.join(tmp, "nginx.conf")
            with open(conf, "w") as f:
                f.write(nginx_conf % {"module": nchan_module, "tmp": tmp, "port": port,
                                      "conns": holds + 1024, "buffer": "",
                                      "listen": "", "extra": ""})
            self._start(["nginx", "-c", conf, "-p", tmp, "-g", "daemon off;"], tmp, port)
            self.pub_port, self.path = port, "/sub/c"
            return
        cmd = [binary, "--listen", "127.0.0.1:%d" % port, "--realtime", "--admin-open",
               "--admin-listen", "127.0.0.1:%d" % self.pub_port, "--mount", "/native=mojo",
               "--chdir", os.path.join(ROOT, "fixtures", "djangoproj"),
               "--mount", "/=djangoproj.wsgi:application",
               "--max-connections", str(holds + 256), "--max-holds", str(holds + 64),
               "--log-level", "warn"]
        self.bus = None
        self.redis_pid = None
        if kind == "m0-redis":
            self._start(["redis-server", "--port", str(rport), "--bind", "127.0.0.1", "--dir", tmp,
                         "--save", "", "--appendonly", "no"], tmp, rport)
            self.bus = "redis://127.0.0.1:%d/0" % rport
            self.redis_pid = self.procs[-1].pid
            cmd += ["--bus", self.bus]
        self._start(cmd, tmp, port)
        wait_port(self.pub_port, self.procs[-1], kind + "'s admin port")
        self.path = "/native/hold?channel=c"
        self.server_pid = self.procs[-1].pid

    def cpu(self):
        """(m0serve's, redis-server's) CPU seconds so far; None where there is none."""
        if self.pushpin or self.kind == "nchan":
            return None, None
        return (cpu_seconds([self.server_pid]),
                cpu_seconds([self.redis_pid]) if self.redis_pid else None)

    def _start(self, cmd, tmp, port):
        proc, log = start(cmd, os.path.join(tmp, "%s-%d.log" % (os.path.basename(cmd[0]), port)))
        self.procs.append(proc)
        self.logs.append(log)
        wait_port(port, proc, self.kind)

    def stop(self):
        if self.pushpin:
            self.pushpin.stop()
        for proc in reversed(self.procs):
            stop(proc)
        for log in self.logs:
            log.close()


class Holds:
    """`n` SSE streams on the server, read by one thread that counts each
    one's `data:` lines."""

    def __init__(self, srv, n):
        self.socks, self.counts, self.carry = [], [], []
        self.stop_flag = False
        req = ("GET %s HTTP/1.1\r\nHost: b\r\nAccept: text/event-stream\r\n\r\n" % srv.path).encode()
        for start_at in range(0, n, 50):  # 50 at a time (Pushpin's proxy refuses a flood)
            batch = []
            for _ in range(min(50, n - start_at)):
                s = socket.create_connection(("127.0.0.1", srv.port), 10)
                s.sendall(req)
                batch.append(s)
            for s in batch:
                head = b""
                while b"\r\n\r\n" not in head:
                    chunk = s.recv(65536)
                    if not chunk:
                        raise SystemExit("bench publish: %s closed a hold" % srv.kind)
                    head += chunk
                if not head.startswith(b"HTTP/1.1 200"):
                    raise SystemExit("bench publish: %s answered a hold %r" % (srv.kind, head[:40]))
                s.setblocking(False)
                self.socks.append(s)
                self.counts.append(head.count(b"data: "))
                self.carry.append(head[-5:])
        self.base = list(self.counts)
        self.sel = selectors.DefaultSelector()
        for i, s in enumerate(self.socks):
            self.sel.register(s, selectors.EVENT_READ, i)
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self):
        while not self.stop_flag:
            for key, _ in self.sel.select(0.05):
                i = key.data
                try:
                    chunk = key.fileobj.recv(1 << 20)
                except BlockingIOError:
                    continue
                if not chunk:
                    self.sel.unregister(key.fileobj)
                    continue
                both = self.carry[i] + chunk
                self.counts[i] += both.count(b"data: ")
                self.carry[i] = chunk[-5:]

    def delivered(self):
        return [c - b for c, b in zip(self.counts, self.base)]

    def close(self):
        self.stop_flag = True
        self.thread.join(5)
        for s in self.socks:
            s.close()


def pipelined(port, requests, depth):
    """Sends `requests` (bytes each) on one connection, `depth` in flight;
    returns the statuses of the answers."""
    def connect():
        c = socket.create_connection(("127.0.0.1", port), 30)
        c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return c

    s = connect()
    sent = got = reconnects = 0
    buf, statuses = b"", []
    while got < len(requests):
        try:
            while sent < len(requests) and sent - got < depth:
                s.sendall(requests[sent])
                sent += 1
            chunk = s.recv(1 << 20)
        except (BrokenPipeError, ConnectionResetError):
            chunk = b""
        if not chunk:
            # nginx ends a keep-alive connection after keepalive_requests
            # answers: what it did not answer goes again on a new one.
            reconnects += 1
            if reconnects > 2 * len(requests) + 10:
                raise SystemExit("bench publish: the publish connection keeps closing")
            s.close()
            s, sent, buf = connect(), got, b""
            continue
        buf += chunk
        # Each answer: a head with Content-Length, then its body.
        while True:
            end = buf.find(b"\r\n\r\n")
            if end < 0:
                break
            head = buf[:end].decode("latin-1")
            length = 0
            for line in head.split("\r\n")[1:]:
                name, _, value = line.partition(":")
                if name.strip().lower() == "content-length":
                    length = int(value)
            if len(buf) < end + 4 + length:
                break
            statuses.append(int(head.split(" ", 2)[1]))
            buf = buf[end + 4 + length:]
            got += 1
    s.close()
    return statuses


def post(path, body, ctype="application/json"):
    return (b"POST %s HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: %s\r\nContent-Length: %d\r\n\r\n" %
            (path.encode(), ctype.encode(), len(body))) + body


def outside(srv, mode, events, batch):
    """m0.publish / m0.publish_many from a Python process outside the
    server; returns (seconds, errors)."""
    env = dict(os.environ)
    env.pop("M0_BUS", None)
    env.pop("M0_ADMIN_URL", None)
    if srv.bus:
        env["M0_BUS"] = srv.bus
    else:
        env["M0_ADMIN_URL"] = "http://127.0.0.1:%d" % srv.pub_port
    script = (
        "import sys, time\nsys.path.insert(0, %r)\nimport m0\n"
        "n, batch, many = %d, %d, %r\n"
        "m0.publish('warm', 'x')\n"
        "t0 = time.monotonic()\n"
        "if many:\n"
        "    for i in range(0, n, batch):\n"
        "        m0.publish_many([('c', %r)] * min(batch, n - i))\n"
        "else:\n"
        "    for i in range(n):\n"
        "        m0.publish('c', %r)\n"
        "print(time.monotonic() - t0)\n") % (os.path.join(ROOT, "src", "wsgi"), events, batch,
                                             mode == "m0.publish_many", DATA, DATA)
    out = subprocess.run(["/usr/bin/python3", "-c", script], env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, timeout=600)
    if out.returncode != 0:
        return None, out.stderr.decode()[-300:]
    return float(out.stdout.decode().split()[-1]), ""


def measure(srv, mode, events, batch):
    """Publishes `events` events the row's way; (seconds, error or "")."""
    if mode.startswith("m0.publish"):
        return outside(srv, mode, events, batch)
    if mode.startswith("view-"):
        return in_view(srv, mode, events, batch)
    return pipelined_rows(srv, mode, events, batch)


def in_view(srv, mode, events, batch):
    """fixtures/djangoproj's /publish-burst: the view's own seconds."""
    form = "channel=c&data=%s&n=%d&batch=%d" % (DATA, events, batch if mode.endswith("_many") else 0)
    s = socket.create_connection(("127.0.0.1", srv.port), 600)
    s.sendall(post("/publish-burst", form.encode(), "application/x-www-form-urlencoded"))
    answer = b""
    while True:
        chunk = s.recv(65536)
        if not chunk:
            break
        answer += chunk
        # Content-Length, or chunked: the JSON object is all there.
        if answer.partition(b"\r\n\r\n")[2].rstrip(b"\r\n0").endswith(b"}"):
            break
    s.close()
    if not answer.startswith(b"HTTP/1.1 200"):
        return None, answer[:200].decode("latin-1")
    body = answer.partition(b"\r\n\r\n")[2]
    fig = json.loads(body[body.index(b"{"):body.rindex(b"}") + 1])
    return fig["seconds"], ""


def pipelined_rows(srv, mode, events, batch):
    if mode in ("admin-single", "nchan-single"):
        path = "/publish" if mode == "admin-single" else "/pub/c"
        body = (json.dumps({"channel": "c", "data": DATA}) if mode == "admin-single" else DATA).encode()
        reqs, depth = [post(path, body)] * events, 50
    elif mode == "admin-batch":
        reqs = [post("/publish", json.dumps([{"channel": "c", "data": DATA}] * min(batch, events - i)).encode())
                for i in range(0, events, batch)]
        depth = 4
    else:  # pushpin-items
        item = {"channel": "c", "formats": {"http-stream": {"content": "data: %s\n\n" % DATA}}}
        reqs = [post("/publish/", json.dumps({"items": [item] * min(batch, events - i)}).encode())
                for i in range(0, events, batch)]
        depth = 4
    t0 = time.monotonic()
    if srv.kind == "pushpin":
        depth = 1  # its control port answers with Connection: close
    statuses = pipelined(srv.pub_port, reqs, depth)
    took = time.monotonic() - t0
    bad = [s for s in statuses if s >= 300]
    return took, ("%d answers %s" % (len(bad), sorted(set(bad))) if bad else "")


def run(args, run_no, out, results, record, nginx_conf, nchan_module):
    kinds = [k for k in args.publish_servers.split(",") if k]
    for holds in [int(h) for h in args.publish_holds.split(",")]:
        n = args.publish_events if holds == 0 else max(1, args.publish_events // 10)
        for kind in kinds:
            for mode in MODES[kind]:
                with tempfile.TemporaryDirectory(prefix="m0bench-pub-") as tmp:
                    srv = PublishServer(kind, args.binary, holds, tmp, nginx_conf, nchan_module)
                    readers = None
                    try:
                        readers = Holds(srv, holds) if holds else None
                        time.sleep(0.2)
                        # One request (a connection) an event: a tenth as many.
                        events = n if mode != "m0.publish" else max(1, n // 10)
                        cpu0 = srv.cpu()
                        t0 = time.monotonic()
                        took, err = measure(srv, mode, events, args.publish_batch)
                        fig = {"kind": kind, "mode": mode, "holds": holds, "events": events,
                               "published_per_s": events / took if took else None, "error": err}
                        if readers:
                            deadline = time.monotonic() + 60
                            while time.monotonic() < deadline and min(readers.delivered()) < events:
                                time.sleep(0.02)
                            got = readers.delivered()
                            done = time.monotonic() - t0
                            fig["delivered_all"] = min(got) == events and max(got) == events
                            fig["delivered_per_s"] = sum(got) / done
                        fig["clean"] = not err and fig.get("delivered_all", True)
                        for name, before, after in zip(("server", "redis"), cpu0, srv.cpu()):
                            if before is not None and after is not None:
                                fig[name + "_cpu_us_per_event"] = (after - before) * 1e6 / events
                    finally:
                        if readers:
                            readers.close()
                        srv.stop()
                record(out, results, ("publish", kind, mode, holds), fig, part="publish", run=run_no)
                print("publish %-8s %-16s holds %-5d %s/s published%s%s%s" % (
                    kind, mode, holds, "%.0f" % fig["published_per_s"] if fig["published_per_s"] else "-",
                    ", %.0f/s delivered" % fig["delivered_per_s"] if "delivered_per_s" in fig else "",
                    "".join(", %s %.1f µs/event" % (name, fig[name + "_cpu_us_per_event"])
                            for name in ("server", "redis") if name + "_cpu_us_per_event" in fig),
                    "" if fig["clean"] else " UNCLEAN " + (err or "not every event delivered")),
                    flush=True)


def table(args, results, median, fmt):
    print("\npublish: events/s, medians of %d runs (the machine may be busy: read ratios)" % args.runs)
    print("%-9s %-16s %6s %12s %12s %8s %8s %8s %6s" % (
        "server", "how", "holds", "published/s", "delivered/s", "vs nchan", "m0 µs/ev",
        "redis µs", "clean"))
    for holds in [int(h) for h in args.publish_holds.split(",")]:
        base = results.get(("publish", "nchan", "nchan-single", holds))
        base_rate = median(base, "published_per_s") if base else None
        for kind in [k for k in args.publish_servers.split(",") if k]:
            for mode in MODES[kind]:
                rows = results.get(("publish", kind, mode, holds), [])
                if not rows:
                    continue
                rate = median(rows, "published_per_s")
                ratio = fmt(rate / base_rate) if rate and base_rate else "-"
                cpu = [median(rows, name + "_cpu_us_per_event")
                       if any(name + "_cpu_us_per_event" in r for r in rows) else None
                       for name in ("server", "redis")]
                print("%-9s %-16s %6d %12s %12s %8s %8s %8s %6s" % (
                    kind, mode, holds, fmt(rate), fmt(median(rows, "delivered_per_s")) if holds else "-",
                    ratio, *("%.1f" % c if c is not None else "-" for c in cpu),
                    "yes" if all(r["clean"] for r in rows) else "NO"))
