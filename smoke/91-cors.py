#!/usr/bin/python3
"""smoke-cors: --cors-origin and --cors-credentials on hold heads, against the
real binary, then a cross-origin EventSource in a real browser.

Servers (a fresh one per phase):

    m0serve --listen 127.0.0.1:P --chdir fixtures/djangoproj \\
            --mount /=djangoproj.wsgi:application --mount /native=mojo \\
            --realtime --heartbeat 60 --admin-listen 127.0.0.1:P2 --admin-key-file F \\
            [--grant-key-file K] --cors-origin ORIGIN [--cors-credentials]

Phase 1: bad flag values exit 2 with one line naming the flag; --check logs
the policy. Phase 2: the head of an M0-Hold (mojo /native/hold, Django
/hold) and a Grip-Hold (Django /grip-hold) answer carries
Access-Control-Allow-Origin (the request's Origin), -Credentials and
`Vary: Origin` for an allowed Origin, no Access-Control field for another
Origin or none; ordinary answers never get one. Phase 3: `*`.

Phase 4 (the browser: fixtures/cors/browser/test_cors.mjs, playwright-core
driving Debian's /usr/bin/chromium): a page served from 127.0.0.2 (another
origin; Python's http.server, started and stopped by PID) opens an
EventSource on m0serve's /native/live?grant=... at 127.0.0.1, with no
cookie. Without --cors-origin the browser refuses the stream (an error, no
message even after a publish); with --cors-origin http://127.0.0.2:PORT an
event published after it opened reaches the page. Without Chromium phase 4
prints one SKIP line (FAIL with M0_REQUIRE_BROWSER=1, as make sets); its
node_modules are installed with `npm ci` in fixtures/cors/browser when missing.
"""

import json
import os
import signal
import subprocess
import sys

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import m0smoke  # noqa: E402
from m0smoke import (  # noqa: E402
    DJANGO_ARGS, ROOT, Conn, Smoke, check, check_hold_head, free_port, http,
    read_head_body, short)
from browser_lib import CHROMIUM, node, relay  # noqa: E402

SCRIPT = "91-cors"
ADMIN_KEY = "smoke-admin-key-91cors-3f9a"
FIXTURE = os.path.join(ROOT, "fixtures", "cors")
BROWSER_DIR = os.path.join(FIXTURE, "browser")
PAGE_HOST = "127.0.0.2"  # the page's origin: another host than m0serve's 127.0.0.1
ALLOWED = "http://127.0.0.2:8080"
NODE_BUDGET_S = 90.0

smoke = Smoke(SCRIPT, __doc__)

HOLDS = [("/native/hold?channel=c", b": mojo hold\n\n", "mojo"),
         ("/hold?channel=c", b": django hold\n\n", "wsgi"),
         ("/grip-hold?channel=c", b": grip hold\n\n", "wsgi")]


def server(ctx, extra, grant_keys=None):
    key = ctx.tmpfile("admin.key", ADMIN_KEY + "\n")
    args = DJANGO_ARGS + ["--realtime", "--heartbeat", "60", "--blocking-threads", "2",
                          "--admin-key-file", key] + list(extra)
    if grant_keys:
        args += ["--grant-key-file", grant_keys]
    return ctx.server(args, admin=True, admin_key=ADMIN_KEY)


def cors_fields(head):
    return [(n, v) for n, v in head.headers if n.lower().startswith("access-control-")]


def hold_head(ctx, srv, path, body, pool, origin):
    c = Conn(srv.addr, 5.0)
    ctx.conns.append(c)
    headers = [("Origin", origin)] if origin else []
    c.send(m0smoke.build_request("GET", path, headers))
    head = c.read_head(5.0)
    check_hold_head(head, pool, exact_names=False)
    read_head_body(c, body)
    return head


@smoke.phase(1, "start-up: a malformed origin, * with --cors-credentials, --cors-credentials alone, "
                "--cors-origin without --realtime: exit 2 with one line naming the flag; --check logs the policy")
def phase1(ctx):
    base = ["--listen", "127.0.0.1:0", "--mount", "/=mojo", "--realtime"]
    for extra, want in [
            (["--cors-origin", "http://127.0.0.2:8080/"], "--cors-origin"),
            (["--cors-origin", "127.0.0.2:8080"], "--cors-origin"),
            (["--cors-origin", "http://a.test?x"], "--cors-origin"),
            (["--cors-origin", "http://a.test:99999"], "--cors-origin"),
            (["--cors-origin", ""], "--cors-origin"),
            (["--cors-origin", "*", "--cors-credentials"], "--cors-credentials"),
            (["--cors-credentials"], "--cors-credentials needs --cors-origin"),
    ]:
        rc, out, err = ctx.run_binary(base + extra)
        lines = err.strip().splitlines()
        check(rc == 2, "%r: exit %r, want 2 (stderr %s)" % (extra, rc, short(err)))
        check(len(lines) == 1 and want in lines[0], "%r: want one line naming %r, got %s" % (
            extra, want, short(err)))
    # Without --realtime there are no hold heads to shape: refused, as --bus is.
    rc, out, err = ctx.run_binary([a for a in base if a != "--realtime"] + ["--cors-origin", "http://a.test"])
    lines = err.strip().splitlines()
    check(rc == 2 and len(lines) == 1 and "--cors-origin http://a.test needs --realtime" in lines[0],
          "--cors-origin without --realtime: exit %r, stderr %s" % (rc, short(err)))
    rc, out, err = ctx.run_binary(base + ["--check", "--cors-origin", "HTTP://127.0.0.2:8080",
                                          "--cors-origin", "https://app.example:443",
                                          "--cors-credentials"])
    check(rc == 0, "--check: exit %r (stderr %s)" % (rc, short(err)))
    want = "CORS on hold heads: http://127.0.0.2:8080, https://app.example with credentials"
    check(want in err, "--check logs no %r: %s" % (want, short(err, 1200)))


@smoke.phase(2, "hold heads on both pools (M0-Hold and Grip-Hold): an allowed Origin is echoed with "
                "credentials and Vary: Origin; another Origin or none gets no Access-Control field; "
                "ordinary answers get none")
def phase2(ctx):
    srv = server(ctx, ["--cors-origin", ALLOWED, "--cors-origin", "https://app.example",
                       "--cors-credentials"])
    for path, body, pool in HOLDS:
        what = "%s (%s)" % (path, pool)
        # Scheme and host compare without case; the echo is the request's own spelling.
        for origin in (ALLOWED, "HTTP://127.0.0.2:8080", "https://app.example:443"):
            h = hold_head(ctx, srv, path, body, pool, origin)
            got = cors_fields(h)
            check(got == [("Access-Control-Allow-Origin", origin),
                          ("Access-Control-Allow-Credentials", "true")],
                  "%s with Origin %s: CORS fields %r (head %s)" % (what, origin, got, short(h.raw_head)))
            check(h.all("vary") == ["Origin"], "%s: Vary %r" % (what, h.all("vary")))
        for origin in ("http://127.0.0.2:8081", "http://127.0.0.3:8080", "https://127.0.0.2:8080",
                       "null", None):
            h = hold_head(ctx, srv, path, body, pool, origin)
            check(cors_fields(h) == [], "%s with Origin %r: CORS fields %r" % (what, origin, cors_fields(h)))
            check(h.all("vary") == ["Origin"], "%s: Vary %r" % (what, h.all("vary")))
    # Holds only: the application answers for its own responses.
    for path in ("/echo", "/native/hello"):
        r = http(srv.addr, "GET", path, [("Origin", ALLOWED)])
        check(r.status == 200 and cors_fields(r) == [], "GET %s with an allowed Origin: %s, CORS fields %r" % (
            path, r.summary(), cors_fields(r)))


@smoke.phase(3, "--cors-origin '*': every hold head, with an Origin or without, says *; no Vary")
def phase3(ctx):
    srv = server(ctx, ["--cors-origin", "*"])
    for path, body, pool in HOLDS:
        for origin in ("http://anything.example:1", None):
            h = hold_head(ctx, srv, path, body, pool, origin)
            check(cors_fields(h) == [("Access-Control-Allow-Origin", "*")],
                  "%s with Origin %r: CORS fields %r" % (path, origin, cors_fields(h)))
            check(not h.has("vary"), "%s: Vary %r" % (path, h.all("vary")))


# ---- the browser -------------------------------------------------------------

def page_server(ctx):
    """Python's http.server on 127.0.0.2 serving fixtures/cors/ (page.html);
    stopped by PID when the phase ends. Returns its origin."""
    port = free_port()
    p = subprocess.Popen(["/usr/bin/python3", "-m", "http.server", str(port), "--bind", PAGE_HOST,
                          "--directory", FIXTURE], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL, start_new_session=True)
    m0smoke._started.append(p)

    def stop():
        if p.poll() is None:
            os.kill(p.pid, signal.SIGTERM)
        p.wait(5)
    ctx.finalizers.append(stop)
    def up():
        try:
            return p.poll() is not None or http((PAGE_HOST, port), "GET", "/page.html").status == 200
        except OSError:
            return False
    m0smoke.wait_for(up, 10.0, what="the page server on %s:%d" % (PAGE_HOST, port))
    check(p.poll() is None, "the page server exited with %r" % p.poll())
    return "http://%s:%d" % (PAGE_HOST, port)


def grant_for(channel, keys):
    src = os.path.join(ROOT, "src", "wsgi")
    if src not in sys.path:
        sys.path.insert(0, src)
    import m0.grant  # noqa: E402  (the signer Django uses)
    return m0.grant.sign_grant([channel], 600, keys=[(kid, bytes.fromhex(h)) for kid, h in keys])


def browser_cases(ctx, label, extra):
    """test_cors.mjs on two cases against m0serve's /native/live from a page
    on 127.0.0.2: a server without --cors-origin (refused) and one with the
    page's origin (delivered); `extra` goes into each case (test_cors.mjs's
    `page`, `replay`)."""
    node_path = node(BROWSER_DIR)
    origin = page_server(ctx)
    keys = [("k1", os.urandom(32).hex())]
    key_path = ctx.tmpfile("grant.keys", "".join("%s %s\n" % k for k in keys))
    os.chmod(key_path, 0o600)
    closed = server(ctx, [], key_path)
    opened = server(ctx, ["--cors-origin", origin], key_path)
    cases = []
    for name, srv, expect in [("%s without --cors-origin: refused" % label, closed, "refused"),
                              ("%s with --cors-origin %s: delivered" % (label, origin), opened,
                               "delivered")]:
        channel = "cors-browser-%d" % len(cases)
        cases.append(dict(extra, name=name, expect=expect, channel=channel, key=ADMIN_KEY,
                          admin="http://%s:%d" % srv.admin,
                          src="http://%s:%d/native/live?grant=%s" % (srv.addr[0], srv.addr[1],
                                                                     grant_for(channel, keys))))
    env = dict(os.environ)
    env.pop("HEADED", None)
    env.update({"PAGE_URL": origin + "/page.html", "CASES": json.dumps(cases), "CHROMIUM": CHROMIUM})
    rc, lines = relay([node_path, "test_cors.mjs"], BROWSER_DIR, env, NODE_BUDGET_S, "  node| ")
    check(rc is not None, "test_cors.mjs still running after %.0fs (killed)" % NODE_BUDGET_S)
    failed = [l for l in lines if l.startswith("FAIL ")]
    check(rc == 0 and not failed and "2 passed, 0 failed" in lines,
          "test_cors.mjs exited %r: %s" % (rc, failed[0] if failed else short(lines[-3:])))


@smoke.phase(4, "browser: an EventSource from a page on http://127.0.0.2:PORT to m0serve's /native/live "
                "(grant in the URL, no cookie) is refused without --cors-origin, and receives an event "
                "published after it opened with --cors-origin http://127.0.0.2:PORT", timeout=180.0)
def phase4(ctx):
    browser_cases(ctx, "EventSource", {})


@smoke.phase(5, "browser: a page on http://127.0.0.2:PORT reads /native/live with fetch() and a "
                "Last-Event-ID header (a fetch-based EventSource), which Chromium preflights: with "
                "--cors-origin the loop answers the OPTIONS (204, the origin, the asked headers) and the "
                "stream resumes after the cursor, replayed then live; without it the preflight fails",
             timeout=180.0)
def phase5(ctx):
    # Three events before the page opens; its Last-Event-ID is the first's.
    browser_cases(ctx, "fetch", {"page": "fetch.html", "replay": 3})


if __name__ == "__main__":
    missing = not os.path.exists(CHROMIUM) and not {"-h", "--help", "--list"} & set(sys.argv[1:])
    if missing:
        # make sets M0_REQUIRE_BROWSER: `make deps` installs Chromium, so its
        # absence there is a failure, not a skip.
        required = bool(os.environ.get("M0_REQUIRE_BROWSER"))
        print("%s %s phases 4 and 5: %s not installed" % ("FAIL" if required else "SKIP", SCRIPT,
                                                             CHROMIUM), flush=True)
        smoke.phases = [p for p in smoke.phases if p[0] not in (4, 5)]
    rc = smoke.main()
    sys.exit(rc or (1 if missing and os.environ.get("M0_REQUIRE_BROWSER") else 0))
