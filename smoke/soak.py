#!/usr/bin/python3
"""soak: textshelf (fixtures/textshelf) served by m0serve under steady load
for SOAK_SECONDS (default 180; `make soak SOAK_SECONDS=600` for ten minutes),
then checked for loss, duplicates, failed requests and leaks.

The load, all at once:
  - SOAK_HOLDS holds (default 1000) on the two documents' channels: most on
    the mojo mount's /native/live with grants Django signed (fetched again
    when one expires, as the page does), some on the WSGI hold view
    /events/document/N; each reconnects with its Last-Event-ID whenever it
    is dropped, and the test drops some at random (SOAK_DROPS_PER_S);
  - two slow readers that stop reading for seconds at a time;
  - admin POST /publish at SOAK_PUBLISH_RATE events/s on the two channels,
    and annotations posted through Django's form (which publishes too);
  - logged-in users reading document pages at the same time.

At the end, with publishing stopped and the streams quiet:
  - every hold received, in order and exactly once, every event of its
    channel after where it started (a reference hold per channel, never
    dropped, is the list; every admin id must be in it), except ids an
    m0-reset it received says history could not fill (counted);
  - no Django request and no publish failed;
  - the server's RSS at the end is within a margin of its RSS after warm-up,
    and its open file descriptors return to the count before the holds;
  - /metrics agrees: the holds it counts open are the holds connected.
A table of the figures is printed and recorded with smoke/emit.py.
"""

import asyncio
import os
import random
import sys
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import emit  # noqa: E402
from m0smoke import Fail, Smoke, check, metric, metrics, publish_admin, short  # noqa: E402
from textshelf_lib import DOC, OTHER_DOC, User, key_file, new_key, seed, textshelf_server  # noqa: E402

SECONDS = float(os.environ.get("SOAK_SECONDS", "180"))
HOLDS = int(os.environ.get("SOAK_HOLDS", "1000"))
PUBLISH_RATE = float(os.environ.get("SOAK_PUBLISH_RATE", "10"))
DROPS_PER_S = float(os.environ.get("SOAK_DROPS_PER_S", "5"))
ANNOTATE_EVERY_S = 2.0
READS_PER_S = 5.0
WSGI_HOLDS = 20
DOCS = (DOC, OTHER_DOC)

smoke = Smoke("soak", __doc__, phase_timeout=SECONDS + 300.0)


def channel(doc):
    return "notate_document_%d" % doc


class Hold:
    """One EventSource-like client: reconnects with its Last-Event-ID."""

    def __init__(self, soak, name, doc, wsgi=False, slow=False, reference=False):
        self.soak, self.name, self.doc = soak, name, doc
        self.wsgi, self.slow, self.reference = wsgi, slow, reference
        self.start = None       # the cursor of its first connect
        self.ids = []           # every id received, in arrival order
        self.resets = []        # (last id before it, oldest) for each m0-reset
        self.connects = 0
        self.refused = 0        # non-200 heads (expired grants are fetched anew)
        self.writer = None
        self.connected = False

    async def run(self, cursor):
        self.start = cursor
        while not self.soak.stopping:
            try:
                await self.session()
            except (ConnectionError, OSError, asyncio.IncompleteReadError):
                pass
            self.connected = False
            if not self.soak.stopping:
                await asyncio.sleep(random.uniform(0.02, 0.2))

    async def session(self):
        last = self.ids[-1] if self.ids else self.start
        if self.wsgi:
            path, headers = "/events/document/%d" % self.doc, self.soak.alice.cookie_header()
        else:
            path, headers = self.soak.url[self.doc], []
        reader, writer = await asyncio.open_connection(*self.soak.srv.addr)
        self.writer = writer
        head = "GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\nLast-Event-ID: %d\r\n" % (path, last)
        head += "".join("%s: %s\r\n" % kv for kv in headers)
        writer.write((head + "\r\n").encode())
        status = await reader.readline()
        while (await reader.readline()) not in (b"\r\n", b""):
            pass
        if b" 200 " not in status:
            self.refused += 1
            writer.close()
            if not self.wsgi:
                await self.soak.refresh_url(self.doc)
            return
        self.connects += 1
        self.connected = True
        buf = b""
        while not self.soak.stopping:
            if self.slow and random.random() < 0.3:
                await asyncio.sleep(random.uniform(2, 6))  # a reader that stops reading
            data = await reader.read(65536)
            if not data:
                return
            buf += data
            while b"\n\n" in buf:
                block, buf = buf.split(b"\n\n", 1)
                self.take(block)
        writer.close()

    def take(self, block):
        fields = {}
        for line in block.split(b"\n"):
            if not line or line.startswith(b":"):
                continue
            k, _, v = line.partition(b":")
            fields.setdefault(k.decode(), v[1:] if v.startswith(b" ") else v)
        if fields.get("event") == b"m0-reset":
            oldest = int(fields["data"].split(b":")[1].strip(b" }"))
            self.resets.append((self.ids[-1] if self.ids else self.start, oldest))
        elif "id" in fields:
            self.ids.append(int(fields["id"]))

    def drop(self):
        if self.writer is not None and self.connected:
            self.writer.close()


class Soak:
    def __init__(self, ctx, srv):
        self.ctx, self.srv = ctx, srv
        self.stopping = False
        self.alice = User(srv.addr, "alice").login()
        self.bob = User(srv.addr, "bob").login()
        self.url = {d: self.alice.stream_url("/grant/document/%d" % d) for d in DOCS}
        self.admin_ids = {d: [] for d in DOCS}
        self.failures = []
        self.reads = self.annotations = self.grant_refreshes = 0

    async def refresh_url(self, doc):
        self.url[doc] = await asyncio.get_running_loop().run_in_executor(
            None, self.alice.stream_url, "/grant/document/%d" % doc)
        self.grant_refreshes += 1

    async def publisher(self):
        loop = asyncio.get_running_loop()
        n = 0
        while not self.stopping:
            doc = DOCS[n % 2]
            n += 1
            try:
                i = await loop.run_in_executor(None, lambda: publish_admin(
                    self.srv.admin, self.srv.admin_key, channel(doc), "soak %d" % n, event="soak"))
                self.admin_ids[doc].append(i)
            except Fail as e:
                self.failures.append("admin publish: %s" % e)
            await asyncio.sleep(1.0 / PUBLISH_RATE)

    async def annotator(self):
        loop = asyncio.get_running_loop()
        n = 0
        while not self.stopping:
            n += 1
            try:
                await loop.run_in_executor(None, self.bob.annotate, DOC, "Nevermore", "soak %d" % n)
                self.annotations += 1
            except Fail as e:
                self.failures.append("annotate: %s" % e)
            await asyncio.sleep(ANNOTATE_EVERY_S)

    async def reader(self):
        loop = asyncio.get_running_loop()
        while not self.stopping:
            doc = random.choice(DOCS)
            r = await loop.run_in_executor(None, self.alice.get, "/documents/%d/" % doc)
            self.reads += 1
            if r.status != 200:
                self.failures.append("GET /documents/%d/: %s" % (doc, r.summary()))
            await asyncio.sleep(1.0 / READS_PER_S)

    async def dropper(self, holds):
        while not self.stopping:
            random.choice(holds).drop()
            await asyncio.sleep(1.0 / DROPS_PER_S)


def rss_kib(pid):
    with open("/proc/%d/status" % pid) as f:
        return int(f.read().split("VmRSS:")[1].split()[0])


def fds(pid):
    return len(os.listdir("/proc/%d/fd" % pid))


def verify(hold, reference):
    """Problems with one hold's stream, checked against its channel's list."""
    problems = []
    ids = hold.ids
    if any(b <= a for a, b in zip(ids, ids[1:])):
        problems.append("ids not strictly increasing (a duplicate or a reorder)")
    got = set(ids)
    extra = got - set(reference)
    if extra:
        problems.append("%d ids not on its channel, e.g. %d" % (len(extra), min(extra)))
    missing = [i for i in reference if i > hold.start and i not in got and
               not any(before < i < oldest for before, oldest in hold.resets)]
    if missing:
        problems.append("%d events lost, e.g. id %d" % (len(missing), missing[0]))
    return problems


@smoke.phase(1, "textshelf under load: holds that drop and reconnect, slow readers, admin and Django "
                "publishing, page reads; nothing lost or doubled, no request failed, nothing leaked")
def phase1(ctx):
    seed()
    srv = textshelf_server(ctx, key_file(ctx, "grant.keys", [new_key("k1")]))
    srv.require_own("it reads the server's memory and file descriptors from /proc")
    pid = srv.proc.pid
    fds_before = fds(pid)
    soak = Soak(ctx, srv)
    start = int(metric(metrics(srv.admin), "m0_bus_last_id"))

    async def main():
        refs = {d: Hold(soak, "reference-%d" % d, d, reference=True) for d in DOCS}
        holds = [Hold(soak, "hold-%d" % i, DOCS[i % 2], wsgi=i < WSGI_HOLDS) for i in range(HOLDS)]
        slow = [Hold(soak, "slow-%d" % d, d, slow=True) for d in DOCS]
        tasks = [asyncio.create_task(h.run(start)) for h in list(refs.values()) + holds + slow]
        t0 = time.monotonic()
        while sum(h.connected for h in holds) < HOLDS * 0.95 and time.monotonic() - t0 < 60:
            await asyncio.sleep(0.2)
        workers = [asyncio.create_task(w) for w in (
            soak.publisher(), soak.annotator(), soak.reader(), soak.dropper(holds))]
        await asyncio.sleep(min(10.0, SECONDS / 4))
        warm_rss = rss_kib(pid)
        await asyncio.sleep(SECONDS - min(10.0, SECONDS / 4))
        # Quiet: no more publishing; the streams settle; every hold reconnected.
        for w in workers:
            w.cancel()
        await asyncio.gather(*workers, return_exceptions=True)
        t1 = time.monotonic()
        while time.monotonic() - t1 < 20:
            await asyncio.sleep(0.5)
            last = {d: max(soak.admin_ids[d] + refs[d].ids + [0]) for d in DOCS}
            behind = [h for h in holds + slow if not h.connected or
                      (h.ids[-1] if h.ids else h.start) < last[h.doc]]
            if not behind:
                break
        end_rss = rss_kib(pid)
        m = metrics(srv.admin)
        open_now = sum(h.connected for h in list(refs.values()) + holds + slow)
        soak.stopping = True
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for h in list(refs.values()) + holds + slow:
            h.drop()
        return refs, holds, slow, warm_rss, end_rss, m, open_now

    refs, holds, slow, warm_rss, end_rss, m, open_now = asyncio.run(main())

    # The reference lists: complete, and holding every admin id.
    for d in DOCS:
        check(not refs[d].resets, "the reference hold of %s got m0-reset: %r" % (channel(d), refs[d].resets))
        missing = set(soak.admin_ids[d]) - set(refs[d].ids)
        check(not missing, "the reference hold of %s lacks %d admin ids, e.g. %d" % (
            channel(d), len(missing), min(missing) if missing else 0))
    bad = {}
    for h in holds + slow:
        p = verify(h, refs[h.doc].ids)
        if p:
            bad[h.name] = p
    check(not bad, "%d holds with problems, e.g. %s: %s" % (
        len(bad), next(iter(bad), ""), bad[next(iter(bad))] if bad else ""))
    check(not soak.failures, "%d requests failed, e.g. %s" % (len(soak.failures), short(soak.failures[0] if soak.failures else "")))
    holds_open = metric(m, "m0_holds_open")
    check(abs(holds_open - open_now) <= 2, "m0_holds_open %g, but %d holds were connected" % (holds_open, open_now))
    growth = end_rss - warm_rss
    check(growth < max(16 * 1024, warm_rss * 0.25), "RSS grew %d KiB after warm-up (%d -> %d)" % (
        growth, warm_rss, end_rss))
    deadline = time.monotonic() + 10
    while fds(pid) > fds_before + 5 and time.monotonic() < deadline:
        time.sleep(0.2)
    check(fds(pid) <= fds_before + 5, "open fds %d after every client left, %d before the holds" % (
        fds(pid), fds_before))

    delivered = sum(len(h.ids) for h in holds + slow)
    resets = sum(len(h.resets) for h in holds + slow)
    reconnects = sum(max(0, h.connects - 1) for h in holds + slow)
    events = sum(len(refs[d].ids) for d in DOCS)
    rows = [("seconds", SECONDS), ("holds", HOLDS + len(slow)), ("events on the channels", events),
            ("admin publishes", sum(len(v) for v in soak.admin_ids.values())),
            ("annotations through Django", soak.annotations), ("page reads", soak.reads),
            ("deliveries checked", delivered), ("reconnects", reconnects), ("m0-resets", resets),
            ("grant refreshes", soak.grant_refreshes),
            ("slow readers closed", metric(m, "m0_slow_readers_closed_total")),
            ("RSS after warm-up KiB", warm_rss), ("RSS at the end KiB", end_rss)]
    sys.stderr.write("\n  %-32s %s\n" % ("soak", "value"))
    for k, v in rows:
        sys.stderr.write("  %-32s %s\n" % (k, v))
    emit.emit("soak-deliveries", delivered, "events", out=sys.stderr)
    emit.emit("soak-rss-growth-kib", growth, "KiB", out=sys.stderr)
    emit.emit("soak-reconnects", reconnects, "reconnects", out=sys.stderr)


if __name__ == "__main__":
    sys.exit(smoke.main())
