#!/usr/bin/python3
"""smoke-django-realtime: holds taken by the WSGI pool (a Django view), the
shared id counter, heartbeats, the admin listener and the publish boundary.

Server (a fresh one per phase; its ids start at the clock, so phases compare
ids with each other or with m0_bus_last_id, never with 1):

    m0serve --listen 127.0.0.1:P --chdir fixtures/djangoproj \\
            --mount /=djangoproj.wsgi:application --mount /native=mojo \\
            --realtime --heartbeat 0.5 --blocking-threads 2 \\
            --admin-listen 127.0.0.1:P2 --admin-key-file build/smoke-logs/...key

Phase 10 starts one without --realtime; phase 15 runs the fixture's
manage.py beside it, which publishes through the admin API (M0_ADMIN_URL).
"""

import os
import subprocess
import sys
import time
import urllib.parse

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from m0smoke import (  # noqa: E402
    DJANGO_ARGS, ROOT, Smoke, build_request, check, check_error, check_hold_head, check_server_headers,
    check_stream, expect_events, http, leave, metric, metrics,
    publish_admin, publish_django, read_head_body, short, wait_metric)

SCRIPT = "20-django-realtime"
DJANGO_HEAD = b": django hold\n\n"
ADMIN_KEY = "smoke-admin-key-7f3a9c"

smoke = Smoke(SCRIPT, __doc__)


def rt_server(ctx, extra=()):
    key_file = ctx.tmpfile("admin.key", ADMIN_KEY + "\n")
    args = DJANGO_ARGS + ["--realtime", "--heartbeat", "0.5", "--blocking-threads", "2",
                          "--admin-key-file", key_file] + list(extra)
    return ctx.server(args, admin=True, admin_key=ADMIN_KEY)


def hold_path(channel):
    return "/hold?channel=%s" % channel


def django_hold(ctx, srv, channel, headers=()):
    c, head = ctx.hold(srv, hold_path(channel), headers)
    # Django's middleware adds its own headers (X-Frame-Options, ...);
    # the hold's own are checked exactly.
    check_hold_head(head, "wsgi", exact_names=False)
    read_head_body(c, DJANGO_HEAD)
    return c, head


@smoke.phase(1, "Django hold: exact head (200, event-stream, no-cache, close, x-worker wsgi-N, no CL/TE), head body")
def phase1(ctx):
    srv = rt_server(ctx)
    c, head = django_hold(ctx, srv, "rt1")
    check(not c.eof, "the server closed the Django hold after its head")
    check_stream(c.buf[len(DJANGO_HEAD):], [], "Django hold before any publish")


@smoke.phase(2, "events published via Django /publish: consecutive ids from the shared counter, 'id: N' / 'data:' lines")
def phase2(ctx):
    srv = rt_server(ctx)
    c, _ = django_hold(ctx, srv, "rt2")
    id1 = publish_django(srv.addr, "rt2", "one")
    id2 = publish_django(srv.addr, "rt2", "two")
    check(id2 == id1 + 1, "publish ids %r: not consecutive from one counter" % ((id1, id2),))
    expect_events(c, DJANGO_HEAD, [(id1, "one"), (id2, "two")], what="Django hold")


@smoke.phase(3, "event names and multi-line data: 'event:' line, one 'data:' line per line")
def phase3(ctx):
    srv = rt_server(ctx)
    c, _ = django_hold(ctx, srv, "rt3")
    a = publish_django(srv.addr, "rt3", "line one\nline two\nline three", event="update")
    b = publish_django(srv.addr, "rt3", "crlf one\r\ncrlf two")  # normalised to LF by m0.publish
    d = publish_django(srv.addr, "rt3", "plain", event="note")
    expect_events(c, DJANGO_HEAD, [(a, "line one\nline two\nline three", "update"),
                                   (b, "crlf one\ncrlf two"), (d, "plain", "note")],
                  what="Django hold")


@smoke.phase(4, "heartbeat comments ':' arrive while idle (--heartbeat 0.5)")
def phase4(ctx):
    srv = rt_server(ctx)
    c, _ = django_hold(ctx, srv, "rt4")
    c.read_until(lambda b: False, 2.0)
    check(not c.eof, "the server closed the idle hold; body %s" % short(c.buf))
    hb = check_stream(c.buf[len(DJANGO_HEAD):], [], "idle Django hold")
    check(2 <= hb <= 6, "%d heartbeats in 2s with --heartbeat 0.5, want 2..6 (body %s)" % (
        hb, short(c.buf[len(DJANGO_HEAD):])))


@smoke.phase(5, "admin POST /publish: 200 {'id'} with the bearer key and delivered; 401 without or with a wrong key")
def phase5(ctx):
    srv = rt_server(ctx)
    check(srv.admin is not None, "no admin listener (with SERVER=, set SERVER_ADMIN and SERVER_ADMIN_KEY)")
    c, _ = django_hold(ctx, srv, "rt5")
    base = metric(metrics(srv.admin), "m0_bus_last_id")
    r = publish_admin(srv.admin, None, "rt5", "no key", expect=401)
    check_server_headers(r)
    publish_admin(srv.admin, "wrong-" + ADMIN_KEY, "rt5", "bad key", expect=401)
    i = publish_admin(srv.admin, srv.admin_key, "rt5", "from admin", event="adm")
    j = publish_django(srv.addr, "rt5", "from django")
    check(j == i + 1, "admin id %d then Django id %d: not one shared counter" % (i, j))
    check(i == base + 1, "first accepted publish got id %d, want %d (did a refused one take an id?)" % (
        i, base + 1))
    expect_events(c, DJANGO_HEAD, [(i, "from admin", "adm"), (j, "from django")], what="Django hold")


@smoke.phase(6, "/metrics: m0_holds_open 1 while held, 0 after the leave; a later publish counts as published, not delivered")
def phase6(ctx):
    srv = rt_server(ctx)
    check(srv.admin is not None, "no admin listener (with SERVER=, set SERVER_ADMIN)")
    base = metric(metrics(srv.admin), "m0_holds_open")
    if srv.fresh:
        check(base == 0, "m0_holds_open is %g before any hold" % base)
    c, _ = django_hold(ctx, srv, "rt6")
    wait_metric(srv.admin, "m0_holds_open", base + 1, 3.0, "while held")
    m = metrics(srv.admin)
    d0 = metric(m, "m0_events_delivered_total")
    eid = publish_django(srv.addr, "rt6", "held")
    expect_events(c, DJANGO_HEAD, [(eid, "held")], what="Django hold")
    wait_metric(srv.admin, "m0_events_delivered_total", d0 + 1, 3.0, "after one delivery")
    leave(c)
    wait_metric(srv.admin, "m0_holds_open", base, 3.0, "after the client left")
    m = metrics(srv.admin)
    p1, d1 = metric(m, "m0_events_published_total"), metric(m, "m0_events_delivered_total")
    publish_admin(srv.admin, srv.admin_key, "rt6", "after the leave")
    wait_metric(srv.admin, "m0_events_published_total", p1 + 1, 3.0, "after the publish")
    time.sleep(0.3)
    d2 = metric(metrics(srv.admin), "m0_events_delivered_total")
    check(d2 == d1, "m0_events_delivered_total %g -> %g after a publish nobody holds" % (d1, d2))


REFUSED = [("m0.slot.1", "reserved prefix"), ("a\nb", "LF"), ("", "empty"),
           ("a\rb", "CR"), ("a\x00b", "NUL"), ("x" * 257, "257 bytes")]


@smoke.phase(7, "refused channel names (m0.slot.1, 'a\\nb', empty, CR, NUL, 257 bytes) -> 400 from /publish and admin")
def phase7(ctx):
    srv = rt_server(ctx)
    check(srv.admin is not None, "no admin listener")
    c, _ = django_hold(ctx, srv, "rt7")
    base = metric(metrics(srv.admin), "m0_bus_last_id")
    for name, why in REFUSED:
        publish_django(srv.addr, name, "refused", expect=400)
        r = publish_admin(srv.admin, srv.admin_key, name, "refused", expect=400)
        check(r.body.strip(), "admin 400 for %s has no reason in its body" % why)
    # The reserved namespace is refused on the admin JSON path too when
    # the name is only reserved after JSON decoding (an escaped prefix).
    publish_admin(srv.admin, srv.admin_key, "m0.slot.1", "x", expect=400,
                  raw_json=b'{"channel": "m0\\u002eslot.7", "data": "x"}')
    ok = publish_admin(srv.admin, srv.admin_key, "rt7", "accepted")
    check(ok == base + 1, "the accepted publish got id %d, want %d: refused publishes took ids" % (
        ok, base + 1))
    expect_events(c, DJANGO_HEAD, [(ok, "accepted")], what="Django hold")


@smoke.phase(8, "Last-Event-ID on a Django hold mutes ids <= cursor")
def phase8(ctx):
    srv = rt_server(ctx)
    first = publish_django(srv.addr, "rt8", "before")
    cursor = first + 2
    c, _ = django_hold(ctx, srv, "rt8", [("Last-Event-ID", str(cursor))])
    ids = [publish_django(srv.addr, "rt8", d) for d in ("two", "three", "four")]
    check(ids == [first + 1, first + 2, first + 3], "publish ids %r" % ids)
    expect_events(c, DJANGO_HEAD, [(ids[2], "four")], what="Django hold with Last-Event-ID: %d" % cursor)


@smoke.phase(9, "holds keep no pool thread: 3 Django holds on 2 threads, / still served, one publish reaches all 3")
def phase9(ctx):
    srv = rt_server(ctx)
    holds = [django_hold(ctx, srv, "rt9")[0] for _ in range(3)]
    r = http(srv.addr, "GET", "/", timeout=3.0)
    check(r.status == 200, "GET / with 3 holds open on 2 threads: %s" % r.summary())
    eid = publish_django(srv.addr, "rt9", "to all", timeout=3.0)
    for i, c in enumerate(holds):
        expect_events(c, DJANGO_HEAD, [(eid, "to all")], settle=0.0, what="hold %d of 3" % (i + 1))


@smoke.phase(10, "without --realtime: /hold is 200 with Content-Length and ': django hold', no M0-*; /publish 503")
def phase10(ctx):
    srv = ctx.server(DJANGO_ARGS + ["--blocking-threads", "2"])
    c = ctx.connect(srv)
    r = c.request("GET", hold_path("rt10"))
    check(r.status == 200, "degraded Django hold: %s %s" % (r.summary(), short(r.body, 120)))
    check(r.framing == "length", "degraded hold framing %r, want Content-Length" % r.framing)
    check(r.body == DJANGO_HEAD, "degraded hold body %s, want %s" % (short(r.body), short(DJANGO_HEAD)))
    m0 = [n for n, _ in r.headers if n.lower().startswith("m0-")]
    check(not m0, "degraded hold still carries %r" % m0)
    check_server_headers(r)
    publish_django(srv.addr, "rt10", "nobody", expect=503)


@smoke.phase(11, "--max-holds 1: a second hold (Django or mojo) gets 503 with Retry-After; a freed slot holds again")
def phase11(ctx):
    srv = rt_server(ctx, ["--max-holds", "1"])
    check(srv.admin is not None, "no admin listener (with SERVER=, set SERVER_ADMIN)")
    base = metric(metrics(srv.admin), "m0_holds_open")
    c, _ = django_hold(ctx, srv, "rt11")
    for path in (hold_path("rt11"), "/native/hold?channel=rt11"):
        d = ctx.connect(srv)
        d.send(build_request("GET", path))
        r = d.read_response("GET", 5)
        check_error(r, 503, "second hold %s" % path)
        check(r.has("retry-after"), "503 past --max-holds has no Retry-After: %s" % short(r.raw_head))
        d.close()
    leave(c)
    wait_metric(srv.admin, "m0_holds_open", base, 3.0, "after the only hold left")
    c, _ = django_hold(ctx, srv, "rt11")
    eid = publish_django(srv.addr, "rt11", "again")
    expect_events(c, DJANGO_HEAD, [(eid, "again")], what="hold after the slot was freed")



EDGE = [" rt12", "rt12 ", "\trt12", " "]


@smoke.phase(12, "channel names with edge whitespace: 400 from Django and mojo /hold, Django and admin /publish; never held as the trimmed name")
def phase12(ctx):
    srv = rt_server(ctx)
    check(srv.admin is not None, "no admin listener (with SERVER=, set SERVER_ADMIN)")
    c, _ = django_hold(ctx, srv, "rt12")
    first = metric(metrics(srv.admin), "m0_bus_last_id")
    for name in EDGE:
        q = urllib.parse.quote(name, safe="")
        for path in (hold_path(q), "/native/hold?channel=" + q, "/native/hold?channel=rt12," + q):
            r = http(srv.addr, "GET", path, timeout=3.0)
            check(r.status == 400, "GET %s: want 400, got %s %s" % (path, r.summary(), short(r.body, 160)))
            check(b"space or tab" in r.body, "GET %s: 400 without the reason: %s" % (path, short(r.body)))
        publish_django(srv.addr, name, "refused", expect=400)
        r = publish_admin(srv.admin, srv.admin_key, name, "refused", expect=400)
        check(b"space or tab" in r.body, "admin 400 for %r without the reason: %s" % (name, short(r.body)))
    ok = publish_admin(srv.admin, srv.admin_key, "rt12", "only this")
    check(ok == first + 1, "the accepted publish got id %d, want %d: refused publishes took ids" % (
        ok, first + 1))
    expect_events(c, DJANGO_HEAD, [(ok, "only this")], what="Django hold on rt12")


@smoke.phase(13, "a 1 MiB event is refused at publish (admin 413, Django m0.publish ValueError -> 400, both naming --max-event-size); the holds on its channel stay open")
def phase13(ctx):
    srv = rt_server(ctx)
    check(srv.admin is not None, "no admin listener (with SERVER=, set SERVER_ADMIN)")
    holds = [django_hold(ctx, srv, "rt13")[0], ctx.hold(srv, "/native/hold?channel=rt13")[0]]
    read_head_body(holds[1], b": mojo hold\n\n")
    heads = [DJANGO_HEAD, b": mojo hold\n\n"]
    base = metrics(srv.admin).get("m0_events_too_large_total", 0.0)
    first = metric(metrics(srv.admin), "m0_bus_last_id")
    big = "x" * (1 << 20)
    r = publish_admin(srv.admin, srv.admin_key, "rt13", big, expect=413)
    check(b"--max-event-size" in r.body, "admin 413 does not name the limit: %s" % short(r.body))
    r = publish_django(srv.addr, "rt13", big, expect=400)
    check(b"--max-event-size" in r.body, "Django 400 does not name the limit: %s" % short(r.body))
    wait_metric(srv.admin, "m0_events_too_large_total", base + 2, 3.0, "after two refused events")
    eid = publish_admin(srv.admin, srv.admin_key, "rt13", "small")
    check(eid == first + 1, "the accepted publish got id %d, want %d: refused events took ids" % (
        eid, first + 1))
    for c, head in zip(holds, heads):
        expect_events(c, head, [(eid, "small")], settle=0.0, what="hold after a refused 1 MiB event")


@smoke.phase(14, "--max-hold-channels 2: a mojo hold on 3 channels is 502 naming the count and the flag; on 2 it is held and hears both")
def phase14(ctx):
    srv = rt_server(ctx, ["--max-hold-channels", "2"])
    check(srv.admin is not None, "no admin listener (with SERVER=, set SERVER_ADMIN)")
    d = ctx.connect(srv)
    d.send(build_request("GET", "/native/hold?channel=rt14a,rt14b,rt14c"))
    r = d.read_response("GET", 5)
    check_error(r, 502, "a hold on 3 channels")
    check(b"3 channels" in r.body and b"--max-hold-channels 2" in r.body,
          "the 502 does not name the count and the flag: %s" % short(r.body))
    d.close()
    c, _ = ctx.hold(srv, "/native/hold?channel=rt14a,rt14b")
    read_head_body(c, b": mojo hold\n\n")
    ids = [publish_admin(srv.admin, srv.admin_key, ch, "on " + ch) for ch in ("rt14b", "rt14a")]
    expect_events(c, b": mojo hold\n\n", [(ids[0], "on rt14b"), (ids[1], "on rt14a")], settle=0.0,
                  what="a hold on 2 channels")


@smoke.phase(15, "manage.py (plain /usr/bin/python3, outside the server) publishes on the in-process bus through M0_ADMIN_URL; a Django hold hears it with the next id")
def phase15(ctx):
    srv = rt_server(ctx)
    check(srv.admin is not None, "no admin listener (with SERVER=, set SERVER_ADMIN and SERVER_ADMIN_KEY)")
    c, _ = django_hold(ctx, srv, "rt15")
    i = publish_admin(srv.admin, srv.admin_key, "rt15", "from the admin API")
    command = ("import m0, sys; print(m0.publish('rt15', 'from manage.py', event='cmd')); "
               "sys.stdout.flush()")
    env = dict(os.environ, M0_ADMIN_URL="http://%s:%d" % srv.admin,
               M0_ADMIN_KEY_FILE=ctx.tmpfile("manage.key", srv.admin_key + "\n"),
               PYTHONPATH=os.path.join(ROOT, "src", "wsgi"))
    env.pop("M0_BUS", None)
    p = subprocess.run(["/usr/bin/python3", "manage.py", "shell", "-c", command],
                       cwd=os.path.join(ROOT, "fixtures", "djangoproj"), env=env,
                       capture_output=True, text=True, timeout=30)
    check(p.returncode == 0 and p.stdout.strip() == str(i + 1),
          "manage.py shell -c m0.publish: rc %d, stdout %s (want id %d), stderr %s" % (
              p.returncode, short(p.stdout), i + 1, short(p.stderr)))
    expect_events(c, DJANGO_HEAD, [(i, "from the admin API"), (i + 1, "from manage.py", "cmd")],
                  what="Django hold")


if __name__ == "__main__":
    sys.exit(smoke.main())
