#!/usr/bin/python3
"""bench_tls_holds: m0serve's memory per idle SSE hold, plain and over TLS.

Not a test and not part of `make bench`: idle holds on one loop, measured by
hand (bench.py's part tls, smoke/bench_tls.py, measures holds over TLS under
load with sse_load, beside nchan). For each of plain and TLS (1.3, and 1.2 with --tls12), a
fresh m0serve (`--mount /native=mojo --realtime --loops 1`, a self-signed
certificate the openssl CLI makes) is held N times on /native/hold by
Python ssl clients (50 first, to warm the allocator); the figure is the
server's RSS growth over the N holds divided by N. With --keepalive the
connections are idle keep-alive ones (/native/hello) instead of holds.

    /usr/bin/python3 smoke/bench_tls_holds.py [--binary build/m0serve] [-n 1000]
"""

import argparse
import os
import resource
import shutil
import socket
import ssl
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_util import ROOT, free_port, rss_growth, start, stop, wait_port  # noqa: E402


def measure(binary, n, folder, tls, tls12, keepalive):
    port = free_port()
    cmd = [binary, "--listen", "127.0.0.1:%d" % port, "--mount", "/native=mojo", "--realtime",
           "--loops", "1", "--heartbeat", "600", "--keepalive-timeout", "600"]
    cert, key = os.path.join(folder, "cert.pem"), os.path.join(folder, "key.pem")
    if tls:
        cmd += ["--certfile", cert, "--keyfile", key]
    proc, log = start(cmd, os.path.join(folder, "server.log"))
    try:
        wait_port(port, proc, "m0serve")
        ctx = ssl.create_default_context(cafile=cert)
        if tls12:
            ctx.maximum_version = ssl.TLSVersion.TLSv1_2
        path, want = ("/native/hello", b"hello from mojo") if keepalive else (
            "/native/hold?channel=c", b": mojo hold")

        def one():
            s = socket.create_connection(("127.0.0.1", port), timeout=5)
            if tls:
                s = ctx.wrap_socket(s, server_hostname="localhost")
            s.sendall(b"GET " + path.encode() + b" HTTP/1.1\r\nHost: localhost\r\n\r\n")
            got = b""
            for _ in range(100):
                if want in got:
                    return s
                got += s.recv(4096)
            raise SystemExit("no answer: %r" % got)

        return rss_growth(proc, lambda k: [one() for _ in range(k)], n)
    finally:
        stop(proc)
        log.close()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--binary", default=os.path.join(ROOT, "build", "m0serve"))
    ap.add_argument("-n", type=int, default=1000)
    ap.add_argument("--keepalive", action="store_true", help="idle keep-alive connections, not holds")
    args = ap.parse_args()
    resource.setrlimit(resource.RLIMIT_NOFILE, (args.n + 500, max(args.n + 500, 4096)))
    folder = tempfile.mkdtemp(prefix="m0-bench-tls-")
    try:
        subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                        "ec_paramgen_curve:P-256", "-nodes", "-days", "1", "-subj", "/CN=localhost",
                        "-addext", "subjectAltName=DNS:localhost", "-keyout",
                        os.path.join(folder, "key.pem"), "-out", os.path.join(folder, "cert.pem")],
                       check=True, capture_output=True)
        what = "keep-alive connections" if args.keepalive else "holds"
        for name, tls, tls12 in (("plain", False, False), ("TLS 1.3", True, False),
                                 ("TLS 1.2", True, True)):
            before, after = measure(os.path.abspath(args.binary), args.n, folder, tls, tls12,
                                    args.keepalive)
            print("%-8s %d idle %s: RSS %d -> %d KiB: %.2f KiB each" % (
                name, args.n, what, before, after, (after - before) / args.n), flush=True)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
