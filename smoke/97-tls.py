#!/usr/bin/python3
"""smoke-tls: TLS on the listeners (--certfile, --keyfile), against the real
binary, with real TLS clients (curl, openssl s_client, Python's ssl).

Each phase makes its certificates with the openssl CLI in a temporary
folder: a self-signed CA, and leaf certificates for localhost and 127.0.0.1
signed by it (each with its own serial); clients trust the CA alone.

    m0serve --listen 127.0.0.1:P --certfile LEAF --keyfile KEY \\
            --listen-plain 127.0.0.1:P2 --chdir fixtures/djangoproj \\
            --mount /=djangoproj.wsgi:application --mount /native=mojo \\
            --realtime [--admin-listen 127.0.0.1:P3 --admin-tls --admin-key-file F]

Phase 1: bad TLS flags exit 2 with one line: one of --certfile/--keyfile
alone, an unreadable file, a key that is not the certificate's, a
passphrase-protected key (refused with no prompt); --check
lists the TLS listener. Phase 2: curl --cacert GETs from Django (its
environ says wsgi.url_scheme https and HTTPS=on) and from the mojo mount,
a wsgi.file_wrapper file (3 MiB, twice on one connection) arrives whole;
the --listen-plain listener stays plain (url_scheme http). Phase 3:
openssl s_client: TLS 1.1 refused, 1.2 and 1.3 accepted, ALPN http/1.1
chosen when offered alone (h2 when offered first: smoke 99-http2); a session saved (-sess_out) is resumed (-sess_in), with 1.2 and 1.3.
Phase 4: SSE holds over TLS (mojo and Django) receive events published by
Django on the plain listener and by the admin API over TLS; a long-poll over
TLS is answered by a publish. Phase 5: a plain HTTP request on the TLS port
is answered 400 "plain HTTP request sent to a TLS port" and the server
serves on; a client that connects and sends nothing, or starts a handshake
and stalls, is closed after --tls-handshake-timeout (1 s here, while
--header-timeout is 30). Phase 6: SIGHUP with a new certificate: new
connections see its serial, a connection opened before keeps working; a
bad file then: one log line, and the certificate in use is kept. Phase 7:
--workers 2 (a mojo mount alone): a TLS 1.3 session saved from one
connection is resumed by every later connection, until both workers have
served some (their debug lines say which), so a worker resumes the other's
tickets.
"""

import os
import select
import shutil
import signal
import socket
import ssl
import sys
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import m0smoke  # noqa: E402
from m0smoke import (  # noqa: E402
    DJANGO_ARGS, HOST, Conn, Smoke, build_request, check, check_hold_head,
    expect_events, free_port, form_body, http, read_head_body, short)
from tls_lib import OPENSSL, Pki, run  # noqa: E402

SCRIPT = "97-tls"
ADMIN_KEY = "smoke-admin-key-96tls-7c1e"
CURL = shutil.which("curl") or "/usr/bin/curl"

smoke = Smoke(SCRIPT, __doc__)


def client_context(pki):
    c = ssl.create_default_context(cafile=pki.ca)
    c.set_alpn_protocols(["http/1.1"])
    return c


class TlsConn(Conn):
    """m0smoke's raw connection, over TLS (verified against the smoke's CA)."""

    def __init__(self, addr, tls, timeout=5.0):
        super().__init__(addr, timeout)
        self.sock = tls.wrap_socket(self.sock, server_hostname="localhost")

    def _recv_some(self, timeout):
        if self.eof:
            return 0
        # Bytes OpenSSL has decrypted already are not the socket's to report.
        if not self.sock.pending():
            r, _, _ = select.select([self.sock], [], [], max(0.0, timeout))
            if not r:
                return 0
        # A readable socket may hold no application data (a TLS 1.3 session
        # ticket): the read waits no longer than the caller would.
        self.sock.settimeout(max(0.01, timeout))
        try:
            data = self.sock.recv(1 << 20)
        except (ssl.SSLWantReadError, socket.timeout):
            return 0
        except (ConnectionResetError, ssl.SSLError):
            self.eof = self.reset = True
            return 0
        return self._took(data)

    def serial(self):
        return int(self.sock.getpeercert()["serialNumber"], 16)


def tls_get(addr, tls, path, headers=()):
    """One GET over a new TLS connection: (the answer, the server's certificate serial)."""
    c = TlsConn(addr, tls)
    try:
        c.send(build_request("GET", path, list(headers) + [("Connection", "close")]))
        return c.read_response(), c.serial()
    finally:
        c.close()


def server(ctx, pki, cert, key, extra=(), admin=False, env=None):
    plain = free_port()
    args = DJANGO_ARGS + ["--realtime", "--blocking-threads", "2", "--heartbeat", "60",
                          "--certfile", cert, "--keyfile", key,
                          "--listen-plain", "%s:%d" % (HOST, plain)] + list(extra)
    if admin:
        args += ["--admin-tls", "--admin-key-file", ctx.tmpfile("admin.key", ADMIN_KEY + "\n")]
    srv = ctx.server(args, admin=admin, admin_key=ADMIN_KEY, env=env)
    srv.plain = (HOST, plain)
    return srv


def s_client(addr, args, stdin=b"", timeout=10):
    return run([OPENSSL, "s_client", "-connect", "%s:%d" % addr, "-servername", "localhost"] +
               list(args), "s_client", stdin=stdin, timeout=timeout)


# ---- phases --------------------------------------------------------------------

@smoke.phase(1, "start-up: --certfile without --keyfile (and back), an unreadable file, an encrypted key, a key "
                "not the certificate's: exit 2 with one line naming it; --check lists the TLS listener")
def phase1(ctx):
    pki = Pki(ctx)
    cert, key = pki.leaf("a", 1001)
    _, other = pki.leaf("b", 1002)
    base = ["--listen", "127.0.0.1:0", "--mount", "/=mojo"]
    missing = pki.path("nosuch.pem")
    encrypted = pki.path("encrypted.key")
    rc, _, err = run([OPENSSL, "pkey", "-in", key, "-aes256", "-passout", "pass:secret", "-out",
                      encrypted], "openssl pkey")
    check(rc == 0, "openssl pkey: %s" % short(err))
    for extra, want in [
            (["--certfile", cert], "--certfile and --keyfile go together"),
            (["--keyfile", key], "--certfile and --keyfile go together"),
            (["--certfile", missing, "--keyfile", key], "--certfile " + missing + ": cannot read"),
            (["--certfile", cert, "--keyfile", missing], "--keyfile " + missing + ": cannot read"),
            (["--certfile", key, "--keyfile", key], "--certfile " + key + ": not a PEM certificate"),
            (["--certfile", cert, "--keyfile", other], "--keyfile " + other + ": not the key of"),
            (["--certfile", cert, "--keyfile", encrypted], "--keyfile " + encrypted +
             ": an encrypted (passphrase-protected) key"),  # and no prompt: one line
    ]:
        rc, out, err = ctx.run_binary(base + extra)
        lines = err.strip().splitlines()
        check(rc == 2, "%r: exit %r, want 2 (stderr %s)" % (extra, rc, short(err)))
        check(len(lines) == 1 and want in lines[0], "%r: want one line with %r, got %s" % (
            extra, want, short(err)))
    rc, out, err = ctx.run_binary(base + ["--check", "--certfile", cert, "--keyfile", key])
    check(rc == 0, "--check: exit %r (stderr %s)" % (rc, short(err)))
    check("(TLS)" in err, "--check lists no TLS listener: %s" % short(err, 1500))


@smoke.phase(2, "curl --cacert: Django (wsgi.url_scheme https, HTTPS=on) and a mojo mount over TLS; "
                "--listen-plain stays plain")
def phase2(ctx):
    pki = Pki(ctx)
    cert, key = pki.leaf("a", 2001)
    payload = os.urandom(3 << 20)
    with open(pki.path("payload.bin"), "wb") as f:
        f.write(payload)
    srv = server(ctx, pki, cert, key, env={"M0_BENCH_FILES": pki.dir})
    url = "https://localhost:%d" % srv.addr[1]
    for path, want in (("/native/hello", "hello from mojo"), ("/echo", '"wsgi.url_scheme": "https"')):
        rc, out, err = run([CURL, "-sS", "--max-time", "10", "--cacert", pki.ca, url + path], "curl")
        check(rc == 0 and want in out, "curl %s: rc %d, out %s, err %s" % (path, rc, short(out), short(err)))
    rc, out, err = run([CURL, "-sS", "--max-time", "10", "--cacert", pki.ca, url + "/echo"], "curl")
    check('"HTTPS": "on"' in out, "Django's environ has no HTTPS=on: %s" % short(out, 800))
    # Without the CA the client refuses the server's certificate: TLS is real.
    rc, out, err = run([CURL, "-sS", "--max-time", "10", url + "/native/hello"], "curl")
    check(rc != 0, "curl without --cacert accepted the certificate: %s" % short(out))
    # wsgi.file_wrapper over TLS: the file goes through OpenSSL, twice on
    # one keep-alive connection (HTTP/1.1's; smoke 99 sends one over h2).
    got = pki.path("got.bin")
    rc, out, err = run([CURL, "-sS", "--http1.1", "--max-time", "20", "--cacert", pki.ca, "-D", "-",
                        url + "/files/payload.bin", url + "/files/payload.bin", "-o", "/dev/null",
                        "-o", got], "curl")
    check(rc == 0 and "X-File-Wrapper: yes" in out, "file over TLS: rc %d %s %s" % (
        rc, short(out, 600), short(err)))
    with open(got, "rb") as f:
        check(f.read() == payload, "the file over TLS is not the file")
    r = http(srv.plain, "GET", "/echo")
    check(r.status == 200 and '"wsgi.url_scheme": "http"' in r.text() and '"HTTPS"' not in r.text(),
          "--listen-plain: %s %s" % (r.summary(), short(r.body, 600)))


@smoke.phase(3, "openssl s_client: TLS 1.1 refused, 1.2 and 1.3 accepted with ALPN http/1.1; "
                "a saved session is resumed (1.2 and 1.3)")
def phase3(ctx):
    pki = Pki(ctx)
    cert, key = pki.leaf("a", 3001)
    srv = server(ctx, pki, cert, key)
    # The client's own floor is lowered so that it offers TLS 1.1 at all.
    rc, out, err = s_client(srv.addr, ["-tls1_1", "-cipher", "DEFAULT@SECLEVEL=0"])
    check(rc != 0 and "Cipher is (NONE)" in out, "TLS 1.1 was not refused: rc %d %s %s" % (
        rc, short(out, 600), short(err)))
    check("protocol version" in err, "TLS 1.1: no protocol_version alert: %s" % short(err))
    req = b"GET /native/hello HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"
    for version, name in (("-tls1_2", "TLSv1.2"), ("-tls1_3", "TLSv1.3")):
        rc, out, err = s_client(srv.addr, [version, "-alpn", "http/1.1", "-CAfile", pki.ca,
                                           "-ign_eof"], stdin=req)
        check(rc == 0 and ("New, %s" % name) in out, "%s: rc %d %s" % (name, rc, short(out, 600)))
        check("ALPN protocol: http/1.1" in out, "%s: ALPN is not http/1.1: %s" % (name, short(out, 900)))
        check("Verify return code: 0 (ok)" in out, "%s: not verified: %s" % (name, short(out, 900)))
        check("hello from mojo" in out, "%s: no answer: %s" % (name, short(out, 900)))
        sess = pki.path("sess%s.pem" % version)
        rc, out, err = s_client(srv.addr, [version, "-CAfile", pki.ca, "-ign_eof", "-sess_out", sess],
                                stdin=req)
        check(rc == 0 and "New, %s" % name in out, "%s first: %s" % (name, short(out, 600)))
        rc, out, err = s_client(srv.addr, [version, "-CAfile", pki.ca, "-ign_eof", "-sess_in", sess],
                                stdin=req)
        check(rc == 0 and "Reused, %s" % name in out, "%s: the session was not resumed: %s" % (
            name, short(out, 900)))
        check("hello from mojo" in out, "%s resumed: no answer: %s" % (name, short(out, 900)))


@smoke.phase(4, "SSE holds over TLS (mojo, Django) get events published by Django and by the admin "
                "API over TLS; a long-poll over TLS is answered by a publish")
def phase4(ctx):
    pki = Pki(ctx)
    cert, key = pki.leaf("a", 4001)
    srv = server(ctx, pki, cert, key, admin=True)
    tls = client_context(pki)
    holds = []
    for path, body, pool in (("/native/hold?channel=t", b": mojo hold\n\n", "mojo"),
                             ("/hold?channel=t", b": django hold\n\n", "wsgi")):
        c = TlsConn(srv.addr, tls)
        ctx.conns.append(c)
        c.send(build_request("GET", path))
        check_hold_head(c.read_head(5.0), pool, exact_names=False)
        read_head_body(c, body)
        check(c.sock.selected_alpn_protocol() == "http/1.1", "ALPN %r" % c.sock.selected_alpn_protocol())
        holds.append((c, body))
    want = []
    r = http(srv.plain, "POST", "/publish", [("Content-Type", "application/x-www-form-urlencoded")],
             form_body([("channel", "t"), ("data", "one")]))
    check(r.status == 200, "Django /publish: %s %s" % (r.summary(), short(r.body)))
    want.append((int(r.json()["id"]), "one", None))
    # The admin API over TLS (--admin-tls): a publish with the bearer key.
    a = TlsConn(srv.admin, tls)
    ctx.conns.append(a)
    body = b'{"channel": "t", "data": "two", "event": "e"}'
    a.send(build_request("POST", "/publish", [("Authorization", "Bearer " + ADMIN_KEY),
                                              ("Content-Type", "application/json")], body))
    r = a.read_response()
    check(r.status == 200, "admin /publish over TLS: %s %s" % (r.summary(), short(r.body)))
    want.append((int(r.json()["id"]), "two", "e"))
    for c, head_body in holds:
        expect_events(c, head_body, want, what="TLS hold")
    # GRIP's long-poll (the mojo mount's /poll): the next event is the answer.
    p = TlsConn(srv.addr, tls)
    ctx.conns.append(p)
    p.send(build_request("GET", "/native/poll?channel=lp&timeout=20"))
    time.sleep(0.3)
    check(not p.pending(), "the long-poll was answered before any publish: %s" % short(p.buf))
    r = http(srv.plain, "POST", "/publish", [("Content-Type", "application/x-www-form-urlencoded")],
             form_body([("channel", "lp"), ("data", "answer")]))
    check(r.status == 200, "publish lp: %s" % r.summary())
    r = p.read_response(timeout=5.0)
    check(r.status == 200 and b"answer" in r.body, "long-poll over TLS: %s %s" % (r.summary(), short(r.body)))


@smoke.phase(5, "plain HTTP on the TLS port: 400 and the server serves on; a silent or stalled "
                "handshake is closed after --tls-handshake-timeout")
def phase5(ctx):
    pki = Pki(ctx)
    cert, key = pki.leaf("a", 5001)
    srv = server(ctx, pki, cert, key, ["--tls-handshake-timeout", "1", "--header-timeout", "30"])
    tls = client_context(pki)
    for _ in range(2):
        r = http(srv.addr, "GET", "/native/hello")
        check(r.status == 400 and b"plain HTTP request sent to a TLS port" in r.body,
              "plain HTTP on the TLS port: %s %s" % (r.summary(), short(r.body)))
        check(r.header("connection") == "close", "the 400 does not close: %r" % r.header("connection"))
        r, _ = tls_get(srv.addr, tls, "/native/hello")
        check(r.status == 200, "TLS after the plain request: %s" % r.summary())
    check("refused 400: plain HTTP request sent to a TLS port" in srv.log_text(),
          "no log line for the plain request")
    # A client that says nothing, and one that stops inside its ClientHello.
    silent = Conn(srv.addr, 5.0)
    ctx.conns.append(silent)
    stalled = Conn(srv.addr, 5.0)
    ctx.conns.append(stalled)
    stalled.send(b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03")
    began = time.monotonic()
    for c, what in ((silent, "a silent client"), (stalled, "a stalled handshake")):
        check(c.wait_eof(6.0), "%s was not closed within 6 s" % what)
        took = time.monotonic() - began
        check(0.8 <= took <= 4.0, "%s closed after %.1f s, want about 1 (--tls-handshake-timeout)" % (
            what, took))
    r, _ = tls_get(srv.addr, tls, "/native/hello")
    check(r.status == 200, "TLS after the timeouts: %s" % r.summary())


@smoke.phase(6, "SIGHUP: a new certificate for new connections (its serial), an open connection "
                "keeps working; a bad file keeps the old one, with one log line")
def phase6(ctx):
    pki = Pki(ctx)
    cert, key = pki.leaf("a", 6001)
    live_cert, live_key = pki.path("live.pem"), pki.path("live.key")
    shutil.copy(cert, live_cert)
    shutil.copy(key, live_key)
    srv = server(ctx, pki, live_cert, live_key)
    tls = client_context(pki)
    old = TlsConn(srv.addr, tls)
    ctx.conns.append(old)
    check(old.serial() == 6001, "serial %d, want 6001" % old.serial())
    old.send(build_request("GET", "/native/hello"))
    check(old.read_response().status == 200, "first request on the old connection")
    cert2, key2 = pki.leaf("b", 6002)
    shutil.copy(cert2, live_cert)
    shutil.copy(key2, live_key)
    os.kill(srv.proc.pid, signal.SIGHUP)
    m0smoke.wait_for(lambda: "--certfile and --keyfile read again" in srv.log_text(), 5.0,
                     what="the reload's log line")
    r, serial = tls_get(srv.addr, tls, "/native/hello")
    check(r.status == 200 and serial == 6002, "after SIGHUP: %s, serial %d, want 6002" % (
        r.summary(), serial))
    old.send(build_request("GET", "/native/hello"))
    r = old.read_response()
    check(r.status == 200 and old.serial() == 6001, "the connection opened before: %s, serial %d" % (
        r.summary(), old.serial()))
    # A bad file: the key of another certificate.
    _, key3 = pki.leaf("c", 6003)
    shutil.copy(key3, live_key)
    os.kill(srv.proc.pid, signal.SIGHUP)
    m0smoke.wait_for(lambda: "the certificate in use is kept" in srv.log_text(), 5.0,
                     what="the refusal's log line")
    lines = [l for l in srv.log_text().splitlines() if "the certificate in use is kept" in l]
    check(len(lines) == 1 and "not the key of --certfile" in lines[0], "log: %r" % lines)
    r, serial = tls_get(srv.addr, tls, "/native/hello")
    check(r.status == 200 and serial == 6002, "after a bad SIGHUP: %s, serial %d, want 6002" % (
        r.summary(), serial))


@smoke.phase(7, "--workers 2: a TLS session saved from one connection is resumed by every later "
                "one, on both workers (one worker opens the other's tickets)")
def phase7(ctx):
    pki = Pki(ctx)
    cert, key = pki.leaf("a", 7001)
    srv = ctx.server(["--mount", "/native=mojo", "--workers", "2", "--log-level", "debug",
                      "--certfile", cert, "--keyfile", key])
    m0smoke.wait_for(lambda: "as worker 1" in srv.log_text() and "as worker 0" in srv.log_text(),
                     30.0, what="both workers listening")
    req = b"GET /native/hello HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"
    sess = pki.path("sess-workers.pem")
    rc, out, err = s_client(srv.addr, ["-tls1_3", "-CAfile", pki.ca, "-ign_eof", "-sess_out", sess],
                            stdin=req)
    check(rc == 0 and "New, TLSv1.3" in out, "first connection: %s" % short(out, 600))

    def served():
        return {w for w in ("0", "1") if "m0serve worker=%s: debug: GET /native/hello" % w in srv.log_text()}
    # The kernel spreads connections over the workers' sockets by the
    # client's port: a few are enough to reach both.
    tries = 0
    while served() != {"0", "1"} and tries < 30:
        tries += 1
        rc, out, err = s_client(srv.addr, ["-tls1_3", "-CAfile", pki.ca, "-ign_eof", "-sess_in", sess],
                                stdin=req)
        check(rc == 0 and "Reused, TLSv1.3" in out and "hello from mojo" in out,
              "connection %d was not resumed (workers so far: %s): %s" % (
                  tries, sorted(served()), short(out, 900)))
    check(served() == {"0", "1"}, "%d connections reached only worker(s) %s" % (tries, sorted(served())))
    sys.stderr.write("  [phase 7] %d resumed connections reached both workers\n" % tries)


@smoke.phase(8, "--tls-ticket-rotation 3 with --workers 2: a saved session resumes in its period and the "
                "next on either worker, and not two periods on (its key is gone from every process); a new "
                "session then resumes; --tls-ticket-rotation 0 is refused")
def phase8(ctx):
    rc, out, err = ctx.run_binary(["--listen", "127.0.0.1:0", "--mount", "/=mojo", "--tls-ticket-rotation", "0"])
    check(rc == 2 and "--tls-ticket-rotation wants a number from 1 to 604800" in err,
          "--tls-ticket-rotation 0: exit %r: %s" % (rc, short(err)))
    pki = Pki(ctx)
    cert, key = pki.leaf("a", 8001)
    period = 3
    srv = ctx.server(["--mount", "/native=mojo", "--workers", "2", "--certfile", cert, "--keyfile", key,
                      "--tls-ticket-rotation", str(period)])
    m0smoke.wait_for(lambda: "as worker 1" in srv.log_text() and "as worker 0" in srv.log_text(),
                     30.0, what="both workers listening")
    req = b"GET /native/hello HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"
    sess = pki.path("sess-rotation.pem")

    def connect(offer):
        args = ["-tls1_3", "-CAfile", pki.ca, "-ign_eof"] + (["-sess_in", sess] if offer else ["-sess_out", sess])
        rc, out, err = s_client(srv.addr, args, stdin=req)
        check(rc == 0 and "hello from mojo" in out, "s_client: rc %r: %s" % (rc, short(out + err, 600)))
        return "Reused, TLSv1.3" in out

    check(not connect(False), "the first connection was resumed")
    saved = time.time()
    for n in range(3):  # in its period, or the next: the kernel picks the worker
        check(connect(True), "resumption %d, %.1f s after the session was saved, failed" % (
            n, time.time() - saved))
    # Two periods after the one it was sealed in, no process has its key.
    time.sleep(max(0.0, (int(saved) // period + 2) * period + 0.3 - time.time()))
    for n in range(4):
        check(not connect(True), "a session two periods old was resumed (%.1f s after it was saved)" % (
            time.time() - saved))
    check(not connect(False), "a new session's first connection was resumed")
    check(connect(True), "the new session was not resumed")


if __name__ == "__main__":
    sys.exit(smoke.main())
