#!/usr/bin/python3
"""bench_scale: many holds on one machine, m0serve --workers W on one Redis.

The scale part of `make bench` (`BENCH_PARTS=scale`; alone:
`/usr/bin/python3 smoke/bench_scale.py --holds 76000 --workers 4`). A
process here may open 20,000 files, so one driver cannot hold 76,000
streams: D drivers (`build/sse_load`, 19,000 holds each at most) share the
server's port, each from its own source addresses (`--source-first`) and on
its own ten channels (`d0bench0`..), and each publishes its share of the
rate through the admin API of whichever worker takes its connection; the
Redis bus carries every event to every worker. The drivers say when their
holds are open and wait (`--go-file`) until all are, so the memory is read
with every hold open and no event flowing:

- the server's RSS (the parent and its workers) and redis-server's, each
  as growth over the idle processes, per hold;
- the kernel's: /proc/meminfo's `Slab` and /proc/net/sockstat's TCP `mem`
  pages, growth per hold. Both ends of a loopback connection are this
  kernel's, the driver's as much as the server's: the server's share is
  counted as half (`kernel_per_hold_bytes`), the whole beside it;
- holds per GB: 10^9 over the server's, Redis's and the kernel's share.

Then the drivers publish (`--rate` events/s in all, for `--seconds`): each
counts every event on every one of its holds; the part reads the server's,
Redis's (the master's, and with `--redis sentinel` its replica's and the
three sentinels') CPU over the run, per million deliveries and, Redis's,
per event published. `--redis sentinel`: the same load with the master
found through three redis-sentinel processes, a replica following it.

Prints one JSON line per run (and appends it to --out); figures are
recorded, not asserted.
"""

import argparse
import json
import os
import resource
import secrets
import socket
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_util import ROOT, cpu_ns, free_ports, rss_kib, start, stop, wait_port, with_descendants  # noqa: E402

PER_DRIVER = 19000  # holds a driver opens at most (its fd limit is 20,000 here)


def meminfo_kib(key):
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    return 0


def sockstat_tcp_pages():
    with open("/proc/net/sockstat") as f:
        for line in f:
            if line.startswith("TCP:"):
                fields = line.split()
                return int(fields[fields.index("mem") + 1])
    return 0


def kernel_bytes():
    return meminfo_kib("Slab") * 1024 + sockstat_tcp_pages() * os.sysconf("SC_PAGE_SIZE")


def rss_bytes(pids):
    total = 0
    for pid in pids:
        try:
            total += rss_kib(pid) * 1024
        except OSError:
            pass
    return total


def redis_command(port, *words, timeout=2.0):
    """One command to a Redis or a sentinel, in RESP; the raw answer."""
    req = b"*%d\r\n" % len(words) + b"".join(b"$%d\r\n%s\r\n" % (len(w), w.encode()) for w in words)
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(req)
        return s.recv(65536).decode(errors="replace")


class Redis:
    """A redis-server, and with sentinel=True a replica and three sentinels
    watching it as `m0m`; each in the temporary folder, stopped by PID."""

    def __init__(self, tmp, sentinel):
        ports = free_ports(5)
        self.port, self.procs, self.logs = ports[0], [], []
        base = ["--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--maxclients", "10000"]
        self._start(["redis-server", "--port", str(self.port), "--dir", tmp] + base, tmp, "redis", self.port)
        self.url = "redis://127.0.0.1:%d/0" % self.port
        if not sentinel:
            return
        rdir = os.path.join(tmp, "replica")
        os.mkdir(rdir)
        self._start(["redis-server", "--port", str(ports[1]), "--dir", rdir,
                     "--replicaof", "127.0.0.1", str(self.port)] + base, tmp, "replica", ports[1])
        deadline = time.monotonic() + 20
        while "master_link_status:up" not in redis_command(ports[1], "INFO", "replication"):
            if time.monotonic() > deadline:
                raise SystemExit("bench: the replica did not follow its master")
            time.sleep(0.1)
        for i, port in enumerate(ports[2:]):
            sdir = os.path.join(tmp, "sentinel%d" % i)
            os.mkdir(sdir)
            conf = os.path.join(sdir, "sentinel.conf")
            with open(conf, "w") as f:
                f.write("port %d\nbind 127.0.0.1\ndir %s\nsentinel monitor m0m 127.0.0.1 %d 2\n"
                        % (port, sdir, self.port))
            self._start(["redis-sentinel", conf], tmp, "sentinel%d" % i, port)
        self.url = "redis+sentinel://%s/m0m/0" % ",".join("127.0.0.1:%d" % p for p in ports[2:])

    def _start(self, cmd, tmp, name, port):
        proc, log = start(cmd, os.path.join(tmp, name + ".log"))
        self.procs.append(proc)
        self.logs.append(log)
        wait_port(port, proc, name)

    def pids(self):
        return [p.pid for p in self.procs]

    def stop(self):
        for proc in reversed(self.procs):
            stop(proc)
        for log in self.logs:
            log.close()


def driver_cmd(args, i, holds, port, admin_port, key, go, server_pid):
    prefix = "d%d" % i
    return [args.driver, "--url", "http://127.0.0.1:%d/native/hold?channel=%s{ch}" % (port, prefix),
            "--holds", str(holds), "--channels", "10", "--sources", "1", "--source-first", str(i),
            "--connecting", "250", "--open-timeout", "300", "--go-file", go,
            ] + (["--burst", str(-(-args.burst // args.drivers))] if args.burst else
                 ["--rate", str(args.rate / args.drivers), "--seconds", str(args.seconds)]) + [
            "--publish-url", "http://127.0.0.1:%d/publish" % admin_port,
            "--publish-header", "Authorization: Bearer " + key,
            "--publish-header", "Content-Type: application/json",
            "--publish-body", '{"channel": "%s{ch}", "data": "{data}"}' % prefix,
            "--server-pid", str(server_pid), "--label", "scale-driver%d" % i]


def measure(args, run):
    """One run: a fresh Redis (or Sentinel set) and server, the drivers'
    holds, memory, the events; one figures dict."""
    per_worker = -(-args.holds // args.workers)
    with tempfile.TemporaryDirectory(prefix="m0bench-scale-") as tmp:
        redis = Redis(tmp, args.redis == "sentinel")
        server = None
        drivers = []
        try:
            port, admin_port = free_ports(2)
            key = secrets.token_hex(24)
            keyfile = os.path.join(tmp, "admin.key")
            with open(keyfile, "w") as f:
                f.write(key + "\n")
            server, slog = start([args.binary, "--listen", "127.0.0.1:%d" % port, "--realtime",
                                  "--workers", str(args.workers), "--bus", redis.url,
                                  "--mount", "/native=mojo", "--admin-listen", "127.0.0.1:%d" % admin_port,
                                  "--admin-key-file", keyfile, "--max-holds", str(per_worker + 2000),
                                  "--log-level", "warn"], os.path.join(tmp, "m0serve.log"))
            wait_port(port, server, "m0serve")
            deadline = time.monotonic() + 20
            while len(with_descendants([server.pid])) < 1 + args.workers and time.monotonic() < deadline:
                time.sleep(0.1)
            time.sleep(1.0)
            spids = with_descendants([server.pid])
            srv0, red0, ker0 = rss_bytes(spids), rss_bytes(redis.pids()), kernel_bytes()
            ker0_slab = meminfo_kib("Slab") * 1024
            go = os.path.join(tmp, "go")
            said = []
            lock = threading.Lock()

            def watch(proc, errs):
                for line in proc.stderr:
                    text = line.decode(errors="replace").strip()
                    errs.append(text)
                    if text.startswith("sse_load: open "):
                        with lock:
                            said.append(int(text.split()[-1]))

            left = args.holds
            for i in range(args.drivers):
                n = min(-(-args.holds // args.drivers), left)
                left -= n
                proc = subprocess.Popen(driver_cmd(args, i, n, port, admin_port, key, go, server.pid),
                                        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                        stderr=subprocess.PIPE)
                errs = []
                t = threading.Thread(target=watch, args=(proc, errs), daemon=True)
                t.start()
                drivers.append((proc, errs, t))
            t_open = time.monotonic()
            while len(said) < args.drivers:
                if time.monotonic() - t_open > 300 or any(p.poll() is not None for p, _, _ in drivers):
                    raise SystemExit("bench: the drivers did not open their holds: %s" % [
                        e[-3:] for _, e, _ in drivers])
                time.sleep(0.2)
            open_s = time.monotonic() - t_open
            # Two seconds with every hold open and nothing published: the
            # memory, and Redis's idle CPU (its timers, the workers' pings),
            # taken off its CPU over the events.
            idle0, t_idle = cpu_ns(redis.pids()), time.monotonic()
            time.sleep(2.0)
            idle_rate = (cpu_ns(redis.pids()) - idle0) / (time.monotonic() - t_idle)
            spids = with_descendants([server.pid])
            srv1, red1, ker1 = rss_bytes(spids), rss_bytes(redis.pids()), kernel_bytes()
            per_proc = [rss_kib(p) * 1024 for p in spids]
            slab1 = meminfo_kib("Slab") * 1024
            cpu0 = cpu_ns(spids), cpu_ns(redis.pids()), cpu_ns(redis.pids()[:1]), time.monotonic()
            open(go, "w").close()
            t_go = time.monotonic()
            figs = []
            for proc, errs, t in drivers:
                out, _ = proc.communicate(timeout=args.seconds + 600)
                t.join(5)
                try:
                    fig = json.loads(out.decode().strip().splitlines()[-1])
                except (IndexError, ValueError):
                    raise SystemExit("bench: a driver printed no figures (exit %d): %s" % (
                        proc.returncode, errs[-3:]))
                fig["clean"] = proc.returncode == 0
                figs.append(fig)
            cpu1 = cpu_ns(spids), cpu_ns(redis.pids()), cpu_ns(redis.pids()[:1]), time.monotonic()
            # The events' span: from the go to the last delivery, the same
            # clock (CLOCK_MONOTONIC) as the drivers' own.
            span = max(f.get("last_delivery_s", 0) for f in figs) - t_go
        finally:
            for proc, _, _ in drivers:
                stop(proc)
            if server is not None:
                stop(server)
            redis.stop()
    opened = sum(f["holds_open"] for f in figs)
    delivered = sum(f["delivered"] for f in figs)
    events = sum(f["events"] for f in figs)
    srv_hold = (srv1 - srv0) / max(opened, 1)
    red_hold = (red1 - red0) / max(opened, 1)
    ker_pair = (ker1 - ker0) / max(opened, 1)
    per_gb = 1e9 / max(srv_hold + red_hold + ker_pair / 2, 1)
    # Redis's CPU over the events, its idle rate taken off (every process of
    # it the same way: the replica's and the sentinels' idle are in the rate).
    red_busy = max(0.0, (cpu1[1] - cpu0[1]) - idle_rate * (cpu1[3] - cpu0[3])) / 1e9
    master_busy = (cpu1[2] - cpu0[2]) / 1e9
    return {
        "label": "scale-%s-w%d-%d%s" % (args.redis, args.workers, args.holds, "-burst" if args.burst else ""),
        "run": run, "mode": "burst" if args.burst else "steady",
        "holds": args.holds, "holds_open": opened, "workers": args.workers, "drivers": args.drivers,
        "redis": args.redis, "open_s": round(open_s, 2),
        "server_rss_per_hold_bytes": round(srv_hold), "redis_rss_per_hold_bytes": round(red_hold),
        "kernel_per_hold_bytes": round(ker_pair / 2), "kernel_both_ends_per_hold_bytes": round(ker_pair),
        "holds_per_gb": round(per_gb), "process_rss_mb": [round(b / 2**20) for b in per_proc],
        "events": events, "delivered": delivered, "expected": sum(f["expected"] for f in figs),
        "delivered_pct": round(100.0 * delivered / max(sum(f["expected"] for f in figs), 1), 3),
        "p50_ms": max(f["p50_ms"] for f in figs), "p99_ms": max(f["p99_ms"] for f in figs),
        "kernel_slab_both_ends_per_hold_bytes": round((slab1 - ker0_slab) / max(opened, 1)),
        "server_cpu_s_per_1m": round((cpu1[0] - cpu0[0]) / 1e9 / max(delivered, 1) * 1e6, 2),
        "redis_cpu_s_per_1m": round(red_busy / max(delivered, 1) * 1e6, 3),
        "redis_idle_cpu_ms_per_s": round(idle_rate / 1e6, 2),
        "events_per_s": round(events / span) if span > 0 else None,
        "deliveries_per_s": round(delivered / span) if span > 0 else None,
        "redis_master_cpu_share": round(master_busy / span, 3) if span > 0 else None,
        "server_cpu_share": round((cpu1[0] - cpu0[0]) / 1e9 / span, 3) if span > 0 else None,
        "redis_master_cpu_us_per_event": round(master_busy / max(events, 1) * 1e6, 1),
        "redis_all_cpu_us_per_event": round(red_busy / max(events, 1) * 1e6, 1),
        "clean": all(f["clean"] for f in figs),
    }


# Published figures of the peers: connections a GB of memory.
PEERS_PER_GB = (("Pushpin", 31000), ("Centrifugo", 37000))
ROWS = ("single", "sentinel")  # the bench part's rows: one Redis, then a Sentinel set


def run(args, run_no, out, results, record):
    """The bench part (smoke/bench.py --parts scale): the steady row on one
    Redis and behind Sentinel, --scale-holds holds over --scale-workers."""
    for redis in ROWS:
        opts = argparse.Namespace(binary=args.binary, driver=args.driver, holds=args.scale_holds,
                                  workers=args.scale_workers, redis=redis, rate=args.rate,
                                  seconds=args.seconds, burst=0, drivers=-(-args.scale_holds // PER_DRIVER))
        fig = measure(opts, run_no)
        record(out, results, ("scale", redis), fig)
        print("  scale %-8s run %d: %d holds open, %.0f bytes a hold (server), %d holds a GB, "
              "%.3g%% delivered, p99 %.1f ms" % (redis, run_no, fig["holds_open"], fig["server_rss_per_hold_bytes"],
                                                 fig["holds_per_gb"], fig["delivered_pct"], fig["p99_ms"]), flush=True)


def cell(v):
    """A figure for the table: whole numbers of 1000 and more in full, with spaces."""
    if v is None:
        return "-"
    return "{:,.0f}".format(v).replace(",", " ") if abs(v) >= 1000 else "%.3g" % v


def table(args, results, median, fmt):
    print("\nscale: %d holds, m0serve --workers %d --bus redis:// (%d drivers, 10 channels each, %g events/s "
          "in all for %g s); medians of %d runs" % (args.scale_holds, args.scale_workers,
                                                    -(-args.scale_holds // PER_DRIVER), args.rate,
                                                    args.seconds, args.runs))
    keys = ("holds_open", "open_s", "server_rss_per_hold_bytes", "redis_rss_per_hold_bytes",
            "kernel_per_hold_bytes", "holds_per_gb", "delivered_pct", "p50_ms", "p99_ms",
            "server_cpu_s_per_1m", "redis_all_cpu_us_per_event", "redis_master_cpu_us_per_event")
    print("%-34s %12s %12s" % (("measure",) + ROWS))
    for key in keys:
        print("%-34s %12s %12s" % ((key,) + tuple(cell(median(results.get(("scale", r), []), key)) for r in ROWS)))
    for name, per_gb in PEERS_PER_GB:
        print("%-34s %12s" % ("%s's published holds a GB" % name, cell(per_gb)))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--binary", default=os.path.join(ROOT, "build", "m0serve"))
    ap.add_argument("--driver", default=os.path.join(ROOT, "build", "sse_load"))
    ap.add_argument("--holds", type=int, default=76000)
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--redis", default="single", choices=("single", "sentinel"))
    ap.add_argument("--rate", type=float, default=20, help="events/s in all, over 10 channels a driver")
    ap.add_argument("--seconds", type=float, default=10)
    ap.add_argument("--burst", type=int, default=0,
                    help="instead: this many events in all, each driver publishing its share "
                         "back to back (the next once the last is answered)")
    ap.add_argument("--drivers", type=int, default=0,
                    help="drivers (publishers) to share the holds (default: enough for the fd limit)")
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--out", default=os.path.join(ROOT, "build", "bench.jsonl"))
    args = ap.parse_args()
    args.drivers = max(args.drivers, -(-args.holds // PER_DRIVER))
    fd_hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    if -(-args.holds // args.workers) + 512 > fd_hard:
        raise SystemExit("bench: %d holds over %d workers is more than the fd limit (%d) allows a worker"
                         % (args.holds, args.workers, fd_hard))
    with open(args.out, "a") as out:
        for run in range(args.runs):
            fig = measure(args, run)
            line = json.dumps(fig)
            print(line, flush=True)
            out.write(line + "\n")


if __name__ == "__main__":
    main()
