"""bench_files: Django's FileResponse under wrk (bench.py's files part).

Two files of random bytes, 1 MiB and 100 MiB, are written once into a
temporary folder; every server starts fresh with M0_BENCH_FILES naming it
and serves them from fixtures/djangoproj's /files/NAME
(django_realtime/file_views.py), started as for the request rows
(smoke/bench_wrk.py): m0serve with --blocking-threads 4, gunicorn gthread
with four threads, uWSGI with four threads and --http-socket.

Before wrk, one GET checks the body (its length and SHA-256) and reads the
view's X-File-Wrapper header: whether the server's environ offered
`wsgi.file_wrapper`, which Django then hands the open file to (gunicorn and
uWSGI send it with sendfile(2)); without one Django iterates the file in
FileResponse.block_size (4096-byte) chunks. Then `wrk -t2 -cN
-d<seconds>s --timeout 60s --latency` (N: 8 for 1 MiB, 2 for 100 MiB;
wrk reads and discards the bodies) gives requests/s and p50/p99, and /proc
the server's CPU (every process under its PID), per 10^9 bytes wrk read.
"""

import hashlib
import http.client
import os
import sys
import urllib.parse

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_wrk  # noqa: E402

SERVERS = ["m0serve", "gunicorn", "uwsgi"]
# (label, bytes, wrk connections): the rows of the table, in order.
SIZES = [("1MiB", 1 << 20, 8), ("100MiB", 100 << 20, 2)]
ENV = "M0_BENCH_FILES"


def make_files(folder):
    """Writes one file of random bytes per size into folder; returns
    {label: SHA-256 hex of its bytes}."""
    digests = {}
    for label, size, _ in SIZES:
        h = hashlib.sha256()
        with open(os.path.join(folder, label + ".bin"), "wb") as f:
            left = size
            while left:
                chunk = os.urandom(min(left, 1 << 20))
                h.update(chunk)
                f.write(chunk)
                left -= len(chunk)
        digests[label] = h.hexdigest()
    return digests


def probe(url, size, digest):
    """One GET of url: checks the body, returns the X-File-Wrapper answer."""
    u = urllib.parse.urlsplit(url)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=120)
    try:
        conn.request("GET", u.path)
        resp = conn.getresponse()
        h, n = hashlib.sha256(), 0
        while True:
            chunk = resp.read(1 << 20)
            if not chunk:
                break
            h.update(chunk)
            n += len(chunk)
        wrapper = resp.getheader("X-File-Wrapper")
    finally:
        conn.close()
    if resp.status != 200 or n != size or h.hexdigest() != digest:
        raise SystemExit("bench: GET %s answered %d with %d bytes (SHA-256 %s), not the file's %d" % (
            url, resp.status, n, "matching" if h.hexdigest() == digest else "not matching", size))
    return {"file_wrapper": wrapper}


def measure(kind, label, binary, seconds, tmp, folder, digest):
    """One server, fresh, one size; returns its figures."""
    size, conns = next((s, c) for lbl, s, c in SIZES if lbl == label)
    fig = bench_wrk.measure(kind, "/files/%s.bin" % label, binary, seconds, tmp,
                            wrk_args=("-t2", "-c%d" % conns, "--timeout", "60s"), warm_args=None,
                            env=dict(os.environ, **{ENV: folder}),
                            probe=lambda url: probe(url, size, digest))
    got = fig["bytes_read"]
    fig.update(size=size, connections=conns,
               cpu_s_per_gb=round(fig["cpu_s"] / (got / 1e9), 3) if got else None)
    return fig
