#!/usr/bin/python3
"""bench_h2: HTTP/2 against HTTP/1.1 on the same server (bench.py's part
`h2`: `make bench BENCH_PARTS=h2`, or
`/usr/bin/python3 smoke/bench.py --parts h2 --runs 3`).

Requests: h2load (nghttp2-client) GETs the mojo mount's /native/hello from a
fresh m0serve (`--mount /native=mojo --loops 1`): --h2-requests requests over
10 connections, each as HTTP/1.1 (`--h1`, one request in flight a
connection), h2c with one stream in flight a connection, and h2c with 10.
Holds: the RSS growth per idle hold over 1000 holds (bench_h2_holds.py):
HTTP/1.1 (a connection each) and h2c (50 streams a connection, a page's
EventSources), and their ratio (target: at most 1.5).
"""

import os
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_h2_holds import h1_holds, h2_holds, measure as hold_kib  # noqa: E402
from bench_util import free_port, start, stop, wait_port  # noqa: E402

# (row, h2load arguments)
REQUEST_ROWS = [("http/1.1", ["--h1", "-c", "10", "-m", "1"]),
                ("h2c-m1", ["-c", "10", "-m", "1"]),
                ("h2c-m10", ["-c", "10", "-m", "10"])]
HOLD_RATIO_TARGET = 1.5


def requests_per_s(binary, h2load_args, n, tmp):
    port = free_port()
    proc, log = start([binary, "--listen", "127.0.0.1:%d" % port, "--mount", "/native=mojo",
                       "--loops", "1"], os.path.join(tmp, "server.log"))
    try:
        wait_port(port, proc, "m0serve")
        url = "http://127.0.0.1:%d/native/hello" % port
        subprocess.run(["h2load", "-n", "2000"] + h2load_args + [url], capture_output=True, timeout=60)
        out = subprocess.run(["h2load", "-n", str(n)] + h2load_args + [url], capture_output=True,
                             text=True, timeout=300).stdout
        m = re.search(r"finished in [\d.]+m?s, ([\d.]+) req/s", out)
        ok = re.search(r"requests: \d+ total, \d+ started, \d+ done, (\d+) succeeded", out)
        return (float(m.group(1)) if m else None), (int(ok.group(1)) == n if ok else False)
    finally:
        stop(proc)
        log.close()


def run(args, run_no, out, results, record):
    with tempfile.TemporaryDirectory(prefix="m0bench-h2-") as tmp:
        for row, h2load_args in REQUEST_ROWS:
            rate, clean = requests_per_s(args.binary, h2load_args, args.h2_requests, tmp)
            record(out, results, ("h2", row), {"requests_per_s": rate, "clean": clean}, run=run_no,
                   part="h2", row=row)
            print("bench: run %d h2 %-9s %8.0f requests/s%s" % (
                run_no + 1, row, rate or 0, "" if clean else ", NOT CLEAN"), flush=True)
        log = os.path.join(tmp, "holds.log")
        for row, opener in (("hold-h1", h1_holds), ("hold-h2c", lambda p, k: h2_holds(p, k, 50))):
            kib = hold_kib(args.binary, 1000, log, opener)
            record(out, results, ("h2", row), {"kib_per_hold": kib}, run=run_no, part="h2", row=row)
            print("bench: run %d h2 %-9s %.2f KiB a hold" % (run_no + 1, row, kib), flush=True)


def table(args, results, median, fmt):
    print("\nh2: h2load -n %d on /native/hello (10 connections); idle holds' RSS; medians of %d runs" % (
        args.h2_requests, args.runs))
    base = median(results.get(("h2", "http/1.1"), []), "requests_per_s")
    for row, _ in REQUEST_ROWS:
        rate = median(results.get(("h2", row), []), "requests_per_s")
        print("%-9s %10s requests/s %8s vs http/1.1" % (
            row, fmt(rate), fmt(rate / base if rate and base else None)))
    h1 = median(results.get(("h2", "hold-h1"), []), "kib_per_hold")
    h2 = median(results.get(("h2", "hold-h2c"), []), "kib_per_hold")
    print("%-9s %10s KiB a hold" % ("hold-h1", fmt(h1)))
    print("%-9s %10s KiB a hold %8s vs hold-h1 (target <=%g)" % (
        "hold-h2c", fmt(h2), fmt(h2 / h1 if h1 and h2 else None), HOLD_RATIO_TARGET))
