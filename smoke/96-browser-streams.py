#!/usr/bin/python3
"""smoke-browser-streams: many live streams from one page, in Chromium
(fixtures/textshelf/browser/streams.mjs: playwright-core driving Debian's
/usr/bin/chromium), over plain HTTP and over TLS.

    m0serve --listen 127.0.0.1:P --mount /native=mojo --realtime \\
            --heartbeat 60 --admin-listen 127.0.0.1:P2 --admin-key-file F \\
            [--certfile LEAF --keyfile KEY]

The page (the server's /native/hello) opens 50 EventSources to
/native/hold?channel=bs-N, or 20 WebSockets to /native/ws?channel=bs-N
(Chromium opens those one at a time, ~100 ms each), on its own origin;
once no more open, one admin POST /publish sends an event
to each channel; the script reports how many opened, how many got their
own event (exactly once) and the page's protocol.

Phase 1, HTTP/1.1: Chromium keeps at most six connections to one origin,
so six EventSources open and get their events and the other 44 wait (the
stall HTTP/2 is for). Phase 2, over TLS (a certificate from the smoke's own
CA, which Chromium is told to accept): Chromium picks h2 by ALPN and all 50
EventSources open as streams of one connection and get their events; 20
WebSockets over wss (HTTP/1.1: the server does not offer WebSocket over
HTTP/2) all open and each gets its event as a JSON message.

Phase 3, an upload on a slow link: Chromium's DevTools network emulation
limits the page's upload to 100 KB/s (fixtures/textshelf/browser/upload.mjs,
through a CDP session), and a fetch() POSTs 300 KB to Django's echo view on
a server with --header-timeout 1: over TLS (h2) and over plain HTTP/1.1 the
body arrives whole (its SHA-256) after about 3 s, where it was once cut 408
at the header timeout.

Needs /usr/bin/chromium (without it: one SKIP line, exit 0; FAIL with
M0_REQUIRE_BROWSER=1, as `make test-browser` and CI set it) and the
playwright-core package (npm ci in fixtures/textshelf/browser when missing).
"""

import json
import os
import sys

sys.dont_write_bytecode = True  # no __pycache__ in smoke/ or src/wsgi/m0/
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from m0smoke import DJANGO_ARGS, Smoke, check, short  # noqa: E402
from browser_lib import BROWSER_DIR, CHROMIUM, main, node, relay  # noqa: E402
from tls_lib import Pki  # noqa: E402

SCRIPT = "96-browser-streams"
ADMIN_KEY = "smoke-admin-key-96-browser-streams"
STREAMS = 50
WS_STREAMS = 20  # Chromium opens WebSockets to one address one at a time, ~100 ms each
BROWSER_LIMIT = 6  # Chromium's HTTP/1.1 connections to one origin

smoke = Smoke(SCRIPT, __doc__, phase_timeout=120.0)


def server(ctx, tls=None):
    args = ["--mount", "/native=mojo", "--realtime", "--heartbeat", "60",
            "--admin-key-file", ctx.tmpfile("admin.key", ADMIN_KEY + "\n")]
    if tls:
        args += ["--certfile", tls[0], "--keyfile", tls[1]]
    return ctx.server(args, admin=True, admin_key=ADMIN_KEY)


def pages(srv, scheme, modes, sse_expect):
    """Runs streams.mjs, each of `modes` (sse, ws) in turn in one browser;
    returns their results by mode."""
    env = dict(os.environ, BASE_URL="%s://%s:%d" % ((scheme,) + srv.addr), MODES=",".join(modes),
               STREAMS=str(STREAMS), WS_STREAMS=str(WS_STREAMS), SSE_EXPECT=str(sse_expect), ADMIN_URL="http://%s:%d" % srv.admin, ADMIN_KEY=ADMIN_KEY,
               CHROMIUM=CHROMIUM, INSECURE="1" if scheme == "https" else "0")
    rc, lines = relay([node(), "streams.mjs"], BROWSER_DIR, env, 90.0, "  node| ")
    check(rc is not None, "streams.mjs over %s still running after 90 s (killed)" % scheme)
    results = {r["mode"]: r for r in (json.loads(l[len("@result "):]) for l in lines
                                      if l.startswith("@result "))}
    check(rc == 0 and set(results) == set(modes), "streams.mjs over %s exited %r: %s" % (
        scheme, rc, short(lines[-3:])))
    for mode, r in results.items():
        check(not r["wrong"], "%s over %s: streams got other than their own one event: %s" % (
            mode, scheme, short(json.dumps(r["wrong"]), 300)))
    return results


def check_page(srv, scheme, modes, protocol, want):
    """The page's protocol, and `want` EventSources open, each with its event."""
    got = pages(srv, scheme, modes, want)
    r = got["sse"]
    check(r["protocol"] == protocol, "the page came over %r, want %s" % (r["protocol"], protocol))
    check(r["opened"] == want and r["received"] == want and not r["late"],
          "EventSources over %s: %d opened (%d more later), %d got their event (none: %r); want %d" % (
              protocol, r["opened"], r["late"], r["received"], r["missing"], want))
    sys.stderr.write("  [%s] EventSources: %d opened, %d waiting\n" % (scheme, r["opened"], r["pending"]))
    w = got.get("ws")
    if w:
        check(w["opened"] == WS_STREAMS and w["received"] == WS_STREAMS and not w["errors"],
              "WebSockets over %s: %d of %d opened, %d got their event (none: %r), %d errors" % (
                  scheme, w["opened"], WS_STREAMS, w["received"], w["missing"], w["errors"]))
        sys.stderr.write("  [%s] WebSockets: %d of %d got their event\n" % (scheme, w["received"], WS_STREAMS))


@smoke.phase(1, "HTTP/1.1: of 50 EventSources on one page six open and get their events, 44 wait "
                "(Chromium's six connections to one origin)")
def phase1(ctx):
    check_page(server(ctx), "http", ["sse"], "http/1.1", BROWSER_LIMIT)


@smoke.phase(2, "TLS: the page comes over HTTP/2 (ALPN h2) and all 50 EventSources open on its one "
                "connection and get their events; 20 WebSockets over wss (HTTP/1.1) all open and "
                "each gets its event")
def phase2(ctx):
    pki = Pki(ctx)
    check_page(server(ctx, pki.leaf("leaf", 2)), "https", ["sse", "ws"], "h2", STREAMS)


@smoke.phase(3, "an upload on a slow link: Chromium throttled to 100 KB/s POSTs 300 KB to Django past "
                "--header-timeout 1, over h2 (TLS) and HTTP/1.1; each arrives whole")
def phase3(ctx):
    pki = Pki(ctx)
    cert, key = pki.leaf("leaf", 2)
    for scheme, protocol, tls in (("https", "h2", ["--certfile", cert, "--keyfile", key]),
                                  ("http", "http/1.1", [])):
        srv = ctx.server(DJANGO_ARGS + ["--header-timeout", "1"] + tls)
        env = dict(os.environ, BASE_URL="%s://%s:%d" % ((scheme,) + srv.addr), CHROMIUM=CHROMIUM,
                   INSECURE="1" if scheme == "https" else "0", BYTES=str(300 * 1024),
                   UPLOAD_BPS=str(100 * 1024))
        rc, lines = relay([node(), "upload.mjs"], BROWSER_DIR, env, 60.0, "  node| ")
        got = [json.loads(line[len("@result "):]) for line in lines if line.startswith("@result ")]
        check(rc == 0 and got, "upload.mjs over %s exited %r: %s" % (scheme, rc, short(lines[-3:])))
        r = got[0]
        check(r["protocol"] == protocol, "the upload went over %r, want %s" % (r["protocol"], protocol))
        check(r["status"] == 200 and r["length"] == 300 * 1024 and r["sha256"] == r["want"],
              "the upload over %s: %s" % (protocol, short(json.dumps(r), 400)))
        check(r["ms"] >= 2000, "the upload over %s took %d ms: not throttled, proves nothing" % (
            protocol, r["ms"]))
        sys.stderr.write("  [%s] 300 KB at 100 KB/s: %d ms, whole\n" % (protocol, r["ms"]))


if __name__ == "__main__":
    main(smoke, "browser streams")
