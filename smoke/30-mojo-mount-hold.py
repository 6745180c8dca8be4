#!/usr/bin/python3
"""smoke-mojo-mount-hold: THE GATE. A mojo pool thread takes the SSE hold a
WSGI pool thread takes (reference/000 "The gate").

The server is started exactly as the design note's probe ran it:

    m0serve --mount /=djangoproj.wsgi:application --mount /native=mojo \\
            --realtime --blocking-threads 2

plus --listen (a free port) and --chdir fixtures/djangoproj; phase 3 adds
--heartbeat 0.5, phase 8 --mojo-in-loop (the loop runs the quick mount in
place, no pool thread). The one exception to that command line: phase 4 adds
--admin-listen, because /metrics lives on the admin listener. Phase 6 drops
--realtime (it checks the degrade). A fresh server per phase; ids start at
the clock, so phases compare ids with each other, never with 1.

Each phase pins one thing that would be silent-wrong otherwise; one line per
phase, PASS or FAIL with the reason.
"""

import os
import re
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import emit  # noqa: E402
from m0smoke import (  # noqa: E402
    DJANGO_ARGS, Fail, Smoke, build_request, check, check_hold_head,
    check_server_headers, check_stream, event_ids, expect_events, leave, metric,
    metrics, publish_django, read_head_body, short, stream_items, wait_metric)

SCRIPT = "30-mojo-mount-hold"
GATE_ARGS = DJANGO_ARGS + ["--realtime", "--blocking-threads", "2"]
MOJO_HEAD = b": mojo hold\n\n"
HEAD_LIMIT_S = 1.0

smoke = Smoke(SCRIPT, __doc__)


def hold_path(channel):
    return "/native/hold?channel=%s" % channel


@smoke.phase(1, "hold delivered at all: mojo head, then two Django-published events, consecutive ids")
def phase1(ctx):
    srv = ctx.server(GATE_ARGS)
    c, head = ctx.hold(srv, hold_path("gate1"))
    check_hold_head(head, "mojo")
    read_head_body(c, MOJO_HEAD)
    # Published the moment the head is read: the subscription must already
    # exist (the h frame reached the loop before the head was written).
    id1 = publish_django(srv.addr, "gate1", "first")
    id2 = publish_django(srv.addr, "gate1", "second")
    check(id2 == id1 + 1, "Django /publish answered ids %r: not consecutive from one counter" % (
        (id1, id2),))
    expect_events(c, MOJO_HEAD, [(id1, "first"), (id2, "second")], what="mojo hold")


@smoke.phase(2, "reconnect cursor: Last-Event-ID: N+2 with the counter at N mutes N+1 and N+2, delivers N+3")
def phase2(ctx):
    srv = ctx.server(GATE_ARGS)
    first = publish_django(srv.addr, "gate2", "before the hold")
    cursor = first + 2
    c, head = ctx.hold(srv, hold_path("gate2"), [("Last-Event-ID", str(cursor))])
    check_hold_head(head, "mojo")
    read_head_body(c, MOJO_HEAD)
    ids = [publish_django(srv.addr, "gate2", d) for d in ("two", "three", "four")]
    check(ids == [first + 1, first + 2, first + 3], "publish ids %r, want %r" % (
        ids, [first + 1, first + 2, first + 3]))
    expect_events(c, MOJO_HEAD, [(ids[2], "four")], what="hold with Last-Event-ID: %d" % cursor)


@smoke.phase(3, "drained as a hold: heartbeats, no Transfer-Encoding, no chunk framing, close, x-worker mojo-N")
def phase3(ctx):
    srv = ctx.server(GATE_ARGS + ["--heartbeat", "0.5"])
    c, head = ctx.hold(srv, hold_path("gate3"))
    check_hold_head(head, "mojo")  # no TE, no CL, Connection: close, x-worker: mojo-N
    read_head_body(c, MOJO_HEAD)
    n = len(MOJO_HEAD)
    t0 = time.monotonic()
    c.read_until(lambda b: False, 2.0)
    check(not c.eof, "the server closed the idle hold; body %s" % short(c.buf))
    window = time.monotonic() - t0
    hb = check_stream(c.buf[n:], [], "idle hold")
    check(2 <= hb <= 6, "%d heartbeats in %.1fs idle with --heartbeat 0.5, want 2..6 (body %s)" % (
        hb, window, short(c.buf[n:])))
    eid = publish_django(srv.addr, "gate3", "raw line")
    c.read_until(lambda b: eid in event_ids(b[n:]), 5.0)
    body = c.buf[n:]
    # The event's bytes must be raw SSE lines right after the head and the
    # heartbeats: a hex chunk-size line or CRLF framing would fail here.
    check(re.match(rb"^(:\n\n)*id: %d\ndata: raw line\n\n(:\n\n)*$" % eid, body) is not None,
          "stream after the head is not raw SSE (heartbeats, then 'id: %d' lines): %s" % (eid, short(body)))
    check(not c.eof, "the server closed the hold after the event")


@smoke.phase(4, "slot released when the client leaves: m0_holds_open back to 0, later publish delivered to no one")
def phase4(ctx):
    # The one exception to the gate's exact command line: --admin-listen,
    # for /metrics.
    srv = ctx.server(GATE_ARGS, admin=True)
    check(srv.admin is not None, "no admin listener (with SERVER=, set SERVER_ADMIN)")
    m = metrics(srv.admin)
    base_open = metric(m, "m0_holds_open")
    if srv.fresh:
        check(base_open == 0, "m0_holds_open is %g before any hold" % base_open)
    c, head = ctx.hold(srv, hold_path("gate4"))
    check_hold_head(head, "mojo")
    read_head_body(c, MOJO_HEAD)
    wait_metric(srv.admin, "m0_holds_open", base_open + 1, 3.0, "while held")
    # A publish while held is delivered and counted, so "unchanged" below
    # is not vacuous.
    m = metrics(srv.admin)
    d0, p0 = metric(m, "m0_events_delivered_total"), metric(m, "m0_events_published_total")
    eid = publish_django(srv.addr, "gate4", "while held")
    expect_events(c, MOJO_HEAD, [(eid, "while held")], what="mojo hold")
    wait_metric(srv.admin, "m0_events_delivered_total", d0 + 1, 3.0, "after one delivery")
    check(metric(metrics(srv.admin), "m0_events_published_total") == p0 + 1,
          "m0_events_published_total did not count the publish")
    leave(c)
    wait_metric(srv.admin, "m0_holds_open", base_open, 3.0, "after the client left")
    m = metrics(srv.admin)
    d1, p1 = metric(m, "m0_events_delivered_total"), metric(m, "m0_events_published_total")
    publish_django(srv.addr, "gate4", "after the leave")
    wait_metric(srv.admin, "m0_events_published_total", p1 + 1, 3.0, "after the publish")
    time.sleep(0.3)
    d2 = metric(metrics(srv.admin), "m0_events_delivered_total")
    check(d2 == d1, "m0_events_delivered_total went %g -> %g: a publish after the leave was delivered" % (d1, d2))


@smoke.phase(5, "head answered while both Python threads are inside 1.5 s views (< %.1f s, emitted)" % HEAD_LIMIT_S)
def phase5(ctx):
    srv = ctx.server(GATE_ARGS)
    t_start = time.monotonic()
    slow = []
    for _ in range(2):
        s = ctx.connect(srv)
        s.send(build_request("GET", "/slow?s=1.5"))
        slow.append(s)
    time.sleep(0.2)
    for s in slow:
        check(s.pending() == b"", "a /slow?s=1.5 answered within 0.2s: %s" % short(s.buf))
    t0 = time.monotonic()
    c = ctx.connect(srv)
    c.send(build_request("GET", hold_path("gate5")))
    head = c.read_head(5.0)
    took = head.t_head - t0
    emit.emit("mojo-mount-hold-head-s", round(took, 4), "s", out=sys.stderr)
    check_hold_head(head, "mojo")
    read_head_body(c, MOJO_HEAD)
    check(took < HEAD_LIMIT_S, "the /native/hold head took %.3fs behind two busy Python threads (limit %.1fs)" % (
        took, HEAD_LIMIT_S))
    for s in slow:
        check(s.pending() == b"", "a /slow?s=1.5 had answered by the time the hold head came (%.2fs): %s" % (
            time.monotonic() - t_start, short(s.buf)))
    for i, s in enumerate(slow):
        r = s.read_response("GET", 5.0)
        done = time.monotonic() - t_start
        check(r.status == 200, "/slow?s=1.5 #%d: %s %s" % (i + 1, r.summary(), short(r.body, 120)))
        check(done >= 1.4, "/slow?s=1.5 #%d finished after %.2fs: it was not inside its view" % (i + 1, done))


@smoke.phase(6, "degrade without --realtime: 200 with Content-Length, body ': mojo hold', no M0-*, /native/hello served")
def phase6(ctx):
    srv = ctx.server(DJANGO_ARGS + ["--blocking-threads", "2"])
    c = ctx.connect(srv)
    r = c.request("GET", hold_path("gate6"))
    check(r.status == 200, "degraded hold: %s %s" % (r.summary(), short(r.body, 120)))
    check(r.framing == "length", "degraded hold framing %r (Transfer-Encoding %r), want Content-Length" % (
        r.framing, r.header("transfer-encoding")))
    check(r.body == MOJO_HEAD, "degraded hold body %s, want %s" % (short(r.body), short(MOJO_HEAD)))
    m0 = [n for n, _ in r.headers if n.lower().startswith("m0-")]
    check(not m0, "degraded hold still carries %r" % m0)
    check_server_headers(r)
    # A degraded hold is an ordinary answer: the connection goes on.
    if c.eof or r.header("connection") == "close":
        c = ctx.connect(srv)
    r2 = c.request("GET", "/native/hello")
    check(r2.status == 200 and r2.body == b"hello from mojo\n",
          "/native/hello after the degrade: %s %s" % (r2.summary(), short(r2.body)))


@smoke.phase(7, "SIGTERM: a held client receives retry: N (1000..6000) then EOF, the server exits 0")
def phase7(ctx):
    srv = ctx.server(GATE_ARGS)
    srv.require_own("it sends SIGTERM")
    c, head = ctx.hold(srv, hold_path("gate7"))
    check_hold_head(head, "mojo")
    read_head_body(c, MOJO_HEAD)
    n = len(MOJO_HEAD)
    check(not c.wait_eof(0.3), "the server closed the hold before SIGTERM; body %s" % short(c.buf))
    srv.terminate()
    c.read_until(lambda b: False, 8.0)
    body = c.buf[n:]
    check(c.eof, "no EOF on the hold within 8s of SIGTERM; body %s" % short(body))
    items, rest = stream_items(body)
    check(rest == b"", "stream ends in an incomplete block %s" % short(rest))
    kinds = [it[0] for it in items if it[0] != "hb"]
    check(kinds == ["retry"], "after SIGTERM the hold got %s, want heartbeats then one 'retry: N'" % short(body))
    check(items[-1][0] == "retry", "retry is not the last block: %s" % short(body))
    ms = int(items[-1][1]) if re.match(r"^\d+$", items[-1][1]) else -1
    check(1000 <= ms <= 6000, "retry: %s not in 1000..6000" % items[-1][1])
    rc = srv.wait_exit(12.0)
    if rc is None:
        srv.kill()
        raise Fail("the server did not exit within 12s of SIGTERM (killed)")
    check(rc == 0, "the server exited %d after SIGTERM, want 0" % rc)


@smoke.phase(8, "--mojo-in-loop: the loop runs the quick mojo mount in place (x-worker mojo-loop-N); "
                "head first, then the Django-published events in order; /native/hello served")
def phase8(ctx):
    srv = ctx.server(GATE_ARGS + ["--mojo-in-loop"])
    c, head = ctx.hold(srv, hold_path("gate8"))
    check_hold_head(head, "mojo-loop")
    read_head_body(c, MOJO_HEAD)
    # Published the moment the head is read: the frame reached the loop's
    # bus lane before the completion, as from a pool thread.
    id1 = publish_django(srv.addr, "gate8", "first")
    id2 = publish_django(srv.addr, "gate8", "second")
    expect_events(c, MOJO_HEAD, [(id1, "first"), (id2, "second")], what="in-loop mojo hold")
    r = ctx.connect(srv).request("GET", "/native/hello")
    check(r.status == 200 and r.body == b"hello from mojo\n",
          "/native/hello in the loop: %s %s" % (r.summary(), short(r.body)))


if __name__ == "__main__":
    sys.exit(smoke.main())
