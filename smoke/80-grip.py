#!/usr/bin/python3
"""smoke-grip: GRIP against the real binary. A Django view answers with the
hold headers django-grip's set_hold_stream() writes (Grip-Hold,
Grip-Channel with prev-id, Grip-Keep-Alive); Debian's real pushpin-publish
(package pushpin) publishes to the admin listener in Pushpin's format; a
publisher signs its JWT the way gripcontrol does (python3-jwt, HS256 with
the GRIP key) against a keyed admin listener.

Servers (a fresh one per phase):

    m0serve --listen 127.0.0.1:P --chdir fixtures/djangoproj \\
            --mount /=djangoproj.wsgi:application --mount /native=mojo \\
            --realtime --heartbeat 60 --admin-listen 127.0.0.1:P2 \\
            --admin-open                 (or --admin-key-file FILE)
"""

import base64
import json
import os
import shutil
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from m0smoke import (  # noqa: E402
    DJANGO_ARGS, Smoke, check, check_hold_head, http, metric, metrics, read_head_body, short)

import jwt  # noqa: E402  (Debian python3-jwt, as gripcontrol uses PyJWT)

SCRIPT = "80-grip"
GRIP_HEAD = b": grip hold\n\n"
ADMIN_KEY = "smoke-grip-key-5d1e8b7a"

smoke = Smoke(SCRIPT, __doc__)


def grip_server(ctx, keyed=False):
    args = DJANGO_ARGS + ["--realtime", "--heartbeat", "60", "--blocking-threads", "2"]
    if keyed:
        args += ["--admin-key-file", ctx.tmpfile("admin.key", ADMIN_KEY + "\n")]
    else:
        args += ["--admin-open"]
    return ctx.server(args, admin=True, admin_key=ADMIN_KEY if keyed else None)


def grip_hold(ctx, srv, query):
    """A hold opened on the fixture's GRIP view; the head checked: a hold
    head like any other, no Grip-* header left, the view's body first."""
    c, head = ctx.hold(srv, "/grip-hold?" + query)
    check_hold_head(head, "wsgi", exact_names=False)
    grip = [n for n in head.names() if n.startswith("grip-")]
    check(not grip, "the hold head still carries %r" % grip)
    read_head_body(c, GRIP_HEAD)
    c.buf = c.buf[len(GRIP_HEAD):]
    return c


def pushpin_publish(srv, *args):
    """Runs Debian's pushpin-publish against the admin listener; returns
    (exit code, output)."""
    exe = shutil.which("pushpin-publish")
    check(exe, "pushpin-publish not found (make deps installs Debian's pushpin)")
    spec = "http://%s:%d" % srv.admin
    p = subprocess.run([exe, "--spec", spec] + list(args), capture_output=True, timeout=20,
                       stdin=subprocess.DEVNULL)
    return p.returncode, (p.stdout + p.stderr).decode("utf-8", "replace")


def read_exactly(conn, want, what, timeout=5.0):
    """Reads until the stream holds `want` after what was read so far; it
    must be exactly that (nothing added around it)."""
    conn.read_until(lambda b: len(b) >= len(want), timeout)
    got, conn.buf = conn.buf[:len(want)], conn.buf[len(want):]
    check(got == want, "%s: want %s, got %s" % (what, short(want), short(got)))
    return got


def signed_jwt(key, exp_in=3600):
    """What gripcontrol sends: {"iss": ..., "exp": now + 3600} signed HS256."""
    return jwt.encode({"iss": "m0smoke", "exp": int(time.time()) + exp_in}, key, algorithm="HS256")


def post_items(srv, items, token=None):
    headers = [("Content-Type", "application/json")]
    if token is not None:
        headers.append(("Authorization", "Bearer %s" % token))
    return http(srv.admin, "POST", "/publish/", headers, json.dumps({"items": items}).encode())


@smoke.phase(1, "--admin-open: refused with one line and exit 2 off loopback, without --admin-listen, with a key file")
def phase1(ctx):
    key = ctx.tmpfile("admin.key", ADMIN_KEY + "\n")
    for args, want in [
            (["--admin-listen", "0.0.0.0:0", "--admin-open"], "loopback"),
            (["--admin-open"], "--admin-listen"),
            (["--admin-listen", "127.0.0.1:0", "--admin-open", "--admin-key-file", key], "exclude"),
    ]:
        rc, out, err = ctx.run_binary(["--listen", "127.0.0.1:0", "--mount", "/=mojo"] + args)
        lines = err.strip().splitlines()
        check(rc == 2, "%r: exit %r, want 2 (stderr %s)" % (args, rc, short(err)))
        check(len(lines) == 1 and want in lines[0], "%r: want one line naming %r, got %s" % (
            args, want, short(err)))


@smoke.phase(2, "pushpin-publish (Debian's) publishes to a hold django-grip's headers opened: the content arrives verbatim")
def phase2(ctx):
    srv = grip_server(ctx)
    c = grip_hold(ctx, srv, "channel=g2&prev_id=p0")
    rc, out = pushpin_publish(srv, "--id", "p1", "--prev-id", "p0", "g2",
                              "event: grip\ndata: hello from pushpin")
    check(rc == 0, "pushpin-publish exit %d: %s" % (rc, short(out)))
    # pushpin-publish adds the newline (no --no-eol); m0serve adds nothing.
    read_exactly(c, b"event: grip\ndata: hello from pushpin\n", "the first publish")
    rc, out = pushpin_publish(srv, "g2", "data: two\n")
    check(rc == 0, "pushpin-publish exit %d: %s" % (rc, short(out)))
    read_exactly(c, b"data: two\n\n", "the second publish")
    ms = metrics(srv.admin)
    check(metric(ms, "m0_events_delivered_total") == 2, "delivered %r, want 2" % ms)


@smoke.phase(3, "pushpin-publish --close ends the channel's holds; a reconnect is replayed the raw content from history")
def phase3(ctx):
    srv = grip_server(ctx)
    c = grip_hold(ctx, srv, "channel=g3")
    rc, out = pushpin_publish(srv, "g3", "data: kept\n")
    check(rc == 0, "pushpin-publish exit %d: %s" % (rc, short(out)))
    read_exactly(c, b"data: kept\n\n", "the publish")
    last = int(metric(metrics(srv.admin), "m0_bus_last_id"))
    rc, out = pushpin_publish(srv, "--close", "g3")
    check(rc == 0, "pushpin-publish --close exit %d: %s" % (rc, short(out)))
    check(c.wait_eof(5.0), "the hold is still open after --close")
    check(c.buf.startswith(b"retry: "), "the close sends a retry hint first, got %s" % short(c.buf))
    # The raw event is kept in history under m0serve's id: a client whose
    # cursor is below it is replayed the same bytes.
    c2 = grip_hold(ctx, srv, "channel=g3&lastEventID=%d" % (last - 1))
    read_exactly(c2, b"data: kept\n\n", "the replay")


@smoke.phase(4, "Grip-Keep-Alive (cstring, timeout=1) is written on an idle hold in place of the comment heartbeat")
def phase4(ctx):
    srv = grip_server(ctx)
    c = grip_hold(ctx, srv, "channel=g4&ka=:ka%0A%0A&ka_timeout=1")
    t0 = time.monotonic()
    read_exactly(c, b":ka\n\n", "the first keep-alive", timeout=4.0)
    read_exactly(c, b":ka\n\n", "the second keep-alive", timeout=4.0)
    took = time.monotonic() - t0
    check(1.0 <= took <= 4.5, "two keep-alives took %.2fs, want about 2" % took)


@smoke.phase(5, "Grip-Hold: response (a long-poll) is 502 with the reason; the server keeps serving")
def phase5(ctx):
    srv = grip_server(ctx)
    r = http(srv.addr, "GET", "/grip-hold?channel=g5&mode=response")
    check(r.status == 502, "want 502, got %s" % r.summary())
    check(b"long-poll" in r.body, "502 body %s does not say why" % short(r.body))
    grip_hold(ctx, srv, "channel=g5")


@smoke.phase(6, "keyed admin: a JWT signed as gripcontrol signs it is taken; a bad, expired or missing one is 401")
def phase6(ctx):
    srv = grip_server(ctx, keyed=True)
    c = grip_hold(ctx, srv, "channel=g6")
    content = base64.b64encode(b"event: bin\ndata: \xc3\xa9\n\n").decode()
    items = [{"channel": "g6", "id": "a1", "formats": {"http-stream": {"content-bin": content}}},
             {"channel": "g6", "formats": {"http-response": {"body": "skipped"}}}]
    r = post_items(srv, items, signed_jwt(ADMIN_KEY))
    check(r.status == 200, "signed JWT: %s %s" % (r.summary(), short(r.body)))
    check(r.json().get("skipped") == 1, "answer %s: want skipped 1" % short(r.body))
    read_exactly(c, b"event: bin\ndata: \xc3\xa9\n\n", "the content-bin publish")
    for what, token, reason in [
            ("wrong key", signed_jwt("not-the-admin-key"), b"bad JWT signature"),
            ("expired", signed_jwt(ADMIN_KEY, exp_in=-10), b"JWT expired"),
            ("garbage", "a.b.c", b"malformed JWT"),
            ("none", None, b"bearer key")]:
        r = post_items(srv, items, token)
        check(r.status == 401 and reason in r.body, "%s: want 401 %r, got %s %s" % (
            what, reason, r.summary(), short(r.body)))
    rc, out = pushpin_publish(srv, "g6", "data: no key\n")
    check(rc != 0 and "bearer key" in out, "pushpin-publish without a key: exit %d, %s" % (
        rc, short(out)))
    check(c.read_until(lambda b: False, 0.3) is False and c.buf == b"",
          "a refused publish reached the hold: %s" % short(c.buf))


if __name__ == "__main__":
    sys.exit(smoke.main())
