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
Phase 3: HTTP/2 (test_h2_streams.mjs): one page opens 50 EventSources over
TLS (ALPN h2) and every one receives its event; the same page over plain
HTTP/1.1 opens at most six (Chromium's connections to one origin) and only
those receive theirs.
Phase 2: an EventSource that reconnects sends `Last-Event-ID: N`, N the
last id it saw; over /native/live it must get only later events -- and the
cursor must really filter, so a client whose cursor is ahead of the counter
hears nothing of the same annotation.
"""

import os
import re
import secrets
import shutil
import subprocess
import sys
import threading
import time

sys.dont_write_bytecode = True  # no __pycache__ in smoke/ or src/wsgi/m0/
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from m0smoke import (  # noqa: E402
    DJANGO_ARGS, ROOT, Fail, Server, Smoke, check, check_hold_head, check_stream, free_port, leave,
    read_head_body, self_signed, short)
from textshelf_lib import (  # noqa: E402
    DOC, FIXTURE, MOJO_HEAD, User, key_file, new_key, read_events, seed,
    textshelf_server)

SCRIPT = "50-textshelf-browser"
CHROMIUM = "/usr/bin/chromium"
BROWSER_DIR = os.path.join(FIXTURE, "browser")
SCREENSHOT = os.path.join(ROOT, "build", "textshelf-live.png")
NODE_BUDGET_S = 200.0  # test_live.mjs has its own 180 s watchdog

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


def relay(cmd, cwd, env, budget, prefix, on_line=None):
    """Runs cmd, copying its output lines to stderr as they come; returns
    (rc, lines). rc is None when it was killed at the budget. With on_line,
    each line is also passed to it, and what it returns (a line) is written
    to cmd's stdin."""
    p = subprocess.Popen(cmd, cwd=cwd, env=env, stdin=subprocess.PIPE if on_line else subprocess.DEVNULL,
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
    lines = []

    def pump():
        for raw in p.stdout:
            line = raw.decode("utf-8", "replace").rstrip("\n")
            lines.append(line)
            sys.stderr.write("%s%s\n" % (prefix, line))
            sys.stderr.flush()
            answer = on_line(line) if on_line else None
            if answer is not None:
                try:
                    p.stdin.write(answer.encode("utf-8") + b"\n")
                    p.stdin.flush()
                except OSError as e:
                    sys.stderr.write("  could not answer %r: %s\n" % (line, e))

    t = threading.Thread(target=pump, daemon=True)
    t.start()
    try:
        rc = p.wait(budget)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, 9)  # its own session: node and the chromium it started
        p.wait(10)
        rc = None
    t.join(5)
    if p.stdin:
        try:
            p.stdin.close()
        except OSError:
            pass
    return rc, lines


def ensure_node_modules():
    if os.path.isdir(os.path.join(BROWSER_DIR, "node_modules", "playwright-core")):
        return
    npm = shutil.which("npm")
    check(npm, "fixtures/textshelf/browser/node_modules is missing and npm is not installed")
    sys.stderr.write("  node_modules missing: npm ci --no-audit --no-fund (in %s)\n" % BROWSER_DIR)
    rc, lines = relay([npm, "ci", "--no-audit", "--no-fund"], BROWSER_DIR, dict(os.environ), 600.0, "  npm| ")
    check(rc == 0, "npm ci exited %r: %s" % (rc, lines[-1] if lines else "(no output)"))


@smoke.phase(1, "browser: test_live.mjs against textshelf on m0serve (mojo and WSGI paths, 403s, badge, "
                "reconnect after the admin POST /close, a server restart: m0-reset and the page's resync)")
def phase1(ctx):
    node = shutil.which("node")
    check(node, "node is not installed")
    ensure_node_modules()
    srv = start(ctx)
    env = dict(os.environ)
    check(srv.admin and srv.admin_key, "the server has no admin listener and key (SERVER_ADMIN, SERVER_ADMIN_KEY)")
    env.update({"BASE_URL": "http://%s:%d" % srv.addr, "SCREENSHOT": SCREENSHOT, "CHROMIUM": CHROMIUM,
                "ADMIN_URL": "http://%s:%d" % srv.admin, "ADMIN_KEY": srv.admin_key})
    env.pop("HEADED", None)
    env["RESTART"] = "stdio"
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
    rc, lines = relay([node, "test_live.mjs"], BROWSER_DIR, env, NODE_BUDGET_S, "  node| ", on_line)
    took = time.monotonic() - t0
    check(rc is not None, "test_live.mjs still running after %.0fs (killed)" % NODE_BUDGET_S)
    summary = [m for m in (re.match(r"^(\d+) passed, (\d+) failed, (\d+) skipped$", l) for l in lines) if m]
    failed = [l for l in lines if l.startswith(("FAIL ", "SKIP "))]
    check(rc == 0, "test_live.mjs exited %d after %.1fs (%s): %s" % (
        rc, took, summary[-1].group(0) if summary else "no summary line",
        failed[0] if failed else short(lines[-3:])))
    check(summary, "test_live.mjs exited 0 without its 'N passed, M failed, K skipped' line")
    passed, nfailed, skipped = map(int, summary[-1].groups())
    check(passed > 0 and nfailed == 0 and skipped == 0,
          "test_live.mjs exited 0 but says %r" % summary[-1].group(0))


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


@smoke.phase(3, "browser: 50 EventSources on one page all receive over TLS+h2; over HTTP/1.1 six")
def phase3(ctx):
    node = shutil.which("node")
    check(node, "node is not installed")
    ensure_node_modules()
    cert, key = self_signed(ctx)
    plain = free_port()
    srv = ctx.server(DJANGO_ARGS + ["--realtime", "--admin-open", "--certfile", cert, "--keyfile",
                                    key, "--listen-plain", "127.0.0.1:%d" % plain], admin=True)
    env = dict(os.environ)
    env.update({"TLS_URL": "https://%s:%d" % srv.addr, "PLAIN_URL": "http://127.0.0.1:%d" % plain,
                "ADMIN_URL": "http://%s:%d" % srv.admin, "N": "50", "CHROMIUM": CHROMIUM})
    rc, lines = relay([node, "test_h2_streams.mjs"], BROWSER_DIR, env, 90.0, "  node| ")
    check(rc == 0, "test_h2_streams.mjs exited %r: %s" % (
        rc, [l for l in lines if l.startswith("FAIL")] or lines[-3:]))


if __name__ == "__main__":
    if not os.path.exists(CHROMIUM) and not {"-h", "--help", "--list"} & set(sys.argv[1:]):
        # `make test-browser` sets M0_REQUIRE_BROWSER: `make deps` installs
        # Chromium, so its absence there is a failure, not a skip.
        if os.environ.get("M0_REQUIRE_BROWSER"):
            print("FAIL textshelf browser: %s not installed (make deps installs it)" % CHROMIUM,
                  flush=True)
            sys.exit(1)
        print("SKIP textshelf browser: %s not installed" % CHROMIUM, flush=True)
        sys.exit(0)
    sys.exit(smoke.main())
