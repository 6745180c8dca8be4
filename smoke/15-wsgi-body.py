#!/usr/bin/python3
"""smoke-wsgi-body: a WSGI body against its Content-Length, on keep-alive
connections, through the real binary (PEP 3333, "Handling the Content-Length
Header"; RFC 9112 §6.3).

Servers (a fresh one per phase):

    m0serve --listen 127.0.0.1:P --chdir fixtures/pep3333 --mount /=body_apps:application
    m0serve --listen 127.0.0.1:P --chdir fixtures/djangoproj --mount /=djangoproj.wsgi:application

fixtures/pep3333/body_apps.py answers on every shape (a list, an iterator,
write()) with bodies that match, exceed or fall short of their
Content-Length, each app wrapped in wsgiref.validate.validator. The rule
checked: never a byte past the declared length (the next answer on the
connection starts clean, the server stops iterating), a body short of it
closes the connection and is logged, and the access log shows the bytes
that went. The Django phase serves a FileResponse whose file grows or
shrinks between the response's making and its sending.
"""

import os
import shutil
import socket
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from m0smoke import DJANGO_ARGS, Smoke, build_request, check, short  # noqa: E402

SCRIPT = "15-wsgi-body"
APP_ARGS = ["--chdir", "fixtures/pep3333", "--mount", "/=body_apps:application"]

smoke = Smoke(SCRIPT, __doc__)


def own_server(ctx, args, why, **kw):
    srv = ctx.server(args, **kw)
    srv.require_own(why)
    return srv


def asked(c):
    r = c.request("GET", "/asked")
    check(r.status == 200, "/asked: %s" % r.summary())
    return r.json()


def then_clean(c, what):
    """The next answer on connection c is whole and starts where it should."""
    r = c.request("GET", "/exact-list")
    check(r.status == 200 and r.body == b"hello world",
          "%s: the next answer on the connection is %s %s" % (what, r.summary(), short(r.body)))
    check(not c.pending(), "%s: bytes after the next answer: %s" % (what, short(c.buf)))


def file_server(ctx, extra=()):
    """A Django server whose length views write their files to a folder of
    this phase's own; (server, folder)."""
    folder = tempfile.mkdtemp(prefix="m0-smoke15-")
    ctx.finalizers.append(lambda: shutil.rmtree(folder, ignore_errors=True))
    srv = own_server(ctx, DJANGO_ARGS + list(extra), "this phase serves files from its own folder",
                     env={"M0_LENGTH_DIR": folder})
    return srv, folder


def wait_log(srv, text, what, timeout=5.0):
    deadline = time.monotonic() + timeout
    while text not in srv.log_text():
        check(time.monotonic() < deadline, "%s: no %r in the server's log" % (what, text))
        time.sleep(0.05)


@smoke.phase(1, "bodies that match their Content-Length, as a list, an iterator and write(), "
                "and a chunked stream, all on one keep-alive connection")
def phase1(ctx):
    srv = ctx.server(APP_ARGS)
    c = ctx.connect(srv)
    for path, want in (("/exact-list", b"hello world"), ("/exact-iter", b"hello world"),
                       ("/exact-write", b"hello world"), ("/stream", b"one;two;three")):
        r = c.request("GET", path)
        check(r.status == 200 and r.body == want, "%s: %s %s" % (path, r.summary(), short(r.body)))
        if path == "/stream":
            check(r.framing == "chunked", "/stream: framed by %s, want chunked" % r.framing)
        else:
            check(r.header("content-length") == "11", "%s: Content-Length %r" % (path, r.header("content-length")))
    then_clean(c, "after the exact bodies")


@smoke.phase(2, "a body longer than its Content-Length (list, iterator, write()) goes out cut at it; the "
                "next answer on the connection starts clean; the server stops iterating and logs it")
def phase2(ctx):
    srv = own_server(ctx, APP_ARGS, "this phase reads the server's log")
    c = ctx.connect(srv)
    asked(c)
    for path, declared, want in (("/over-list", 5, b"12345"), ("/over-iter", 15, b"0123456789ABCDE"),
                                 ("/over-write", 4, b"abcd")):
        r = c.request("GET", path)
        check(r.status == 200 and r.header("content-length") == str(declared) and r.body == want,
              "%s: %s %s, want %d bytes %r" % (path, r.summary(), short(r.body), declared, want))
        then_clean(c, path)
        wait_log(srv, "GET %s: the body went past its Content-Length %d" % (path, declared), path)
    # Two items taken from /over-iter (the second completed the length), not the third;
    # the counted items of the clean answers do not count here.
    check(asked(c) == ["0123456789", "ABCDEFGHIJ"], "the server asked /over-iter for more than it sends")


@smoke.phase(3, "a body shorter than its Content-Length (list, iterator) goes out with that length, then the "
                "connection closes (a request pipelined behind it is not answered from a wrong offset); "
                "logged, and the access log shows the bytes that went")
def phase3(ctx):
    folder = tempfile.mkdtemp(prefix="m0-smoke15-")
    ctx.finalizers.append(lambda: shutil.rmtree(folder, ignore_errors=True))
    access = os.path.join(folder, "access.log")
    srv = own_server(ctx, APP_ARGS + ["--access-log", access], "this phase reads the server's logs")
    for path in ("/short-list", "/short-iter"):
        c = ctx.connect(srv)
        c.send(build_request("GET", path) + build_request("GET", "/exact-list"))
        head = c.read_head()
        check(head.status == 200 and head.header("content-length") == "100",
              "%s: head %s, want 200 with its Content-Length 100" % (path, head.summary()))
        check(c.wait_eof(5.0), "%s: the connection stayed open after a body short of its length" % path)
        check(c.buf == b"0123456789", "%s: after the head came %s, want the 10 bytes there were" % (
            path, short(c.buf)))
        wait_log(srv, "GET %s: the body ended at 10 of its Content-Length 100 bytes" % path, path)
        # The server keeps serving.
        d = ctx.connect(srv)
        then_clean(d, "after " + path)
    deadline = time.monotonic() + 5
    lines = []
    while time.monotonic() < deadline:
        with open(access) as f:
            lines = [l for l in f if '"GET /short-' in l]
        if len(lines) == 2:
            break
        time.sleep(0.05)
    check(len(lines) == 2, "the access log has %d lines for the short bodies, want 2" % len(lines))
    for line in lines:
        fields = line.split('"')[2].split()
        status, size = int(fields[0]), int(fields[1])
        check(status == 200, "access log: status %d: %s" % (status, line.strip()))
        # The head (a few hundred bytes) and 10 of the 100 body bytes, not head + 100.
        check(100 < size < 400, "access log: %d bytes for a head and 10 body bytes: %s" % (size, line.strip()))


@smoke.phase(4, "HEAD on a streamed answer without a length keeps the connection: the request pipelined "
                "behind it is answered; a 204 streamed from an iterator frames nothing")
def phase4(ctx):
    srv = ctx.server(APP_ARGS)
    c = ctx.connect(srv)
    c.send(build_request("HEAD", "/stream") + build_request("GET", "/no-content") +
           build_request("GET", "/exact-iter"))
    h = c.read_response("HEAD")
    check(h.status == 200 and not h.has("transfer-encoding") and not h.has("content-length"),
          "HEAD /stream: %s, want 200 with no framing" % h.summary())
    check(h.header("connection") != "close", "HEAD /stream: Connection: close")
    n = c.read_response("GET")
    check(n.status == 204 and not n.has("transfer-encoding") and not n.has("content-length"),
          "/no-content: %s, want 204 with no framing" % n.summary())
    r = c.read_response("GET")
    check(r.status == 200 and r.body == b"hello world",
          "the request pipelined behind HEAD and 204: %s %s" % (r.summary(), short(r.body)))
    then_clean(c, "after HEAD on a stream")


@smoke.phase(5, "Django FileResponse on a file that grows after the response was made goes out at the length "
                "it declared; one that shrinks closes the connection after what there is")
def phase5(ctx):
    srv, folder = file_server(ctx)
    c = ctx.connect(srv)
    want = bytes(i % 251 for i in range(65536))
    for path in ("/length/same", "/length/grow"):
        r = c.request("GET", path)
        check(r.status == 200 and r.header("content-length") == "65536" and r.body == want,
              "%s: %s, %d bytes (want the 65536 declared)" % (path, r.summary(), len(r.body)))
        r = c.request("GET", "/hello")
        check(r.status == 200, "%s: the next answer on the connection is %s %s" % (path, r.summary(),
                                                                                   short(r.body)))
    c.send(build_request("GET", "/length/shrink") + build_request("GET", "/hello"))
    head = c.read_head()
    check(head.status == 200 and head.header("content-length") == "65536",
          "/length/shrink: head %s" % head.summary())
    check(c.wait_eof(5.0), "/length/shrink: the connection stayed open after a body short of its length")
    check(c.buf == want[:1000], "/length/shrink: %d bytes after the head, want the 1000 the file kept" %
          len(c.buf))


def pattern(n):
    block = bytes(i % 251 for i in range(251 * 1024))
    return (block * (n // len(block) + 1))[:n]


@smoke.phase(6, "wsgi.file_wrapper: Django's FileResponse is offered it, the file arrives whole (1 MiB), on a "
                "kept connection, and the response's close() runs, also when the client leaves midway")
def phase6(ctx):
    srv, folder = file_server(ctx)
    c = ctx.connect(srv)
    r = c.request("GET", "/length/same?size=%d&closed=whole" % (1 << 20), timeout=20)
    check(r.status == 200 and r.header("x-file-wrapper") == "yes",
          "FileResponse: %s, X-File-Wrapper %r (want yes: the environ offers wsgi.file_wrapper)" % (
              r.summary(), r.header("x-file-wrapper")))
    check(r.body == pattern(1 << 20), "FileResponse: %d bytes, not the file's 1 MiB" % len(r.body))
    r = c.request("GET", "/hello")
    check(r.status == 200, "the next answer on the connection: %s" % r.summary())
    check(os.path.exists(os.path.join(folder, "closed-whole")), "the FileResponse's close() did not run")
    # 64 MiB, and the client leaves after the head.
    d = ctx.connect(srv)
    d.send(build_request("GET", "/length/same?size=%d&closed=left" % (64 << 20)))
    head = d.read_head(20)
    check(head.status == 200 and head.header("content-length") == str(64 << 20), "64 MiB: %s" % head.summary())
    d.close()
    deadline = time.monotonic() + 10
    while not os.path.exists(os.path.join(folder, "closed-left")):
        check(time.monotonic() < deadline, "the FileResponse's close() did not run after the client left")
        time.sleep(0.05)
    r = ctx.connect(srv).request("GET", "/hello")
    check(r.status == 200, "after a client left midway: %s" % r.summary())


@smoke.phase(7, "wsgi.file_wrapper keeps no pool thread: with one Python thread, a 64 MiB file to a client that "
                "does not read leaves the thread free for the next request")
def phase7(ctx):
    srv, _ = file_server(ctx, ["--blocking-threads", "1"])
    stalled = ctx.connect(srv)
    stalled.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    stalled.send(build_request("GET", "/length/same?size=%d" % (64 << 20)))
    stalled.read_head(20)
    t0 = time.monotonic()
    r = ctx.connect(srv).request("GET", "/hello", timeout=15)
    took = time.monotonic() - t0
    check(r.status == 200, "/hello while a file waits for its reader: %s" % r.summary())
    # Reading the file in Python would keep the one thread until --write-timeout (60 s).
    check(took < 10, "/hello took %.1f s behind a stalled file transfer" % took)


if __name__ == "__main__":
    sys.exit(smoke.main())
