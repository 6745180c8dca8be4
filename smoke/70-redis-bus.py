#!/usr/bin/python3
"""smoke-redis-bus: two m0serve processes on one Redis (--bus redis://...).

Each phase starts its own redis-server (a free port, a directory under
build/smoke-logs/, stopped by its PID) and the servers it needs:

    m0serve --listen 127.0.0.1:P --chdir fixtures/djangoproj \\
            --mount /=djangoproj.wsgi:application --mount /native=mojo \\
            --realtime --bus redis://127.0.0.1:R/0 --heartbeat 30 \\
            --admin-listen 127.0.0.1:P2 --admin-key-file build/smoke-logs/...key

Holds are the mojo mount's /native/hold and the Django view /hold; events
are published through the admin listener of the *other* server, or from a
plain /usr/bin/python3 process (m0.publish with M0_BUS). Checked: shared ids,
replay from Redis, 503s while Redis is down, and that a Redis that dies and
comes back mid-stream leaves every published event delivered exactly once,
or covered by one m0-reset when its data went with it. Phases 9 and 10:
--workers N (processes sharing the port under a supervising parent), which
needs the shared bus.
"""

import os
import re
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from m0smoke import (  # noqa: E402
    DJANGO_ARGS, ROOT, Fail, Smoke, check, check_error, check_hold_head, event_bytes, free_port, leave,
    metric, metrics, parse_block, publish_admin, read_head_body, short, sse_blocks, wait_for,
    wait_metric)
from m0redis import RedisServer  # noqa: E402

sys.path.insert(0, os.path.join(ROOT, "src", "wsgi"))
from m0 import redis_bus  # noqa: E402

SCRIPT = "70-redis-bus"
ADMIN_KEY = "smoke-admin-key-70redis-9d2e"
MOJO = ("mojo", "/native/hold?channel=%s", b": mojo hold\n\n")
DJANGO = ("wsgi", "/hold?channel=%s", b": django hold\n\n")
HEARTBEAT = b":\n\n"

smoke = Smoke(SCRIPT, __doc__, phase_timeout=90.0)


def redis_for(ctx, persist=False):
    r = RedisServer("%s-phase%d" % (SCRIPT, ctx.number), persist)
    ctx.finalizers.append(r.stop)
    return r


def rt_server(ctx, redis, extra=()):
    key_file = ctx.tmpfile("admin.key", ADMIN_KEY + "\n")
    args = DJANGO_ARGS + ["--realtime", "--bus", redis.url, "--heartbeat", "30",
                          "--blocking-threads", "2", "--admin-key-file", key_file] + list(extra)
    srv = ctx.server(args, admin=True, admin_key=ADMIN_KEY)
    srv.require_own("it starts a Redis of its own")
    wait_metric(srv.admin, "m0_bus_redis_up", 1, 5.0, "the Redis bus connected")
    return srv


def pub(srv, channel, data, event=None, expect=200):
    return publish_admin(srv.admin, srv.admin_key, channel, data, event, expect=expect)


def hold(ctx, srv, pool, channel, cursor=None):
    worker, path, head_body = pool
    headers = [("Last-Event-ID", str(cursor))] if cursor is not None else []
    c, head = ctx.hold(srv, path % channel, headers)
    check_hold_head(head, worker, exact_names=worker == "mojo")
    read_head_body(c, head_body)
    c.head_body = head_body
    c.what = "%s hold on %s%s" % (worker, channel, " after %d" % cursor if cursor else "")
    return c


def blocks(c):
    """(kind, id, block) for each complete block after the head body,
    heartbeats left out: kind 'event' or 'reset'."""
    bs, _ = sse_blocks(c.buf[len(c.head_body):])
    out = []
    for b in bs:
        if b == HEARTBEAT:
            continue
        p = parse_block(b)
        if p["event"] == "m0-reset" and p["id"] is None:
            out.append(("reset", None, b))
        elif p["id"] is not None:
            out.append(("event", int(p["id"]), b))
        else:
            raise Fail("%s: an unexpected block %s" % (c.what, short(b)))
    return out


def wait_ids(c, ids, timeout=5.0, settle=0.3):
    """Reads until every id in `ids` arrived, then settle seconds more;
    returns the blocks."""
    want = set(ids)
    c.read_until(lambda b: want <= {i for _, i, _ in blocks(c)}, timeout)
    if settle and not c.eof:
        c.read_until(lambda b: False, settle)
    got = blocks(c)
    missing = sorted(want - {i for _, i, _ in got})
    check(not missing, "%s: ids %s never arrived (%s); stream %s" % (
        c.what, missing, "EOF" if c.eof else "still open", short(c.buf, 600)))
    return got


def expect_exact(c, want, timeout=5.0):
    """The stream after the head is exactly `want` (id, data, event), in order."""
    got = wait_ids(c, [w[0] for w in want], timeout)
    body = b"".join(b for _, _, b in got)
    check(body == b"".join(event_bytes(*w) for w in want),
          "%s: stream %s, want %s" % (c.what, short(body, 600),
                                      short(b"".join(event_bytes(*w) for w in want), 600)))
    check(not c.eof, "%s: closed" % c.what)


# ---------------------------------------------------------------------------


@smoke.phase(1, "a bad --bus is one line and exit code 2; --bus needs --realtime; --bus in-process is the default bus")
def phase1(ctx):
    for bad, why in (("redis://", "no host"), ("redis://h:99999/0", "port"),
                     ("redis://h/x", "database"), ("memcached://h", "wants redis://"),
                     ("redis+unix://rel", "absolute")):
        rc, out, err = ctx.run_binary(DJANGO_ARGS + ["--realtime", "--bus", bad])
        check(rc == 2, "--bus %s: exit code %r, want 2 (stderr %s)" % (bad, rc, short(err)))
        lines = err.strip().splitlines()
        check(len(lines) == 1 and lines[0].startswith("m0serve: --bus %s: " % bad) and why in lines[0],
              "--bus %s: stderr %s, want one line naming --bus and '%s'" % (bad, short(err), why))
    rc, out, err = ctx.run_binary(DJANGO_ARGS + ["--bus", "redis://127.0.0.1:6379/0"])
    check(rc == 2 and "needs --realtime" in err, "--bus without --realtime: rc %r, %s" % (rc, short(err)))
    # The default, named: the in-process bus, no Redis metrics.
    key_file = ctx.tmpfile("admin.key", ADMIN_KEY + "\n")
    srv = ctx.server(DJANGO_ARGS + ["--realtime", "--bus", "in-process", "--admin-key-file", key_file],
                     admin=True, admin_key=ADMIN_KEY)
    ms = metrics(srv.admin)
    check("m0_bus_redis_up" not in ms and pub(srv, "ip1", "x") > 0,
          "--bus in-process: Redis metrics %r" % sorted(k for k in ms if "redis" in k))


@smoke.phase(2, "two servers on one Redis: holds on A (both pools) get the events published on B, with B's ids, in order; a channel held nowhere costs nothing")
def phase2(ctx):
    redis = redis_for(ctx)
    a, b = rt_server(ctx, redis), rt_server(ctx, redis)
    holds = [hold(ctx, a, pool, "x2") for pool in (MOJO, DJANGO)]
    t0 = time.monotonic()
    want = [(pub(b, "x2", "one"), "one", None)]
    wait_ids(holds[0], [want[0][0]], settle=0)
    latency = time.monotonic() - t0
    want += [(pub(b, "x2", "two\nlines", "upd"), "two\nlines", "upd"),
             (pub(a, "x2", "from A"), "from A", None), (pub(b, "x2", "three"), "three", None)]
    pub(b, "elsewhere", "not for x2")
    ids = [w[0] for w in want]
    check(ids == sorted(ids) and len(set(ids)) == len(ids), "ids across A and B not increasing: %r" % ids)
    for c in holds:
        expect_exact(c, want)
    # One subscription a process a channel it holds (A's two holds share it),
    # none for a channel held nowhere; dropped once no hold is left.
    # The readers' name (batched messages) goes with the channel's, always.
    numsub = lambda ch, kind="e": redis.command("PUBSUB", "NUMSUB", "m0:0:%s:%s" % (kind, ch)).split()[-1]
    check(numsub("x2") == "1" and numsub("elsewhere") == "0",
          "PUBSUB NUMSUB x2 %s, elsewhere %s; want 1 and 0" % (numsub("x2"), numsub("elsewhere")))
    check(numsub("x2", "r") == "1", "PUBSUB NUMSUB m0:0:r:x2 %s; want 1" % numsub("x2", "r"))
    for c in holds:
        leave(c)
    wait_for(lambda: numsub("x2") == "0", 5.0, what="A unsubscribed from x2 after its holds left")
    check(numsub("x2", "r") == "0", "PUBSUB NUMSUB m0:0:r:x2 %s after the holds left; want 0"
          % numsub("x2", "r"))
    sys.stderr.write("  [phase 2] publish on B to delivery on A: %.1f ms\n" % (latency * 1000))
    try:
        import emit
        emit.emit("redis-bus-cross-process-delivery-s", latency, "s")
    except Exception as e:  # noqa: BLE001 - a figure is not the check
        sys.stderr.write("  [phase 2] figure not recorded: %r\n" % e)


@smoke.phase(3, "a hold that leaves A and reconnects to B with its Last-Event-ID is replayed from Redis exactly what it missed, then live events")
def phase3(ctx):
    redis = redis_for(ctx)
    a, b = rt_server(ctx, redis), rt_server(ctx, redis)
    for pool in (MOJO, DJANGO):
        ch = "r3-" + pool[0]
        c = hold(ctx, a, pool, ch)
        seen = [(pub(a, ch, "seen %d" % n), "seen %d" % n, None) for n in range(2)]
        expect_exact(c, seen)
        leave(c)
        missed = [(pub(a, ch, "missed %d" % n), "missed %d" % n, None) for n in range(3)]
        r = hold(ctx, b, pool, ch, cursor=seen[-1][0])
        expect_exact(r, missed)
        live = pub(a, ch, "live")
        expect_exact(r, missed + [(live, "live", None)])


@smoke.phase(4, "Redis down: the admin publish is 503 with a reason, holds stay open, m0_bus_redis_up is 0; once it is back the server reconnects (counted) and publishes work")
def phase4(ctx):
    redis = redis_for(ctx)
    a = rt_server(ctx, redis)
    c = hold(ctx, a, MOJO, "d4")
    first = pub(a, "d4", "before")
    redis.stop()
    wait_metric(a.admin, "m0_bus_redis_up", 0, 5.0, "the Redis bus down")
    r = pub(a, "d4", "while down", expect=503)
    check_error(r, 503)
    check(b"redis bus " + redis.url.encode() in r.body, "503 body %s does not say why" % short(r.body))
    check(metric(metrics(a.admin), "m0_bus_redis_publish_failures_total") >= 1,
          "m0_bus_redis_publish_failures_total did not count the 503")
    check(not c.wait_eof(0.5), "the hold closed while Redis was down")
    redis.start()
    wait_metric(a.admin, "m0_bus_redis_up", 1, 10.0, "the Redis bus back")
    check(metric(metrics(a.admin), "m0_bus_redis_reconnects_total") == 1, "reconnects not counted once")
    after = pub(a, "d4", "after")
    got = wait_ids(c, [first, after])
    kinds = [k for k, _, _ in got]
    # Redis came back empty: the hold hears that the history is gone.
    check(kinds == ["event", "reset", "event"], "%s: blocks %s, want event, m0-reset, event" % (
        c.what, short(c.buf, 500)))
    logs = a.log_text()
    check(logs.count("holds stay open, publishes fail") == 1,
          "the outage is not logged exactly once:\n%s" % logs[-1500:])


def outage(ctx, persist):
    """Holds on A and B, events from both sides and from plain Python while
    Redis crashes (SIGKILL) and comes back; returns the holds and the ids
    accepted."""
    redis = redis_for(ctx, persist)
    a, b = rt_server(ctx, redis), rt_server(ctx, redis)
    holds = [hold(ctx, a, MOJO, "o5"), hold(ctx, b, DJANGO, "o5")]
    accepted = []
    for n in range(5):
        accepted.append(pub((a, b)[n % 2], "o5", "before %d" % n))
    for c in holds:
        wait_ids(c, accepted, settle=0)
    redis.stop(crash=True)
    wait_metric(a.admin, "m0_bus_redis_up", 0, 5.0, "A sees Redis down")
    check_error(pub(b, "o5", "lost?", expect=503), 503)
    redis.start()
    for srv in (a, b):
        wait_metric(srv.admin, "m0_bus_redis_up", 1, 10.0, "the bus back")
    for n in range(5):
        accepted.append(pub((a, b)[n % 2], "o5", "after %d" % n))
    return redis, (a, b), holds, accepted


def account(c, accepted, want_reset):
    """Every accepted id arrives once, in order, apart from those one m0-reset covers."""
    got = wait_ids(c, accepted[-1:], 10.0)
    ids = [i for k, i, _ in got if k == "event"]
    resets = [n for n, (k, _, _) in enumerate(got) if k == "reset"]
    check(len(ids) == len(set(ids)), "%s: an id arrived twice: %r" % (c.what, ids))
    check(ids == sorted(ids), "%s: ids out of order: %r" % (c.what, ids))
    check(set(ids) <= set(accepted), "%s: ids nobody published: %r" % (c.what, sorted(set(ids) - set(accepted))))
    if want_reset:
        check(len(resets) == 1, "%s: %d m0-resets, want one: %s" % (c.what, len(resets), short(c.buf, 600)))
    else:
        check(not resets and ids == accepted, "%s: ids %r (resets at %r), want every accepted id %r" % (
            c.what, ids, resets, accepted))


@smoke.phase(5, "Redis crashes mid-stream and comes back with its data (append-only file): holds on both servers stay open and get every accepted event exactly once, in order, no m0-reset")
def phase5(ctx):
    _, _, holds, accepted = outage(ctx, persist=True)
    for c in holds:
        account(c, accepted, want_reset=False)


@smoke.phase(6, "Redis crashes mid-stream and comes back empty: every accepted event arrives at most once, in order, and the loss is announced by one m0-reset")
def phase6(ctx):
    _, _, holds, accepted = outage(ctx, persist=False)
    for c in holds:
        account(c, accepted, want_reset=True)


@smoke.phase(7, "a server's links are cut while another publishes: it reconnects and replays what it missed from the stream, each event once")
def phase7(ctx):
    redis = redis_for(ctx, persist=False)
    a, b = rt_server(ctx, redis), rt_server(ctx, redis)
    c = hold(ctx, a, MOJO, "k7")
    replayed = metric(metrics(a.admin), "m0_events_replayed_total")
    # The first from here: the Redis client is made (and imported) now, so
    # the three below take a millisecond each, inside A's 50 ms backoff.
    accepted = [pub(b, "k7", "before"), redis_bus.publish(redis.url, "k7", "warm")]
    wait_ids(c, accepted, settle=0)
    # A's subscriber link (B holds nothing, so subscribes to nothing): A
    # drops both its async links and reconnects after 50 ms. Redis stays up.
    killed = redis.command("CLIENT", "KILL", "TYPE", "pubsub")
    check(killed == "1", "CLIENT KILL TYPE pubsub killed %s links, want A's one" % short(killed))
    # Published at once, from here (the m0 package's Redis path), while A is away.
    for n in range(3):
        accepted.append(redis_bus.publish(redis.url, "k7", "while A reconnects %d" % n))
    wait_metric(a.admin, "m0_bus_redis_up", 1, 10.0, "A back")
    # The replay reads the stream up to its end when it runs: an event
    # published before that read is replayed too (and its live copy muted),
    # so the three missed ones must be in before "after" goes out.
    wait_ids(c, accepted, 10.0, settle=0)
    accepted.append(pub(b, "k7", "after"))
    account(c, accepted, want_reset=False)
    ms = metrics(a.admin)
    check(metric(ms, "m0_bus_redis_reconnects_total") == 1, "A's reconnect not counted once")
    check(metric(ms, "m0_events_replayed_total") == replayed + 3,
          "m0_events_replayed_total %g -> %g: the 3 events A missed did not come from the stream" % (
              replayed, metric(ms, "m0_events_replayed_total")))


def python_publish(redis, channel, data):
    """m0.publish from a plain /usr/bin/python3 process: M0_BUS, no m0serve."""
    code = "import m0, sys; print(m0.publish(sys.argv[1], sys.argv[2]))"
    env = dict(os.environ, M0_BUS=redis.url, PYTHONPATH=os.path.join(ROOT, "src", "wsgi"))
    out = subprocess.run(["/usr/bin/python3", "-c", code, channel, data], capture_output=True,
                         text=True, timeout=20, env=env, cwd="/")
    check(out.returncode == 0 and re.match(r"^\d+$", out.stdout.strip()),
          "m0.publish from plain Python: rc %d, stdout %s, stderr %s" % (
              out.returncode, short(out.stdout), short(out.stderr)))
    return int(out.stdout.strip())


@smoke.phase(8, "m0.publish from a plain /usr/bin/python3 process (M0_BUS) reaches holds on both servers with the shared ids; with Redis down it raises RuntimeError")
def phase8(ctx):
    redis = redis_for(ctx)
    a, b = rt_server(ctx, redis), rt_server(ctx, redis)
    holds = [hold(ctx, a, MOJO, "p8"), hold(ctx, b, DJANGO, "p8")]
    first = pub(a, "p8", "from the admin API")
    i = python_publish(redis, "p8", "from a cron job")
    check(i > first, "the plain Python id %d is not above the server's %d" % (i, first))
    for c in holds:
        expect_exact(c, [(first, "from the admin API", None), (i, "from a cron job", None)])
    redis.stop()
    code = "import m0\ntry:\n    m0.publish('p8', 'x')\nexcept RuntimeError as e:\n    print('RuntimeError', e)"
    env = dict(os.environ, M0_BUS=redis.url, PYTHONPATH=os.path.join(ROOT, "src", "wsgi"))
    out = subprocess.run(["/usr/bin/python3", "-c", code], capture_output=True, text=True,
                         timeout=20, env=env, cwd="/")
    check(out.stdout.startswith("RuntimeError m0.publish: redis bus " + redis.url),
          "m0.publish with Redis down: %s %s" % (short(out.stdout), short(out.stderr)))


@smoke.phase(9, "--workers: a bad count is one line and exit code 2; several workers with --realtime need --bus redis://; a worker that cannot start stops them all with exit code 2")
def phase9(ctx):
    for bad in ("0", "65", "two"):
        rc, _, err = ctx.run_binary(DJANGO_ARGS + ["--workers", bad])
        check(rc == 2 and err.strip().count("\n") == 0 and "--workers" in err,
              "--workers %s: rc %r, stderr %s" % (bad, rc, short(err)))
    rc, _, err = ctx.run_binary(DJANGO_ARGS + ["--workers", "2", "--realtime"])
    check(rc == 2 and "needs a shared bus" in err, "--workers 2 --realtime without --bus: rc %r, %s" % (
        rc, short(err)))
    sock = __import__("socket")
    # A client port another process listens on, with SO_REUSEPORT as a
    # second m0serve would: the parent refuses it before any worker binds,
    # in one line (the workers would otherwise join that port).
    blocker = sock.socket()
    blocker.setsockopt(sock.SOL_SOCKET, sock.SO_REUSEPORT, 1)
    blocker.bind(("127.0.0.1", 0))
    blocker.listen(1)
    port = blocker.getsockname()[1]
    rc, _, err = ctx.run_binary(DJANGO_ARGS + ["--workers", "2", "--listen", "127.0.0.1:%d" % port])
    blocker.close()
    lines = [l for l in err.splitlines() if l.strip()]
    check(rc == 2 and len(lines) == 1 and "another process listens on it" in err,
          "--workers 2 on a port in use: rc %r, stderr %s" % (rc, short(err)))
    # An admin port in use: the parent, which binds every listener before any
    # worker starts, refuses it in one line.
    blocker = sock.socket()
    blocker.bind(("127.0.0.1", 0))
    blocker.listen(1)
    admin_port = blocker.getsockname()[1]
    rc, _, err = ctx.run_binary(DJANGO_ARGS + ["--workers", "2", "--listen", "127.0.0.1:%d" % free_port(),
                                               "--admin-listen", "127.0.0.1:%d" % admin_port, "--admin-open"])
    blocker.close()
    lines = [l for l in err.splitlines() if l.strip()]
    check(rc == 2 and len(lines) == 1 and "--admin-listen" in err,
          "--workers 2 on an admin port in use: rc %r, stderr %s" % (rc, short(err)))


def children(pid):
    out = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True).stdout
    return sorted(int(p) for p in out.split())


@smoke.phase(10, "--workers 2 on one Redis: two worker processes share the port; holds on either hear a publish made on worker 0's admin API; a killed worker is started again; SIGTERM stops them all, exit code 0")
def phase10(ctx):
    redis = redis_for(ctx)
    srv = rt_server(ctx, redis, ["--workers", "2"])
    parent = srv.proc.pid
    kids = wait_for(lambda: len(children(parent)) == 2 and children(parent), 5.0, what="two workers")
    # Both listening before any hold (a worker still importing Django under a
    # sanitizer on a busy machine would leave every connection to the other).
    wait_for(lambda: "as worker 1" in srv.log_text(), 60.0, what="worker 1 listening")
    # Holds until both workers have some (the kernel spreads connections by
    # the client's port): /metrics is worker 0's, so it counts fewer than all.
    holds = []
    for _ in range(40):
        holds.append(hold(ctx, srv, MOJO, "w10"))
        on0 = metric(metrics(srv.admin), "m0_holds_open")
        if 0 < on0 < len(holds):
            break
    check(0 < on0 < len(holds), "%d holds, worker 0 has %d: not spread over both workers" % (
        len(holds), on0))
    i = pub(srv, "w10", "to every worker")
    for c in holds:
        expect_exact(c, [(i, "to every worker", None)])
    os.kill(kids[0], 9)
    again = wait_for(lambda: len(children(parent)) == 2 and kids[0] not in children(parent)
                     and children(parent), 5.0, what="the killed worker started again")
    check(kids[1] in again, "the other worker %d was restarted too: %r" % (kids[1], again))
    wait_for(lambda: "worker 0" in srv.log_text() and srv.log_text().count("as worker 0") == 2, 5.0,
             what="worker 0 listening again")
    after = hold(ctx, srv, MOJO, "w10b")
    j = pub(srv, "w10b", "after the restart")
    expect_exact(after, [(j, "after the restart", None)])


if __name__ == "__main__":
    sys.exit(smoke.main())
