#!/usr/bin/python3
"""smoke-history: channel history and replay, end to end, on both pools.

Each channel keeps its recent events (--history, --history-seconds,
--history-bytes). A hold that names a cursor (Last-Event-ID, or the
lastEventID query parameter) is replayed every kept event after it, merged
across its channels in id order, before any live event; a cursor the history
cannot serve (evicted, or older than this server process) is first answered
with one `event: m0-reset` control event that carries no id. A first connect
starts where its handler began. A slow reader is closed with a retry hint
and loses nothing: reconnecting with its last id, it is replayed the rest.

Server (a fresh one per phase):

    m0serve --listen 127.0.0.1:P --chdir fixtures/djangoproj \\
            --mount /=djangoproj.wsgi:application --mount /native=mojo \\
            --realtime --heartbeat 30 --blocking-threads 2 \\
            --admin-listen 127.0.0.1:P2 --admin-key-file build/smoke-logs/...key

plus what a phase adds (--history 2, --blocking-threads 1, small
--hold-buffer-limit). Events are published through the admin listener; the
holds are the mojo mount's /native/hold and the Django view /hold.

Every phase runs twice: on the in-process bus (phases 1-7), and on the Redis
bus (phases 11-17: the same checks, with `--bus redis://...` and a
redis-server of the phase's own). On Redis the history lives in Redis: the
m0_history_* gauges are not counted, and a restarted server still replays
what Redis keeps (phase 14) where the in-process bus answers m0-reset.
"""

import os
import re
import select
import socket
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from m0smoke import (  # noqa: E402
    DJANGO_ARGS, Conn, Fail, Smoke, build_request, check, check_hold_head, event_bytes,
    leave, metric, metrics, publish_admin, read_head_body, short, sse_blocks, wait_for,
    wait_metric)
from m0redis import RedisServer  # noqa: E402

SCRIPT = "60-history"
ADMIN_KEY = "smoke-admin-key-60hist-b41c"
MOJO_HEAD = b": mojo hold\n\n"
DJANGO_HEAD = b": django hold\n\n"
HEARTBEAT = b":\n\n"

smoke = Smoke(SCRIPT, __doc__)
REDIS_PHASES = 10  # phase N on the Redis bus is phase N + 10


def phase(number, what, redis_what=None):
    """Registers `fn` as phase `number` on the in-process bus and as phase
    number + 10 on the Redis bus (ctx.redis set: rt_server adds --bus);
    `redis_what` when the Redis phase checks something else."""
    def deco(fn):
        def on_redis(ctx):
            ctx.redis = RedisServer("%s-phase%d" % (SCRIPT, ctx.number))
            ctx.finalizers.append(ctx.redis.stop)
            fn(ctx)

        smoke.phase(number, what)(fn)
        smoke.phase(number + REDIS_PHASES, (redis_what or what) + " (Redis bus)")(on_redis)
        return fn
    return deco


def on_redis(ctx):
    return getattr(ctx, "redis", None) is not None


class Pool:
    """Where a hold is taken: the mojo mount or the Django view."""

    def __init__(self, name, worker, path, head):
        self.name = name      # for channel names and messages
        self.worker = worker  # the x-worker prefix
        self.path = path      # % channels
        self.head = head      # the stream's first bytes


MOJO = Pool("mojo", "mojo", "/native/hold?channel=%s", MOJO_HEAD)
DJANGO = Pool("django", "wsgi", "/hold?channel=%s", DJANGO_HEAD)
POOLS = (MOJO, DJANGO)


def rt_server(ctx, extra=()):
    key_file = ctx.tmpfile("admin.key", ADMIN_KEY + "\n")
    args = DJANGO_ARGS + ["--realtime", "--heartbeat", "30", "--blocking-threads", "2",
                          "--admin-key-file", key_file] + list(extra)
    if on_redis(ctx):
        args += ["--bus", ctx.redis.url]
    srv = ctx.server(args, admin=True, admin_key=ADMIN_KEY)
    check(srv.admin is not None, "no admin listener (with SERVER=, set SERVER_ADMIN and SERVER_ADMIN_KEY)")
    if on_redis(ctx):
        wait_metric(srv.admin, "m0_bus_redis_up", 1, 5.0, "the Redis bus connected")
    return srv


def pub(srv, channel, data, event=None):
    return publish_admin(srv.admin, srv.admin_key, channel, data, event)


def open_hold(ctx, srv, pool, channels, cursor=None, query_cursor=None):
    """A hold on `channels` (comma-separated) taken by `pool`; `cursor` goes
    in Last-Event-ID, `query_cursor` in ?lastEventID=. Checks the head and
    the head body; returns the connection."""
    path = pool.path % channels
    if query_cursor is not None:
        path += "&lastEventID=%d" % query_cursor
    headers = [("Last-Event-ID", str(cursor))] if cursor is not None else []
    c, head = ctx.hold(srv, path, headers)
    # Django's middleware adds its own headers; the mojo head is exact.
    check_hold_head(head, pool.worker, exact_names=pool is MOJO)
    read_head_body(c, pool.head)
    c.what = "%s hold GET %s%s" % (pool.name, path, " with Last-Event-ID: %d" % cursor if cursor is not None else "")
    c.head_body = pool.head
    return c


def ev(eid, data, event=None):
    """The exact bytes of one event block."""
    return event_bytes(eid, data, event)


def reset(oldest):
    """The exact bytes of the m0-reset control event: no id line."""
    return b'event: m0-reset\ndata: {"oldest": %d}\n\n' % oldest


def blocks(c):
    """The hold's complete blocks after its head body, heartbeats left out,
    and the incomplete rest."""
    bs, rest = sse_blocks(c.buf[len(c.head_body):])
    return [b for b in bs if b != HEARTBEAT], rest


def block_id(b):
    m = re.match(rb"^id: (\d+)\n", b)
    return int(m.group(1)) if m else None


def expect_blocks(c, want, timeout=5.0, settle=0.3):
    """Reads until len(want) blocks (heartbeats aside) have arrived, then
    settle seconds more; the stream must be exactly `want`, in order, and
    still open."""
    c.read_until(lambda b: len(blocks(c)[0]) >= len(want), timeout)
    if not c.eof and settle:
        c.read_until(lambda b: False, settle)
    got, rest = blocks(c)
    body = c.buf[len(c.head_body):]
    if got != want:
        state = "EOF" if c.eof else "still open"
        raise Fail("%s: stream after the head is %s (%s), want blocks %s" % (
            c.what, short(body, 700), state, short(b"".join(want), 700)))
    check(rest == b"", "%s: stream ends in an incomplete block %s" % (c.what, short(rest)))
    check(not c.eof, "%s: the server closed the stream after %s" % (c.what, short(body)))


# ---------------------------------------------------------------------------


@phase(1, "a hold that leaves and reconnects with its Last-Event-ID is replayed exactly the 3 events it missed, in order, then live events, on both pools")
def phase1(ctx):
    srv = rt_server(ctx)
    for pool in POOLS:
        ch = "h1-" + pool.name
        c = open_hold(ctx, srv, pool, ch)
        seen = [(pub(srv, ch, d), d) for d in ("one", "two", "three")]
        expect_blocks(c, [ev(i, d) for i, d in seen])
        leave(c)
        missed = [(pub(srv, ch, "four"), "four", None),
                  (pub(srv, ch, "five\nsix", "update"), "five\nsix", "update"),
                  (pub(srv, ch, "seven"), "seven", None)]
        r0 = metric(metrics(srv.admin), "m0_events_replayed_total")
        c = open_hold(ctx, srv, pool, ch, cursor=seen[-1][0])
        want = [ev(*m) for m in missed]
        # Replayed right after the head, before anything else is published.
        expect_blocks(c, want)
        live = pub(srv, ch, "live")
        expect_blocks(c, want + [ev(live, "live")])
        wait_metric(srv.admin, "m0_events_replayed_total", r0 + 3, 3.0, "%s reconnect" % pool.name)


@phase(2, "a hold on two channels reconnecting with a cursor gets the missed events of both, merged in id order, and none of a third channel, on both pools")
def phase2(ctx):
    srv = rt_server(ctx)
    for pool in POOLS:
        a, b, other = "m2a-" + pool.name, "m2b-" + pool.name, "m2c-" + pool.name
        c = open_hold(ctx, srv, pool, "%s,%s" % (a, b))
        first = pub(srv, a, "a0")
        expect_blocks(c, [ev(first, "a0")])
        leave(c)
        want = []
        for ch, d in ((b, "b1"), (a, "a2"), (a, "a3"), (other, "c4"), (b, "b5"), (a, "a6"), (b, "b7")):
            i = pub(srv, ch, d)
            if ch != other:
                want.append(ev(i, d))
        c = open_hold(ctx, srv, pool, "%s,%s" % (a, b), cursor=first)
        expect_blocks(c, want)
        live = pub(srv, b, "live")
        expect_blocks(c, want + [ev(live, "live")])


@phase(3, "with --history 2, a cursor older than what is kept gets one m0-reset (no id line, oldest = the first kept id), then the kept events, then live; a cursor at the last evicted id needs none")
def phase3(ctx):
    srv = rt_server(ctx, ["--history", "2"])
    for pool in POOLS:
        ch = "r3-" + pool.name
        m0 = metrics(srv.admin)
        ids = [pub(srv, ch, "e%d" % n) for n in range(1, 6)]
        m1 = metrics(srv.admin)
        # On Redis the history lives in Redis: not counted here.
        check(on_redis(ctx) or metric(m1, "m0_history_events") == metric(m0, "m0_history_events") + 2,
              "m0_history_events %g -> %g after 5 events on a new channel with --history 2, want +2" % (
                  metric(m0, "m0_history_events"), metric(m1, "m0_history_events")))
        check(on_redis(ctx) or
              metric(m1, "m0_history_evictions_total") == metric(m0, "m0_history_evictions_total") + 3,
              "m0_history_evictions_total %g -> %g after 5 events with --history 2, want +3" % (
                  metric(m0, "m0_history_evictions_total"), metric(m1, "m0_history_evictions_total")))
        kept = [ev(ids[3], "e4"), ev(ids[4], "e5")]
        resets = metric(m1, "m0_resets_total")
        # The newest evicted id: everything after it is kept, no gap.
        at_mark = open_hold(ctx, srv, pool, ch, cursor=ids[2])
        expect_blocks(at_mark, kept)
        check(metric(metrics(srv.admin), "m0_resets_total") == resets,
              "%s: m0_resets_total moved for a cursor with no gap" % at_mark.what)
        old = open_hold(ctx, srv, pool, ch, cursor=ids[0])
        expect_blocks(old, [reset(ids[3])] + kept)
        first = blocks(old)[0][0]
        check(not re.search(rb"(^|\n)id:", first),
              "%s: the m0-reset block carries an id line (a browser would take it as its cursor): %s" % (
                  old.what, short(first)))
        wait_metric(srv.admin, "m0_resets_total", resets + 1, 3.0, "after one reset")
        live = pub(srv, ch, "e6")
        expect_blocks(at_mark, kept + [ev(live, "e6")])
        expect_blocks(old, [reset(ids[3])] + kept + [ev(live, "e6")])


@phase(4, "after a restart ids keep increasing, and a hold reconnecting with the old server's id gets m0-reset first, then live events, on both pools",
       "after a restart the counter and the history are Redis's: ids keep increasing and a hold reconnecting with an old id is replayed what Redis keeps, no m0-reset, on both pools")
def phase4(ctx):
    one = rt_server(ctx)
    one.require_own("it restarts the server")
    old_ids = [pub(one, "rs4", "before %d" % n) for n in range(3)]
    one.stop()  # SIGTERM by PID, exit code 0
    two = rt_server(ctx)
    if on_redis(ctx):
        return phase4_redis(ctx, two, old_ids)
    pos = int(metric(metrics(two.admin), "m0_bus_last_id"))
    check(pos > max(old_ids), "the restarted server's m0_bus_last_id %d is not above the old server's ids %r" % (
        pos, old_ids))
    resets = metric(metrics(two.admin), "m0_resets_total")
    holds = []
    for pool in POOLS:
        c = open_hold(ctx, two, pool, "rs4", cursor=old_ids[-1])
        # Never silence: the reset arrives before anything is published.
        expect_blocks(c, [reset(pos + 1)])
        holds.append(c)
    wait_metric(two.admin, "m0_resets_total", resets + 2, 3.0, "after two reconnects across the restart")
    first = pub(two, "rs4", "after")
    check(first > max(old_ids), "the restarted server's first id %d is not above the old server's ids %r" % (
        first, old_ids))
    check(first == pos + 1, "first id %d after the restart, want m0_bus_last_id + 1 = %d (the reset's oldest)" % (
        first, pos + 1))
    for c in holds:
        expect_blocks(c, [reset(pos + 1), ev(first, "after")])


def phase4_redis(ctx, two, old_ids):
    """On Redis the counter and the history outlive the server: the new one
    starts at the shared counter and replays what Redis keeps, no m0-reset."""
    pos = int(metric(metrics(two.admin), "m0_bus_last_id"))
    check(pos == max(old_ids), "the restarted server's m0_bus_last_id %d, want the shared counter %d" % (
        pos, max(old_ids)))
    resets = metric(metrics(two.admin), "m0_resets_total")
    kept = [ev(i, "before %d" % n) for n, i in enumerate(old_ids)][1:]
    holds = [open_hold(ctx, two, pool, "rs4", cursor=old_ids[0]) for pool in POOLS]
    for c in holds:
        expect_blocks(c, kept)
    first = pub(two, "rs4", "after")
    check(first > max(old_ids), "the restarted server's first id %d is not above the old ids %r" % (
        first, old_ids))
    for c in holds:
        expect_blocks(c, kept + [ev(first, "after")])
    check(metric(metrics(two.admin), "m0_resets_total") == resets, "an m0-reset across a restart on Redis")


@phase(5, "?lastEventID=C replays like Last-Event-ID: C on both pools; with both, the header wins either way")
def phase5(ctx):
    srv = rt_server(ctx)
    ch = "q5"
    e = [pub(srv, ch, "e%d" % n) for n in range(1, 5)]

    def after(k):
        """The events after e[k-1]: e[k] .. e[3]."""
        return [ev(e[n], "e%d" % (n + 1)) for n in range(k, 4)]

    cases = []
    for pool in POOLS:
        cases += [
            (open_hold(ctx, srv, pool, ch, query_cursor=e[1]), after(2)),
            (open_hold(ctx, srv, pool, ch, cursor=e[1]), after(2)),
            (open_hold(ctx, srv, pool, ch, cursor=e[2], query_cursor=e[0]), after(3)),
            (open_hold(ctx, srv, pool, ch, cursor=e[0], query_cursor=e[2]), after(1)),
        ]
    for c, want in cases:
        expect_blocks(c, want, settle=0.0)
    live = pub(srv, ch, "live")
    for c, want in cases:
        expect_blocks(c, want + [ev(live, "live")])


def wsgi_label(ms, name):
    keys = [k for k in ms if k.startswith(name + "{") and 'pool="wsgi' in k]
    check(len(keys) == 1, "no single %s{pool=\"wsgi...\"} in /metrics: %r" % (name, keys))
    return keys[0]


@phase(6, "a first connect starts where its handler began: an event published inside the hold's own view is replayed; one published while the job still waited in the queue is not")
def phase6(ctx):
    srv = rt_server(ctx, ["--blocking-threads", "1"])
    ms = metrics(srv.admin)
    replayed = metric(ms, "m0_events_replayed_total")
    busy, queued = wsgi_label(ms, "m0_pool_busy_threads"), wsgi_label(ms, "m0_pool_queued_jobs")
    # The view publishes, then answers the hold: its event is numbered after
    # the hold's start and before its subscription, so only replay brings it.
    c, head = ctx.hold(srv, "/hold-publish?channel=s6&data=during")
    check_hold_head(head, "wsgi", exact_names=False)
    c.read_until(lambda b: b"\n\n" in b, 5.0)
    m = re.match(rb"^: django hold published (\d+)\n\n", c.buf)
    check(m is not None, "/hold-publish head body %s, want ': django hold published N'" % short(c.buf))
    c.head_body, c.what = m.group(0), "hold from /hold-publish"
    during = int(m.group(1))
    expect_blocks(c, [ev(during, "during")])
    wait_metric(srv.admin, "m0_events_replayed_total", replayed + 1, 3.0, "after the view's own event")
    live = pub(srv, "s6", "live")
    expect_blocks(c, [ev(during, "during"), ev(live, "live")])

    # One pool thread, busy in /slow: the hold's job waits in the queue, and
    # its start position is read only when a thread takes it.
    slow = ctx.connect(srv)
    t0 = time.monotonic()
    slow.send(build_request("GET", "/slow?s=1.5"))
    wait_for(lambda: metric(metrics(srv.admin), busy) == 1, 1.0, what="the pool thread busy in /slow")
    q = ctx.connect(srv)
    q.send(build_request("GET", DJANGO.path % "s6q"))
    wait_for(lambda: metric(metrics(srv.admin), queued) == 1, 1.0, what="the hold job queued behind /slow")
    early = pub(srv, "s6q", "while queued")
    check(time.monotonic() - t0 < 1.2 and slow.pending() == b"",
          "the publish came %.2fs after /slow?s=1.5 began (answered: %s): the queued hold may already have started" % (
              time.monotonic() - t0, short(slow.buf)))
    head = q.read_head(5.0)
    check_hold_head(head, "wsgi", exact_names=False)
    read_head_body(q, DJANGO_HEAD)
    q.head_body, q.what = DJANGO_HEAD, "Django hold queued behind /slow"
    r = slow.read_response("GET", 5.0)
    check(r.status == 200, "/slow?s=1.5: %s %s" % (r.summary(), short(r.body)))
    live = pub(srv, "s6q", "after the start")
    check(live > early, "ids %d then %d" % (early, live))
    expect_blocks(q, [ev(live, "after the start")])


class SmallWindowConn(Conn):
    """A client connection whose receive buffer is set small before the
    connect, so the window stays small: a client that does not read stops
    taking the server's bytes early instead of letting its kernel absorb
    megabytes."""

    def __init__(self, addr, rcvbuf, timeout=5.0):
        self.addr = addr
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        self.sock.settimeout(timeout)
        self.sock.connect(addr)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = b""
        self.eof = False
        self.reset = False
        self.closed = False


def read_to_eof(c, timeout):
    """Reads until EOF as fast as bytes come (the server gives a closed slow
    reader only --hold-drain-timeout to take its last bytes); joins once, so
    megabytes cost no quadratic copying. Returns whether EOF came."""
    parts = [c.buf]
    deadline = time.monotonic() + timeout
    for _ in range(1000000):
        left = deadline - time.monotonic()
        if left <= 0:
            break
        r, _, _ = select.select([c.sock], [], [], min(left, 0.5))
        if not r:
            continue
        try:
            data = c.sock.recv(1 << 20)
        except ConnectionResetError:
            c.eof = c.reset = True
            break
        if not data:
            c.eof = True
            break
        parts.append(data)
    c.buf = b"".join(parts)
    return c.eof


SLOW_LIMIT = 65536            # --hold-buffer-limit
SLOW_EVENT = 16000            # bytes of data per event, under --max-event-size 32768
SLOW_CAP = 8 * 1024 * 1024    # published at most before the close must have come
SLOW_MISSED = 3               # events published while the reader is away


@phase(7, "a reader that stops reading while ~2 MiB are published is closed with 'retry: 1000'; reconnecting with the last id it saw it is replayed every later event, none lost, none twice")
def phase7(ctx):
    srv = rt_server(ctx, ["--hold-buffer-limit", str(SLOW_LIMIT), "--max-event-size", "32768",
                          "--hold-drain-timeout", "0.5", "--history", "1000"])
    closed0 = metric(metrics(srv.admin), "m0_slow_readers_closed_total")
    c = SmallWindowConn(srv.addr, 4096)
    ctx.conns.append(c)
    c.send(build_request("GET", MOJO.path % "slow7"))
    head = c.read_head(5.0)
    check_hold_head(head, "mojo")
    read_head_body(c, MOJO_HEAD)
    c.head_body, c.what = MOJO_HEAD, "slow mojo hold"
    pad = "x" * SLOW_EVENT
    published = []  # ids, in publish order
    data = {}

    def publish_one():
        d = "%d %s" % (len(published), pad)
        i = pub(srv, "slow7", d)
        published.append(i)
        data[i] = d

    # Publish, reading nothing, until the server gives up on this reader
    # (the kernel's buffers take the first megabytes, then the hold's
    # backlog passes twice --hold-buffer-limit).
    for _ in range(SLOW_CAP // SLOW_EVENT):
        publish_one()
        if metric(metrics(srv.admin), "m0_slow_readers_closed_total") > closed0:
            break
    else:
        raise Fail("%d bytes published to a hold that reads nothing, and it was never closed as a slow reader" % (
            len(published) * SLOW_EVENT))
    # It reads what it has at once: the server waits --hold-drain-timeout.
    check(read_to_eof(c, 5.0), "the slow reader's stream did not end within 5s of its close (%d bytes)" % len(c.buf))
    check(c.buf.startswith(MOJO_HEAD), "the slow reader's stream does not start with its head body: %s" % short(c.buf))
    bs, rest = sse_blocks(c.buf[len(MOJO_HEAD):])
    bs = [b for b in bs if b != HEARTBEAT]
    check(rest == b"", "the slow reader's stream ends in an incomplete block (%d bytes): %s" % (
        len(rest), short(rest[:120])))
    check(bs and bs[-1] == b"retry: 1000\n\n",
          "the slow reader's stream (%d bytes) does not end in 'retry: 1000': its last bytes %s" % (
              len(c.buf), short(c.buf[-300:])))
    seen = [block_id(b) for b in bs[:-1]]
    if None in seen:
        raise Fail("the slow reader got a block without an id: %s" % short(bs[seen.index(None)][:120]))
    check(seen == published[:len(seen)],
          "the slow reader got ids %s ... %s (%d), not a prefix of those published %s ... %s (%d)" % (
              seen[:2], seen[-2:], len(seen), published[:2], published[-2:], len(published)))
    for b, i in zip(bs, seen):
        check(b == ev(i, data[i]), "event %d arrived as %s" % (i, short(b[:120])))
    # While it is away, a few more. Kept under --hold-buffer-limit in all:
    # a replay is written to the new connection at once, and counts against
    # the limit like any backlog.
    for _ in range(SLOW_MISSED):
        publish_one()
    last = seen[-1] if seen else None
    want = [i for i in published if last is None or i > last]
    r = Conn(srv.addr)
    ctx.conns.append(r)
    r.send(build_request("GET", MOJO.path % "slow7", [("Last-Event-ID", str(last))] if last else []))
    head = r.read_head(5.0)
    check_hold_head(head, "mojo")
    read_head_body(r, MOJO_HEAD)
    r.head_body, r.what = MOJO_HEAD, "reconnect with Last-Event-ID: %s" % last
    expect_blocks(r, [ev(i, data[i]) for i in want])
    check(len(seen) + len(want) == len(published) and sorted(seen + want) == published,
          "ids across both connections do not account for the %d published exactly once" % len(published))
    live = pub(srv, "slow7", "live")
    expect_blocks(r, [ev(i, data[i]) for i in want] + [ev(live, "live")])
    check(metric(metrics(srv.admin), "m0_slow_readers_closed_total") == closed0 + 1,
          "m0_slow_readers_closed_total is %g, want %g: the reconnect was closed too" % (
              metric(metrics(srv.admin), "m0_slow_readers_closed_total"), closed0 + 1))
    sys.stderr.write("  [phase 7] %d events (%d bytes) reached the reader before its close; %d replayed\n" % (
        len(seen), len(c.buf), len(want)))


if __name__ == "__main__":
    sys.exit(smoke.main())
