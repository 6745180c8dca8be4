#!/usr/bin/python3
"""smoke-http2: HTTP/2 with real clients (curl, nghttp, python3-h2).

Phase 1: h2c with prior knowledge on a plain listener (curl
--http2-prior-knowledge): Django's environ says SERVER_PROTOCOL HTTP/2 and
HTTP_HOST from :authority, a POST body arrives whole, the mojo mount
answers, a streamed answer arrives; HTTP/1.1 on the same port still works.
Phase 2: over TLS, ALPN offers h2 then http/1.1: curl --http2 speaks
HTTP/2 (wsgi.url_scheme https), openssl s_client offering h2,http/1.1 is
given h2, curl --http1.1 is given HTTP/1.1.
Phase 3: nghttp opens three SSE holds (mojo and Django) on one connection;
two events published by the admin API reach each stream; SIGTERM's drain
ends each stream with its retry hint, and nghttp exits on its own.
Phase 4: python3-h2 writes hostile frames: rapid reset (HEADERS and
RST_STREAM, 1200 times), a CONTINUATION flood and MadeYouReset (a request
and a WINDOW_UPDATE past its stream's window, 600 times) each end in GOAWAY; a
stream past --h2-max-concurrent-streams is refused; the server serves
curl after each.
Phase 5: replay over HTTP/2, on the mojo mount and a Django view. Over TLS
(ALPN h2), eight holds on one connection name a cursor (Last-Event-ID, or
?lastEventID=): one within history is replayed the kept events after it,
one older than history gets m0-reset first, then live events follow on
every stream. Over h2c, two holds the client resets (RST_STREAM, a closed
EventSource) come back as new streams on the same connection with their
last id and are replayed exactly what they missed.
Phase 6: GRIP over HTTP/2 (TLS): the fixture's GRIP view answers seven
streams of one connection, four Grip-Hold: stream and three long-polls
(Grip-Hold: response); Debian's pushpin-publish reaches the streams, its
http-response item answers one long-poll with its code and header, one is
answered from history by its prev-id at once, one by its Grip-Timeout
with the view's own answer; Grip-Keep-Alive is written on an idle stream;
pushpin-publish --close ends a stream with its retry hint, and a new
stream with a cursor below the event is replayed its raw content from
history; the connection serves on.
Phase 7: a slow reader on HTTP/2: of two holds on one connection the
client stops opening one's window while events of 16 KB are published;
that stream is reset as a slow reader (--hold-buffer-limit) while the
other takes every event; a new stream with the last id the stalled one
saw is replayed every later event, none lost, none twice.
Phase 8: uploads on a slow link: with --header-timeout 1 and --body-timeout
1, curl --limit-rate sends 300 KB to Django's echo view in about 3 s over
HTTP/2 (TLS), HTTP/1.1 (TLS) and h2c, and each arrives whole (its SHA-256);
a body that stops (python3-h2 over TLS, a raw socket over HTTP/1.1) is
answered 408 after --body-timeout, the HTTP/2 stream then reset NO_ERROR
(RFC 9113 §8.1: the client stops sending) and the connection serves on.
Phase 9: Django's session and CSRF over HTTP/2 (TLS), with the clients that
check each field (RFC 9113 §8.2.1: no value begins or ends with whitespace,
where Django's Set-Cookie values begin with a space): python3-h2 gets the
form and its csrftoken cookie, posts the note with the token and gets the
303 with the sessionid cookie, and the next GET shows the note; nghttp gets
the form with no stream reset.
Phase 10: request bodies in all (--max-body-total 8 MB): h2load sends 100
uploads of 3 MB at once on one HTTP/2 connection to the mojo mount; each
is answered 200 or 503 (with Retry-After), some of each, and the server's
memory high-water grows by far less than the 300 MB the streams would
have held (304 MiB before the bound); a curl upload over HTTP/1.1 at the
same time is 200 or 503, and after them every upload fits again (Django's
echo view, by its SHA-256).
Phase 11: the receive windows python3-h2 is given: a stream's
SETTINGS_INITIAL_WINDOW_SIZE is --h2-window (1 MiB by default, 64 KiB when
set so) and the connection's window 16 times it, so an upload goes without
waiting on a WINDOW_UPDATE every 64 KiB; a 2 MB upload to Django's echo
view, sent as the windows allow, arrives whole (its SHA-256).
"""

import os
import re
import shutil
import socket
import subprocess
import sys
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hashlib  # noqa: E402
import ssl  # noqa: E402

import h2.config  # noqa: E402
import h2.connection  # noqa: E402
import h2.events  # noqa: E402
import h2.settings  # noqa: E402
from m0smoke import (  # noqa: E402
    DJANGO_ARGS, Smoke, check, event_bytes, free_port, metric, metrics, publish_admin,
    pushpin_publish, self_signed, short, wait_metric)
from h2_lib import H2Client, Stream  # noqa: E402

SCRIPT = "99-http2"
ADMIN_KEY = "smoke-admin-key-99h2-41d7"
CURL = shutil.which("curl") or "/usr/bin/curl"
NGHTTP = shutil.which("nghttp") or "/usr/bin/nghttp"
OPENSSL = shutil.which("openssl") or "/usr/bin/openssl"

smoke = Smoke(SCRIPT, __doc__)


def run(args, stdin=b"", timeout=10):
    p = subprocess.run(args, input=stdin, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       timeout=timeout)
    return p.returncode, p.stdout.decode("utf-8", "replace"), p.stderr.decode("utf-8", "replace")


def curl(args, timeout=10):
    return run([CURL, "-sS", "--max-time", str(timeout)] + args, timeout=timeout + 2)


def url(addr, path, scheme="http"):
    return "%s://%s:%d%s" % (scheme, addr[0], addr[1], path)


@smoke.phase(1, "h2c with prior knowledge: Django and mojo answer over streams, SERVER_PROTOCOL HTTP/2")
def phase1(ctx):
    srv = ctx.server(DJANGO_ARGS)
    rc, out, err = curl(["--http2-prior-knowledge", "-D", "-", "-d", "a=1&b=two",
                         url(srv.addr, "/echo?q=1")])
    check(rc == 0, "curl: %s" % short(err))
    check(out.startswith("HTTP/2 200"), "not an HTTP/2 answer: %s" % short(out))
    check('"SERVER_PROTOCOL": "HTTP/2"' in out, "environ: %s" % short(out, 900))
    check('"HTTP_HOST": "127.0.0.1:%d"' % srv.addr[1] in out, "no HTTP_HOST: %s" % short(out, 900))
    check('"body": "a=1&b=two"' in out and '"QUERY_STRING": "q=1"' in out, short(out, 900))
    rc, out, err = curl(["--http2-prior-knowledge", url(srv.addr, "/native/hello")])
    check(rc == 0 and out == "hello from mojo\n", "mojo: %r %s" % (out, short(err)))
    rc, out, err = curl(["--http2-prior-knowledge", url(srv.addr, "/stream-generator")])
    check(rc == 0 and "chunk 1" in out and "chunk 5" in out, "streamed: %r %s" % (out, short(err)))
    rc, out, err = curl(["--http1.1", "-D", "-", url(srv.addr, "/hello")])
    check(rc == 0 and out.startswith("HTTP/1.1 200") and out.endswith("hello\n"),
          "HTTP/1.1 beside it: %s" % short(out))


@smoke.phase(2, "TLS: ALPN h2 first, then http/1.1; curl --http2 and s_client get h2; "
                "a 3 MiB wsgi.file_wrapper file over h2, twice on one connection")
def phase2(ctx):
    cert, key = self_signed(ctx)
    folder = os.path.dirname(cert)
    payload = os.urandom(3 << 20)
    with open(os.path.join(folder, "payload.bin"), "wb") as f:
        f.write(payload)
    srv = ctx.server(DJANGO_ARGS + ["--certfile", cert, "--keyfile", key, "--admin-tls",
                                    "--admin-open"], admin=True, env={"M0_BENCH_FILES": folder})
    got = os.path.join(folder, "got.bin")
    file_url = url(srv.addr, "/files/payload.bin", "https")
    rc, out, err = curl(["--http2", "--cacert", cert, "-D", "-", file_url, file_url, "-o",
                         "/dev/null", "-o", got], timeout=20)
    check(rc == 0 and out.count("HTTP/2 200") == 2 and "x-file-wrapper: yes" in out,
          "file over h2: %s %s" % (short(out, 600), short(err)))
    with open(got, "rb") as f:
        check(f.read() == payload, "the file over h2 is not the file")
    rc, out, err = curl(["--http2", "--cacert", cert, "-D", "-", url(srv.addr, "/echo", "https")])
    check(rc == 0 and out.startswith("HTTP/2 200"), "curl --http2: %s %s" % (short(out), short(err)))
    check('"wsgi.url_scheme": "https"' in out and '"SERVER_PROTOCOL": "HTTP/2"' in out,
          "environ: %s" % short(out, 900))
    rc, out, err = run([OPENSSL, "s_client", "-connect", "%s:%d" % srv.addr, "-alpn",
                        "h2,http/1.1", "-CAfile", cert], stdin=b"")
    check("ALPN protocol: h2" in out, "s_client: %s" % short(out, 900))
    # The admin listener (--admin-tls) speaks HTTP/1.1 alone: its ALPN never says h2.
    rc, out, err = run([OPENSSL, "s_client", "-connect", "%s:%d" % srv.admin, "-alpn",
                        "h2,http/1.1", "-CAfile", cert], stdin=b"")
    check("ALPN protocol: http/1.1" in out, "admin s_client: %s" % short(out, 900))
    rc, out, err = curl(["--http1.1", "--cacert", cert, "-D", "-", url(srv.addr, "/hello", "https")])
    check(rc == 0 and out.startswith("HTTP/1.1 200"), "curl --http1.1: %s" % short(out))


@smoke.phase(3, "nghttp: three holds on one connection get every event; the drain ends each with retry:")
def phase3(ctx):
    srv = ctx.server(DJANGO_ARGS + ["--realtime", "--admin-key-file",
                                    ctx.tmpfile("key", ADMIN_KEY)], admin=True, admin_key=ADMIN_KEY)
    paths = ["/native/hold?channel=n1", "/hold?channel=n1", "/native/hold?channel=n2"]
    proc = subprocess.Popen([NGHTTP, "-v"] + [url(srv.addr, p) for p in paths],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:  # the three holds' subscriptions
            rc, out, _ = curl([url(srv.admin, "/metrics")])
            if "m0_holds_open 3" in out:
                break
            time.sleep(0.05)
        check("m0_holds_open 3" in out, "three holds not open: %s" % short(out, 900))
        ids = [publish_admin(srv.admin, ADMIN_KEY, ch, "ev-" + ch) for ch in ("n1", "n2", "n1")]
        time.sleep(0.3)
        srv.terminate()
        out, err = proc.communicate(timeout=8)
        rc = srv.wait_exit(5)
        check(rc == 0, "the drain did not end the server (exit %r)" % rc)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    text = out.decode("utf-8", "replace")
    check(proc.returncode == 0, "nghttp exited %d: %s" % (proc.returncode, short(text, 900)))
    check(text.count("data: ev-n1") == 4 and text.count("data: ev-n2") == 1,
          "events (ids %r) not each delivered: %s" % (ids, short(text, 1500)))
    check(text.count("retry: ") == 3, "retry hints: %s" % short(text, 1500))
    check(text.count("send HEADERS frame") == 3 and "recv GOAWAY" in text,
          "not three streams and a GOAWAY on one connection: %s" % short(text, 1500))


class H2Raw:
    """python3-h2 over a plain socket, prior knowledge; frames it would not send go raw."""

    def __init__(self, addr):
        self.sock = socket.create_connection(addr, timeout=5)
        self.conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
        self.conn.initiate_connection()
        self.sock.sendall(self.conn.data_to_send())

    def headers(self, sid, path):
        return [(":method", "GET"), (":scheme", "http"), (":authority", "t"), (":path", path)]

    def events_until(self, want, timeout=5.0):
        """Reads until an event of type `want` (or the end); every event read."""
        seen = []
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self.sock.settimeout(max(0.01, deadline - time.monotonic()))
            try:
                data = self.sock.recv(65536)
            except (socket.timeout, ConnectionResetError):
                break
            if not data:
                break
            try:
                evs = self.conn.receive_data(data)
            except Exception:  # the server's frames after ours broke the state machine
                evs = []
            seen += evs
            self.sock.sendall(self.conn.data_to_send())
            if any(isinstance(e, want) for e in seen):
                break
        return seen

    def read_to_end(self, timeout=5.0):
        """The server's bytes until it closes (python3-h2 is not asked to parse them)."""
        got = b""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self.sock.settimeout(max(0.01, deadline - time.monotonic()))
            try:
                data = self.sock.recv(65536)
            except (socket.timeout, ConnectionResetError):
                break
            if not data:
                break
            got += data
        return got

    def close(self):
        self.sock.close()


def goaway_code(data):
    """The error code of the first GOAWAY frame in `data`, or None."""
    off = 0
    while off + 9 <= len(data):
        n = int.from_bytes(data[off:off + 3], "big")
        if data[off + 3] == 7 and off + 17 <= len(data):
            return int.from_bytes(data[off + 13:off + 17], "big")
        off += 9 + n
    return None


def frame(ftype, flags, sid, payload):
    n = len(payload)
    return bytes([n >> 16 & 255, n >> 8 & 255, n & 255, ftype, flags]) + sid.to_bytes(4, "big") + payload


def served(srv):
    rc, out, _ = curl(["--http2-prior-knowledge", url(srv.addr, "/native/hello")])
    return rc == 0 and out == "hello from mojo\n"


@smoke.phase(4, "python3-h2: rapid reset, a CONTINUATION flood and MadeYouReset end in GOAWAY; streams past "
             "the limit refused")
def phase4(ctx):
    srv = ctx.server(DJANGO_ARGS + ["--h2-max-concurrent-streams", "2", "--realtime"])
    c = H2Raw(srv.addr)
    wire = b""
    for i in range(1200):
        sid = 1 + 2 * i
        c.conn.send_headers(sid, c.headers(sid, "/native/hello"))
        c.conn.reset_stream(sid)
        wire += c.conn.data_to_send()
    c.sock.sendall(wire)
    evs = c.events_until(h2.events.ConnectionTerminated)
    ends = [e for e in evs if isinstance(e, h2.events.ConnectionTerminated)]
    check(ends and ends[0].error_code != 0, "rapid reset: no GOAWAY: %s" % short(repr(evs[-5:])))
    c.close()
    check(served(srv), "not served after the rapid reset")

    c = H2Raw(srv.addr)
    c.conn.send_headers(1, c.headers(1, "/native/hello"))
    block = c.conn.data_to_send()[9:]  # the HPACK block of that HEADERS frame
    raw = frame(1, 0x1, 1, block)  # END_STREAM, no END_HEADERS
    raw += b"".join(frame(9, 0, 1, b"\x40\x03x-a\x01a") for _ in range(64))
    c.sock.sendall(raw)
    got = c.read_to_end()
    check(goaway_code(got) == 11, "CONTINUATION flood: no GOAWAY ENHANCE_YOUR_CALM: %r" % got[:200])
    c.close()
    check(served(srv), "not served after the CONTINUATION flood")

    # A third hold on a connection allowed two: refused, the two go on.
    c = H2Raw(srv.addr)
    c.conn.update_settings({h2.settings.SettingCodes.ENABLE_PUSH: 0})
    c.sock.sendall(c.conn.data_to_send())
    c.events_until(h2.events.RemoteSettingsChanged, 2)
    # python3-h2 keeps to the server's limit: told it is 100, it sends the third.
    c.conn.remote_settings._settings[h2.settings.SettingCodes.MAX_CONCURRENT_STREAMS] = [100]
    for sid in (1, 3, 5):
        c.conn.send_headers(sid, c.headers(sid, "/native/hold?channel=lim"), end_stream=True)
    c.sock.sendall(c.conn.data_to_send())
    # RFC 9113 §5.1.2: a stream error (REFUSED_STREAM) before our SETTINGS
    # is acknowledged, a connection error (PROTOCOL_ERROR) once it is.
    evs = c.events_until((h2.events.StreamReset, h2.events.ConnectionTerminated))
    refused = [e for e in evs if isinstance(e, h2.events.StreamReset) and e.stream_id == 5
               and e.error_code == 7]
    ended = [e for e in evs if isinstance(e, h2.events.ConnectionTerminated)
             and e.last_stream_id == 3 and e.error_code == 1]
    check(refused or ended, "stream 5 past the limit not refused: %s" % short(repr(evs)))
    c.close()
    check(served(srv), "not served after the refused stream")

    # MadeYouReset (CVE-2025-8671): requests the server resets by the
    # client's doing (a WINDOW_UPDATE past each stream's window, a stream
    # error FLOW_CONTROL_ERROR): past --h2-max-stream-errors, GOAWAY
    # ENHANCE_YOUR_CALM. python3-h2 refuses to write such a frame, and keeps
    # to 100 open streams: it encodes the connection's start and one
    # request; the rest is written by hand, each request that one's HPACK
    # block (literal fields, valid again each time) on a stream of its own.
    # A server of its own: the one above refuses streams past two, which
    # would count too.
    srv = ctx.server(DJANGO_ARGS + ["--h2-max-stream-errors", "50"])
    c = H2Raw(srv.addr)
    wire = c.conn.data_to_send()
    c.conn.send_headers(1, c.headers(1, "/native/hello"), end_stream=True)
    block = c.conn.data_to_send()[9:]
    for i in range(600):
        sid = 1 + 2 * i
        wire += frame(1, 0x5, sid, block) + frame(8, 0, sid, b"\x7f\xff\xff\xff")
    c.sock.sendall(wire)
    got = c.read_to_end()
    check(goaway_code(got) == 11, "MadeYouReset: no GOAWAY ENHANCE_YOUR_CALM: %r" % got[-200:])
    c.close()
    check(served(srv), "not served after MadeYouReset")


REPLAY_HOLDS = (("mojo", "/native/hold?channel=%s", b": mojo hold\n\n"),
                ("django", "/hold?channel=%s", b": django hold\n\n"))


def replay_hold(c, pool, channel, cursor=None, query=False):
    """A hold on `channel` taken by `pool` (an item of REPLAY_HOLDS), its
    cursor in Last-Event-ID or, with `query`, in ?lastEventID=."""
    _, path, head_body = pool
    path %= channel
    headers = []
    if cursor is not None and query:
        path += "&lastEventID=%d" % cursor
    elif cursor is not None:
        headers = [("last-event-id", str(cursor))]
    s = c.get(path, headers)
    s.what = "%s %s%s" % (pool[0], path, " Last-Event-ID: %d" % cursor if headers else "")
    s.head_body = head_body
    return s


def check_replayed(c, streams, settle=0.2):
    """Each stream's body is its head body then exactly its `want` blocks."""
    c.until(lambda: all(len(s.body) >= len(s.head_body + b"".join(s.want)) for s in streams), 5.0,
            "every stream's events")
    c.settle(settle)
    for s in streams:
        check(s.status() == 200 and s.header("content-type") == "text/event-stream",
              "%s: head %r" % (s.what, s.headers))
        check(s.body == s.head_body + b"".join(s.want) and not s.done(),
              "%s: stream %s, want %s then the blocks %s" % (
                  s.what, short(s.body, 600), short(s.head_body), short(b"".join(s.want), 600)))


def m0_reset(oldest):
    return b'event: m0-reset\ndata: {"oldest": %d}\n\n' % oldest


@smoke.phase(5, "replay over HTTP/2 (mojo and Django; Last-Event-ID and ?lastEventID=): kept events "
                "after the cursor, m0-reset for one older than history, then live; over TLS and h2c")
def phase5(ctx):
    cert, key = self_signed(ctx)
    plain = free_port()
    srv = ctx.server(DJANGO_ARGS + ["--realtime", "--heartbeat", "30", "--history", "3",
                                    "--admin-key-file", ctx.tmpfile("key", ADMIN_KEY),
                                    "--certfile", cert, "--keyfile", key,
                                    "--listen-plain", "127.0.0.1:%d" % plain],
                     admin=True, admin_key=ADMIN_KEY)
    ids = [publish_admin(srv.admin, ADMIN_KEY, "r5", "e%d" % n) for n in range(1, 6)]
    kept = [event_bytes(ids[n], "e%d" % (n + 1)) for n in (2, 3, 4)]  # --history 3
    resets = metric(metrics(srv.admin), "m0_resets_total")
    c = H2Client(srv.addr, ca=cert)
    ctx.conns.append(c)
    streams = []
    for pool in REPLAY_HOLDS:
        for query in (False, True):
            s = replay_hold(c, pool, "r5", ids[2], query)
            s.want = kept[1:]
            old = replay_hold(c, pool, "r5", ids[0], query)
            old.want = [m0_reset(ids[2])] + kept
            streams += [s, old]
    check_replayed(c, streams)
    wait_metric(srv.admin, "m0_resets_total", resets + 4, 3.0, "four cursors older than history")
    live = publish_admin(srv.admin, ADMIN_KEY, "r5", "live")
    for s in streams:
        s.want.append(event_bytes(live, "live"))
    check_replayed(c, streams)

    # h2c: the client leaves two holds and comes back on the same connection.
    c = H2Client(("127.0.0.1", plain))
    ctx.conns.append(c)
    first = [replay_hold(c, pool, "c5") for pool in REPLAY_HOLDS]
    c.heads(first)
    seen = publish_admin(srv.admin, ADMIN_KEY, "c5", "seen")
    for s in first:
        s.want = [event_bytes(seen, "seen")]
    check_replayed(c, first, settle=0)
    holds = metric(metrics(srv.admin), "m0_holds_open")
    for s in first:
        c.cancel(s)
    wait_metric(srv.admin, "m0_holds_open", holds - 2, 3.0, "after two RST_STREAMs")
    missed = [publish_admin(srv.admin, ADMIN_KEY, "c5", d, ev) for d, ev in
              (("two", None), ("three\nlines", "update"))]
    again = [replay_hold(c, REPLAY_HOLDS[0], "c5", seen), replay_hold(c, REPLAY_HOLDS[1], "c5", seen, True)]
    for s in again:
        s.want = [event_bytes(missed[0], "two"), event_bytes(missed[1], "three\nlines", "update")]
    check_replayed(c, again)
    live = publish_admin(srv.admin, ADMIN_KEY, "c5", "live")
    for s in again:
        s.want.append(event_bytes(live, "live"))
    check_replayed(c, again)
    check(c.goaway is None and not c.eof, "the h2c connection ended: %r" % c.goaway)


GRIP_HEAD = b": grip hold\n\n"


def grip_head(s, status=200):
    """A GRIP stream's answer head: `status`, no Grip-* field left."""
    check(s.status() == status, "%s: status %s, want %d" % (s.path, s.header(":status"), status))
    grip = [n for n in s.names() if n.startswith("grip-")]
    check(not grip, "%s: the head still carries %r" % (s.path, grip))


def grip_publish(srv, *args):
    rc, out = pushpin_publish(srv, *args)
    check(rc == 0, "pushpin-publish %s: exit %d %s" % (" ".join(args), rc, short(out)))


@smoke.phase(6, "GRIP over HTTP/2: Grip-Hold stream and response on streams of one connection; "
                "pushpin-publish reaches them, long-polls answered by a publish, history and Grip-Timeout")
def phase6(ctx):
    cert, key = self_signed(ctx)
    srv = ctx.server(DJANGO_ARGS + ["--realtime", "--heartbeat", "60", "--admin-open",
                                    "--certfile", cert, "--keyfile", key], admin=True)
    c = H2Client(srv.addr, ca=cert)
    ctx.conns.append(c)
    stream = c.get("/grip-hold?channel=g6")
    closing = c.get("/grip-hold?channel=g6b&prev_id=p0")
    poll = c.get("/grip-hold?channel=g6&mode=response&timeout=30")
    timed = c.get("/grip-hold?channel=g6c&mode=response&timeout=1")
    idle = c.get("/grip-hold?channel=g6d&ka=:ka%0A%0A&ka_timeout=1")  # Grip-Keep-Alive
    t0 = time.monotonic()
    c.heads([stream, closing, idle])
    for s in (stream, closing, idle):
        grip_head(s)
        check(s.header("content-type") == "text/event-stream", "%s: %r" % (s.path, s.headers))
    c.until(lambda: stream.body == GRIP_HEAD and closing.body == GRIP_HEAD, 3.0, "the views' bodies")
    wait_metric(srv.admin, "m0_holds_open", 5, 5.0, "three GRIP streams and two long-polls")
    grip_publish(srv, "g6", "hello", "--code", "201", "-H", "X-Pub: yes")
    c.until(lambda: poll.done() and stream.body == GRIP_HEAD + b"hello\n", 5.0, "the publish")
    grip_head(poll, 201)
    check(poll.ended and poll.header("x-pub") == "yes" and poll.body == b"hello\n",
          "the long-poll's answer: %r %s" % (poll.headers, short(poll.body)))
    event_id = int(poll.header("m0-event-id") or 0)
    check(event_id > 0, "the long-poll's answer names no event: %r" % poll.headers)
    again = c.get("/grip-hold?channel=g6&mode=response&timeout=30&prev_id=%d" % (event_id - 1))
    c.until(again.done, 3.0, "the long-poll answered from history")
    grip_head(again, 201)
    check(again.body == b"hello\n" and int(again.header("m0-event-id")) == event_id,
          "from history: %r %s" % (again.headers, short(again.body)))
    grip_publish(srv, "g6b", "event: grip\ndata: two")
    two = int(metric(metrics(srv.admin), "m0_bus_last_id"))
    c.until(lambda: closing.body == GRIP_HEAD + b"event: grip\ndata: two\n", 3.0, "the second publish")
    c.until(timed.done, 3.0, "the long-poll's Grip-Timeout")
    took = timed.t_end - t0
    grip_head(timed)
    check(timed.ended and timed.body == GRIP_HEAD and timed.header("m0-event-id") is None,
          "the timed-out long-poll: %r %s" % (timed.headers, short(timed.body)))
    check(0.9 <= took <= 5, "the Grip-Timeout of 1 s took %.2fs" % took)
    c.until(lambda: len(idle.body) > len(GRIP_HEAD), 3.0, "the Grip-Keep-Alive")
    check(idle.body == GRIP_HEAD + b":ka\n\n" * ((len(idle.body) - len(GRIP_HEAD)) // 5),
          "the idle stream: %s, want its keep-alives alone" % short(idle.body))
    grip_publish(srv, "--close", "g6b")
    c.until(closing.done, 3.0, "the stream's close")
    tail = closing.body[len(GRIP_HEAD + b"event: grip\ndata: two\n"):]
    check(closing.ended and re.match(rb"^retry: \d+\n\n$", tail),
          "the closed stream ends in %s, want END_STREAM after a retry hint" % short(tail))
    # Back with a cursor below the event: replayed its raw content from history.
    back = c.get("/grip-hold?channel=g6b&lastEventID=%d" % (two - 1))
    c.until(lambda: back.body == GRIP_HEAD + b"event: grip\ndata: two\n", 3.0, "the replay")
    wait_metric(srv.admin, "m0_holds_open", 3, 3.0, "the first stream, the idle one and the replayed one")
    check(not stream.done() and c.goaway is None and not c.eof, "the connection: %s" % c.describe())
    after = c.get("/native/hello")
    c.until(after.done, 3.0, "a request after the holds")
    check(after.status() == 200 and after.body == b"hello from mojo\n", "after: %s" % c.describe())


SLOW_EVENT = 16000  # bytes of data an event, under --max-event-size 32768


@smoke.phase(7, "HTTP/2 slow reader: a stream whose window stays closed is reset, its neighbour on the "
                "connection gets every event; back with its last id it is replayed the rest, none lost")
def phase7(ctx):
    srv = ctx.server(DJANGO_ARGS + ["--realtime", "--heartbeat", "30", "--hold-buffer-limit", "65536",
                                    "--max-event-size", "32768", "--hold-drain-timeout", "0.5",
                                    "--admin-key-file", ctx.tmpfile("key", ADMIN_KEY)],
                     admin=True, admin_key=ADMIN_KEY)
    c = H2Client(srv.addr)
    ctx.conns.append(c)
    head_body = REPLAY_HOLDS[0][2]
    slow, fast = c.get("/native/hold?channel=slow7"), c.get("/hold?channel=slow7")
    c.stall(slow)
    # The neighbour's window is wide: a busy machine's slow client never makes it a slow reader.
    c.conn.increment_flow_control_window(1 << 24, stream_id=fast.sid)
    c.flush()
    c.heads([slow, fast])
    wait_metric(srv.admin, "m0_holds_open", 2, 3.0, "the two holds")
    closed = metric(metrics(srv.admin), "m0_slow_readers_closed_total")
    pad = "x" * SLOW_EVENT
    sent = {}  # id -> its bytes
    for n in range(64):  # 1 MiB at most: the kernel and the window take some, the backlog the rest
        i = publish_admin(srv.admin, ADMIN_KEY, "slow7", "%d %s" % (n, pad))
        sent[i] = event_bytes(i, "%d %s" % (n, pad))
        c.settle(0.005)
        if slow.done() or metric(metrics(srv.admin), "m0_slow_readers_closed_total") > closed:
            break
    c.until(slow.done, 3.0, "the stalled stream's reset")
    check(slow.reset is not None, "the stalled stream ended (END_STREAM), not reset: %s" % c.describe())
    ids = sorted(sent)
    fast.want = [sent[i] for i in ids]
    fast.head_body = b": django hold\n\n"
    fast.what = "the neighbour hold"
    check_replayed(c, [fast], settle=0)
    check(slow.body.startswith(head_body), "the stalled stream: %s" % short(slow.body))
    blocks = slow.body[len(head_body):].split(b"\n\n")[:-1]  # complete blocks only
    seen = [int(b.split(b"\n", 1)[0][4:]) for b in blocks]
    check(seen and seen == ids[:len(seen)] and len(seen) < len(ids),
          "the stalled stream got ids %s of %d published" % (short(repr(seen)), len(ids)))
    check(all(b + b"\n\n" == sent[i] for b, i in zip(blocks, seen)), "the stalled stream's events differ")
    back = replay_hold(c, REPLAY_HOLDS[0], "slow7", seen[-1])
    back.want = [sent[i] for i in ids[len(seen):]]
    check_replayed(c, [back])
    wait_metric(srv.admin, "m0_slow_readers_closed_total", closed + 1, 3.0, "one slow reader")
    sys.stderr.write("  [phase 7] %d events of 16 KB: %d reached the stalled stream, %d replayed\n" % (
        len(ids), len(seen), len(back.want)))


@smoke.phase(8, "uploads on a slow link outlive --header-timeout over HTTP/2, HTTP/1.1 and h2c; a body that "
                "stops is 408 after --body-timeout, its HTTP/2 stream reset NO_ERROR")
def phase8(ctx):
    cert, key = self_signed(ctx)
    plain = ("127.0.0.1", free_port())
    srv = ctx.server(DJANGO_ARGS + ["--certfile", cert, "--keyfile", key, "--listen-plain",
                                    "%s:%d" % plain, "--header-timeout", "1", "--body-timeout", "1"])
    body = os.urandom(300 * 1024)
    path = ctx.tmpfile("upload.bin", "")  # the phase's log folder: its name, then its bytes
    with open(path, "wb") as f:
        f.write(body)
    want = hashlib.sha256(body).hexdigest()
    runs = [("HTTP/2", ["--http2", "--cacert", cert], url(srv.addr, "/echo", "https")),
            ("HTTP/1.1", ["--http1.1", "--cacert", cert], url(srv.addr, "/echo", "https")),
            ("h2c", ["--http2-prior-knowledge"], url(plain, "/echo"))]
    t0 = time.monotonic()
    procs = [(what, subprocess.Popen([CURL, "-sS", "--max-time", "20", "--limit-rate", "100K",
                                      "--data-binary", "@" + path, target] + opts,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE))
             for what, opts, target in runs]  # the three at once
    for what, p in procs:
        out, err = p.communicate(timeout=25)
        took = time.monotonic() - t0
        out, err = out.decode("utf-8", "replace"), err.decode("utf-8", "replace")
        check(p.returncode == 0 and '"body_sha256": "%s"' % want in out,
              "%s: a 300 KB upload over %.1f s: %s %s" % (what, took, short(out), short(err)))
        check(took >= 2.0, "%s: the upload took %.1f s: not slow enough to prove anything" % (what, took))
    # HTTP/1.1 (TLS): a head and ten bytes of a hundred, then nothing.
    tls = ssl.create_default_context(cafile=cert)
    raw = socket.create_connection(srv.addr, timeout=5)
    s = tls.wrap_socket(raw, server_hostname=srv.addr[0])
    s.sendall(b"POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 100\r\n\r\n0123456789")
    t0 = time.monotonic()
    got = b""
    while b"\r\n\r\n" not in got:
        chunk = s.recv(4096)
        if not chunk:
            break
        got += chunk
    waited = time.monotonic() - t0
    s.close()
    check(got.startswith(b"HTTP/1.1 408") and 0.8 <= waited < 4,
          "HTTP/1.1 stalled body: %.1f s, %r" % (waited, got[:200]))
    # HTTP/2 (TLS): the same on a stream.
    c = H2Client(srv.addr, ca=cert)
    ctx.conns.append(c)
    sid = c.conn.get_next_available_stream_id()
    c.conn.send_headers(sid, [(":method", "POST"), (":scheme", "https"), (":authority", c.authority),
                              (":path", "/echo"), ("content-length", "100")], end_stream=False)
    c.conn.send_data(sid, b"0123456789")
    c.flush()
    st = c.streams[sid] = Stream(sid, "/echo")
    t0 = time.monotonic()
    c.until(lambda: st.reset is not None, 5.0, "the stalled stream's answer and reset")
    check(st.status() == 408 and b"--body-timeout" in st.body and 0.8 <= st.t_end - t0 < 4,
          "HTTP/2 stalled body: %s" % c.describe())
    check(st.reset == 0, "the stalled stream was reset with %r, not NO_ERROR" % st.reset)
    after = c.get("/hello")
    c.until(after.done, 5.0, "a request after it")
    check(after.status() == 200, "after the 408: %s" % c.describe())


@smoke.phase(9, "Django's session and CSRF over HTTP/2: the cookies reach python3-h2 and nghttp, which "
                "check each field")
def phase9(ctx):
    cert, key = self_signed(ctx)
    srv = ctx.server(DJANGO_ARGS + ["--certfile", cert, "--keyfile", key])
    c = H2Client(srv.addr, ca=cert)
    ctx.conns.append(c)

    def cookies(st):
        return [v for n, v in st.headers or () if n == "set-cookie"]

    page = c.get("/form")
    c.until(page.done, 5.0, "the form")  # python3-h2 raises on a field it refuses
    got = cookies(page)
    check(page.status() == 200 and len(got) == 1 and got[0].startswith("csrftoken="),
          "the form's cookie: %r %s" % (got, c.describe()))
    token = got[0].split(";", 1)[0].split("=", 1)[1]
    form = re.search(rb'name="csrfmiddlewaretoken" value="([^"]+)"', page.body)
    check(form is not None, "no CSRF field in the form: %s" % short(page.body, 600))
    body = b"csrfmiddlewaretoken=" + form.group(1) + b"&note=over+h2"
    sid = c.conn.get_next_available_stream_id()
    c.conn.send_headers(sid, [(":method", "POST"), (":scheme", "https"), (":authority", c.authority),
                              (":path", "/form"), ("content-type", "application/x-www-form-urlencoded"),
                              ("content-length", str(len(body))), ("cookie", "csrftoken=" + token),
                              ("referer", "https://%s/form" % c.authority)], end_stream=False)
    c.conn.send_data(sid, body, end_stream=True)
    c.flush()
    post = c.streams[sid] = Stream(sid, "/form")
    c.until(post.done, 5.0, "the POST")
    got = cookies(post)
    check(post.status() == 303 and any(v.startswith("sessionid=") for v in got),
          "the POST's answer: %r %s" % (got, c.describe()))
    session = [v for v in got if v.startswith("sessionid=")][0].split(";", 1)[0]
    again = c.get("/form", [("cookie", "csrftoken=%s; %s" % (token, session))])
    c.until(again.done, 5.0, "the form again")
    check(again.status() == 200 and b'<span id="note">over h2</span>' in again.body,
          "the saved note: %s" % c.describe())
    rc, out, err = run([NGHTTP, "-v", url(srv.addr, "/form", "https")])
    check(rc == 0 and "Invalid HTTP header field" not in out + err and "RST_STREAM" not in out
          and "set-cookie: csrftoken=" in out, "nghttp: rc %d %s %s" % (rc, short(out, 900), short(err)))


def vm_kib(pid, field):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise AssertionError("no %s for the server" % field)


@smoke.phase(10, "--max-body-total: 100 uploads of 3 MB on one HTTP/2 connection are 200 or 503, the "
                 "memory bounded; afterwards every upload fits")
def phase10(ctx):
    cert, key = self_signed(ctx)
    # Under AddressSanitizer freed memory waits in a quarantine (256 MiB by
    # default), which reads as growth: this server runs without one. A
    # sanitizer's shadow memory still adds what the server does not keep
    # (149 MiB grown under TSan, 37 under ASan, 6 to 18 without): there the
    # bound is loose, the plain run's is the one that bites.
    env = None
    if "ASAN_OPTIONS" in os.environ:
        env = {"ASAN_OPTIONS": os.environ["ASAN_OPTIONS"] + ":quarantine_size_mb=0"}
    limit_mib = 400 if any(v in os.environ for v in ("ASAN_OPTIONS", "TSAN_OPTIONS")) else 100
    srv = ctx.server(DJANGO_ARGS + ["--certfile", cert, "--keyfile", key, "--max-body-size",
                                    "4000000", "--max-body-total", "8000000"], env=env)
    srv.require_own("it reads the server's memory high-water from /proc")
    body = os.urandom(3000000)
    path = ctx.tmpfile("upload.bin", "")
    with open(path, "wb") as f:
        f.write(body)
    want = hashlib.sha256(body).hexdigest()
    rc, out, err = curl(["--cacert", cert, url(srv.addr, "/hello", "https")])
    check(rc == 0, "the server before: %s" % short(err))
    before = vm_kib(srv.proc.pid, "VmHWM")
    h2load = subprocess.Popen([shutil.which("h2load") or "/usr/bin/h2load", "-n", "100", "-c", "1",
                               "-m", "100", "-d", path, url(srv.addr, "/native/hello", "https")],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    rc, out1, err1 = curl(["--http1.1", "--cacert", cert, "-D", "-", "--data-binary", "@" + path,
                           url(srv.addr, "/native/hello", "https")], timeout=30)
    if out1.startswith("HTTP/1.1 100 Continue\r\n\r\n"):  # curl's Expect, answered: the body fit
        out1 = out1[len("HTTP/1.1 100 Continue\r\n\r\n"):]
    out, err = h2load.communicate(timeout=60)
    out = out.decode("utf-8", "replace")
    codes = re.search(r"status codes: (\d+) 2xx, (\d+) 3xx, (\d+) 4xx, (\d+) 5xx", out)
    check(h2load.returncode == 0 and codes, "h2load: %s %s" % (short(out, 900), short(err)))
    ok, bad = int(codes.group(1)), int(codes.group(4))
    check(ok >= 1 and bad >= 1 and ok + bad == 100 and "100 done" in out,
          "h2load's 100 uploads: %d 2xx, %d 5xx: %s" % (ok, bad, short(out, 900)))
    check(rc == 0 and (out1.startswith("HTTP/1.1 200") and out1.endswith("hello from mojo\n")
                       or out1.startswith("HTTP/1.1 503") and "retry-after: 1" in out1.lower()),
          "the HTTP/1.1 upload beside them: %s %s" % (short(out1, 600), short(err1)))
    grew = vm_kib(srv.proc.pid, "VmHWM") - before
    sys.stderr.write("  [phase 10] %d of 100 uploads answered 200, %d 503; memory high-water grew "
                     "%d KiB\n" % (ok, bad, grew))
    check(grew < limit_mib * 1024, "the memory high-water grew by %d KiB (limit %d MiB)" % (
        grew, limit_mib))
    for _ in range(3):  # every share came back
        rc, out, err = curl(["--http2", "--cacert", cert, "--data-binary", "@" + path,
                             url(srv.addr, "/echo", "https")], timeout=30)
        check(rc == 0 and '"body_sha256": "%s"' % want in out, "an upload after: %s %s" % (
            short(out), short(err)))


@smoke.phase(11, "the receive windows: --h2-window for a stream (1 MiB by default), 16 times it for "
                 "the connection, as python3-h2 reads them; a 2 MB upload within them")
def phase11(ctx):
    for flags, window in (([], 1 << 20), (["--h2-window", "65536"], 65536)):
        srv = ctx.server(DJANGO_ARGS + flags)
        c = H2Client(srv.addr)
        ctx.conns.append(c)
        st = c.get("/hello")
        c.until(st.done, 5.0, "an answer")
        got = c.conn.remote_settings.initial_window_size
        check(got == window, "%r: SETTINGS_INITIAL_WINDOW_SIZE %r, want %d" % (flags, got, window))
        got = c.conn.outbound_flow_control_window
        check(got == 16 * window, "%r: the connection's window %d, want %d" % (flags, got, 16 * window))
        body = os.urandom(1000 * 1000).hex().encode()  # 2 MB that JSON takes as it is
        sid = c.conn.get_next_available_stream_id()
        c.conn.send_headers(sid, [(":method", "POST"), (":scheme", "http"), (":authority", c.authority),
                                  (":path", "/echo"), ("content-length", str(len(body)))])
        up = c.streams[sid] = Stream(sid, "/echo")
        sent = 0
        for _ in range(100000):  # as much as the windows allow, then what the server gives back
            if sent == len(body) or up.done():
                break
            # (python3-h2's local window of a stream: what this side may send on it)
            room = min(16384, c.conn.local_flow_control_window(sid), len(body) - sent)
            if room > 0:
                c.conn.send_data(sid, body[sent:sent + room], end_stream=sent + room == len(body))
                sent += room
                c.flush()
            else:
                c.read(1.0)
        c.until(up.done, 20.0, "the upload's answer")
        want = '"body_sha256": "%s"' % hashlib.sha256(body).hexdigest()
        check(up.status() == 200 and want.encode() in up.body,
              "%r: the 2 MB upload: %s" % (flags, short(up.body[-300:], 300)))

if __name__ == "__main__":
    sys.exit(smoke.main())
