#!/usr/bin/python3
"""bench_tls: holds over TLS and HTTP/2 beside nchan doing the same
(bench.py's part `tls`: `make bench BENCH_PARTS=tls`, or
`/usr/bin/python3 smoke/bench.py --parts tls --tls-holds 1000 --runs 3`).

The hold rows as the holds part runs them (build/sse_load: steady,
--tls-holds N holds on 10 channels at 20 events/s; burst, 1000 holds on one
channel, 1000 events back to back), m0serve's mojo hold (`m0-mojo`, the default loops)
against nchan on nginx (two workers), over each transport of
--tls-transports:

    http/1.1   plain, a connection a hold (the plain rows again, in this run)
    tls-h1     TLS (1.3), ALPN http/1.1, a connection a hold
    tls-h2     TLS (1.3), ALPN h2, --tls-streams holds a connection
    h2c        HTTP/2 with prior knowledge, --tls-streams holds a connection

m0serve serves TLS with --certfile/--keyfile on its --listen (its admin
listener, the publisher's, stays plain); nginx has `listen ... ssl http2`
(or `http2` alone for h2c) for the streams, `ssl_protocols TLSv1.2
TLSv1.3` (1.22's default lacks 1.3), and a plain listener for the publisher.
The certificate is a leaf for 127.0.0.1 signed by a CA the bench makes with
the openssl CLI (smoke/tls_lib.py's Pki); the driver verifies it against
that CA.

Handshakes: the driver's --handshakes loop against m0serve's /native/hello
and nginx's `return 200` (same servers, same certificate): --tls-handshakes
connections, 16 at a time, each a full TLS 1.3 handshake (the driver keeps
and offers no session, so none resumes: the run says how many did, 0) and
one GET with `Connection: close`: handshakes/s, the server's CPU a
handshake, the driver's (it runs on the same cores).
"""

import atexit
import json
import os
import subprocess
import sys
import tempfile
import types

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import emit  # noqa: E402
from bench_util import fmt, median  # noqa: E402
from tls_lib import Pki  # noqa: E402

SERVERS = ("nchan", "m0-mojo")
HOLD_RATIO_TARGET = 1.5  # an HTTP/2 hold's RSS over a plain HTTP/1.1 hold's, m0serve


class Certs:
    """A CA and a leaf for 127.0.0.1, made once for the whole bench."""

    def __init__(self):
        self._ctx = types.SimpleNamespace(finalizers=[])
        pki = Pki(self._ctx)
        cert, key = pki.leaf("bench", 2)
        self.tls = (cert, key, pki.ca)
        atexit.register(self.close)

    def close(self):
        while self._ctx.finalizers:
            self._ctx.finalizers.pop()()


def transport(name, certs, streams):
    """(tls, streams) for Server."""
    return {"http/1.1": (None, 0), "tls-h1": (certs.tls, 0), "tls-h2": (certs.tls, streams),
            "h2c": (None, streams)}[name]


def run(args, run_no, out, results, record, drive, make_server, certs):
    plan = [("steady", int(h), 10) for h in args.tls_holds.split(",")] + [("burst", 1000, 1)]
    for name in args.tls_transports.split(","):
        tls, streams = transport(name, certs, args.tls_streams)
        for mode, holds, channels in plan:
            for kind in SERVERS:
                with tempfile.TemporaryDirectory(prefix="m0bench-tls-") as tmp:
                    srv = make_server(kind, args.binary, holds, tmp, tls=tls, streams=streams)
                    try:
                        fig = drive(args, srv, holds, channels, mode)
                    finally:
                        srv.stop()
                fig["delivered_pct"] = 100.0 * fig["delivered"] / fig["expected"] if fig["expected"] else None
                record(out, results, ("tls", name, mode, holds, kind), fig, run=run_no, part="tls",
                       transport=name, mode=mode, server=kind, streams=streams)
                print("bench: run %d tls %-8s %s %d holds %-8s rss/hold %.0f, p99 %.1f ms, %.0f deliveries/s, "
                      "%.2f CPU s/1M, %d/%d delivered, %s" % (
                          run_no + 1, name, mode, holds, kind, fig["rss_per_hold_bytes"], fig["p99_ms"],
                          fig["deliveries_per_s"], fig["cpu_s_per_1m"], fig["delivered"], fig["expected"],
                          "clean" if fig["clean"] else "NOT CLEAN"), flush=True)
    # OpenSSL's own state for an idle connection, no server around it
    # (smoke/load/tls_floor.cpp): the floor under an idle TLS hold's memory.
    tool = os.path.join(os.path.dirname(args.driver), "tls_floor")
    if os.path.exists(tool):
        n = int(args.tls_holds.split(",")[0])
        p = subprocess.run([tool, "--connections", str(n)], stdout=subprocess.PIPE, timeout=300)
        fig = json.loads(p.stdout.decode().strip().splitlines()[-1])
        fig["clean"] = p.returncode == 0
        record(out, results, ("tls", "floor"), fig, run=run_no, part="tls", mode="floor", server="tls_floor")
    for kind in SERVERS:
        with tempfile.TemporaryDirectory(prefix="m0bench-tls-") as tmp:
            srv = make_server(kind, args.binary, 64, tmp, tls=certs.tls)
            try:
                cmd = [args.driver, "--url", srv.hello_url, "--cafile", certs.tls[2], "--handshakes",
                       str(args.tls_handshakes), "--connecting", "16", "--label", "%s-handshakes" % kind]
                for pid in srv.pids():
                    cmd += ["--server-pid", str(pid)]
                p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=300)
            finally:
                srv.stop()
        try:
            fig = json.loads(p.stdout.decode().strip().splitlines()[-1])
        except (IndexError, ValueError):
            raise SystemExit("bench: the handshake loop printed nothing for %s (exit %d): %s" % (
                kind, p.returncode, p.stderr.decode()[-400:]))
        fig["clean"] = p.returncode == 0
        record(out, results, ("tls", "handshakes", kind), fig, run=run_no, part="tls", mode="handshakes",
               server=kind)
        print("bench: run %d tls handshakes %-8s %.0f/s, %.3f ms server CPU, %.3f ms driver CPU each, "
              "%s, %d resumed, %s" % (
                  run_no + 1, kind, fig["handshakes_per_s"], fig["cpu_ms_per_handshake"],
                  fig["driver_cpu_ms_per_handshake"], fig["tls_version"], fig["resumed"],
                  "clean" if fig["clean"] else "NOT CLEAN " + fig["first_error"]), flush=True)


def table(args, results, targets, target_text):
    plan = [("steady", int(h)) for h in args.tls_holds.split(",")] + [("burst", 1000)]
    names = args.tls_transports.split(",")
    print("\ntls: holds over TLS and HTTP/2 (%d streams a connection); medians of %d runs; "
          "ratio = m0serve / nchan" % (args.tls_streams, args.runs))
    cols = ["nchan", "m0-mojo", "m0/nchan", "target"]
    print(("%-8s %-7s %6s  %-19s" + " %11s" * len(cols)) % tuple(["over", "mode", "holds", "measure"] + cols))
    for name in names:
        for mode, holds in plan:
            keys = (["deliveries_per_s", "cpu_s_per_1m", "delivered_pct"] if mode == "burst" else
                    ["rss_per_hold_bytes", "p50_ms", "p99_ms", "cpu_s_per_1m", "delivered_pct"])
            for key in keys:
                med = {k: median(results.get(("tls", name, mode, holds, k), []), key) for k in SERVERS}
                ratio = med["m0-mojo"] / med["nchan"] if med["nchan"] and med["m0-mojo"] is not None else None
                tkey = key if mode == "steady" or "burst_" + key not in targets else "burst_" + key
                print(("%-8s %-7s %6d  %-19s" + " %11s" * len(cols)) % (
                    name, mode, holds, key, fmt(med["nchan"]), fmt(med["m0-mojo"]), fmt(ratio),
                    target_text(tkey) if key in targets else "-"))
                if ratio is not None and key in targets:
                    emit.emit("bench-tls-%s-%s-%d-%s-ratio" % (name.replace("/", ""), mode, holds,
                                                               key.replace("_", "-")),
                              round(ratio, 4), "ratio", out=open(os.devnull, "w"))
    floor = median(results.get(("tls", "floor"), []), "rss_per_connection_bytes")
    if floor is not None:
        heap = median(results.get(("tls", "floor"), []), "heap_per_connection_bytes")
        for mode, holds in plan:
            nchan = median(results.get(("tls", "tls-h1", mode, holds, "nchan"), []), "rss_per_hold_bytes")
            if mode == "steady" and nchan:
                print("OpenSSL's floor (tls_floor: an idle TLS 1.3 connection's server SSL, buffers released, "
                      "nothing else): %s bytes RSS, %s of malloc's; the lowest tls-h1 rss_per_hold_bytes ratio "
                      "an OpenSSL server can reach at %d holds: %s" % (fmt(floor), fmt(heap), holds,
                                                                       fmt(floor / nchan)))
    # An HTTP/2 hold's memory against a plain HTTP/1.1 hold's, on m0serve.
    for mode, holds in plan:
        if mode != "steady":
            continue
        plain = median(results.get(("tls", "http/1.1", mode, holds, "m0-mojo"), []), "rss_per_hold_bytes")
        for name in ("tls-h2", "h2c", "tls-h1"):
            rss = median(results.get(("tls", name, mode, holds, "m0-mojo"), []), "rss_per_hold_bytes")
            if plain and rss:
                print("m0-mojo %-8s hold at %d holds: %s bytes, %s times a plain HTTP/1.1 hold's%s" % (
                    name, holds, fmt(rss), fmt(rss / plain),
                    " (target <=%g)" % HOLD_RATIO_TARGET if name != "tls-h1" else ""))
    print("\ntls handshakes: %d connections, 16 at a time, full TLS handshakes and one GET each; medians of %d runs"
          % (args.tls_handshakes, args.runs))
    keys = ("handshakes_per_s", "cpu_ms_per_handshake", "driver_cpu_ms_per_handshake", "resumed", "failed")
    print(("%-28s" + " %11s" * 3) % ("measure", "nginx", "m0-mojo", "m0/nginx"))
    for key in keys:
        med = {k: median(results.get(("tls", "handshakes", k), []), key) for k in SERVERS}
        ratio = med["m0-mojo"] / med["nchan"] if med["nchan"] and med["m0-mojo"] is not None else None
        print(("%-28s" + " %11s" * 3) % (key, fmt(med["nchan"]), fmt(med["m0-mojo"]), fmt(ratio)))
