#!/usr/bin/python3
"""smoke-textshelf-browser: textshelf's live annotations in a real browser
(fixtures/textshelf/browser/test_live.mjs: playwright-core driving Debian's
/usr/bin/chromium), then the reconnect the browser relies on, at the
protocol level.

Needs /usr/bin/chromium (without it: one SKIP line, exit 0; FAIL with
M0_REQUIRE_BROWSER=1, as `make test-browser` sets) and the test's
node_modules (`npm ci --no-audit --no-fund` in fixtures/textshelf/browser
when they are missing; package-lock.json pins them). Installs nothing else.

The server is the one of smoke/40-textshelf.py: textshelf, the mojo mount
at /native, --realtime, a fresh grant key file shared through
M0_GRANT_KEY_FILE and --grant-key-file, the fixture's database seeded first.

The server also has the admin listener and key textshelf_lib gives it.

Phase 1 runs `node test_live.mjs` (BASE_URL, SCREENSHOT=build/textshelf-live.png,
ADMIN_URL and ADMIN_KEY for its reconnect steps: the admin POST /close drops
alice's stream, her browser reconnects with Last-Event-ID) and relays its
lines to stderr; it passes when the test exits 0 with nothing failed or skipped.
It also restarts the server when the test asks (RESTART=stdio): on the line
`@restart` from node it stops m0serve by PID (SIGTERM, exit 0), starts a new
one with the same command line (same port, admin port, database, grant and
admin key files) and answers `@restarted OLD_PID NEW_PID` on node's stdin,
or `@restart-failed REASON`. The browser's EventSource comes back by itself
to the new process with its old Last-Event-ID, which predates it: m0-reset.
Phase 2: an EventSource that reconnects sends `Last-Event-ID: N`, N the
last id it saw; over /native/live it must get only later events -- and the
cursor must really filter, so a client whose cursor is ahead of the counter
hears nothing of the same annotation.
Phase 3: test_live.mjs again over TLS, with a certificate from the smoke's
own CA (INSECURE=1: Chromium accepts it, as smoke 96 does): Chromium
chooses h2 by ALPN, so the pages, both hold paths, the 403s and the
reconnect after POST /close (Last-Event-ID on a new stream) run over
HTTP/2; the page's nextHopProtocol must be h2, and the server's access log
must show every request Chromium made as HTTP/2. The restart step is
phase 1's alone, to keep this phase short (it costs seven seconds; the
drain's GOAWAY and retry hints over HTTP/2 are smoke 99's phase 3).
"""

import os
import re
import secrets
import sys
import time

sys.dont_write_bytecode = True  # no __pycache__ in smoke/ or src/wsgi/m0/
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from m0smoke import (  # noqa: E402
    LOG_DIR, ROOT, Fail, Server, Smoke, check, check_hold_head, check_stream, leave, read_head_body,
    short)
from browser_lib import BROWSER_DIR, CHROMIUM, main, node, relay  # noqa: E402
from tls_lib import Pki  # noqa: E402
from textshelf_lib import (  # noqa: E402
    DOC, MOJO_HEAD, User, key_file, new_key, read_events, seed,
    textshelf_server)

SCRIPT = "50-textshelf-browser"
SCREENSHOT = os.path.join(ROOT, "build", "textshelf-live.png")
NODE_BUDGET_S = 200.0  # test_live.mjs has its own 180 s watchdog
RESTART_SKIP = "SKIP the server restarts between"  # the step RESTART=stdio runs

smoke = Smoke(SCRIPT, __doc__, phase_timeout=240.0)


def start(ctx):
    seed()
    return textshelf_server(ctx, key_file(ctx, "grant.keys", [new_key("k1")]))


def restart(ctx, srv):
    """Stops srv by PID (SIGTERM, exit 0) and starts the same command line
    again: same port and admin port, same environment (database, grant key
    file). Returns the new Server."""
    srv.require_own("it restarts the server")
    old_pid = srv.proc.pid
    t0 = time.monotonic()
    srv.stop()
    stopped = time.monotonic() - t0
    again = Server(ctx, srv.binary, srv.args, "%s-restarted" % srv.label,
                   admin_key=srv.admin_key, env=srv.env)
    # The same listeners: srv.args already names the admin one.
    again.addr, again.admin = srv.addr, srv.admin
    again.argv = [srv.binary, "--listen", "%s:%d" % srv.addr] + srv.args
    ctx.servers.append(again)
    t1 = time.monotonic()
    again.start()
    sys.stderr.write("  restart: pid %d stopped (SIGTERM, exit 0) in %.2fs; pid %d accepting on %s:%d "
                     "in %.2fs\n" % (old_pid, stopped, again.proc.pid, srv.addr[0], srv.addr[1],
                                     time.monotonic() - t1))
    return again


def run_live(ctx, srv, scheme="http", extra_env=None):
    """Runs test_live.mjs against srv at `scheme`://; restarts the server when
    it asks (RESTART=stdio) unless extra_env sets RESTART. Returns its lines
    and the restart step's SKIP lines (there are none unless RESTART is off)."""
    node_path = node()
    env = dict(os.environ)
    check(srv.admin and srv.admin_key, "the server has no admin listener and key (SERVER_ADMIN, SERVER_ADMIN_KEY)")
    env.update({"BASE_URL": "%s://%s:%d" % ((scheme,) + srv.addr), "SCREENSHOT": SCREENSHOT,
                "CHROMIUM": CHROMIUM, "ADMIN_URL": "http://%s:%d" % srv.admin,
                "ADMIN_KEY": srv.admin_key, "RESTART": "stdio"})
    env.pop("HEADED", None)
    env.update(extra_env or {})
    current = [srv]

    def on_line(line):
        if line.strip() != "@restart":
            return None
        try:
            old = current[0]
            current[0] = restart(ctx, old)
            return "@restarted %d %d" % (old.proc.pid, current[0].proc.pid)
        except Fail as e:
            return "@restart-failed %s" % " ".join(str(e).split())
        except Exception as e:  # noqa: BLE001 - node reports it as its step's failure
            return "@restart-failed %s: %s" % (type(e).__name__, " ".join(str(e).split()))

    t0 = time.monotonic()
    rc, lines = relay([node_path, "test_live.mjs"], BROWSER_DIR, env, NODE_BUDGET_S, "  node| ", on_line)
    took = time.monotonic() - t0
    check(rc is not None, "test_live.mjs still running after %.0fs (killed)" % NODE_BUDGET_S)
    summary = [m for m in (re.match(r"^(\d+) passed, (\d+) failed, (\d+) skipped$", l) for l in lines) if m]
    failed = [l for l in lines if l.startswith("FAIL ")]
    skipped = [l for l in lines if l.startswith("SKIP ")]
    unasked = [l for l in skipped if env["RESTART"] == "stdio" or not l.startswith(RESTART_SKIP)]
    check(rc == 0 and not unasked, "test_live.mjs exited %d after %.1fs (%s): %s" % (
        rc, took, summary[-1].group(0) if summary else "no summary line",
        (failed + unasked)[0] if failed + unasked else short(lines[-3:])))
    check(summary, "test_live.mjs exited 0 without its 'N passed, M failed, K skipped' line")
    passed, nfailed, nskipped = map(int, summary[-1].groups())
    check(passed > 0 and nfailed == 0 and nskipped == len(skipped),
          "test_live.mjs exited 0 but says %r" % summary[-1].group(0))
    return lines


@smoke.phase(1, "browser: test_live.mjs against textshelf on m0serve (mojo and WSGI paths, 403s, badge, "
                "reconnect after the admin POST /close, a server restart: m0-reset and the page's resync)")
def phase1(ctx):
    run_live(ctx, start(ctx), extra_env={"PROTOCOL": "http/1.1"})


def annotation_event(conn, aid, what, timeout=10.0):
    """Waits for the annotation event of annotation `aid` on a /native/live hold; returns its id."""
    events = read_events(conn, MOJO_HEAD, 1, timeout)
    check(events, "%s: no event within %.0fs of annotation %d%s; body %s" % (
        what, timeout, aid, " (EOF)" if conn.eof else "", short(conn.buf[len(MOJO_HEAD):])))
    ev = events[-1]
    check(ev["event"] == "annotation" and ('"id":%d,' % aid) in "".join(ev["data"]),
          "%s: the event is not annotation %d: %s" % (what, aid, short(ev["raw"])))
    return int(ev["id"])


def live(ctx, srv, url, last_event_id=None):
    headers = [("Last-Event-ID", str(last_event_id))] if last_event_id is not None else []
    c, head = ctx.hold(srv, url, headers, timeout=10.0)
    check(head.status == 200, "GET %s (Last-Event-ID %r): %s %s" % (
        short(url, 60), last_event_id, head.summary(), short(c.pending(), 120)))
    check_hold_head(head, "mojo")
    read_head_body(c, MOJO_HEAD)
    return c


@smoke.phase(2, "reconnect: /native/live with Last-Event-ID: N (the last id seen) gets only later ids; "
                "a cursor ahead of the counter mutes the same annotation")
def phase2(ctx):
    srv = start(ctx)
    alice = User(srv.addr, "alice").login()
    bob = User(srv.addr, "bob").login()
    url = alice.stream_url("/grant/document/%d" % DOC)

    first = live(ctx, srv, url)
    a1 = bob.annotate(DOC, "Nevermore", "reconnect %s one" % secrets.token_hex(3))
    n = annotation_event(first, a1, "the first connection")
    leave(first)  # the browser's connection drops

    # EventSource reconnects to the same URL with the last id it saw.
    again = live(ctx, srv, url, n)
    ahead = live(ctx, srv, url, n + 1000)
    a2 = bob.annotate(DOC, "Nevermore", "reconnect %s two" % secrets.token_hex(3))
    m = annotation_event(again, a2, "the reconnected hold (Last-Event-ID: %d)" % n)
    check(m > n, "after Last-Event-ID: %d the hold got id %d" % (n, m))
    again.read_until(lambda b: False, 0.3)  # nothing else may follow
    ev = read_events(again, MOJO_HEAD, 1, 0)[0]
    check_stream(again.buf[len(MOJO_HEAD):], [(m, "\n".join(ev["data"]), "annotation")],
                 "the reconnected hold (Last-Event-ID: %d)" % n)
    # The control: the header is honoured, not ignored -- a cursor past the
    # new id mutes it (and no later event was published meanwhile).
    ahead.read_until(lambda b: False, 0.3)
    check(read_events(ahead, MOJO_HEAD, 1, 0) == [],
          "a hold with Last-Event-ID: %d got %s: the cursor is ignored on /native/live" % (
              n + 1000, short(ahead.buf[len(MOJO_HEAD):])))
    check(not again.eof and not ahead.eof, "a hold was closed")


def browser_requests(path):
    """(method, target, protocol) of each access log line Chromium's requests wrote."""
    with open(path, encoding="utf-8", errors="replace") as f:
        return re.findall(r'"(\w+) (\S+) (HTTP/[\d.]+)" \d+ \d+ "[^"]*" "[^"]*HeadlessChrome', f.read())


@smoke.phase(3, "browser over TLS: test_live.mjs on https (Chromium speaks h2 by ALPN): mojo and WSGI "
                "holds, 403s, the reconnect after POST /close with Last-Event-ID, all on HTTP/2 streams")
def phase3(ctx):
    seed()
    cert, key = Pki(ctx).leaf("leaf", 3)
    log = os.path.join(LOG_DIR, "%s-phase3-access.log" % SCRIPT)
    if os.path.exists(log):
        os.unlink(log)
    srv = textshelf_server(ctx, key_file(ctx, "grant.keys", [new_key("k1")]),
                           ["--certfile", cert, "--keyfile", key, "--access-log", log])
    srv.require_own("it reads the server's access log")
    # RESTART off: the restart step is phase 1's alone (see the top).
    lines = run_live(ctx, srv, "https", {"INSECURE": "1", "PROTOCOL": "h2", "RESTART": ""})
    check("     protocol: h2" in lines, "test_live.mjs printed no 'protocol: h2'")
    srv.stop()  # the access log is whole once the server has stopped
    got = browser_requests(log)
    holds = [r for r in got if r[1].startswith(("/native/live?", "/events/document/"))]
    check(len(holds) >= 4 and any(r[0] == "POST" for r in got),
          "the access log has %d requests from Chromium, %d of them holds" % (len(got), len(holds)))
    # The document page's presence WebSocket is the one HTTP/1.1 connection:
    # a WebSocket over HTTP/2 needs RFC 8441's extended CONNECT, which
    # m0serve does not offer, so Chromium opens it over HTTP/1.1.
    other = [r for r in got if r[2] != "HTTP/2" and not r[1].startswith("/presence/")]
    check(not other, "Chromium's requests not over HTTP/2: %s" % short(other))


if __name__ == "__main__":
    main(smoke, "textshelf browser")
