#!/usr/bin/python3
"""smoke-nginx: m0serve behind Debian's nginx, with the README's minimal site
(read from README.md's "Behind nginx" section, its two addresses replaced:
upstream with keepalive, proxy_http_version 1.1, Upgrade and Connection
from a map (upgrade for a WebSocket handshake, none otherwise), Host as the
client sent it, X-Forwarded-For and -Proto, proxy_read_timeout 1h) and
nothing SSE-specific in it: the hold head's `X-Accel-Buffering: no` is what
turns nginx's buffering off for the stream. Phase 7 holds WebSockets
through the same site (python3-websockets).

Each phase starts m0serve and its own nginx, both on free loopback ports:

    m0serve --listen 127.0.0.1:P --chdir fixtures/djangoproj \\
            --mount /=djangoproj.wsgi:application --mount /native=mojo \\
            --realtime --heartbeat 60 --admin-listen 127.0.0.1:P2 --admin-key-file F
    nginx -p TMP/ -c TMP/nginx.conf -e TMP/error.log -g 'daemon off;'

nginx runs in a fresh temporary directory (its configuration, pid file,
logs and temp paths inside it; a master and one worker, `user nobody` when
run as root, so the directory is world-readable), is stopped by PID
(SIGTERM, exit 0 wanted) and its error log is copied to build/smoke-logs/.
A client talks HTTP/1.1 to nginx, so held streams come back chunked; the
phases read them through the chunked coding.

Without /usr/sbin/nginx: one SKIP line and exit 0 (`make deps` installs it);
FAIL with M0_REQUIRE_NGINX=1.
"""

import asyncio
import grp
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import m0smoke  # noqa: E402
from m0smoke import (  # noqa: E402
    DJANGO_ARGS, HOST, LOG_DIR, ROOT, Conn, Fail, Smoke, build_request, check, check_stream, event_ids,
    free_port, http, leave, publish_admin, short, stream_items, wait_metric)
from emit import emit  # noqa: E402

import websockets  # noqa: E402  (Debian python3-websockets)

SCRIPT = "90-nginx"
NGINX = "/usr/sbin/nginx"
ADMIN_KEY = "smoke-admin-key-90nginx-7c2e"
MOJO_HEAD = b": mojo hold\n\n"
DJANGO_HEAD = b": django hold\n\n"
CLIENT_ADDR = "127.0.0.3"  # the browser's address, as nginx sees it
LATENCY_LIMIT_S = 0.100
EVENTS_TIMED = 10

smoke = Smoke(SCRIPT, __doc__)


def readme_site():
    """The first ```nginx block of README.md's "Behind nginx" section, with
    %(upstream)s and %(listen)s in place of its addresses: the smoke runs
    the site the README shows."""
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
        text = f.read()
    section = text[text.index("## Behind nginx"):]
    block = section[section.index("```nginx\n") + len("```nginx\n"):]
    block = block[:block.index("```")]
    block = block.replace("%", "%%")
    for old, new in [("server 127.0.0.1:8000;", "server %(upstream)s;"),
                     ("listen 80;", "listen %(listen)s;")]:
        check(block.count(old) == 1, "README's nginx site has no single %r" % old)
        block = block.replace(old, new)
    return block


SITE = readme_site()


def readme_unix_upstream():
    """The unix socket the README's unix-socket variant names for the upstream."""
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
        text = f.read()
    section = text[text.index("## Behind nginx"):]
    section = section[:section.index("\n## ", 3)]
    blocks = section.split("```nginx\n")
    check(len(blocks) == 3, "README's Behind nginx has %d nginx blocks, want 2" % (len(blocks) - 1))
    unix_block = blocks[2][:blocks[2].index("```")]
    line = [l.strip() for l in unix_block.splitlines() if l.strip().startswith("server unix:")]
    check(len(line) == 1, "README's unix variant names no single 'server unix:...;'")
    return line[0][len("server unix:"):].rstrip(";")

MAIN = """
%(user)s
worker_processes 1;
pid %(dir)s/nginx.pid;
error_log %(dir)s/error.log info;
events { worker_connections 256; }
http {
    access_log %(dir)s/access.log;
    client_body_temp_path %(dir)s/client_body;
    proxy_temp_path %(dir)s/proxy;
    fastcgi_temp_path %(dir)s/fastcgi;
    uwsgi_temp_path %(dir)s/uwsgi;
    scgi_temp_path %(dir)s/scgi;
%(site)s
}
"""


def worker_group():
    """The group nginx's worker runs as when started by root (user nobody)."""
    try:
        grp.getgrnam("nogroup")
        return "nogroup"
    except KeyError:
        return "nobody"


class Nginx:
    """One nginx this phase started, in front of `upstream` (host, port)."""

    def __init__(self, ctx, upstream):
        self.ctx = ctx
        self.dir = tempfile.mkdtemp(prefix="m0-nginx-")
        # As root, the worker runs as nobody: it must reach its temp paths.
        os.chmod(self.dir, 0o755)
        self.port = free_port()
        self.addr = (HOST, self.port)
        user = "user nobody %s;" % worker_group() if os.geteuid() == 0 else ""
        up = upstream if isinstance(upstream, str) else "%s:%d" % upstream
        site = SITE % {"upstream": up, "listen": "%s:%d" % self.addr}
        self.conf = os.path.join(self.dir, "nginx.conf")
        with open(self.conf, "w") as f:
            f.write(MAIN % {"user": user, "dir": self.dir, "site": site})
        self.error_log = os.path.join(self.dir, "error.log")
        self.argv = [NGINX, "-p", self.dir + "/", "-c", self.conf, "-e", self.error_log,
                     "-g", "daemon off;"]
        out = open(os.path.join(self.dir, "stdout.log"), "wb")
        self.proc = subprocess.Popen(self.argv, stdin=subprocess.DEVNULL, stdout=out,
                                     stderr=subprocess.STDOUT, start_new_session=True)
        out.close()
        m0smoke._started.append(self.proc)  # killed at exit if a phase leaves it
        ctx.finalizers.append(self.stop)
        self._wait_ready(10.0)

    def log_tail(self, n=15):
        text = ""
        for name in ("stdout.log", "error.log"):
            try:
                with open(os.path.join(self.dir, name), "rb") as f:
                    text += f.read().decode("utf-8", "replace")
            except OSError:
                pass
        return " | ".join(text.strip().splitlines()[-n:])

    def _wait_ready(self, timeout):
        deadline = time.monotonic() + timeout
        for _ in range(int(timeout / 0.05) + 2):
            rc = self.proc.poll()
            if rc is not None:
                raise Fail("nginx exited with %d at start-up: %s" % (rc, self.log_tail()))
            try:
                Conn(self.addr, 0.5).close()
                return
            except OSError:
                pass
            if time.monotonic() >= deadline:
                break
            time.sleep(0.05)
        raise Fail("nginx not accepting on %s:%d within %.0fs: %s" % (
            self.addr[0], self.port, timeout, self.log_tail()))

    def stop(self):
        """SIGTERM by PID; exit code 0 wanted. The error log is kept in build/smoke-logs/."""
        try:
            if self.proc.poll() is None:
                os.kill(self.proc.pid, signal.SIGTERM)
            try:
                rc = self.proc.wait(10)
            except subprocess.TimeoutExpired:
                os.kill(self.proc.pid, signal.SIGKILL)
                self.proc.wait(5)
                raise Fail("nginx did not exit within 10s of SIGTERM (killed)")
            check(rc == 0, "nginx exited with code %d: %s" % (rc, self.log_tail()))
        finally:
            os.makedirs(LOG_DIR, exist_ok=True)
            if os.path.exists(self.error_log):
                shutil.copy(self.error_log, os.path.join(
                    LOG_DIR, "%s-phase%d-nginx-error.log" % (SCRIPT, self.ctx.number)))
            shutil.rmtree(self.dir, ignore_errors=True)


def dechunk(raw):
    """The payload of the complete chunks at the start of `raw` (RFC 9112
    §7.1), and whether the last chunk was among them."""
    out, pos = [], 0
    for _ in range(1000000):
        eol = raw.find(b"\r\n", pos)
        if eol < 0:
            break
        try:
            size = int(raw[pos:eol].split(b";")[0], 16)
        except ValueError:
            raise Fail("bad chunk size line %s" % short(raw[pos:eol]))
        if size == 0:
            return b"".join(out), True
        end = eol + 2 + size
        if len(raw) < end + 2:
            break
        check(raw[end:end + 2] == b"\r\n", "chunk not followed by CRLF: %s" % short(raw[pos:end + 2]))
        out.append(raw[eol + 2:end])
        pos = end + 2
    return b"".join(out), False


def setup(ctx, extra=()):
    key = ctx.tmpfile("admin.key", ADMIN_KEY + "\n")
    args = DJANGO_ARGS + ["--realtime", "--heartbeat", "60", "--blocking-threads", "2",
                          "--admin-key-file", key] + list(extra)
    srv = ctx.server(args, admin=True, admin_key=ADMIN_KEY)
    return srv, Nginx(ctx, srv.addr)


class Stream:
    """A hold opened through nginx by an HTTP/1.1 client: the head, then the
    stream's payload read through the chunked coding."""

    def __init__(self, ctx, nginx, path, head_body, headers=(), pool="mojo", source=None):
        self.conn = Conn(nginx.addr, 5.0, source=source)
        ctx.conns.append(self.conn)
        self.conn.send(build_request("GET", path, headers))
        self.head = self.conn.read_head(5.0)
        h = self.head
        check(h.status == 200, "GET %s through nginx: %s %s" % (path, h.summary(), short(self.conn.pending())))
        check(h.header("content-type") == "text/event-stream" and h.header("cache-control") == "no-cache",
              "the hold head through nginx: %s" % short(h.raw_head))
        check(h.header("transfer-encoding") == "chunked",
              "nginx answers an HTTP/1.1 client's stream chunked; head %s" % short(h.raw_head))
        check((h.header("x-worker") or "").startswith(pool + "-"), "x-worker %r, want %s-N" % (
            h.header("x-worker"), pool))
        # nginx reads X-Accel-* itself and does not pass them on.
        check(not h.has("x-accel-buffering"), "nginx passed X-Accel-Buffering on: %s" % short(h.raw_head))
        self.head_body = head_body
        self.wait(lambda p: len(p) >= len(head_body), 5.0, "the head body")
        check(self.payload().startswith(head_body), "the stream starts %s, want %s" % (
            short(self.payload()), short(head_body)))

    def payload(self):
        return dechunk(self.conn.buf)[0]

    def body(self):
        return self.payload()[len(self.head_body):]

    def wait(self, pred, timeout, what):
        if not self.conn.read_until(lambda b: pred(dechunk(b)[0]), timeout):
            raise Fail("through nginx: %s not received within %.1fs%s; stream %s" % (
                what, timeout, " (EOF)" if self.conn.eof else "", short(self.payload())))

    def wait_event(self, n, timeout=5.0):
        self.wait(lambda p: n in event_ids(p[len(self.head_body):]), timeout, "event %d" % n)


def timed_publishes(srv, stream, channel, count, what):
    """Publishes `count` events, one at a time, each timed from just before
    the admin POST to its arrival through nginx. Returns (latencies, ids)."""
    lat, ids = [], []
    for i in range(count):
        t0 = time.monotonic()
        n = publish_admin(srv.admin, ADMIN_KEY, channel, "%s %d" % (what, i))
        stream.wait_event(n, 5.0)
        lat.append(time.monotonic() - t0)
        ids.append(n)
        time.sleep(0.02)
    return lat, ids


@smoke.phase(1, "events published through the admin API reach holds through nginx within 100 ms "
                "(median of 10, mojo and Django holds), with no SSE setting in the site")
def phase1(ctx):
    if os.environ.get("SERVER"):
        raise Fail("needs servers this script starts (nginx points at them); unset SERVER")
    srv, nginx = setup(ctx)
    all_lat = []
    for path, head, pool, channel in [("/native/hold?channel=n1m", MOJO_HEAD, "mojo", "n1m"),
                                      ("/hold?channel=n1d", DJANGO_HEAD, "wsgi", "n1d")]:
        s = Stream(ctx, nginx, path, head, pool=pool)
        lat, ids = timed_publishes(srv, s, channel, EVENTS_TIMED, pool)
        check_stream(s.body(), [(n, "%s %d" % (pool, i), None) for i, n in enumerate(ids)],
                     "the %s hold through nginx" % pool)
        med = statistics.median(lat)
        sys.stderr.write("  %s hold through nginx: publish->receive median %.1f ms, max %.1f ms\n" % (
            pool, med * 1000, max(lat) * 1000))
        check(med <= LATENCY_LIMIT_S, "%s hold: the median publish->receive through nginx is %.1f ms "
              "(all: %s), over %d ms: nginx buffers the stream" % (
                  pool, med * 1000, ", ".join("%.0f" % (x * 1000) for x in lat), LATENCY_LIMIT_S * 1000))
        all_lat += lat
    emit("nginx-publish-receive-median-s", round(statistics.median(all_lat), 6), "s", out=sys.stderr)
    emit("nginx-publish-receive-max-s", round(max(all_lat), 6), "s", out=sys.stderr)


@smoke.phase(2, "the control: the same site told to ignore X-Accel-Buffering (proxy_ignore_headers) "
                "buffers the stream, so the header is what makes phase 1 work")
def phase2(ctx):
    global SITE
    saved = SITE
    SITE = SITE.replace("proxy_read_timeout 1h;", "proxy_read_timeout 1h;\n        "
                        "proxy_ignore_headers X-Accel-Buffering;")
    try:
        srv, nginx = setup(ctx)
    finally:
        SITE = saved
    c = Conn(nginx.addr, 5.0)
    ctx.conns.append(c)
    c.send(build_request("GET", "/native/hold?channel=n2", []))
    # nginx may hold back even the head: the hold is seen open on /metrics.
    wait_metric(srv.admin, "m0_holds_open", 1, 5.0, "the hold through nginx")
    n = publish_admin(srv.admin, ADMIN_KEY, "n2", "buffered")
    c.read_until(lambda b: b"\r\n\r\n" in b and n in event_ids(dechunk(b.split(b"\r\n\r\n", 1)[1])[0]),
                 1.0)
    got = c.buf.split(b"\r\n\r\n", 1)
    check(len(got) < 2 or n not in event_ids(dechunk(got[1])[0]),
          "with X-Accel-Buffering ignored the event still came through within 1 s: %s" % short(c.buf))
    # The event was held in nginx's buffer: closing the hold flushes it.
    r = http(srv.admin, "POST", "/close", [("Authorization", "Bearer %s" % ADMIN_KEY),
                                           ("Content-Type", "application/json")], b'{"channel": "n2"}')
    check(r.status == 200 and r.json().get("closed") == 1, "admin /close: %s %s" % (r.summary(), short(r.body)))
    c.read_until(lambda b: b"\r\n\r\n" in b and dechunk(b.split(b"\r\n\r\n", 1)[1])[1], 5.0)
    got = c.buf.split(b"\r\n\r\n", 1)
    check(len(got) == 2 and got[0].startswith(b"HTTP/1.1 200") and n in event_ids(dechunk(got[1])[0]),
          "after the hold closed, nginx should have flushed the event; got %s" % short(c.buf))


@smoke.phase(3, "comment heartbeats (--heartbeat 0.5) pass through nginx on an idle hold")
def phase3(ctx):
    srv, nginx = setup(ctx, ["--heartbeat", "0.5"])
    s = Stream(ctx, nginx, "/native/hold?channel=n3", MOJO_HEAD)
    t0 = time.monotonic()
    s.wait(lambda p: sum(1 for it in stream_items(p[len(MOJO_HEAD):])[0] if it[0] == "hb") >= 3, 5.0,
           "three heartbeats")
    took = time.monotonic() - t0
    hb = check_stream(s.body(), [], "the idle hold through nginx")
    check(hb >= 3 and not s.conn.eof, "heartbeats %d, eof %r" % (hb, s.conn.eof))
    sys.stderr.write("  %d heartbeats through nginx in %.2fs\n" % (hb, took))
    n = publish_admin(srv.admin, ADMIN_KEY, "n3", "after the heartbeats")
    s.wait_event(n)


def echo_through(ctx, nginx):
    """GET /echo through nginx from CLIENT_ADDR; the app's environ."""
    c = Conn(nginx.addr, 5.0, source=CLIENT_ADDR)
    ctx.conns.append(c)
    check(c.sock.getsockname()[0] == CLIENT_ADDR, "the client is bound to %r" % (c.sock.getsockname(),))
    r = c.request("GET", "/echo")
    check(r.status == 200, "GET /echo through nginx: %s %s" % (r.summary(), short(r.body)))
    return r.json()["environ"]


@smoke.phase(4, "the client's address (127.0.0.3) reaches Django through nginx's X-Forwarded-For "
                "under the default --forwarded-allow-ips; with '' the app sees nginx (127.0.0.1)")
def phase4(ctx):
    srv, nginx = setup(ctx)
    env = echo_through(ctx, nginx)
    check(env.get("REMOTE_ADDR") == CLIENT_ADDR, "REMOTE_ADDR %r, want the client's %s (environ %s)" % (
        env.get("REMOTE_ADDR"), CLIENT_ADDR, short(env, 400)))
    check(env.get("HTTP_X_FORWARDED_FOR") == CLIENT_ADDR, "X-Forwarded-For %r" % env.get("HTTP_X_FORWARDED_FOR"))
    check(env.get("wsgi.url_scheme") == "http", "wsgi.url_scheme %r" % env.get("wsgi.url_scheme"))

    srv2 = ctx.server(DJANGO_ARGS + ["--forwarded-allow-ips", ""], label="%s-phase4-untrusting" % SCRIPT)
    nginx2 = Nginx(ctx, srv2.addr)
    env = echo_through(ctx, nginx2)
    check(env.get("REMOTE_ADDR") == "127.0.0.1", "with --forwarded-allow-ips '' REMOTE_ADDR is %r, "
          "want nginx's 127.0.0.1" % env.get("REMOTE_ADDR"))
    check(env.get("HTTP_X_FORWARDED_FOR") == CLIENT_ADDR, "X-Forwarded-For %r" % env.get("HTTP_X_FORWARDED_FOR"))


@smoke.phase(5, "a reconnect through nginx with Last-Event-ID resumes exactly after that id "
                "(replayed from history, then live)")
def phase5(ctx):
    srv, nginx = setup(ctx)
    for path, head, pool, channel in [("/native/hold?channel=n5m", MOJO_HEAD, "mojo", "n5m"),
                                      ("/hold?channel=n5d", DJANGO_HEAD, "wsgi", "n5d")]:
        s = Stream(ctx, nginx, path, head, pool=pool)
        ids = [publish_admin(srv.admin, ADMIN_KEY, channel, "e%d" % i) for i in range(3)]
        s.wait_event(ids[-1])
        check_stream(s.body(), [(n, "e%d" % i, None) for i, n in enumerate(ids)], "the first connection")
        leave(s.conn)
        # Published while the client is away: the reconnect must be replayed these.
        ids += [publish_admin(srv.admin, ADMIN_KEY, channel, "e%d" % i) for i in range(3, 5)]
        again = Stream(ctx, nginx, path, head, [("Last-Event-ID", str(ids[1]))], pool=pool)
        ids.append(publish_admin(srv.admin, ADMIN_KEY, channel, "e5"))
        again.wait_event(ids[-1])
        again.conn.read_until(lambda b: False, 0.3)
        check_stream(again.body(), [(n, "e%d" % i, None) for i, n in enumerate(ids)][2:],
                     "the %s reconnect with Last-Event-ID: %d" % (pool, ids[1]))


@smoke.phase(6, "README's unix-socket variant: nginx reaches m0serve over --listen unix:PATH (the socket's group "
                "is nginx's, mode 0660); events reach a hold, and the client's address reaches Django with "
                "--forwarded-allow-ips '' (a unix peer is trusted)")
def phase6(ctx):
    readme_path = readme_unix_upstream()
    check(readme_path.startswith("/"), "README's unix socket %r is not a path" % readme_path)
    d = tempfile.mkdtemp(prefix="m0-nginx-unix-")
    try:
        os.chmod(d, 0o755)  # nginx's worker (nobody, when run as root) walks in
        sock = os.path.join(d, os.path.basename(readme_path))
        extra = ["--listen", "unix:" + sock, "--forwarded-allow-ips", ""]
        if os.geteuid() == 0:
            # The worker is nobody:nogroup: the socket's group lets it connect, as
            # --unix-owner m0serve:www-data does in the README.
            extra += ["--unix-owner", "root:" + worker_group()]
        srv, _ = setup(ctx, extra)
        st = os.stat(sock)
        check(oct(st.st_mode & 0o777) == oct(0o660), "the socket's mode is %o, want 660" % (st.st_mode & 0o777))
        nginx = Nginx(ctx, "unix:" + sock)
        s = Stream(ctx, nginx, "/native/hold?channel=n6", MOJO_HEAD, pool="mojo")
        lat, ids = timed_publishes(srv, s, "n6", 5, "unix")
        check_stream(s.body(), [(n, "unix %d" % i, None) for i, n in enumerate(ids)], "over the unix socket")
        check(statistics.median(lat) <= 0.1, "median publish->receive over the unix socket %.1f ms" % (
            1000 * statistics.median(lat)))
        env = echo_through(ctx, nginx)
        check(env.get("REMOTE_ADDR") == CLIENT_ADDR, "over the unix socket REMOTE_ADDR is %r, want the client's "
              "%s (a unix peer's X-Forwarded-For is believed)" % (env.get("REMOTE_ADDR"), CLIENT_ADDR))
        check(env.get("SERVER_NAME") == "localhost" and env.get("SERVER_PORT") == "80",
              "over the unix socket SERVER_NAME %r, SERVER_PORT %r" % (env.get("SERVER_NAME"), env.get("SERVER_PORT")))
    finally:
        shutil.rmtree(d, ignore_errors=True)


@smoke.phase(7, "WebSocket through the README's site (its Upgrade and Connection lines): python3-websockets "
                "reaches the mojo /native/ws and Django's /ws (M0-Hold: websocket) through nginx, "
                "permessage-deflate negotiated end to end, hears the admin API's events in order, and its "
                "close reaches m0serve; a page of the site's own origin (port included: Host is passed as "
                "the client sent it) is let in, another origin refused 403 by m0serve; an ordinary request "
                "after them still answers")
def phase7(ctx):
    srv, nginx = setup(ctx)
    base, own = "ws://%s:%d" % nginx.addr, "http://%s:%d" % nginx.addr

    async def run():
        for path, pool, channel in [("/native/ws?channel=n7m", "mojo", "n7m"), ("/ws?channel=n7d", "wsgi", "n7d")]:
            try:
                ws = await websockets.connect(base + path, origin=own, open_timeout=5)
            except websockets.exceptions.InvalidStatusCode as e:
                why = {400: "nginx did not pass Upgrade on (m0serve refuses a Sec-WebSocket-Key without it)",
                       200: "nginx did not pass Upgrade on, so m0serve saw a plain GET",
                       403: "m0serve refused the site's own origin %s: was Host passed without its port?" % own
                       }.get(e.status_code, "")
                raise Fail("the WebSocket %s through nginx was answered %d, not 101 (%s): %s" % (
                    path, e.status_code, short(getattr(e, "headers", "")), why))
            try:
                ext = ws.response_headers.get("Sec-WebSocket-Extensions", "")
                check(ext.startswith("permessage-deflate"), "through nginx the extensions are %r" % ext)
                worker = ws.response_headers.get("x-worker", "")
                check(worker.startswith(pool + "-"), "the 101's x-worker %r, want %s-N" % (worker, pool))
                ids = [publish_admin(srv.admin, ADMIN_KEY, channel, "w%d" % i) for i in range(3)]
                got = [json.loads(await asyncio.wait_for(ws.recv(), 5.0)) for _ in ids]
                check(got == [{"id": str(n), "data": "w%d" % i} for i, n in enumerate(ids)],
                      "%s through nginx: messages %r for ids %r" % (path, got, ids))
                wait_metric(srv.admin, "m0_holds_open", 1, 5.0, "the WebSocket %s through nginx" % path)
            finally:
                await ws.close()
            wait_metric(srv.admin, "m0_holds_open", 0, 5.0, "after the client's close through nginx")
        try:
            ws = await websockets.connect(base + "/native/ws?channel=n7x", origin="http://elsewhere.example",
                                          open_timeout=5)
            await ws.close()
            raise Fail("a WebSocket from another origin was let in through nginx")
        except websockets.exceptions.InvalidStatusCode as e:
            check(e.status_code == 403, "another origin through nginx: %d, want 403" % e.status_code)

    asyncio.run(run())
    env = echo_through(ctx, nginx)
    check(env.get("REMOTE_ADDR") == CLIENT_ADDR, "after the WebSockets, REMOTE_ADDR %r" % env.get("REMOTE_ADDR"))


if __name__ == "__main__":
    if not os.path.exists(NGINX) and not {"-h", "--help", "--list"} & set(sys.argv[1:]):
        if os.environ.get("M0_REQUIRE_NGINX"):
            print("FAIL nginx: %s not installed (make deps installs it)" % NGINX, flush=True)
            sys.exit(1)
        print("SKIP nginx: %s not installed" % NGINX, flush=True)
        sys.exit(0)
    sys.exit(smoke.main())
