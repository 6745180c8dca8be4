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
    DJANGO_ARGS, Smoke, check, check_hold_head, http, metric, metrics, pushpin_publish,
    read_head_body, short)

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


def curl_poll(srv, query, max_time):
    """A long-poll by curl, as a client of it would make one (in the background)."""
    exe = shutil.which("curl")
    check(exe, "curl not found")
    url = "http://%s:%d/grip-hold?%s" % (srv.addr[0], srv.addr[1], query)
    return subprocess.Popen([exe, "-s", "-i", "--max-time", str(max_time), url],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)


def curl_answer(p, what, timeout=15):
    """(status, {lowercase name: value}, body) of a curl -i that ended."""
    out, err = p.communicate(timeout=timeout)
    check(p.returncode == 0, "%s: curl exit %d %s" % (what, p.returncode, short(err)))
    head, _, body = out.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    return int(lines[0].split()[1]), headers, body


def wait_metric(srv, name, want, timeout=5.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if metric(metrics(srv.admin), name) == want:
            return
        time.sleep(0.02)
    check(False, "%s never reached %r" % (name, want))


@smoke.phase(5, "Grip-Hold: response, a long-poll by curl: answered by pushpin-publish's http-response item, by history from prev-id, by the view's own answer at Grip-Timeout")
def phase5(ctx):
    srv = grip_server(ctx)
    stream = grip_hold(ctx, srv, "channel=g5")
    p = curl_poll(srv, "channel=g5&mode=response&timeout=30", 20)
    wait_metric(srv, "m0_holds_open", 2)  # the stream and the long-poll, subscribed
    # -H takes several values: the options go after the channel and content.
    rc, out = pushpin_publish(srv, "g5", "hello", "--code", "201", "-H", "X-Pub: yes")
    check(rc == 0, "pushpin-publish exit %d: %s" % (rc, short(out)))
    status, headers, body = curl_answer(p, "the long-poll")
    check(status == 201, "the long-poll: want 201, got %d %r" % (status, headers))
    check(headers.get("x-pub") == "yes", "the published header is missing: %r" % headers)
    check(body == b"hello\n", "the long-poll's body %s" % short(body))
    check(not [n for n in headers if n.startswith("grip-")], "Grip-* left in %r" % headers)
    event_id = int(headers.get("m0-event-id", "0"))
    check(event_id > 0, "no M0-Event-Id in %r" % headers)
    # The same item's http-stream content reached the stream hold.
    read_exactly(stream, b"hello\n", "the stream's copy")
    # A poll from the id before it is answered at once, from history.
    t0 = time.monotonic()
    p = curl_poll(srv, "channel=g5&mode=response&timeout=30&prev_id=%d" % (event_id - 1), 10)
    status, headers, body = curl_answer(p, "the replayed poll")
    check(status == 201 and body == b"hello\n", "replayed: %d %s" % (status, short(body)))
    check(time.monotonic() - t0 < 5, "the replayed poll waited")
    # Nothing newer: Grip-Timeout's answer is the view's own.
    t0 = time.monotonic()
    p = curl_poll(srv, "channel=g5&mode=response&timeout=1&prev_id=%d" % event_id, 10)
    status, headers, body = curl_answer(p, "the timed-out poll")
    took = time.monotonic() - t0
    check(status == 200 and body == GRIP_HEAD, "timed out: %d %s" % (status, short(body)))
    check(0.9 <= took <= 5, "the timeout took %.2fs, want about 1" % took)
    check("m0-event-id" not in headers, "a timeout names no event: %r" % headers)
    wait_metric(srv, "m0_holds_open", 1)  # the stream's only
    r = http(srv.addr, "GET", "/grip-hold?channel=g5&mode=response&timeout=x")
    check(r.status == 502 and b"Grip-Timeout" in r.body, "a bad Grip-Timeout: %s" % r.summary())


@smoke.phase(6, "keyed admin: a JWT signed as gripcontrol signs it is taken; a bad, expired or missing one is 401")
def phase6(ctx):
    srv = grip_server(ctx, keyed=True)
    c = grip_hold(ctx, srv, "channel=g6")
    content = base64.b64encode(b"event: bin\ndata: \xc3\xa9\n\n").decode()
    items = [{"channel": "g6", "id": "a1", "formats": {"http-stream": {"content-bin": content}}},
             {"channel": "g6", "formats": {"ws-message": {"content": "WebSockets only"}}},
             {"channel": "g6", "formats": {"xmpp-message": {"content": "skipped"}}}]
    r = post_items(srv, items, signed_jwt(ADMIN_KEY))
    check(r.status == 200, "signed JWT: %s %s" % (r.summary(), short(r.body)))
    check(r.json().get("skipped") == 1 and len(r.json().get("ids", [])) == 2,
          "answer %s: want two ids (the ws-message one is for WebSockets), skipped 1"
          % short(r.body))
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
