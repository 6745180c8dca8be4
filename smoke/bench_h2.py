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
Uploads: the seconds curl takes to POST 5 MB to the mojo mount's /native/echo
through smoke/delay_proxy.py (25 ms each way: a 50 ms round trip for
HTTP/2's flow control), over HTTP/1.1 and h2c to m0serve, and over h2c to
nginx (its defaults, `listen ... http2`, proxying to the same m0serve): the
median of three uploads a run. A stream's receive window (--h2-window)
paces an upload at a window a round trip.
"""

import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_h2_holds import h1_holds, h2_holds, measure as hold_kib  # noqa: E402
from bench_util import free_port, start, stop, wait_port  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
UPLOAD_BYTES = 5 * 1000 * 1000
UPLOAD_DELAY = 0.025  # each way
# nginx's defaults for a request body, but the size (1 MiB by default)
NGINX_UPLOAD = """
worker_processes 1;
error_log %(tmp)s/nginx-error.log;
pid %(tmp)s/nginx.pid;
events { worker_connections 64; }
http {
  access_log off;
  client_body_temp_path %(tmp)s/nginx-body;
  proxy_temp_path %(tmp)s/nginx-proxy;
  server {
    listen 127.0.0.1:%(port)d http2;
    client_max_body_size 20m;
    location / { proxy_pass http://127.0.0.1:%(upstream)d; }
  }
}
"""
UPLOAD_ROWS = ["upload-h1", "upload-h2c", "upload-h2c-nginx"]

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


def upload_seconds(tmp, port, curl_args, what):
    """The median seconds of three 5 MB uploads through a delaying proxy."""
    body = os.path.join(tmp, "upload.bin")
    if not os.path.exists(body):
        with open(body, "wb") as f:
            f.write(os.urandom(UPLOAD_BYTES))
    relay = free_port()
    proxy, log = start(["/usr/bin/python3", os.path.join(HERE, "delay_proxy.py"), str(relay),
                        str(port), str(UPLOAD_DELAY)], os.path.join(tmp, "proxy.log"))
    try:
        wait_port(relay, proxy, "delay_proxy")
        took = []
        for _ in range(3):
            p = subprocess.run(["curl", "-sS", "-o", "/dev/null", "--max-time", "60", "-w",
                                "%{http_code} %{size_upload} %{time_total}"] + curl_args +
                               ["--data-binary", "@" + body,
                                "http://127.0.0.1:%d/native/echo" % relay],
                               capture_output=True, text=True, timeout=70)
            code, sent, secs = (p.stdout.split() + ["", "", ""])[:3]
            if p.returncode != 0 or code != "200" or sent != str(UPLOAD_BYTES):
                raise SystemExit("bench: %s upload: %r %s" % (what, p.stdout, p.stderr.strip()))
            took.append(float(secs))
        return statistics.median(took)
    finally:
        stop(proxy)
        log.close()


def uploads(binary, tmp):
    """{row: seconds} of UPLOAD_ROWS."""
    port, edge = free_port(), free_port()
    proc, log = start([binary, "--listen", "127.0.0.1:%d" % port, "--mount", "/native=mojo"],
                      os.path.join(tmp, "upload-server.log"))
    nginx = nlog = None
    try:
        wait_port(port, proc, "m0serve")
        got = {"upload-h1": upload_seconds(tmp, port, ["--http1.1"], "HTTP/1.1"),
               "upload-h2c": upload_seconds(tmp, port, ["--http2-prior-knowledge"], "h2c")}
        # nginx's worker (nobody, under root) writes the body to its temp path
        os.chmod(tmp, 0o755)
        conf = os.path.join(tmp, "nginx-upload.conf")
        with open(conf, "w") as f:
            f.write(NGINX_UPLOAD % {"tmp": tmp, "port": edge, "upstream": port})
        nginx, nlog = start(["nginx", "-c", conf, "-p", tmp, "-g", "daemon off;"],
                            os.path.join(tmp, "nginx-upload.log"))
        wait_port(edge, nginx, "nginx")
        got["upload-h2c-nginx"] = upload_seconds(tmp, edge, ["--http2-prior-knowledge"],
                                                 "nginx h2c")
        return got
    finally:
        stop(nginx, signal.SIGQUIT)
        stop(proc)
        log.close()
        if nlog:
            nlog.close()


def run(args, run_no, out, results, record):
    with tempfile.TemporaryDirectory(prefix="m0bench-h2-") as tmp:
        for row, secs in uploads(args.binary, tmp).items():
            record(out, results, ("h2", row), {"upload_s": secs}, run=run_no, part="h2", row=row)
            print("bench: run %d h2 %-16s %.2f s for 5 MB over a 50 ms round trip" % (
                run_no + 1, row, secs), flush=True)
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
    edge = median(results.get(("h2", "upload-h2c-nginx"), []), "upload_s")
    print("uploads: 5 MB to /native/echo through a 50 ms round trip (smoke/delay_proxy.py), seconds")
    for row in UPLOAD_ROWS:
        secs = median(results.get(("h2", row), []), "upload_s")
        print("%-16s %8s s %8s vs nginx's h2c" % (row, fmt(secs), fmt(
            secs / edge if secs and edge else None)))
