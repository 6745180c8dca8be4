#!/usr/bin/python3
"""bench: m0serve's holds side by side with nchan, in one run (make bench).

Each server is started fresh for each measurement, one at a time, the servers
interleaved (m0serve's mojo hold, m0serve's Django hold, m0serve with --workers 2 on
a Redis bus of its own, nchan on nginx with two workers), every measurement repeated --runs times; the table shows the
medians and each m0serve figure as a ratio of nchan's, beside the target the
project aims at. The load comes from build/sse_load (smoke/load/sse_load.cpp),
one process, which opens the streams, publishes through each server's own
publish endpoint and reads /proc for the servers' RSS and CPU.

    steady   N holds on 10 channels, 20 events/s for --seconds: RSS per hold,
             p50/p99 publish-to-receive, CPU seconds per million deliveries
    burst    1000 holds on one channel, 1000 events back to back:
             deliveries/s, CPU seconds per million deliveries

Figures are recorded (build/bench.jsonl, and smoke/emit.py), never asserted:
the machine is shared and noisy. Pushpin, gunicorn, uWSGI and wrk rows are
not here yet.

    /usr/bin/python3 smoke/bench.py --holds 1000,5000 --runs 3
"""

import argparse
import json
import os
import secrets
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import emit  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NCHAN_MODULE = "/usr/lib/nginx/modules/ngx_nchan_module.so"

# measure -> (what, better, target ratio against nchan)
TARGETS = {
    "rss_per_hold_bytes": ("RSS per held connection", "lower", 0.1),
    "p99_ms": ("p99 publish->receive", "lower", 0.3),
    "deliveries_per_s": ("burst deliveries/s", "higher", 2.0),
    "cpu_s_per_1m": ("CPU s per 1M deliveries", "lower", 0.7),
}


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


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


class Server:
    """One server under test, started fresh in its own temporary folder and
    stopped by its PID."""

    def __init__(self, kind, binary, holds, tmp):
        self.kind, self.tmp = kind, tmp
        self.port, self.pub_port = free_port(), free_port()
        key = secrets.token_hex(24)
        self.redis = None
        if kind == "m0-redis2":
            # Its own redis-server, in the temporary folder, stopped by PID.
            rport = free_port()
            self.redis = subprocess.Popen(
                ["redis-server", "--port", str(rport), "--bind", "127.0.0.1", "--dir", tmp,
                 "--save", "", "--appendonly", "no"], stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT, start_new_session=True)
            wait_port(rport, self.redis, "redis-server")
        if kind.startswith("m0"):
            keyfile = os.path.join(tmp, "admin.key")
            with open(keyfile, "w") as f:
                f.write(key + "\n")
            cmd = [binary, "--listen", "127.0.0.1:%d" % self.port, "--realtime",
                   "--admin-listen", "127.0.0.1:%d" % self.pub_port, "--admin-key-file", keyfile,
                   "--max-connections", str(holds + 256), "--max-holds", str(holds + 64),
                   "--log-level", "warn"]
            if kind == "m0-redis2":
                cmd += ["--workers", "2", "--bus", "redis://127.0.0.1:%d/0" % rport,
                        "--mount", "/native=mojo"]
                self.url = "http://127.0.0.1:%d/native/hold?channel={ch}" % self.port
            elif kind == "m0-django":
                cmd += ["--chdir", os.path.join(ROOT, "fixtures", "djangoproj"),
                        "--mount", "/=djangoproj.wsgi:application", "--mount", "/native=mojo"]
                self.url = "http://127.0.0.1:%d/hold?channel={ch}" % self.port
            else:
                cmd += ["--mount", "/native=mojo"]
                self.url = "http://127.0.0.1:%d/native/hold?channel={ch}" % self.port
            self.publish = ["--publish-url", "http://127.0.0.1:%d/publish" % self.pub_port,
                            "--publish-header", "Authorization: Bearer " + key,
                            "--publish-header", "Content-Type: application/json",
                            "--publish-body", '{"channel": "{ch}", "data": "{data}"}']
        else:
            conf = os.path.join(tmp, "nginx.conf")
            with open(conf, "w") as f:
                f.write(NGINX_CONF % {"module": NCHAN_MODULE, "tmp": tmp, "port": self.port,
                                      "conns": holds + 1024})
            cmd = ["nginx", "-c", conf, "-p", tmp, "-g", "daemon off;"]
            self.url = "http://127.0.0.1:%d/sub/{ch}" % self.port
            self.publish = ["--publish-url", "http://127.0.0.1:%d/pub/{ch}" % self.port]
            self.pub_port = self.port
        self.log = open(os.path.join(tmp, kind + ".log"), "wb")
        self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=self.log,
                                     stderr=subprocess.STDOUT, start_new_session=True)
        wait_port(self.port, self.proc, kind)

    def pids(self):
        """The processes whose RSS and CPU count: the server (with its
        workers, found by the driver as descendants) and its redis-server."""
        return [self.proc.pid] + ([self.redis.pid] if self.redis else [])

    def stop(self):
        if self.redis and self.redis.poll() is None:
            self.redis.terminate()
            self.redis.wait(10)
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM if self.kind.startswith("m0") else signal.SIGQUIT)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()


# nginx with nchan: two workers, as the reference; everything under the
# temporary folder given with -p.
NGINX_CONF = """
load_module %(module)s;
worker_processes 2;
worker_rlimit_nofile %(conns)d;
pid %(tmp)s/nginx.pid;
error_log %(tmp)s/error.log warn;
events { worker_connections %(conns)d; }
http {
    access_log off;
    client_body_temp_path %(tmp)s/body;
    proxy_temp_path %(tmp)s/proxy;
    fastcgi_temp_path %(tmp)s/fastcgi;
    uwsgi_temp_path %(tmp)s/uwsgi;
    scgi_temp_path %(tmp)s/scgi;
    server {
        listen 127.0.0.1:%(port)d;
        location ~ ^/sub/(\\w+)$ { nchan_subscriber eventsource; nchan_channel_id $1; }
        location ~ ^/pub/(\\w+)$ { nchan_publisher; nchan_channel_id $1; }
    }
}
"""


def drive(args, srv, holds, channels, mode):
    cmd = [args.driver, "--url", srv.url, "--holds", str(holds), "--channels", str(channels),
           "--label", "%s-%s-%d" % (srv.kind, mode, holds)]
    for pid in srv.pids():
        cmd += ["--server-pid", str(pid)]
    cmd += srv.publish
    cmd += ["--burst", str(args.burst)] if mode == "burst" else [
        "--rate", str(args.rate), "--seconds", str(args.seconds)]
    out = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=600)
    try:
        fig = json.loads(out.stdout.decode().strip().splitlines()[-1])
    except (IndexError, ValueError):
        raise SystemExit("bench: the driver printed no figures for %s (exit %d): %s" % (
            srv.kind, out.returncode, out.stderr.decode()[-400:]))
    fig["clean"] = out.returncode == 0
    return fig


def median(rows, key):
    vals = [r[key] for r in rows if r.get(key) is not None]
    return statistics.median(vals) if vals else None


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--binary", default=os.path.join(ROOT, "build", "m0serve"))
    ap.add_argument("--driver", default=os.path.join(ROOT, "build", "sse_load"))
    ap.add_argument("--holds", default="1000,5000", help="comma-separated hold counts (steady)")
    ap.add_argument("--servers", default="m0-mojo,m0-django,m0-redis2,nchan",
                    help="m0-mojo, m0-django, m0-redis2 (--workers 2 --bus redis://, its own "
                         "redis-server), nchan")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--rate", type=float, default=20)
    ap.add_argument("--seconds", type=float, default=10)
    ap.add_argument("--burst", type=int, default=1000)
    ap.add_argument("--out", default=os.path.join(ROOT, "build", "bench.jsonl"))
    args = ap.parse_args()
    servers = args.servers.split(",")
    if "nchan" in servers and not os.path.exists(NCHAN_MODULE):
        raise SystemExit("bench: %s is missing (Debian libnginx-mod-nchan)" % NCHAN_MODULE)
    plan = [("steady", int(h), 10) for h in args.holds.split(",")] + [("burst", 1000, 1)]
    results = {}  # (mode, holds, server) -> [figures]
    with open(args.out, "a") as out:
        for run in range(args.runs):
            for mode, holds, channels in plan:
                for kind in servers:
                    with tempfile.TemporaryDirectory(prefix="m0bench-") as tmp:
                        srv = Server(kind, args.binary, holds, tmp)
                        try:
                            fig = drive(args, srv, holds, channels, mode)
                        finally:
                            srv.stop()
                    fig.update(run=run, mode=mode, server=kind, commit=emit.commit(),
                               time=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
                    out.write(json.dumps(fig) + "\n")
                    out.flush()
                    results.setdefault((mode, holds, kind), []).append(fig)
                    print("bench: run %d %s %d holds %-9s p99 %.1f ms, %.0f deliveries/s, "
                          "%.2f CPU s/1M, %s" % (run + 1, mode, holds, kind, fig["p99_ms"],
                                                 fig["deliveries_per_s"], fig["cpu_s_per_1m"],
                                                 "clean" if fig["clean"] else "NOT CLEAN"),
                          flush=True)
    print()
    print("medians of %d runs; ratio = m0serve / nchan; target from the performance issue" % args.runs)
    others = [k for k in servers if k != "nchan"]
    print(("%-8s %6s  %-20s %11s" + " %11s" * len(others) + " %9s" * len(others) + " %8s") % tuple(
        ["mode", "holds", "measure", "nchan"] + others + [k + "/x" for k in others] + ["target"]))
    for mode, holds, _ in plan:
        keys = ["deliveries_per_s", "cpu_s_per_1m"] if mode == "burst" else [
            "rss_per_hold_bytes", "p50_ms", "p99_ms", "cpu_s_per_1m"]
        for key in keys:
            med = {k: median(results.get((mode, holds, k), []), key) for k in servers}
            base = med.get("nchan")
            ratio = {k: (med[k] / base if base and med.get(k) is not None else None) for k in servers}
            target = TARGETS.get(key, ("", "", None))[2]
            if key == "cpu_s_per_1m" and mode == "burst":
                target = 0.5
            if key == "deliveries_per_s" and mode != "burst":
                target = None
            fmt = lambda v: "-" if v is None else ("%.3g" % v)  # noqa: E731
            print(("%-8s %6d  %-20s %11s" + " %11s" * len(others) + " %9s" * len(others) + " %8s") % tuple(
                [mode, holds, key, fmt(med.get("nchan"))] + [fmt(med.get(k)) for k in others]
                + [fmt(ratio.get(k)) for k in others]
                + ["-" if target is None else "%s%g" % ("<=" if key != "deliveries_per_s" else ">=", target)]))
            for k in servers:
                if k != "nchan" and ratio.get(k) is not None:
                    emit.emit("bench-%s-%s-%d-%s-ratio" % (k, mode, holds, key.replace("_", "-")),
                              round(ratio[k], 4), "ratio", out=open(os.devnull, "w"))
    print("\nJSON lines: %s" % args.out)


if __name__ == "__main__":
    main()
