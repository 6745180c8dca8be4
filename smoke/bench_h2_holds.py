#!/usr/bin/python3
"""bench_h2_holds: m0serve's memory per idle SSE hold over HTTP/2, against a
plain HTTP/1.1 hold.

Not a test: idle holds on one loop, measured by hand as bench_tls_holds.py's
(bench.py's part h2 runs it too); the tls part (smoke/bench_tls.py) measures
holds over h2c and TLS+h2 under load, with sse_load, beside nchan. For each of HTTP/1.1 (a
connection a hold) and h2c with prior knowledge (python3-h2, --streams
holds a connection: a page's EventSources), a fresh m0serve (`--mount
/native=mojo --realtime --loops 1`) is held N times on /native/hold (50
first, to warm the allocator); the figure is the server's RSS growth over
the N holds divided by N, the median of --runs runs.

    /usr/bin/python3 smoke/bench_h2_holds.py [--binary build/m0serve] [-n 1000] [--streams 50]
"""

import argparse
import os
import resource
import socket
import statistics
import sys

import h2.config
import h2.connection

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_util import ROOT, free_port, rss_growth, start, stop, wait_port  # noqa: E402

HEAD = b": mojo hold"


def h1_holds(port, n):
    socks = []
    for _ in range(n):
        s = socket.create_connection(("127.0.0.1", port), timeout=5)
        s.sendall(b"GET /native/hold?channel=c HTTP/1.1\r\nHost: localhost\r\n\r\n")
        got = b""
        while HEAD not in got:
            got += s.recv(4096)
        socks.append(s)
    return socks


def h2_holds(port, n, per_conn):
    """n holds, per_conn streams a connection; each stream's head read."""
    socks = []
    while n > 0:
        k = min(n, per_conn)
        s = socket.create_connection(("127.0.0.1", port), timeout=5)
        c = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
        c.initiate_connection()
        for i in range(k):
            c.send_headers(1 + 2 * i, [(":method", "GET"), (":scheme", "http"),
                                       (":authority", "localhost"),
                                       (":path", "/native/hold?channel=c")], end_stream=True)
        s.sendall(c.data_to_send())
        heads = 0
        while heads < k:
            for ev in c.receive_data(s.recv(65536)):
                heads += type(ev).__name__ == "DataReceived" and HEAD in ev.data
            s.sendall(c.data_to_send())
        socks.append(s)
        n -= k
    return socks


def measure(binary, n, folder_log, open_holds):
    port = free_port()
    cmd = [binary, "--listen", "127.0.0.1:%d" % port, "--mount", "/native=mojo", "--realtime",
           "--loops", "1", "--heartbeat", "600", "--keepalive-timeout", "600",
           "--h2-max-concurrent-streams", "1000"]
    proc, log = start(cmd, folder_log)
    try:
        wait_port(port, proc, "m0serve")
        before, after = rss_growth(proc, lambda k: open_holds(port, k), n)
        return (after - before) / n
    finally:
        stop(proc)
        log.close()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--binary", default=os.path.join(ROOT, "build", "m0serve"))
    ap.add_argument("-n", type=int, default=1000)
    ap.add_argument("--streams", type=int, default=50, help="HTTP/2 holds a connection")
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    resource.setrlimit(resource.RLIMIT_NOFILE, (args.n + 500, max(args.n + 500, 4096)))
    binary = os.path.abspath(args.binary)
    log = os.path.join(ROOT, "build", "bench_h2_holds.log")
    plain = statistics.median(measure(binary, args.n, log, h1_holds) for _ in range(args.runs))
    over = statistics.median(measure(binary, args.n, log, lambda p, k: h2_holds(p, k, args.streams))
                             for _ in range(args.runs))
    print("HTTP/1.1 %d idle holds: %.2f KiB each" % (args.n, plain), flush=True)
    print("h2c      %d idle holds, %d a connection: %.2f KiB each (%.2f times)" % (
        args.n, args.streams, over, over / plain if plain > 0 else 0), flush=True)


if __name__ == "__main__":
    main()
