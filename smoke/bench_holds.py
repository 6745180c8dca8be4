#!/usr/bin/python3
"""bench_holds: what a hold costs and how fast events fan out (a baseline).

Starts m0serve (mojo mount only, --realtime, an admin listener) on 127.0.0.1,
opens N holds on one channel from one asyncio client, reads the server's RSS
before and after (/proc/PID/status), then publishes M events through the admin
API and times until every hold has every event. Records, with smoke/emit.py:

    bench-hold-rss-bytes        resident memory per open hold (RSS delta / N)
    bench-fanout-deliveries-s   event deliveries per second across the N holds
    bench-hold-open-s           time to open the N holds (heads received)

Figures are recorded, not asserted. The side-by-side peers (Pushpin, nchan)
come with the performance issue; this is m0serve's own baseline.

    /usr/bin/python3 smoke/bench_holds.py --binary build/m0serve --holds 2000 --events 200
"""

import argparse
import asyncio
import json
import os
import resource
import secrets
import signal
import socket
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import emit  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rss_bytes(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS")


def wait_port(port, proc, timeout=10.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"bench: m0serve exited {proc.returncode}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    raise SystemExit("bench: m0serve did not listen in time")


async def open_hold(port, channel):
    r, w = await asyncio.open_connection("127.0.0.1", port)
    w.write(f"GET /native/hold?channel={channel} HTTP/1.1\r\nHost: b\r\n\r\n".encode())
    await w.drain()
    head = await r.readuntil(b"\r\n\r\n")
    if not head.startswith(b"HTTP/1.1 200"):
        raise SystemExit(f"bench: hold refused: {head[:60]!r}")
    return r, w


async def count_events(reader, want, deadline):
    """Counts "\nid: " (every event follows a blank line); the 4-byte tail kept
    between reads catches a match split across two reads, and no match fits
    inside it, so none is counted twice."""
    seen, tail = 0, b""
    while seen < want:
        left = deadline - time.monotonic()
        if left <= 0:
            raise SystemExit(f"bench: a hold saw {seen} of {want} events in time")
        chunk = await asyncio.wait_for(reader.read(65536), left)
        if not chunk:
            raise SystemExit("bench: a hold was closed")
        data = tail + chunk
        seen += data.count(b"\nid: ")
        tail = data[-4:]
    if seen != want:
        raise SystemExit(f"bench: a hold saw {seen} events, {want} were published")
    return seen


def publish(admin_port, key, channel, n, data):
    body_tmpl = {"channel": channel, "data": data}
    s = socket.create_connection(("127.0.0.1", admin_port))
    for i in range(n):
        body = json.dumps(body_tmpl).encode()
        s.sendall(b"POST /publish HTTP/1.1\r\nHost: a\r\nAuthorization: Bearer " + key.encode() +
                  b"\r\nContent-Type: application/json\r\nContent-Length: " +
                  str(len(body)).encode() + b"\r\n\r\n" + body)
    # Read the n answers (keep-alive, pipelined).
    got, buf = 0, b""
    while got < n:
        chunk = s.recv(65536)
        if not chunk:
            raise SystemExit("bench: admin connection closed")
        buf += chunk
        got = buf.count(b"HTTP/1.1 200")
    s.close()


async def main_async(args, port, admin_port, key, pid):
    base = rss_bytes(pid)
    t0 = time.monotonic()
    conns = []
    for i in range(0, args.holds, 200):  # open in batches
        conns += await asyncio.gather(*(open_hold(port, "bench") for _ in range(min(200, args.holds - i))))
    opened = time.monotonic() - t0
    await asyncio.sleep(0.3)
    per_hold = (rss_bytes(pid) - base) / args.holds
    deadline = time.monotonic() + 120
    t1 = time.monotonic()
    counters = [asyncio.ensure_future(count_events(r, args.events, deadline)) for r, _ in conns]
    await asyncio.get_running_loop().run_in_executor(
        None, publish, admin_port, key, "bench", args.events, "x" * args.size)
    await asyncio.gather(*counters)
    elapsed = time.monotonic() - t1
    for _, w in conns:
        w.close()
    return opened, per_hold, args.holds * args.events / elapsed


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--binary", default=os.path.join(ROOT, "build", "m0serve"))
    ap.add_argument("--holds", type=int, default=2000)
    ap.add_argument("--events", type=int, default=200)
    ap.add_argument("--size", type=int, default=64, help="bytes of data per event")
    args = ap.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    need = args.holds * 2 + 256
    if soft < need:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(need, hard), hard))
    port, admin_port = free_port(), free_port()
    key = secrets.token_urlsafe(24)
    with tempfile.NamedTemporaryFile("w", suffix=".key", delete=False) as f:
        f.write(key + "\n")
    cmd = [args.binary, "--listen", f"127.0.0.1:{port}", "--mount", "/native=mojo", "--realtime",
           "--admin-listen", f"127.0.0.1:{admin_port}", "--admin-key-file", f.name,
           "--max-connections", str(args.holds + 64), "--log-level", "warn"]
    proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL)
    try:
        wait_port(port, proc)
        opened, per_hold, rate = asyncio.run(main_async(args, port, admin_port, key, proc.pid))
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
        os.unlink(f.name)
    print(f"bench: {args.holds} holds, {args.events} events of {args.size} bytes")
    emit.emit("bench-hold-open-s", round(opened, 4), "s")
    emit.emit("bench-hold-rss-bytes", round(per_hold), "bytes")
    emit.emit("bench-fanout-deliveries-s", round(rate), "deliveries/s")


if __name__ == "__main__":
    main()
