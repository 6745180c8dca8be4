#!/usr/bin/python3
"""bench_stream_delay: what Nagle's algorithm costs a streamed answer.

Not a test (it times): on one keep-alive connection, a whole answer (the
pep3333 fixture's /exact-list), then a streamed one (/stream: the head, then
its chunks, written apart), --tries times; prints the time from sending the
second request to the streamed answer's last chunk, median, p90 and max.
With Nagle on the server's socket, the first chunk after the head waits for
the client's ACK of the head, which a client that has just sent a request
delays (40 ms on Linux); with TCP_NODELAY it goes at once (docs/BENCHMARK.md,
"Nagle on client connections").

    /usr/bin/python3 smoke/bench_stream_delay.py --binary build/m0serve
"""

import argparse
import os
import socket
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_util import ROOT, free_port, start, stop, wait_port  # noqa: E402

FIXTURE = os.path.join(ROOT, "fixtures", "pep3333")


def read_until(sock, buf, done):
    """Reads from sock onto buf until done(buf); returns buf."""
    while not done(buf):
        chunk = sock.recv(65536)
        if not chunk:
            raise SystemExit("bench: the server closed the connection")
        buf += chunk
    return buf


def whole_answer(buf):
    head, sep, body = buf.partition(b"\r\n\r\n")
    if not sep:
        return False
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            return len(body) >= int(value)
    raise SystemExit("bench: /exact-list answered without a Content-Length: %r" % head)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--binary", default=os.path.join(ROOT, "build", "m0serve"))
    ap.add_argument("--tries", type=int, default=30)
    args = ap.parse_args()
    port = free_port()
    with tempfile.TemporaryDirectory(prefix="m0bench-") as tmp:
        proc, log = start([args.binary, "--listen", "127.0.0.1:%d" % port, "--chdir", FIXTURE,
                           "--mount", "/=body_apps:application", "--log-level", "warn"],
                          os.path.join(tmp, "m0serve.log"))
        try:
            wait_port(port, proc, "m0serve")
            times = []
            with socket.create_connection(("127.0.0.1", port), timeout=10) as c:
                for _ in range(args.tries):
                    c.sendall(b"GET /exact-list HTTP/1.1\r\nHost: bench\r\n\r\n")
                    read_until(c, b"", whole_answer)
                    t0 = time.monotonic()
                    c.sendall(b"GET /stream HTTP/1.1\r\nHost: bench\r\n\r\n")
                    read_until(c, b"", lambda b: b.endswith(b"0\r\n\r\n"))
                    times.append(1000 * (time.monotonic() - t0))
                    time.sleep(0.01)
        finally:
            stop(proc)
            log.close()
    times.sort()
    print("streamed answer after a whole one, %d tries: median %.2f ms, p90 %.2f ms, max %.2f ms" % (
        len(times), statistics.median(times), times[int(len(times) * 0.9)], times[-1]))


if __name__ == "__main__":
    main()
