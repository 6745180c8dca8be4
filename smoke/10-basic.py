#!/usr/bin/python3
"""smoke-basic: HTTP/1.1 behaviour of m0serve serving the fixture Django
project and the built-in mojo mount, its limits, its errors and its
command line.

Server (a fresh one per phase; limit phases add the one limit they test):

    m0serve --listen 127.0.0.1:P --chdir fixtures/djangoproj \\
            --mount /=djangoproj.wsgi:application --mount /native=mojo

The validator phase mounts djangoproj.wsgi:validated_application (wsgiref's
PEP 3333 checker) instead; the /boom phase sets DJANGO_PROPAGATE_EXCEPTIONS=1
so the view's exception reaches the server.
"""

import json
import os
import re
import shutil
import signal
import socket
import stat
import struct
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import emit  # noqa: E402
from m0smoke import (  # noqa: E402
    DJANGO_ARGS, HOST, LOG_DIR, ROOT, Conn, Fail, Server, Smoke, build_request, check, check_error,
    check_server_headers, chunked, form_body, free_port, free_ports, http, metric, metrics, sha256, short,
    wait_metric)

SCRIPT = "10-basic"
MIB = 1 << 20

smoke = Smoke(SCRIPT, __doc__)


def payload(n, seed=7):
    """n deterministic bytes covering every byte value."""
    out = bytearray(n)
    x = seed
    for i in range(n):
        x = (x * 1103515245 + 12345) & 0x7FFFFFFF
        out[i] = (x >> 16) & 0xFF
    return bytes(out)


def check_echo(r, body, what):
    check(r.status == 200, "%s: %s %s" % (what, r.summary(), short(r.body, 160)))
    j = r.json()
    check(j.get("body_length") == len(body), "%s: body_length %r, want %d" % (what, j.get("body_length"), len(body)))
    check(j.get("body_sha256") == sha256(body), "%s: body_sha256 differs (server saw other bytes)" % what)
    return j


def server(ctx, extra=(), **kw):
    return ctx.server(DJANGO_ARGS + list(extra), **kw)


@smoke.phase(1, "Django index: 200 with Date and Server: m0serve/0.1.0")
def phase1(ctx):
    srv = server(ctx)
    r = http(srv.addr, "GET", "/")
    check(r.status == 200, "GET /: %s %s" % (r.summary(), short(r.body, 160)))
    check_server_headers(r)
    check(b"m0serve demo" in r.body, "GET / body is not the demo page: %s" % short(r.body, 160))
    r = http(srv.addr, "GET", "/native/hello")
    check_server_headers(r)
    if not srv.reused:
        line = "m0serve: listening on %s:%d" % srv.addr
        check(line in srv.log_text(), "no start-up line %r in the log" % line)


@smoke.phase(2, "CSRF form round trip: csrftoken, POST with token -> 303 + sessionid, GET shows the note")
def phase2(ctx):
    srv = server(ctx)
    c = ctx.connect(srv)
    r = c.request("GET", "/form")
    check(r.status == 200, "GET /form: %s" % r.summary())
    token_cookie = r.cookies().get("csrftoken")
    check(token_cookie, "GET /form set no csrftoken cookie (Set-Cookie %r)" % r.all("set-cookie"))
    m = re.search(rb'name="csrfmiddlewaretoken" value="([^"]+)"', r.body)
    check(m, "no csrfmiddlewaretoken in the form HTML")
    token = m.group(1).decode()
    note = "smoke-note-%d" % os.getpid()
    ct = ("Content-Type", "application/x-www-form-urlencoded")
    # Without the token: CSRF refuses (the middleware really runs).
    r = c.request("POST", "/form", [ct, ("Cookie", "csrftoken=%s" % token_cookie)],
                  form_body({"note": "no token"}))
    check(r.status == 403, "POST /form without the token: want 403, got %s" % r.summary())
    r = c.request("POST", "/form", [ct, ("Cookie", "csrftoken=%s" % token_cookie)],
                  form_body({"csrfmiddlewaretoken": token, "note": note}))
    check(r.status == 303, "POST /form with the token: want 303, got %s %s" % (r.summary(), short(r.body, 160)))
    check((r.header("location") or "").endswith("/form"), "303 Location %r" % r.header("location"))
    session = r.cookies().get("sessionid")
    check(session, "POST /form set no sessionid cookie (Set-Cookie %r)" % r.all("set-cookie"))
    r = c.request("GET", "/form", [("Cookie", "csrftoken=%s; sessionid=%s" % (token_cookie, session))])
    check(r.status == 200, "GET /form with the session: %s" % r.summary())
    check(('<span id="note">%s</span>' % note).encode() in r.body,
          "GET /form does not show the saved note %r" % note)


@smoke.phase(3, "1 MiB upload to /echo (Content-Length) echoed intact")
def phase3(ctx):
    srv = server(ctx)
    body = payload(MIB)
    r = http(srv.addr, "POST", "/echo", [("Content-Type", "application/octet-stream")], body, timeout=20)
    j = check_echo(r, body, "POST /echo 1 MiB")
    check(j["body"].encode("latin-1") == body, "echoed body differs")
    check(j["environ"].get("CONTENT_LENGTH") == str(MIB), "CONTENT_LENGTH %r" % j["environ"].get("CONTENT_LENGTH"))


@smoke.phase(4, "chunked request body to /echo echoed intact")
def phase4(ctx):
    srv = server(ctx)
    body = payload(300001, seed=11)
    sizes = [1, 15, 16, 4095, 4096, 65537, 100000]
    parts, off = [], 0
    for s in sizes:
        parts.append(body[off:off + s])
        off += s
    parts.append(body[off:])
    raw = chunked(parts, ext=";name=value")
    c = ctx.connect(srv)
    c.send(build_request("POST", "/echo", [("Transfer-Encoding", "chunked"),
                                           ("Content-Type", "application/octet-stream")]) + raw)
    r = c.read_response("POST", 20)
    check_echo(r, body, "chunked POST /echo")
    # The connection stays usable after a chunked body.
    r = c.request("GET", "/native/hello")
    check(r.status == 200 and r.body == b"hello from mojo\n", "request after the chunked one: %s" % r.summary())


@smoke.phase(5, "Expect: 100-continue: interim 100 before the body, then the 1 MiB echo")
def phase5(ctx):
    srv = server(ctx)
    body = payload(MIB, seed=3)
    c = ctx.connect(srv)
    c.send(build_request("POST", "/echo", [("Expect", "100-continue"), ("Content-Length", str(MIB))]))
    interim = c.read_head(3.0)
    check(interim.status == 100, "want the interim 100 before the body, got %s" % interim.summary())
    check(interim.raw_head.startswith(b"HTTP/1.1 100"), "interim status line %s" % short(interim.raw_head))
    c.send(body, timeout=20)
    r = c.read_response("POST", 20)
    check_echo(r, body, "POST /echo after 100-continue")


@smoke.phase(6, "keep-alive: 3 pipelined requests in one send answered in order")
def phase6(ctx):
    srv = server(ctx)
    c = ctx.connect(srv)
    # The first is slow (WSGI pool), the second fast (mojo pool): the
    # answers must still come in request order.
    c.send(build_request("GET", "/slow?s=0.3") + build_request("GET", "/native/echo?n=2")
           + build_request("GET", "/native/hello"))
    r1 = c.read_response("GET", 5)
    r2 = c.read_response("GET", 5)
    r3 = c.read_response("GET", 5)
    check(r1.status == 200 and r1.json().get("slept") == 0.3, "1st answer is not /slow: %s %s" % (
        r1.summary(), short(r1.body)))
    check(r2.status == 200 and r2.json().get("query") == "n=2", "2nd answer is not /native/echo?n=2: %s %s" % (
        r2.summary(), short(r2.body)))
    check(r3.status == 200 and r3.body == b"hello from mojo\n", "3rd answer is not /native/hello: %s %s" % (
        r3.summary(), short(r3.body)))
    check(not c.wait_eof(0.3), "the server closed a keep-alive connection")
    r4 = c.request("GET", "/native/hello")
    check(r4.status == 200, "4th request on the same connection: %s" % r4.summary())


@smoke.phase(7, "HTTP/1.0: closes after the answer; with Connection: keep-alive stays open")
def phase7(ctx):
    srv = server(ctx)
    c = ctx.connect(srv)
    c.send(b"GET / HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n")
    r = c.read_response("GET", 5)
    check(r.status == 200, "HTTP/1.0 GET /: %s" % r.summary())
    check(r.framing != "chunked", "chunked answer to an HTTP/1.0 request")
    check(c.wait_eof(3.0), "the server kept an HTTP/1.0 connection open")
    c = ctx.connect(srv)
    c.send(b"GET /native/hello HTTP/1.0\r\nHost: 127.0.0.1\r\nConnection: keep-alive\r\n\r\n")
    r = c.read_response("GET", 5)
    check(r.status == 200 and r.body == b"hello from mojo\n", "HTTP/1.0 keep-alive: %s" % r.summary())
    check(not c.wait_eof(0.3), "HTTP/1.0 with Connection: keep-alive was closed")
    c.send(b"GET /native/hello HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n")
    r = c.read_response("GET", 5)
    check(r.status == 200, "second HTTP/1.0 request on the kept connection: %s" % r.summary())
    check(c.wait_eof(3.0), "HTTP/1.0 request without keep-alive did not close")


@smoke.phase(8, "HEAD has no body (Django and mojo), the connection goes on")
def phase8(ctx):
    srv = server(ctx)
    c = ctx.connect(srv)
    for path in ("/echo", "/native/hello"):
        c.send(build_request("HEAD", path) + build_request("GET", "/native/echo?after=head"))
        h = c.read_response("HEAD", 5)
        check(h.status == 200, "HEAD %s: %s" % (path, h.summary()))
        check_server_headers(h)
        r = c.read_response("GET", 5)
        check(r.status == 200 and r.json().get("query") == "after=head",
              "HEAD %s left bytes on the wire: the next answer is %s %s" % (path, r.summary(), short(r.body)))
    c.send(build_request("HEAD", "/native/hello"))
    h = c.read_response("HEAD", 5)
    cl = h.header("content-length")
    check(cl in (None, "16"), "HEAD /native/hello Content-Length %r, want 16 (as GET) or none" % cl)
    check(c.pending() == b"", "bytes after a HEAD answer: %s" % short(c.buf))


@smoke.phase(9, "/native/hello: 200 text/plain 'hello from mojo'")
def phase9(ctx):
    srv = server(ctx)
    r = http(srv.addr, "GET", "/native/hello")
    check(r.status == 200, "GET /native/hello: %s" % r.summary())
    check((r.header("content-type") or "").split(";")[0] == "text/plain",
          "Content-Type %r" % r.header("content-type"))
    check(r.body == b"hello from mojo\n", "body %s" % short(r.body))
    check_server_headers(r)


@smoke.phase(10, "/native/echo: JSON method, path, query, lowercased headers, body")
def phase10(ctx):
    srv = server(ctx)
    body = b'{"a": 1, "text": "plain ascii"}'
    r = http(srv.addr, "POST", "/native/echo?x=1&y=two", [("X-Smoke-Test", "Value One"),
                                                           ("Content-Type", "application/json")], body)
    check(r.status == 200, "POST /native/echo: %s" % r.summary())
    check((r.header("content-type") or "").split(";")[0] == "application/json",
          "Content-Type %r" % r.header("content-type"))
    j = r.json()
    check(j.get("method") == "POST", "method %r" % j.get("method"))
    check(j.get("path") == "/echo", "path %r, want '/echo' (PATH_INFO under /native)" % j.get("path"))
    check(j.get("query") == "x=1&y=two", "query %r" % j.get("query"))
    h = j.get("headers") or {}
    check(h.get("x-smoke-test") == "Value One", "headers['x-smoke-test'] %r (headers %s)" % (
        h.get("x-smoke-test"), short(h)))
    check(all(k == k.lower() for k in h), "header names not lowercased: %r" % list(h))
    check(j.get("body") == body.decode(), "body %r" % j.get("body"))
    r = http(srv.addr, "GET", "/native/echo")
    j = r.json()
    check(j.get("method") == "GET" and j.get("query") == "" and j.get("body") == "",
          "GET /native/echo: %s" % short(j))


@smoke.phase(11, "431: a head over --max-header-size 4096, then close")
def phase11(ctx):
    srv = server(ctx, ["--max-header-size", "4096"])
    r = http(srv.addr, "GET", "/native/hello", [("X-Small", "a" * 2000)])
    check(r.status == 200, "a 2 KB head under the limit: %s" % r.summary())
    c = ctx.connect(srv)
    c.send(build_request("GET", "/native/hello", [("X-Big", "a" * 8000)]))
    r = c.read_response("GET", 5)
    check_error(r, 431, "8 KB head")
    check_server_headers(r)
    check(c.wait_eof(3.0), "connection not closed after 431")


@smoke.phase(12, "413: a body over --max-body-size 1024 with Content-Length, then close")
def phase12(ctx):
    srv = server(ctx, ["--max-body-size", "1024"])
    ok = payload(1024)
    check_echo(http(srv.addr, "POST", "/echo", [], ok), ok, "1024-byte body at the limit")
    c = ctx.connect(srv)
    c.send(build_request("POST", "/echo", [], payload(2048)))
    r = c.read_response("POST", 5)
    check_error(r, 413, "2048-byte body")
    check(c.wait_eof(3.0), "connection not closed after 413")


@smoke.phase(13, "413 with Expect: 100-continue comes before the body is sent (no 100)")
def phase13(ctx):
    srv = server(ctx, ["--max-body-size", "1024"])
    c = ctx.connect(srv)
    c.send(build_request("POST", "/echo", [("Expect", "100-continue"), ("Content-Length", "2048")]))
    r = c.read_response("POST", 3)
    check(r.status != 100, "got 100 Continue for a body over the limit")
    check_error(r, 413, "Expect: 100-continue with Content-Length 2048")
    check(c.wait_eof(3.0), "connection not closed after 413")


@smoke.phase(14, "413: a chunked body growing past --max-body-size 1024")
def phase14(ctx):
    srv = server(ctx, ["--max-body-size", "1024"])
    c = ctx.connect(srv)
    c.send(build_request("POST", "/echo", [("Transfer-Encoding", "chunked")])
           + chunked([payload(700), payload(700, 5)]))
    r = c.read_response("POST", 5)
    check_error(r, 413, "chunked 1400 bytes")
    check(c.wait_eof(3.0), "connection not closed after 413")


@smoke.phase(15, "408: a partial head past --header-timeout 1, then close")
def phase15(ctx):
    srv = server(ctx, ["--header-timeout", "1"])
    c = ctx.connect(srv)
    t0 = time.monotonic()
    c.send(b"GET /native/hello HTTP/1.1\r\nHost: 127.0.0.1\r\n")
    r = c.read_response("GET", 5)
    took = time.monotonic() - t0
    check_error(r, 408, "partial head")
    check(0.7 <= took <= 3.5, "408 after %.2fs with --header-timeout 1" % took)
    check(c.wait_eof(3.0), "connection not closed after 408")


@smoke.phase(16, "keep-alive idle close: --keepalive-timeout 1 closes an idle connection within ~3 s")
def phase16(ctx):
    srv = server(ctx, ["--keepalive-timeout", "1"])
    c = ctx.connect(srv)
    r = c.request("GET", "/native/hello")
    check(r.status == 200, "GET /native/hello: %s" % r.summary())
    t0 = time.monotonic()
    closed = c.wait_eof(3.5)
    took = time.monotonic() - t0
    check(closed, "idle keep-alive connection still open after %.1fs" % took)
    check(took >= 0.5, "closed after only %.2fs with --keepalive-timeout 1" % took)
    check(c.buf == b"", "bytes sent on the idle close: %s" % short(c.buf))


@smoke.phase(17, "--max-connections 2: a third connection gets 503 and close; a slot freed is reusable")
def phase17(ctx):
    srv = server(ctx, ["--max-connections", "2"])
    # The start-up probe's connection (closed by this client) may not be
    # reaped yet: retry a refused first or second connection for a while
    # (a refused one is closed by the server, so it counts no more).
    def served_conn(which):
        r = None
        deadline = time.monotonic() + 3.0
        for _ in range(60):
            c = ctx.connect(srv)
            try:
                c.read_until(lambda b: b"\r\n\r\n" in b, 0.05)
                if not c.buf:
                    r = c.request("GET", "/native/hello")
                    if r.status == 200:
                        return c
                else:
                    r = c.read_response("GET", 3)
            except Fail as e:
                r = e
            c.close()
            if time.monotonic() > deadline:
                break
            time.sleep(0.05)
        raise Fail("the %s of 2 connections is not served: %s" % (
            which, r.summary() if hasattr(r, "summary") else r))
    a = served_conn("first")
    b = served_conn("second")
    c = ctx.connect(srv)
    # The 503 may come at accept, before any request: read first, so a
    # request sent into a closed socket cannot reset the answer away.
    c.read_until(lambda b: b"\r\n\r\n" in b, 1.0)
    if not c.buf and not c.eof:
        try:
            c.send(build_request("GET", "/native/hello"))
        except Fail:
            pass
    r = c.read_response("GET", 5)
    check_error(r, 503, "third connection")
    check(c.wait_eof(3.0), "third connection not closed after 503")
    r = a.request("GET", "/native/hello")
    check(r.status == 200, "first connection after the refusal: %s" % r.summary())
    b.close()

    def fourth():
        d = Conn(srv.addr)
        try:
            return d.request("GET", "/native/hello").status == 200
        except Fail:
            return False
        finally:
            d.close()
    deadline = time.monotonic() + 3.0
    for _ in range(30):
        if fourth():
            return
        if time.monotonic() > deadline:
            break
        time.sleep(0.1)
    raise Fail("after one of two connections closed, a new one is still refused")


def bad_request(ctx, srv, raw, what):
    c = ctx.connect(srv)
    c.send(raw)
    r = c.read_response("POST", 5)
    check_error(r, 400, what)
    check_server_headers(r)
    check(c.wait_eof(3.0), "%s: connection not closed after 400" % what)


@smoke.phase(18, "400 and close for a malformed request line")
def phase18(ctx):
    srv = server(ctx)
    bad_request(ctx, srv, b"this is not http\r\n\r\n", "garbage request line")
    bad_request(ctx, srv, b"GET /native/hello HTTP/1.1 extra\r\nHost: x\r\n\r\n", "request line with 4 parts")


@smoke.phase(19, "400 for Content-Length with Transfer-Encoding")
def phase19(ctx):
    srv = server(ctx)
    bad_request(ctx, srv, build_request("POST", "/echo", [("Content-Length", "5"),
                                                          ("Transfer-Encoding", "chunked")])
                + b"5\r\nhello\r\n0\r\n\r\n", "CL + TE")


@smoke.phase(20, "400 for two differing Content-Lengths")
def phase20(ctx):
    srv = server(ctx)
    bad_request(ctx, srv, build_request("POST", "/echo", [("Content-Length", "5"), ("Content-Length", "6")])
                + b"hello!", "Content-Length 5 and 6")


@smoke.phase(21, "400 for a bad chunk size")
def phase21(ctx):
    srv = server(ctx)
    bad_request(ctx, srv, build_request("POST", "/echo", [("Transfer-Encoding", "chunked")])
                + b"zz\r\nhello\r\n0\r\n\r\n", "chunk size 'zz'")


@smoke.phase(22, "/boom -> 500 (text/plain, traceback logged), the next request on a new connection is 200")
def phase22(ctx):
    srv = server(ctx, env={"DJANGO_PROPAGATE_EXCEPTIONS": "1"})
    r = http(srv.addr, "GET", "/boom")
    check_error(r, 500, "GET /boom")
    check_server_headers(r)
    r = http(srv.addr, "GET", "/")
    check(r.status == 200, "GET / after /boom: %s" % r.summary())
    if not srv.reused:
        log = srv.log_text()
        check("Traceback" in log and "RuntimeError: boom" in log,
              "the server log has no traceback of RuntimeError('boom')")


@smoke.phase(23, "/stream-generator: chunked on HTTP/1.1, streamed as yielded; close-delimited on HTTP/1.0")
def phase23(ctx):
    srv = server(ctx)
    want = b"".join(b"chunk %d\n" % n for n in range(1, 6))
    c = ctx.connect(srv)
    c.send(build_request("GET", "/stream-generator?delay=0.2"))
    head = c.read_head(5)
    check(head.status == 200, "GET /stream-generator: %s" % head.summary())
    check(head.header("transfer-encoding") == "chunked", "Transfer-Encoding %r, want chunked" %
          head.header("transfer-encoding"))
    check(not head.has("content-length"), "a chunked answer with Content-Length")
    c.read_until(lambda b: b"chunk 1\n" in b, 3)
    t1 = time.monotonic()
    check(b"chunk 1\n" in c.buf, "first chunk not received: %s" % short(c.buf))
    check(b"chunk 5\n" not in c.buf, "all chunks arrived together: the body was not streamed")
    r = c.read_body(head, "GET", 5)
    t5 = time.monotonic()
    check(r.body == want, "decoded body %s, want %s" % (short(r.body), short(want)))
    check(t5 - t1 >= 0.5, "chunks 1..5 arrived within %.2fs; they are 0.2s apart" % (t5 - t1))
    r = c.request("GET", "/native/hello")
    check(r.status == 200, "request after the chunked answer: %s" % r.summary())
    c = ctx.connect(srv)
    c.send(b"GET /stream-generator HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n")
    r = c.read_response("GET", 5)
    check(r.framing in ("close", "length"), "HTTP/1.0 answer framed %r" % r.framing)
    check(r.body == want, "HTTP/1.0 body %s" % short(r.body))


@smoke.phase(24, "wsgiref validator app: /, /echo POST, /form, /stream-generator with no validator error logged")
def phase24(ctx):
    srv = ctx.server(["--chdir", "fixtures/djangoproj", "--mount", "/=djangoproj.wsgi:validated_application",
                      "--mount", "/native=mojo"])
    c = ctx.connect(srv)
    r = c.request("GET", "/")
    check(r.status == 200, "validated GET /: %s" % r.summary())
    body = payload(100000, seed=5)
    check_echo(c.request("POST", "/echo", [("Content-Type", "application/octet-stream")], body, 10), body,
               "validated POST /echo")
    check_echo(c.request("POST", "/echo?q=1", [("Transfer-Encoding", "chunked")], chunked([body[:500], body[500:]]),
                         10, auto_length=False), body, "validated chunked POST /echo")
    r = c.request("GET", "/form")
    check(r.status == 200, "validated GET /form: %s" % r.summary())
    r = c.request("GET", "/stream-generator")
    check(r.status == 200 and r.body == b"".join(b"chunk %d\n" % n for n in range(1, 6)),
          "validated /stream-generator: %s %s" % (r.summary(), short(r.body)))
    r = c.request("HEAD", "/echo")
    check(r.status == 200, "validated HEAD /echo: %s" % r.summary())
    # Django logs a 404 to Python's sys.stderr: its line in the server log
    # shows the grep below can see what the validator would print.
    r = c.request("GET", "/no-such-page-smoke")
    check(r.status == 404, "validated GET /no-such-page-smoke: %s" % r.summary())
    c.close()
    if srv.reused:
        return
    srv.stop()
    log = srv.log_text()
    check("Not Found: /no-such-page-smoke" in log,
          "Python's stderr does not reach the server log (no Django 404 line); the validator grep would be blind")
    for word in ("AssertionError", "WSGIWarning", "Traceback"):
        check(word not in log, "the server log has %r: %s" % (word, short(
            [l for l in log.splitlines() if word in l][:3])))


def bad_flag(ctx, args, what, timeout=20.0):
    rc, out, err = ctx.run_binary(args, timeout, label="%s-phase%d-%s" % (SCRIPT, ctx.number, what))
    check(rc is not None, "%s: still running after %.0fs" % (what, timeout))
    lines = [l for l in err.splitlines() if l.strip()]
    check(rc == 2, "%s: exit code %r, want 2 (stderr %s)" % (what, rc, short(err)))
    check(len(lines) == 1, "%s: %d lines on stderr, want 1: %s" % (what, len(lines), short(err)))
    return lines[0]


@smoke.phase(25, "bad flags exit 2 with one line on stderr: unknown flag")
def phase25(ctx):
    bad_flag(ctx, ["--listen", "127.0.0.1:%d" % free_port(), "--no-such-flag"] + DJANGO_ARGS, "unknown-flag")
    bad_flag(ctx, ["--listen", "127.0.0.1:%d" % free_port(), "--blocking-threads", "many"] + DJANGO_ARGS,
             "bad-number")
    bad_flag(ctx, ["--listen", "127.0.0.1:%d" % free_port(), "--max-hold-channels", "0"] + DJANGO_ARGS,
             "zero-hold-channels")
    # A near miss names the flag it is nearest to.
    for flag, near in (("--bind", "--listen"), ("--worker", "--workers"), ("--max-hold", "--max-holds")):
        line = bad_flag(ctx, DJANGO_ARGS + [flag, "2"], "near-miss" + flag)
        check("did you mean %s?" % near in line, "%s: the one line: %r" % (flag, line))


@smoke.phase(26, "bad flags exit 2 with one line on stderr: bad mount spec --mount nope")
def phase26(ctx):
    bad_flag(ctx, ["--listen", "127.0.0.1:%d" % free_port(), "--chdir", "fixtures/djangoproj",
                   "--mount", "nope"], "bad-mount")


@smoke.phase(27, "bad flags exit 2 with one line on stderr: unimportable app --mount /=no.such:app")
def phase27(ctx):
    line = bad_flag(ctx, ["--listen", "127.0.0.1:%d" % free_port(), "--chdir", "fixtures/djangoproj",
                          "--mount", "/=no.such:app"], "unimportable")
    check("no.such" in line, "the one line does not name the module: %r" % line)
    check("--log-level debug shows the traceback" in line, "no hint of the traceback: %r" % line)
    # A positional APP is named as the user wrote it, not as a --mount.
    line = bad_flag(ctx, ["--listen", "127.0.0.1:%d" % free_port(), "--chdir", "fixtures/djangoproj",
                          "no.such"], "unimportable-app")
    check("for APP no.such:" in line and "--mount" not in line, "the one line: %r" % line)
    # With --log-level debug the exception is logged whole instead of the hint.
    rc, _, err = ctx.run_binary(["--listen", "127.0.0.1:%d" % free_port(), "--chdir", "fixtures/djangoproj",
                                 "--log-level", "debug", "no.such"])
    check(rc == 2 and "m0serve: error: cannot import no.such\n  | ModuleNotFoundError" in err
          and "shows the traceback" not in err, "--log-level debug: rc %r, stderr %s" % (rc, short(err, 600)))


@smoke.phase(28, "bad flags exit 2 with one line on stderr: port in use, also by another process's SO_REUSEPORT socket")
def phase28(ctx):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        s.bind((HOST, 0))
        s.listen(1)
        port = s.getsockname()[1]
        bad_flag(ctx, ["--listen", "127.0.0.1:%d" % port] + DJANGO_ARGS, "port-in-use")
    finally:
        s.close()
    # Another server with several loops holds its port with SO_REUSEPORT,
    # which this one's loops would take too: refused before they bind.
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        s.bind((HOST, 0))
        s.listen(1)
        port = s.getsockname()[1]
        for loops in ("1", "2"):
            line = bad_flag(ctx, ["--listen", "127.0.0.1:%d" % port, "--loops", loops] + DJANGO_ARGS,
                            "port-shared-loops" + loops)
            check("another process listens on it" in line, "--loops %s: the one line: %r" % (loops, line))
    finally:
        s.close()


@smoke.phase(29, "SIGTERM while /slow?s=1 is in flight: it completes 200, the server exits 0")
def phase29(ctx):
    srv = server(ctx)
    srv.require_own("it sends SIGTERM")
    c = ctx.connect(srv)
    c.send(build_request("GET", "/slow?s=1"))
    time.sleep(0.3)
    check(c.pending() == b"", "/slow?s=1 answered within 0.3s")
    srv.terminate()
    r = c.read_response("GET", 5)
    check(r.status == 200 and r.json().get("slept") == 1.0, "in-flight /slow?s=1 after SIGTERM: %s %s" % (
        r.summary(), short(r.body)))
    rc = srv.wait_exit(12.0)
    if rc is None:
        srv.kill()
        raise Fail("the server did not exit within 12s of SIGTERM (killed)")
    check(rc == 0, "the server exited %d after SIGTERM, want 0" % rc)


@smoke.phase(35, "SIGTERM with --grace 1 while /slow?s=6 runs: new connections are refused at once, "
                 "the server exits when the grace period ends, not when the view does")
def phase35(ctx):
    srv = server(ctx, ["--grace", "1"])
    srv.require_own("it sends SIGTERM")
    c = ctx.connect(srv)
    c.send(build_request("GET", "/slow?s=6"))
    time.sleep(0.3)
    t0 = time.monotonic()
    srv.terminate()
    time.sleep(0.2)
    try:
        socket.create_connection(srv.addr, timeout=2).close()
        refused = False
    except ConnectionRefusedError:
        refused = True
    check(refused, "a connection made during the grace period was accepted; the listener must be closed")
    rc = srv.wait_exit(8.0)
    took = time.monotonic() - t0
    if rc is None:
        srv.kill()
        raise Fail("the server did not exit within 8s of SIGTERM (killed)")
    check(rc == 0, "the server exited %d after SIGTERM, want 0" % rc)
    # The view would run until 6 s; the grace period ends at 1 s.
    check(took < 4.0, "the server took %.1fs to exit with --grace 1" % took)


@smoke.phase(30, "mojo refusals: /native/hold without channel -> 400, /native/stream (a stream, not a hold) -> 409")
def phase30(ctx):
    srv = server(ctx, ["--realtime"])
    c = ctx.connect(srv)
    check_error(c.request("GET", "/native/hold"), 400, "/native/hold without channel")
    r = c.request("GET", "/native/stream")
    check_error(r, 409, "/native/stream")
    r = c.request("GET", "/native/hello")
    check(r.status == 200, "/native/hello after the refusals: %s" % r.summary())


def reset(conn):
    """The client leaves with a reset (SO_LINGER 0), which the server sees at once."""
    conn.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    conn.close()


def wait_wsgi_metric(srv, name, at_least, timeout, what):
    """Polls /metrics until name{pool="wsgi"} >= at_least; returns the value."""
    key = '%s{pool="wsgi"}' % name
    deadline = time.monotonic() + timeout
    last = None
    for _ in range(int(timeout / 0.05) + 2):
        last = metric(metrics(srv.admin), key)
        if last >= at_least:
            return last
        if time.monotonic() >= deadline:
            break
        time.sleep(0.05)
    raise Fail("%s: %s is %g, want >= %g (polled %.1fs)" % (what, key, last, at_least, timeout))


@smoke.phase(31, "abandoned requests are not run: 1 blocking thread, 20 clients ask /slow?s=2 and "
                 "reset; a fresh request is answered in seconds, not after 40 s of slow views")
def phase31(ctx):
    abandoned_requests(ctx, reset)


@smoke.phase(36, "abandoned requests are not run when the clients close their sockets (FIN, not "
                 "reset): the server's interim 100 meets a reset and their queued jobs are skipped")
def phase36(ctx):
    abandoned_requests(ctx, lambda c: c.close())


def abandoned_requests(ctx, leave):
    srv = server(ctx, ["--blocking-threads", "1"], admin=True)
    srv.require_own("it needs --blocking-threads 1 and an admin listener")
    n, slow = 20, 2.0
    conns = []
    for i in range(n):
        c = ctx.connect(srv)
        c.send(build_request("GET", "/slow?s=%g&client=%d" % (slow, i)))
        conns.append(c)
    # The first takes the only thread for 2 s; the other 19 wait behind it.
    wait_wsgi_metric(srv, "m0_pool_queued_jobs", n - 1, slow / 2, "%d clients queued" % (n - 1))
    for c in conns:
        leave(c)
    t0 = time.monotonic()
    r = http(srv.addr, "GET", "/slow?s=0", timeout=n * slow)
    took = time.monotonic() - t0
    check(r.status == 200, "the fresh request: %s %s" % (r.summary(), short(r.body, 160)))
    # Only the one running view may delay it; the 19 abandoned ones are not run.
    check(took < n * slow / 4, "the fresh request took %.1fs behind %d abandoned %gs views" % (
        took, n, slow))
    ms = metrics(srv.admin)
    skipped = metric(ms, 'm0_pool_skipped_total{pool="wsgi"}')
    check(skipped == n - 1, "m0_pool_skipped_total{pool=\"wsgi\"} is %g, want %d" % (skipped, n - 1))
    check(metric(ms, 'm0_pool_queue_wait_seconds_count{pool="wsgi"}') >= 2,
          "the queue wait counted fewer than the 2 jobs run")


@smoke.phase(32, "--max-queued 2 with 1 blocking thread: a 4th waiting request is 503 'too many "
                 "queued requests' with Retry-After; the queued three are answered")
def phase32(ctx):
    srv = server(ctx, ["--blocking-threads", "1", "--max-queued", "2"], admin=True)
    srv.require_own("it needs --blocking-threads 1 --max-queued 2 and an admin listener")
    first = ctx.connect(srv)
    first.send(build_request("GET", "/slow?s=1.5"))
    wait_wsgi_metric(srv, "m0_pool_busy_threads", 1, 1.0, "the slow view running")
    queued = []
    for i in range(2):
        c = ctx.connect(srv)
        c.send(build_request("GET", "/slow?s=0&queued=%d" % i))
        queued.append(c)
    wait_wsgi_metric(srv, "m0_pool_queued_jobs", 2, 1.0, "two requests queued")
    c = ctx.connect(srv)
    r = c.request("GET", "/echo")
    check_error(r, 503, "a request past --max-queued 2")
    check(r.body == b"too many queued requests\n", "503 body %s" % short(r.body))
    check(r.header("retry-after") == "1", "Retry-After %r, want '1'" % r.header("retry-after"))
    check(c.wait_eof(3.0), "connection not closed after the 503")
    rejected = metric(metrics(srv.admin), 'm0_pool_rejected_total{pool="wsgi"}')
    check(rejected == 1, "m0_pool_rejected_total{pool=\"wsgi\"} is %g, want 1" % rejected)
    r = first.read_response("GET", 5)
    check(r.status == 200, "the running request: %s" % r.summary())
    for q in queued:
        r = q.read_response("GET", 5)
        check(r.status == 200, "a queued request: %s" % r.summary())
@smoke.phase(33, "bad flags exit 2 with one line on stderr: --max-event-size not below --hold-buffer-limit, "
                 "--max-body-total below --max-body-size; a --max-body-size past the total's default "
                 "raises it")
def phase33(ctx):
    for event, limit in (("65536", "65536"), ("300000", "262144")):
        line = bad_flag(ctx, ["--listen", "127.0.0.1:%d" % free_port(), "--max-event-size", event,
                              "--hold-buffer-limit", limit, "--mount", "/=mojo"],
                        "max-event-size-%s" % event)
        check("--max-event-size" in line and "--hold-buffer-limit" in line,
              "the one line does not name both flags: %r" % line)
    line = bad_flag(ctx, ["--listen", "127.0.0.1:%d" % free_port(), "--max-body-total", "1000000",
                          "--mount", "/=mojo"], "max-body-total")
    check("--max-body-total 1000000" in line and "--max-body-size 16777216" in line,
          "the one line does not name both flags: %r" % line)
    # A configuration that raised --max-body-size before --max-body-total
    # existed still starts: the total's default follows it.
    srv = ctx.server(["--max-body-size", "300000000", "--mount", "/native=mojo"])
    check("body 292968 KiB (292968 KiB in all)" in srv.log_text(),
          "the config line: %s" % short(srv.log_text(), 1500))



def cpu_seconds(pid):
    """utime + stime of a process, in seconds (Linux /proc)."""
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@smoke.phase(34, "out of file descriptors (prlimit --nofile=128): accepting pauses without spinning, logged once, and resumes when fds are free")
def phase34(ctx):
    check(shutil.which("prlimit"), "prlimit (util-linux) is not installed")
    label = "%s-phase%d-1" % (SCRIPT, ctx.number)
    srv = Server(ctx, ctx.binary, ["--mount", "/native=mojo", "--max-connections", "1000"], label)
    srv.require_own("it runs the binary under prlimit")
    srv.argv = ["prlimit", "--nofile=128:128", "--"] + srv.argv  # prlimit execs: same pid
    ctx.servers.append(srv)
    srv.start()
    time.sleep(0.3)  # the start-up probe's connection is closed and reaped
    socks = []
    try:
        # More connections than the server has descriptors: the rest wait in
        # the backlog, and the listening socket stays readable.
        for _ in range(200):
            socks.append(socket.create_connection(srv.addr, timeout=2.0))
        time.sleep(0.5)
        before = cpu_seconds(srv.proc.pid)
        time.sleep(1.0)
        used = cpu_seconds(srv.proc.pid) - before
        check(used < 0.3, "the server used %.2fs of CPU in 1s while out of descriptors (spinning)" % used)
        log = srv.log_text()
        # Once per episode; an episode ends when an accept succeeds (a
        # connection the server closed may free a descriptor meanwhile).
        n = log.count("out of file descriptors: accepting paused")
        resumed = log.count("accepting resumed")
        check(n >= 1 and n == resumed + 1,
              "'out of file descriptors: accepting paused' logged %d times and "
              "'accepting resumed' %d: want once per episode" % (n, resumed))
        check(len(log.splitlines()) < 40, "%d log lines while out of descriptors: %s" % (
            len(log.splitlines()), short(log[-400:])))
    finally:
        for s in socks:
            s.close()
    deadline = time.monotonic() + 5.0
    while True:
        try:
            r = http(srv.addr, "GET", "/native/hello", timeout=2.0)
            if r.status == 200:
                break
        except (OSError, Fail):
            pass
        check(time.monotonic() < deadline, "no 200 from /native/hello within 5s of freeing the descriptors")
        time.sleep(0.1)
    check("accepting resumed" in srv.log_text(), "no 'accepting resumed' in the log")
    check("--max-connections 1000 is more than the file descriptor limit" in srv.log_text(),
          "no start-up warning that --max-connections passes the fd limit")


@smoke.phase(37, "a client that pipelines for 4 s and never reads costs the server bounded memory "
                 "(the RSS growth recorded as pipeline-unread-rss-growth-kib; limit 32 MiB, 96 under a "
                 "sanitizer)")
def phase37(ctx):
    # Under AddressSanitizer freed memory waits in a quarantine (256 MiB by
    # default) before it is reused, which reads as growth here: this server
    # alone runs without one, so the bound is the server's, not ASan's.
    env = None
    if "ASAN_OPTIONS" in os.environ:
        env = {"ASAN_OPTIONS": os.environ["ASAN_OPTIONS"] + ":quarantine_size_mb=0"}
    srv = server(ctx, env=env)
    # A sanitizer's shadow memory and allocator add to RSS what the server
    # does not keep: a looser bound there (one unbounded buffer grows by
    # hundreds of MiB in 4 s on loopback, so it still bites).
    sanitized = any(v in os.environ for v in ("ASAN_OPTIONS", "TSAN_OPTIONS"))
    limit_mib = 96 if sanitized else 32
    srv.require_own("it reads the server's RSS from /proc")

    def rss_kib():
        with open("/proc/%d/status" % srv.proc.pid) as f:
            return int(f.read().split("VmRSS:")[1].split()[0])

    check(http(srv.addr, "GET", "/native/hello").status == 200, "/native/hello before the pipeline")
    before = rss_kib()
    c = socket.create_connection(srv.addr)
    # A small receive buffer: the answers back up into the server at once.
    c.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)
    c.setblocking(False)
    burst = build_request("GET", "/native/hello") * 1000
    sent, t0 = 0, time.monotonic()
    while time.monotonic() - t0 < 4.0:
        try:
            sent += c.send(burst)
        except BlockingIOError:
            time.sleep(0.01)
    growth = rss_kib() - before
    c.close()
    emit.emit("pipeline-unread-rss-growth-kib", growth, "KiB", out=sys.stderr)
    check(growth < limit_mib * 1024, "server RSS grew %d KiB (limit %d MiB) over %.1f MB of "
          "pipelined requests it could not answer into a client that never reads"
          % (growth, limit_mib, sent / 1e6))
    r = http(srv.addr, "GET", "/native/hello")
    check(r.status == 200, "the server after the unread pipeline: %s" % r.summary())


@smoke.phase(38, "--request-timeout 1: a view still running after 1 s is answered 504 and the "
                 "connection closed; the server serves on, and its late answer reaches nobody")
def phase38(ctx):
    srv = server(ctx, ["--request-timeout", "1"], admin=True)
    c = ctx.connect(srv)
    t0 = time.monotonic()
    r = c.request("GET", "/slow?s=2.5", timeout=5)
    took = time.monotonic() - t0
    check_error(r, 504, "/slow?s=2.5 past --request-timeout 1")
    check(0.8 <= took < 2.4, "the 504 came after %.1fs, want about 1s" % took)
    check(c.wait_eof(3.0), "the connection is not closed after the 504")
    r = http(srv.addr, "GET", "/native/hello")
    check(r.status == 200, "/native/hello after a timeout: %s" % r.summary())
    ms = metrics(srv.admin)
    check(metric(ms, "m0_requests_timed_out_total") == 1, "m0_requests_timed_out_total is %g" % metric(
        ms, "m0_requests_timed_out_total"))
    # The view ends at 2.5 s: its answer is dropped on the loop, counted.
    wait_metric(srv.admin, "m0_completions_dropped_total", 1, 4.0, "the late answer")


@smoke.phase(39, "SIGKILL with keep-alive clients and a request running, then the same command line at "
                 "once: the new process binds the same port and serves")
def phase39(ctx):
    srv = server(ctx)
    srv.require_own("it sends SIGKILL")
    idle = ctx.connect(srv)
    check(idle.request("GET", "/native/hello").status == 200, "/native/hello before the kill")
    busy = ctx.connect(srv)
    busy.send(build_request("GET", "/slow?s=3"))
    time.sleep(0.3)
    srv.kill()
    again = Server(ctx, srv.binary, srv.args, "%s-again" % srv.label)
    again.addr = srv.addr
    again.argv = [srv.binary, "--listen", "%s:%d" % srv.addr] + srv.args
    ctx.servers.append(again)
    again.start()  # fails the phase if it cannot bind or does not come up
    r = http(again.addr, "GET", "/native/hello")
    check(r.status == 200, "/native/hello on the restarted server: %s" % r.summary())
    check(busy.wait_eof(3.0), "the killed server's client was not closed")


@smoke.phase(40, "SIGTERM with --grace 2, 1000 holds open, a view running and three queued: every hold "
                 "gets its retry hint, the process exits 0 when grace ends")
def phase40(ctx):
    srv = server(ctx, ["--realtime", "--grace", "2", "--blocking-threads", "1"], admin=True)
    srv.require_own("it sends SIGTERM")
    holds = []
    for i in range(1000):
        c = Conn(srv.addr, timeout=5.0)
        ctx.conns.append(c)
        c.send(build_request("GET", "/native/hold?channel=grace40"))
        holds.append(c)
    for c in holds:
        c.read_until(lambda b: b": mojo hold\n\n" in b, 10.0)
    running = ctx.connect(srv)
    running.send(build_request("GET", "/slow?s=6"))
    queued = [ctx.connect(srv) for _ in range(3)]
    for c in queued:
        c.send(build_request("GET", "/slow?s=6"))
    wait_metric(srv.admin, 'm0_pool_queued_jobs{pool="wsgi"}', 3, 3.0, "three views queued")
    t0 = time.monotonic()
    srv.terminate()
    missing = 0
    for c in holds:
        c.read_until(lambda b: b"retry: " in b, 3.0)
        missing += b"retry: " not in c.buf
    check(missing == 0, "%d of 1000 holds got no retry hint" % missing)
    rc = srv.wait_exit(6.0)
    took = time.monotonic() - t0
    if rc is None:
        srv.kill()
        raise Fail("the server did not exit within 6 s of SIGTERM with --grace 2")
    check(rc == 0, "exit code %d after SIGTERM, want 0" % rc)
    check(took < 4.0, "the server took %.1fs to exit with --grace 2" % took)


@smoke.phase(41, "a positional APP as gunicorn takes it (djangoproj.wsgi, with --chdir or run in its directory) serves Django at /; two APPs, or an APP beside --mount /, exit 2 with one line")
def phase41(ctx):
    srv = ctx.server(["--chdir", "fixtures/djangoproj", "djangoproj.wsgi", "--mount", "/native=mojo"])
    r = http(srv.addr, "GET", "/")
    check(r.status == 200 and b"m0serve demo" in r.body, "GET / with the positional APP: %s %s" % (
        r.summary(), short(r.body, 120)))
    check(http(srv.addr, "GET", "/native/hello").status == 200, "/native/hello beside the APP")
    # Without --chdir the directory it runs in goes on sys.path, as with gunicorn.
    srv = ctx.server(["djangoproj.wsgi"], cwd=os.path.join(ROOT, "fixtures", "djangoproj"))
    r = http(srv.addr, "GET", "/")
    check(r.status == 200 and b"m0serve demo" in r.body, "GET / from `m0serve djangoproj.wsgi` "
          "run in fixtures/djangoproj: %s %s" % (r.summary(), short(r.body, 120)))
    for args, what in ((["djangoproj.wsgi", "other.wsgi"], "two-apps"),
                       (["djangoproj.wsgi", "--mount", "/=djangoproj.wsgi:application"], "app-and-root-mount"),
                       (["djangoproj.wsgi:"], "app-empty-callable")):
        line = bad_flag(ctx, ["--listen", "127.0.0.1:%d" % free_port(), "--chdir", "fixtures/djangoproj"] + args, what)
        check("APP" in line, "%s: the one line does not say APP: %r" % (what, line))


def echo_environ(srv, headers):
    r = http(srv.addr, "GET", "/echo", headers)
    check(r.status == 200, "GET /echo: %s" % r.summary())
    return json.loads(r.body)["environ"]


@smoke.phase(42, "--forwarded-allow-ips: from a trusted peer (loopback by default) X-Forwarded-For and -Proto set REMOTE_ADDR and wsgi.url_scheme; from an untrusted one they are ignored; a bad list exits 2")
def phase42(ctx):
    fwd = [("X-Forwarded-For", "192.0.2.1, 203.0.113.9"), ("X-Forwarded-Proto", "https")]
    env = echo_environ(server(ctx), fwd)
    check(env.get("REMOTE_ADDR") == "203.0.113.9" and env.get("wsgi.url_scheme") == "https",
          "behind a trusted proxy: REMOTE_ADDR %r, wsgi.url_scheme %r; want 203.0.113.9, https" % (
              env.get("REMOTE_ADDR"), env.get("wsgi.url_scheme")))
    env = echo_environ(server(ctx, ["--forwarded-allow-ips", "10.0.0.0/8"]), fwd)
    check(env.get("REMOTE_ADDR") == "127.0.0.1" and env.get("wsgi.url_scheme") == "http",
          "from an untrusted peer: REMOTE_ADDR %r, wsgi.url_scheme %r; want 127.0.0.1, http" % (
              env.get("REMOTE_ADDR"), env.get("wsgi.url_scheme")))
    line = bad_flag(ctx, ["--listen", "127.0.0.1:%d" % free_port(), "--forwarded-allow-ips", "localhost"]
                    + DJANGO_ARGS, "forwarded-bad")
    check("--forwarded-allow-ips" in line and "localhost" in line, "the one line: %r" % line)


@smoke.phase(43, "--check loads the apps and binds the listeners, logs the configuration block and exits 0 without serving; a missing app or a port in use exits 2 with one line")
def phase43(ctx):
    port = free_port()
    rc, out, err = ctx.run_binary(["--listen", "127.0.0.1:%d" % port, "--realtime", "--loops", "2", "--check"]
                                  + DJANGO_ARGS,
                                  30, label="%s-phase%d-ok" % (SCRIPT, ctx.number))
    check(rc == 0 and "configuration ok" in out, "--check: exit %r, stdout %s, stderr %s" % (
        rc, short(out), short(err)))
    for part in ("config: mounts / -> djangoproj.wsgi:application (wsgi)", "config: 1 process, 2 loops; pools:",
                 "config: listeners: 127.0.0.1:%d" % port, "config: realtime: in-process bus"):
        check(part in err, "the configuration block lacks %r: %s" % (part, short(err, 600)))
    line = bad_flag(ctx, ["--listen", "127.0.0.1:%d" % free_port(), "--check", "--chdir",
                          "fixtures/djangoproj", "nosuch.wsgi"], "check-missing-app")
    check("nosuch" in line, "the one line does not name the app: %r" % line)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        busy = taken.getsockname()[1]
        bad_flag(ctx, ["--listen", "127.0.0.1:%d" % busy, "--check"] + DJANGO_ARGS, "check-port-in-use")


def wait_lines(path, n, timeout=5.0):
    """The access log's lines once it has at least n (Fail otherwise)."""
    deadline = time.monotonic() + timeout
    lines = []
    while time.monotonic() < deadline:
        if os.path.exists(path):
            with open(path) as f:
                lines = f.read().splitlines()
            if len(lines) >= n:
                return lines
        time.sleep(0.05)
    raise Fail("%s has %d lines after %.0fs, want %d: %r" % (path, len(lines), timeout, n, lines[-3:]))


@smoke.phase(44, "--access-log: one combined-format line per request with rt, a grant redacted; SIGHUP reopens "
                 "the file (logrotate: renamed, then a new one); a path that cannot be opened exits 2")
def phase44(ctx):
    path = ctx.tmpfile("access.log", "")
    os.unlink(path)  # created by the server
    srv = ctx.server(DJANGO_ARGS + ["--access-log", path])
    r = http(srv.addr, "GET", "/", headers=[("User-Agent", "smoke/44"), ("Referer", "http://ref/")])
    check(r.status == 200, "GET /: %s" % r.summary())
    lines = wait_lines(path, 1)
    check(re.fullmatch(r'127\.0\.0\.1 - - \[[^]]+\] "GET / HTTP/1\.1" 200 \d+ "http://ref/" "smoke/44" '
                       r'rt=\d+\.\d{3}', lines[0]), "the line is not as documented: %r" % lines[0])
    rotated = path + ".1"
    os.rename(path, rotated)
    http(srv.addr, "GET", "/echo")
    check(len(wait_lines(rotated, 2)) == 2, "before SIGHUP the line goes to the renamed file")
    srv.proc.send_signal(signal.SIGHUP)
    deadline = time.monotonic() + 5
    while "SIGHUP: --access-log reopened" not in srv.log_text():
        check(time.monotonic() < deadline, "no 'SIGHUP: --access-log reopened' in the log")
        time.sleep(0.05)
    http(srv.addr, "GET", "/native/hello?grant=SECRET.GRANT&x=1")
    lines = wait_lines(path, 1)
    check(len(lines) == 1 and '"GET /native/hello?grant=[redacted]&x=1 HTTP/1.1" 200 ' in lines[0],
          "after SIGHUP a new file takes the line, the grant redacted: %r" % lines)
    check("SECRET" not in open(rotated).read() + open(path).read(), "the grant reached the log")
    line = bad_flag(ctx, ["--listen", "127.0.0.1:%d" % free_port(), "--access-log",
                          "/nonexistent-m0-dir/access.log"] + DJANGO_ARGS, "access-log-unopenable")
    check("--access-log" in line, "the one line does not name the flag: %r" % line)


def unix_get(path, target, headers=(), timeout=5.0):
    """One GET over the unix socket at path (Connection: close); the Response and body."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(timeout)
        s.connect(path)
        s.sendall(build_request("GET", target, [("Host", "localhost"), ("Connection", "close")]
                                + list(headers)))
        data = b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1])
    return status, head.decode("latin-1"), body


@smoke.phase(45, "several --listen, TCP and unix:PATH: each serves; the socket file has --unix-mode; a unix peer's "
                 "X-Forwarded-For is believed; a stale socket file is replaced, a live one or another file refused "
                 "(exit 2); the file is removed at exit")
def phase45(ctx):
    d = tempfile.mkdtemp(prefix="m0-unix-")
    try:
        sock = os.path.join(d, "m0.sock")
        stale = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        stale.bind(sock)  # bound, never listened, closed: a file nobody accepts on
        stale.close()
        port2 = free_port()
        srv = server(ctx, ["--listen", "unix:" + sock, "--listen", "127.0.0.1:%d" % port2,
                           "--unix-mode", "0600"])
        for addr in (srv.addr, (HOST, port2)):
            r = http(addr, "GET", "/native/hello")
            check(r.status == 200 and r.body == b"hello from mojo\n", "GET over %r: %s" % (addr, r.summary()))
        status, head, body = unix_get(sock, "/native/hello")
        check(status == 200 and body == b"hello from mojo\n", "GET over unix:%s: %s" % (sock, head))
        st = os.stat(sock)
        check(stat.S_ISSOCK(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o600,
              "the socket file's mode is %o, want 0600" % stat.S_IMODE(st.st_mode))
        status, head, body = unix_get(sock, "/echo", [("X-Forwarded-For", "198.51.100.7"),
                                                      ("X-Forwarded-Proto", "https")])
        check(status == 200, "GET /echo over unix: %s" % head)
        env = json.loads(body)["environ"]
        check((env.get("REMOTE_ADDR"), env.get("wsgi.url_scheme"), env.get("SERVER_NAME"),
               env.get("SERVER_PORT")) == ("198.51.100.7", "https", "localhost", "80"),
              "over unix: REMOTE_ADDR %r, scheme %r, SERVER_NAME %r, SERVER_PORT %r" % (
                  env.get("REMOTE_ADDR"), env.get("wsgi.url_scheme"), env.get("SERVER_NAME"),
                  env.get("SERVER_PORT")))
        for line in ("m0serve: listening on unix:%s" % sock, "m0serve: listening on 127.0.0.1:%d" % port2):
            check(line in srv.log_text(), "no start-up line %r" % line)
        line = bad_flag(ctx, ["--listen", "unix:" + sock] + DJANGO_ARGS, "unix-live")
        check("another process accepts on it" in line, "a live socket: %r" % line)
        plain = os.path.join(d, "plain")
        open(plain, "w").close()
        line = bad_flag(ctx, ["--listen", "unix:" + plain] + DJANGO_ARGS, "unix-not-socket")
        check("not a socket" in line, "a regular file: %r" % line)
        check(os.path.exists(plain), "the regular file was removed")
        srv.stop()
        check(not os.path.exists(sock), "the socket file is still there after exit")
    finally:
        shutil.rmtree(d, ignore_errors=True)


@smoke.phase(46, "systemd: started by systemd-socket-activate, m0serve serves on the sockets it passes (named "
                 "http and admin), says READY=1 on NOTIFY_SOCKET, pings WATCHDOG=1 at half WATCHDOG_USEC, and "
                 "STOPPING=1 on SIGTERM, exit 0")
def phase46(ctx):
    activate = shutil.which("systemd-socket-activate")
    check(activate, "systemd-socket-activate is missing (Debian package systemd)")
    d = tempfile.mkdtemp(prefix="m0-sd-")
    notify = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    proc = None
    try:
        npath = os.path.join(d, "notify")
        notify.bind(npath)
        notify.settimeout(0.2)
        port, aport = free_ports(2)  # distinct: one after the other may be the same port
        os.makedirs(LOG_DIR, exist_ok=True)
        log = open(os.path.join(LOG_DIR, "%s-phase46-activated.log" % SCRIPT), "wb")
        binary = os.path.abspath(ctx.binary)
        # systemd-socket-activate gives the child a bare environment: the
        # sanitizers' and Python's allocator settings of a sanitizer run go on.
        passed_env = []
        for name in ("PYTHONMALLOC", "ASAN_OPTIONS", "UBSAN_OPTIONS", "LSAN_OPTIONS", "TSAN_OPTIONS"):
            if name in os.environ:
                passed_env += ["-E", name]
        proc = subprocess.Popen(
            [activate, "-l", "127.0.0.1:%d" % port, "-l", "127.0.0.1:%d" % aport, "--fdname=http:admin",
             "-E", "NOTIFY_SOCKET=" + npath, "-E", "WATCHDOG_USEC=400000"] + passed_env +
            [binary, "--admin-listen", "127.0.0.1:%d" % aport, "--admin-open", "--realtime"] + DJANGO_ARGS,
            cwd=ROOT, stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True)
        # systemd-socket-activate listens at once and execs m0serve (same PID)
        # at the first connection, which waits in the backlog meanwhile.
        deadline = time.monotonic() + 10
        while True:
            try:
                r = http((HOST, port), "GET", "/native/hello", timeout=20)
                break
            except OSError as e:
                if proc.poll() is not None or time.monotonic() >= deadline:
                    with open(log.name, "rb") as f:
                        said = short(f.read().decode("utf-8", "replace"), 800)
                    raise Fail("no answer over the passed socket (%s; systemd-socket-activate %s): %s"
                               % (e, "exited %s" % proc.returncode if proc.poll() is not None else "running",
                                  said))
                time.sleep(0.05)
        check(r.status == 200, "GET over the passed socket: %s" % r.summary())
        msgs = []

        def read_notify(until, what):
            end = time.monotonic() + 10
            while not until():
                check(time.monotonic() < end, "no %s on NOTIFY_SOCKET within 10s: %r" % (what, msgs))
                try:
                    msgs.append(notify.recv(4096).decode())
                except socket.timeout:
                    pass
        read_notify(lambda: any(m.startswith("READY=1") for m in msgs), "READY=1")
        ready = [m for m in msgs if m.startswith("READY=1")][0]
        check("STATUS=serving on 127.0.0.1:%d" % port in ready, "READY's status: %r" % ready)
        read_notify(lambda: sum(m == "WATCHDOG=1" for m in msgs) >= 3, "three WATCHDOG=1")
        r = http((HOST, aport), "GET", "/metrics")
        check(r.status == 200 and b"m0_holds_open" in r.body, "admin over its passed socket: %s" % r.summary())
        with open(log.name, "rb") as f:
            text = f.read().decode("utf-8", "replace")
        check("config: listeners: 127.0.0.1:%d (from systemd); admin 127.0.0.1:%d" % (port, aport) in text,
              "the configuration block does not show the passed sockets: %s" % short(text, 800))
        proc.send_signal(signal.SIGTERM)
        read_notify(lambda: any(m.startswith("STOPPING=1") for m in msgs), "STOPPING=1")
        rc = proc.wait(timeout=15)
        proc = None
        check(rc == 0, "exit code %r after SIGTERM, want 0" % rc)
    finally:
        notify.close()
        if proc is not None and proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()
        shutil.rmtree(d, ignore_errors=True)


@smoke.phase(47, "--config FILE (TOML): its keys set the flags (served: Django and the mojo mount, the access log, "
                 "realtime), the command line wins, --check validates it; an unknown key or a wrong type exits 2 "
                 "with one line naming the file and line")
def phase47(ctx):
    log = ctx.tmpfile("config-access.log", "")
    conf = ctx.tmpfile("m0serve.toml", "\n".join([
        "# the fixture project, as an operator writes it",
        'app = "djangoproj.wsgi"',
        'chdir = "fixtures/djangoproj"',
        'mount = ["/native=mojo"]',
        "blocking_threads = 3",
        "realtime = true",
        "heartbeat = 30",
        'access-log = "%s"' % log,
        'listen = "127.0.0.1:1"',  # replaced by the --listen the harness gives
        ""]))
    srv = ctx.server(["--config", conf, "--heartbeat", "20"])
    for path, want in (("/", b"m0serve demo"), ("/native/hello", b"hello from mojo")):
        r = http(srv.addr, "GET", path)
        check(r.status == 200 and want in r.body, "GET %s: %s" % (path, r.summary()))
    text = srv.log_text()
    for part in ("config: mounts /native -> mojo (mojo), / -> djangoproj.wsgi:application (wsgi)",
                 "pools: wsgi 3 threads", "heartbeat 20s", "config: access log %s" % log):
        check(part in text, "the configuration block lacks %r: %s" % (part, short(text, 800)))
    check("127.0.0.1:1" not in text.split("config: listeners:")[1].split("\n")[0],
          "the file's listen was not replaced by the command line's")
    check(len(wait_lines(log, 2)) >= 2, "the file's access-log was not written")
    rc, out, err = ctx.run_binary(["--config", conf, "--listen", "127.0.0.1:%d" % free_port(), "--check"], 30,
                                  label="%s-phase47-check" % SCRIPT)
    check(rc == 0 and "configuration ok" in out, "--config with --check: exit %r, %s" % (rc, short(err)))
    bad = ctx.tmpfile("bad.toml", 'app = "djangoproj.wsgi"\nchdir = "fixtures/djangoproj"\n\nmax_holdz = 5\n')
    line = bad_flag(ctx, ["--config", bad, "--listen", "127.0.0.1:%d" % free_port()], "config-unknown-key")
    check(line == "m0serve: %s:4: 'max_holdz' is not a flag m0serve knows (did you mean 'max-holds'? "
                  "see --help)" % bad,
          "an unknown key: %r" % line)
    typed = ctx.tmpfile("typed.toml", 'app = "djangoproj.wsgi"\nrealtime = "yes"\n')
    line = bad_flag(ctx, ["--config", typed, "--listen", "127.0.0.1:%d" % free_port()], "config-type")
    check(line == "m0serve: %s:2: 'realtime' wants true or false" % typed, "a wrong type: %r" % line)
    # A bad value: the file, the line and the key, as the README promises.
    valued = ctx.tmpfile("valued.toml", 'app = "djangoproj.wsgi"\nchdir = "fixtures/djangoproj"\n'
                                        'max-holds = -1\n')
    line = bad_flag(ctx, ["--config", valued, "--listen", "127.0.0.1:%d" % free_port()], "config-value")
    check(line == "m0serve: %s:3: max-holds: wants a number from 0 to 10000000, got '-1'" % valued,
          "a bad value: %r" % line)


SWITCH_APP = """import sys


def application(environ, start_response):
    body = repr(sys.getswitchinterval()).encode()
    start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", str(len(body)))])
    return [body]
"""


@smoke.phase(48, "--python-switch-interval: the app runs with 0.02 s by default, the interval given, or Python's own "
                 "0.005 with 0; the configuration block says which; out of range exits 2 with one line")
def phase48(ctx):
    folder = tempfile.mkdtemp(prefix="m0-phase48-")
    ctx.finalizers.append(lambda: shutil.rmtree(folder, ignore_errors=True))
    with open(os.path.join(folder, "switch_app.py"), "w") as f:
        f.write(SWITCH_APP)
    app = ["--chdir", folder, "--mount", "/=switch_app:application"]
    for value in ("2", "-0.1", "soon"):
        line = bad_flag(ctx, ["--listen", "127.0.0.1:%d" % free_port(), "--python-switch-interval", value] + app,
                        "switch-interval-%s" % value)
        check("--python-switch-interval" in line, "the one line does not name the flag: %r" % line)
    for flag, want, said in (([], "0.02", "0.02 s"), (["--python-switch-interval", "0.05"], "0.05", "0.05 s"),
                             (["--python-switch-interval", "0"], "0.005", "Python's own")):
        srv = ctx.server(app + flag)
        check(not srv.reused, "this phase serves an app it writes to a new folder and reads the server's log: "
                              "it cannot use SERVER; run it without")
        r = http(srv.addr, "GET", "/")
        check(r.status == 200 and abs(float(r.body.decode() or "nan") - float(want)) < 1e-6,
              "%s: the app saw %s %s, want %s" % (flag or "default", r.summary(), short(r.body), want))
        check("config: python switch interval %s" % said in srv.log_text(),
              "%s: the configuration block does not say %r" % (flag or "default", said))


@smoke.phase(49, "--workers 2: SIGUSR1 to the parent (logrotate's postrotate) reaches every worker, which reopens "
                 "its access log, and the service keeps serving; the parent stops on SIGTERM; each worker's log "
                 "lines say worker=N, and each says shutting down once (two loops each)")
def phase49(ctx):
    path = ctx.tmpfile("access.log", "")
    os.unlink(path)
    srv = ctx.server(DJANGO_ARGS + ["--workers", "2", "--loops", "2", "--access-log", path])
    srv.require_own("this phase signals the server's parent")
    check(http(srv.addr, "GET", "/hello").status == 200, "GET /hello before SIGUSR1")
    os.rename(path, path + ".1")
    for _ in range(2):  # a second one, once the first was handled
        before = srv.log_text().count("SIGUSR1: --access-log reopened")
        srv.proc.send_signal(signal.SIGUSR1)
        deadline = time.monotonic() + 5
        while srv.log_text().count("SIGUSR1: --access-log reopened") < before + 2:
            check(srv.alive(), "the parent died of SIGUSR1: %s" % srv.log_tail(5))
            check(time.monotonic() < deadline, "SIGUSR1 did not reach both workers: %d of 2 reopened" % (
                srv.log_text().count("SIGUSR1: --access-log reopened") - before))
            time.sleep(0.05)
    for i in range(20):  # both workers take connections (the shared socket spreads them)
        r = http(srv.addr, "GET", "/hello")
        check(r.status == 200, "GET /hello %d after SIGUSR1: %s" % (i, r.summary()))
    check(len(wait_lines(path, 20)) == 20, "after SIGUSR1 the workers do not write the new file")
    srv.stop()
    lines = srv.log_text().splitlines()
    for worker in (0, 1):
        mine = [l for l in lines if l.startswith("m0serve worker=%d: " % worker)]
        check(any(("listening on 127.0.0.1:%d as worker %d" % (srv.addr[1], worker)) in l for l in mine),
              "no listening line of worker=%d: %s" % (worker, srv.log_tail(20)))
        check(sum("SIGUSR1: --access-log reopened" in l for l in mine) == 2,
              "worker=%d does not say its two reopenings: %s" % (worker, srv.log_tail(20)))
        downs = [l for l in mine if ": shutting down: " in l]
        check(len(downs) == 1, "worker=%d says shutting down %d times, want once: %r" % (worker, len(downs), downs))
    # The parent's own lines carry no worker.
    check(any(l.startswith("m0serve: supervising 2 workers") for l in lines), "no parent line: %s" % srv.log_tail(20))
    check(not any(l.startswith("m0serve: shutting down") for l in lines), "the parent says shutting down")
    stray = [l for l in lines if l.startswith("m0serve: ") and "worker" not in l and "SIGUSR1" not in l
             and "signal SIG" not in l]
    check(not stray, "lines from the workers without worker=N: %r" % stray[:5])


@smoke.phase(50, "--check on a Django project runs Django's system checks and imports ROOT_URLCONF: a "
                 "fresh startproject passes; a urls.py that does not import, or a check error, exits 2 "
                 "with one line")
def phase50(ctx):
    d = tempfile.mkdtemp(prefix="m0-check-")
    try:
        subprocess.run(["/usr/bin/python3", "-m", "django", "startproject", "chk", d], check=True,
                       capture_output=True, timeout=60)
        args = ["--check", "--listen", "127.0.0.1:0", "--chdir", d, "chk.wsgi"]
        rc, out, err = ctx.run_binary(args, 60)
        check(rc == 0 and "configuration ok" in out, "a fresh project: rc %r, stderr %s" % (rc, short(err)))
        urls = os.path.join(d, "chk", "urls.py")
        with open(urls) as f:
            good = f.read()
        with open(urls, "w") as f:
            f.write(good + "\nimport no_such_module_m0\n")
        line = bad_flag(ctx, args, "urlconf", 60)
        check("ROOT_URLCONF 'chk.urls' does not import: ModuleNotFoundError" in line
              and "no_such_module_m0" in line, "a broken urls.py: the one line: %r" % line)
        with open(urls, "w") as f:
            f.write(good)
        with open(os.path.join(d, "chk", "settings.py"), "a") as f:
            f.write("\nSTATICFILES_DIRS = 'static'\n")  # staticfiles.E001: not a list
        line = bad_flag(ctx, args, "system-check", 60)
        check("Django's system checks found 1 error" in line and "staticfiles.E001" in line,
              "a check error: the one line: %r" % line)
        # Without --check the server starts as before (the URLconf is imported on first use).
    finally:
        shutil.rmtree(d, ignore_errors=True)


@smoke.phase(51, "systemd: under socket activation a --listen systemd did not pass, or an --admin-listen "
                 "with no socket named admin, exits 2 with one line instead of being dropped")
def phase51(ctx):
    activate = shutil.which("systemd-socket-activate")
    check(activate, "systemd-socket-activate is missing (Debian package systemd)")
    binary = os.path.abspath(ctx.binary)
    port, other = free_ports(2)
    os.makedirs(LOG_DIR, exist_ok=True)
    cases = [(["--listen", "127.0.0.1:%d" % other], "--listen 127.0.0.1:%d is not one of the 1 sockets" % other),
             (["--admin-listen", "127.0.0.1:%d" % other], "systemd passed no socket named admin")]
    for n, (extra, want) in enumerate(cases):
        log_path = os.path.join(LOG_DIR, "%s-phase51-%d.log" % (SCRIPT, n))
        with open(log_path, "wb") as log:
            proc = subprocess.Popen([activate, "-l", "127.0.0.1:%d" % port, "--fdname=http", binary] + extra
                                    + DJANGO_ARGS, cwd=ROOT, stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                                    start_new_session=True)
        try:
            deadline = time.monotonic() + 20
            while True:  # the first connection starts m0serve
                try:
                    socket.create_connection((HOST, port), timeout=5).close()
                    break
                except OSError as e:
                    if time.monotonic() >= deadline:
                        with open(log_path, "rb") as f:
                            said = f.read().decode("utf-8", "replace")
                        check(False, "systemd-socket-activate never listened on %d (%s; exit %r): %r"
                              % (port, e, proc.poll(), said[-300:]))
                    time.sleep(0.05)
            rc = proc.wait(timeout=30)
        finally:
            if proc.poll() is None:
                os.kill(proc.pid, signal.SIGKILL)
                proc.wait()
        with open(log_path, "rb") as f:
            # systemd-socket-activate's own lines aside.
            lines = [l for l in f.read().decode("utf-8", "replace").splitlines() if l.startswith("m0serve")]
        check(rc == 2 and len(lines) == 1 and want in lines[0],
              "%r: rc %r, want 2 and one line with %r: %r" % (extra, rc, want, lines))


SLOW_START_APP = """\
import os, time
open(os.environ["M0_SMOKE_MARK"], "w").close()  # the import began
time.sleep(float(os.environ["M0_SMOKE_SLEEP"]))

def application(environ, start_response):
    start_response("200 OK", [("Content-Type", "text/plain")])
    return [b"started"]
"""


@smoke.phase(52, "SIGTERM while the app is still being imported: with --workers 2 (the parent's listener takes "
             "connections while the workers start) every worker finishes starting, the request waiting in the "
             "backlog is answered 200, and the server exits 0 (not killed by the signal); one process given a "
             "second SIGTERM while starting ends at once, exit 0")
def phase52(ctx):
    binary = os.path.abspath(ctx.binary)
    os.makedirs(LOG_DIR, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        with open(os.path.join(tmp, "slowstart.py"), "w") as f:
            f.write(SLOW_START_APP)
        for signals, sleep, extra in ((1, 2.0, ["--workers", "2"]), (2, 30.0, [])):
            port = free_port()
            mark = os.path.join(tmp, "mark-%d" % signals)
            log_path = os.path.join(LOG_DIR, "%s-phase52-%d.log" % (SCRIPT, signals))
            env = dict(os.environ, M0_SMOKE_MARK=mark, M0_SMOKE_SLEEP=str(sleep))
            with open(log_path, "wb") as log:
                proc = subprocess.Popen([binary, "--listen", "%s:%d" % (HOST, port), "--pythonpath", tmp,
                                         "--mount", "/=slowstart:application"] + extra, cwd=ROOT, env=env,
                                        stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True)
            c = None
            try:
                for _ in range(400):  # 20 s
                    if os.path.exists(mark) or proc.poll() is not None:
                        break
                    time.sleep(0.05)
                check(os.path.exists(mark), "the app's import never began (rc %r)" % proc.poll())
                if signals == 1:
                    # The parent bound the listener before the workers began:
                    # this request waits in its backlog while they start.
                    c = Conn((HOST, port), timeout=10)
                    c.send(build_request("GET", "/"))
                for _ in range(signals):
                    os.kill(proc.pid, signal.SIGTERM)
                    time.sleep(0.2)
                if c is not None:
                    r = c.read_response("GET", 10)
                    check(r.status == 200 and r.body == b"started", "the request waiting in the backlog: %s %s" % (
                        r.summary(), short(r.body)))
                try:
                    rc = proc.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    rc = None
            finally:
                if c is not None:
                    c.close()
                if proc.poll() is None:
                    os.kill(proc.pid, signal.SIGKILL)
                    proc.wait()
            with open(log_path, "rb") as f:
                text = f.read().decode("utf-8", "replace")
            want = "SIGTERM: stopping" if signals == 1 else "second signal while starting: stopping now"
            check(rc == 0 and want in text, "%d SIGTERM while starting: rc %r, want 0 and %r in the log: %s" % (
                signals, rc, want, text[-600:]))

if __name__ == "__main__":
    sys.exit(smoke.main())
