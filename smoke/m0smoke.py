"""m0smoke: the shared library of m0serve's smoke scripts (stdlib only).

DESIGN
  A smoke script declares numbered phases; each phase starts the servers it
  needs (the real binary, a free port on 127.0.0.1, its log in
  build/smoke-logs/), drives them from raw sockets, and stops them with
  SIGTERM by PID, insisting on exit code 0. The runner prints exactly one
  line per phase on stdout:

      PASS <script> phase N: <what>
      FAIL <script> phase N: <what>: <reason>

  and, on a failure, the tail of each server's log on stderr. It exits 1 if
  any phase failed. Every loop here is bounded by a count and by time; each
  phase also runs under a hard wall-clock deadline (SIGALRM).

  SERVER=host:port reuses a server that is already running (under a debugger,
  say): no server is started or stopped, and a phase that must signal its
  server fails saying so. SERVER_ADMIN=host:port and SERVER_ADMIN_KEY=key
  name that server's admin listener. Run one phase with --phase N (and start
  the reused server with the command line that phase prints on stderr).

Run the scripts with /usr/bin/python3 (Debian's); never the python3 on PATH.
"""

import argparse
import atexit
import email.utils
import hashlib
import json
import os
import re
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import traceback
import urllib.parse

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_BINARY = os.path.join(ROOT, "build", "m0serve")
LOG_DIR = os.path.join(ROOT, "build", "smoke-logs")
SERVER_TOKEN = "m0serve/0.1.0"
HOST = "127.0.0.1"

# The demo command line's mounts; every Django-serving phase starts from it.
DJANGO_ARGS = ["--chdir", "fixtures/djangoproj",
               "--mount", "/=djangoproj.wsgi:application",
               "--mount", "/native=mojo"]

MAX_READS = 200000  # bound on recv() calls in any single read loop


class Fail(Exception):
    """A phase's check failed; the message is the one-line reason."""


class Skip(Exception):
    """A phase cannot run on this machine (a missing browser, say); the
    message says why. The phase prints SKIP and does not fail the script."""


class PhaseTimeout(Exception):
    """The phase ran past its hard deadline."""


def check(cond, reason):
    if not cond:
        raise Fail(reason)


def short(data, limit=300):
    """A one-line, bounded repr of bytes or str for failure reasons."""
    r = repr(data)
    if len(r) > limit:
        r = r[:limit] + "...(%d chars)" % len(r)
    return r


def one_line(text):
    return " ".join(str(text).replace("\r", "\\r").split("\n"))


def free_ports(n=1):
    """n distinct free TCP ports on 127.0.0.1 (all bound at once, then freed)."""
    socks = []
    try:
        for _ in range(n):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            s.bind((HOST, 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def free_port():
    return free_ports(1)[0]


def parse_addr(text):
    host, _, port = text.rpartition(":")
    return (host or HOST, int(port))


def wait_for(fn, timeout, interval=0.05, what="condition"):
    """Calls fn() until it returns a truthy value or timeout passes.

    Returns that value; raises Fail with the last value seen on timeout.
    Bounded by time and by count."""
    deadline = time.monotonic() + timeout
    last = None
    for _ in range(int(timeout / interval) + 2):
        last = fn()
        if last:
            return last
        if time.monotonic() >= deadline:
            break
        time.sleep(interval)
    raise Fail("%s not reached within %.1fs (last: %s)" % (what, timeout, short(last)))


def once(make, what):
    """A function that runs make() on its first call and returns what it
    returned on every later one; when make() failed, every later call fails
    with its reason (what the phases share is made by whichever runs first)."""
    state = {}

    def get():
        if "failed" in state:
            raise Fail("%s failed earlier: %s" % (what, state["failed"]))
        if "value" not in state:
            try:
                state["value"] = make()
            except Fail as e:
                state["failed"] = str(e)
                raise
        return state["value"]
    return get


# ---------------------------------------------------------------------------
# HTTP over a raw socket
# ---------------------------------------------------------------------------

def build_request(method, path, headers=(), body=b"", version="HTTP/1.1",
                  host=None, auto_length=True):
    """The request's bytes. headers: list of (name, value). A Content-Length
    is added for a non-empty body unless one (or Transfer-Encoding) is given
    or auto_length is False. Host is added unless given or host is False."""
    if isinstance(body, str):
        body = body.encode()
    headers = list(headers)
    names = {n.lower() for n, _ in headers}
    lines = ["%s %s %s" % (method, path, version)]
    if host is not False and "host" not in names:
        lines.append("Host: %s" % (host or HOST))
    for n, v in headers:
        lines.append("%s: %s" % (n, v))
    if (auto_length and body and "content-length" not in names
            and "transfer-encoding" not in names):
        lines.append("Content-Length: %d" % len(body))
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body


def chunked(parts, ext=None):
    """Encodes parts as a chunked body (hex sizes, last-chunk, no trailers)."""
    out = []
    for i, p in enumerate(parts):
        size = "%x" % len(p)
        if i % 2:
            size = size.upper()
        if ext and i == 0:
            size += ext
        out.append(size.encode() + b"\r\n" + p + b"\r\n")
    out.append(b"0\r\n\r\n")
    return b"".join(out)


class Response:
    """One parsed HTTP response. headers keeps order and duplicates."""

    def __init__(self, raw_head, version, status, reason, headers):
        self.raw_head = raw_head
        self.version = version
        self.status = status
        self.reason = reason
        self.headers = headers
        self.body = b""
        self.framing = None  # "length" | "chunked" | "close" | "none"
        self.chunk_sizes = []
        self.t_head = None  # monotonic time the head was complete

    def header(self, name):
        for n, v in self.headers:
            if n.lower() == name.lower():
                return v
        return None

    def all(self, name):
        return [v for n, v in self.headers if n.lower() == name.lower()]

    def has(self, name):
        return self.header(name) is not None

    def names(self):
        return [n.lower() for n, _ in self.headers]

    def json(self):
        try:
            return json.loads(self.body.decode("utf-8"))
        except (ValueError, UnicodeDecodeError) as e:
            raise Fail("status %d body is not JSON (%s): %s" % (self.status, e, short(self.body)))

    def text(self):
        return self.body.decode("utf-8", "replace")

    def cookies(self):
        """name -> value from every Set-Cookie header."""
        out = {}
        for v in self.all("set-cookie"):
            first = v.split(";", 1)[0]
            if "=" in first:
                k, _, val = first.partition("=")
                out[k.strip()] = val.strip()
        return out

    def summary(self):
        return "%s %d %s" % (self.version, self.status, self.reason)

    def __repr__(self):
        return "<Response %s headers=%r body=%s>" % (self.summary(), self.headers, short(self.body, 200))


def parse_head(raw):
    """Parses a response head (ending in CRLF CRLF). Raises Fail if malformed."""
    text = raw[:-4].decode("latin-1")
    lines = text.split("\r\n")
    m = re.match(r"^(HTTP/\d\.\d) (\d{3})(?: (.*))?$", lines[0])
    if not m:
        raise Fail("malformed status line: %s" % short(lines[0]))
    headers = []
    for line in lines[1:]:
        if not line or line[0] in " \t" or ":" not in line:
            raise Fail("malformed header line %s in head %s" % (short(line), short(raw)))
        n, _, v = line.partition(":")
        if n != n.strip() or not n:
            raise Fail("malformed header name %s" % short(line))
        headers.append((n, v.strip(" \t")))
    return Response(raw, m.group(1), int(m.group(2)), m.group(3) or "", headers)


class Conn:
    """A raw client connection. self.buf holds received, unconsumed bytes."""

    def __init__(self, addr, timeout=5.0, source=None):
        """source: the local address to connect from (e.g. "127.0.0.3")."""
        self.addr = addr
        self.sock = socket.create_connection(addr, timeout=timeout,
                                             source_address=(source, 0) if source else None)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = b""
        self.eof = False
        self.reset = False
        self.closed = False

    def send(self, data, timeout=10.0):
        if isinstance(data, str):
            data = data.encode("latin-1")
        self.sock.settimeout(timeout)
        try:
            self.sock.sendall(data)
        except socket.timeout:
            raise Fail("send of %d bytes timed out after %.1fs" % (len(data), timeout))
        except OSError as e:
            raise Fail("send of %d bytes failed: %s (received so far %s)" % (len(data), e, short(self.buf)))

    def _recv_some(self, timeout):
        """Waits up to timeout for bytes; returns how many arrived (0 on
        timeout or EOF; self.eof is set on EOF or reset)."""
        if self.eof:
            return 0
        r, _, _ = select.select([self.sock], [], [], max(0.0, timeout))
        if not r:
            return 0
        try:
            data = self.sock.recv(1 << 20)
        except ConnectionResetError:
            self.eof = self.reset = True
            return 0
        except socket.timeout:
            return 0
        return self._took(data)

    def _took(self, data):
        """Keeps what one recv() returned; b"" is the end of the stream."""
        if not data:
            self.eof = True
            return 0
        self.buf += data
        return len(data)

    def read_until(self, pred, timeout):
        """Reads until pred(self.buf) is true, EOF, or timeout.
        Returns whether pred became true. Never consumes self.buf."""
        deadline = time.monotonic() + timeout
        for _ in range(MAX_READS):
            if pred(self.buf):
                return True
            left = deadline - time.monotonic()
            if left <= 0 or self.eof:
                return bool(pred(self.buf))
            self._recv_some(min(left, 0.5))
        return bool(pred(self.buf))

    def pending(self):
        """Whatever has arrived by now, without waiting (not consumed)."""
        for _ in range(1000):
            if not self._recv_some(0):
                break
        return self.buf

    def wait_eof(self, timeout):
        """True if the peer closed within timeout; bytes received meanwhile
        stay in self.buf."""
        if not self.eof:
            self.read_until(lambda b: False, timeout)
        return self.eof

    def read_head(self, timeout=5.0):
        """Reads and consumes one response head; returns it parsed."""
        ok = self.read_until(lambda b: b"\r\n\r\n" in b, timeout)
        if not ok:
            if self.eof:
                raise Fail("connection closed before a complete response head; got %s" % short(self.buf))
            raise Fail("no complete response head within %.1fs; got %s" % (timeout, short(self.buf)))
        i = self.buf.index(b"\r\n\r\n") + 4
        raw, self.buf = self.buf[:i], self.buf[i:]
        resp = parse_head(raw)
        resp.t_head = time.monotonic()
        return resp

    def read_exact(self, n, timeout, what="body"):
        if not self.read_until(lambda b: len(b) >= n, timeout):
            raise Fail("%s: wanted %d bytes, got %d (%s) within %.1fs" % (
                what, n, len(self.buf), "EOF" if self.eof else "timeout", timeout))
        data, self.buf = self.buf[:n], self.buf[n:]
        return data

    def read_response(self, method="GET", timeout=5.0, skip_interim=False):
        """Reads one full response: honors HEAD, 1xx/204/304, chunked,
        Content-Length and close-delimited bodies. A 1xx response is
        returned as such unless skip_interim."""
        deadline = time.monotonic() + timeout
        for _ in range(20):
            resp = self.read_head(max(0.01, deadline - time.monotonic()))
            if skip_interim and 100 <= resp.status < 200:
                continue
            break
        return self.read_body(resp, method, max(0.01, deadline - time.monotonic()))

    def read_body(self, resp, method="GET", timeout=5.0):
        """Reads the body of resp (whose head was just read) into resp.body."""
        deadline = time.monotonic() + timeout
        left = lambda: max(0.01, deadline - time.monotonic())
        te = resp.all("transfer-encoding")
        cl = resp.all("content-length")
        if method == "HEAD" or 100 <= resp.status < 200 or resp.status in (204, 304):
            resp.framing = "none"
            return resp
        if te:
            check(len(te) == 1 and te[0].lower() == "chunked",
                  "unexpected Transfer-Encoding %r" % te)
            check(not cl, "response has both Transfer-Encoding and Content-Length")
            resp.framing = "chunked"
            body = []
            for _ in range(1000000):
                if not self.read_until(lambda b: b"\r\n" in b, left()):
                    raise Fail("chunked body: no chunk-size line (%s); got %s" % (
                        "EOF" if self.eof else "timeout", short(self.buf)))
                i = self.buf.index(b"\r\n")
                line, self.buf = self.buf[:i], self.buf[i + 2:]
                m = re.match(rb"^([0-9a-fA-F]+)(;.*)?$", line)
                if not m:
                    raise Fail("chunked body: bad chunk-size line %s" % short(line))
                size = int(m.group(1), 16)
                if size == 0:
                    # trailers: lines up to an empty line
                    for _ in range(100):
                        if not self.read_until(lambda b: b"\r\n" in b, left()):
                            raise Fail("chunked body: no end after last-chunk; got %s" % short(self.buf))
                        i = self.buf.index(b"\r\n")
                        line, self.buf = self.buf[:i], self.buf[i + 2:]
                        if not line:
                            break
                    break
                resp.chunk_sizes.append(size)
                data = self.read_exact(size + 2, left(), "chunk of %d" % size)
                if data[-2:] != b"\r\n":
                    raise Fail("chunk of %d not followed by CRLF: %s" % (size, short(data[-10:])))
                body.append(data[:-2])
            resp.body = b"".join(body)
            return resp
        if cl:
            check(len(set(cl)) == 1, "several Content-Length values %r" % cl)
            check(re.match(r"^\d+$", cl[0]) is not None, "bad Content-Length %r" % cl[0])
            resp.framing = "length"
            resp.body = self.read_exact(int(cl[0]), left(), "Content-Length body")
            return resp
        resp.framing = "close"
        self.read_until(lambda b: False, left())
        if not self.eof:
            raise Fail("close-delimited body did not end within %.1fs (%d bytes so far)" % (
                timeout, len(self.buf)))
        resp.body, self.buf = self.buf, b""
        return resp

    def request(self, method, path, headers=(), body=b"", timeout=5.0, **kw):
        self.send(build_request(method, path, headers, body, **kw))
        return self.read_response(method, timeout, skip_interim=True)

    def close(self):
        if not self.closed:
            self.closed = True
            try:
                self.sock.close()
            except OSError:
                pass


def http(addr, method, path, headers=(), body=b"", timeout=5.0, **kw):
    """One request on a new connection, which is then closed."""
    c = Conn(addr, timeout)
    try:
        return c.request(method, path, headers, body, timeout, **kw)
    finally:
        c.close()


def form_body(fields):
    return urllib.parse.urlencode(fields).encode()


def check_date(resp):
    d = resp.all("date")
    check(len(d) == 1, "want one Date header, got %r" % d)
    try:
        when = email.utils.parsedate_to_datetime(d[0])
    except (TypeError, ValueError):
        raise Fail("Date header not an HTTP date: %r" % d[0])
    check(d[0].endswith(" GMT"), "Date not in IMF-fixdate (GMT): %r" % d[0])
    skew = abs(when.timestamp() - time.time())
    check(skew < 120, "Date %r is %.0fs off the clock" % (d[0], skew))


def check_server_headers(resp):
    """Every response: one Date (HTTP date, near now), Server: m0serve/0.1.0."""
    check_date(resp)
    s = resp.all("server")
    check(s == [SERVER_TOKEN], "want Server: %s, got %r" % (SERVER_TOKEN, s))


def check_error(resp, status, what=""):
    """An error response: the status, text/plain, a one-line reason, and
    Date and Server like every response."""
    check(resp.status == status, "%swant %d, got %s (body %s)" % (
        what and what + ": ", status, resp.summary(), short(resp.body, 120)))
    ct = resp.header("content-type") or ""
    check(ct.split(";")[0].strip().lower() == "text/plain",
          "%s%d error Content-Type %r, want text/plain" % (what and what + ": ", status, ct))
    text = resp.body.decode("utf-8", "replace")
    check(text.strip() and "\n" not in text.rstrip("\r\n"),
          "%s%d error body not one non-empty line: %s" % (what and what + ": ", status, short(resp.body)))
    try:
        check_server_headers(resp)
    except Fail as e:
        raise Fail("%s%d error: %s (head %s)" % (what and what + ": ", status, e, short(resp.raw_head)))


# ---------------------------------------------------------------------------
# SSE
# ---------------------------------------------------------------------------

def sse_blocks(data):
    """Splits a stream body into complete blocks (each ending in a blank
    line) and the incomplete rest. Lines end in LF (the server writes LF)."""
    blocks = []
    for _ in range(1000000):
        i = data.find(b"\n\n")
        if i < 0:
            break
        blocks.append(data[:i + 2])
        data = data[i + 2:]
    return blocks, data


def parse_block(block):
    """A block's fields: {'id','event','data':[...],'comments':[...],'retry','other':[...]}."""
    out = {"id": None, "event": None, "data": [], "comments": [], "retry": None, "other": [],
           "raw": block}
    for line in block[:-2].split(b"\n"):
        s = line.decode("utf-8", "replace")
        if s.startswith(":"):
            out["comments"].append(s)
        elif s.startswith("id: "):
            out["id"] = s[4:]
        elif s.startswith("event: "):
            out["event"] = s[7:]
        elif s.startswith("data: "):
            out["data"].append(s[6:])
        elif s.startswith("retry: "):
            out["retry"] = s[7:]
        else:
            out["other"].append(s)
    return out


def event_bytes(n, data, event=None):
    """The exact bytes of an event as the spec writes it."""
    out = "id: %d\n" % n
    if event is not None:
        out += "event: %s\n" % event
    for line in data.split("\n"):
        out += "data: %s\n" % line
    return (out + "\n").encode("utf-8")


HEARTBEAT = b":\n\n"


def stream_items(body):
    """Classifies a hold body (after its head) into items: ('hb',) for a
    heartbeat, ('event', id, block) for an event, ('retry', ms, block), and
    ('bad', block) for anything else; the incomplete rest is returned too."""
    blocks, rest = sse_blocks(body)
    items = []
    for b in blocks:
        if b == HEARTBEAT:
            items.append(("hb",))
            continue
        p = parse_block(b)
        if p["id"] is not None and re.match(r"^\d+$", p["id"]) and not p["other"] and not p["comments"]:
            items.append(("event", int(p["id"]), b))
        elif p["retry"] is not None and b == ("retry: %s\n\n" % p["retry"]).encode():
            items.append(("retry", p["retry"], b))
        else:
            items.append(("bad", b))
    return items, rest


def event_ids(body):
    items, _ = stream_items(body)
    return [it[1] for it in items if it[0] == "event"]


def check_hold_head(resp, worker_pool, exact_names=True):
    """The hold answer's head, as the spec pins it."""
    check(resp.raw_head.startswith(b"HTTP/1.1 200 OK\r\n"),
          "hold status line %s, want 'HTTP/1.1 200 OK'" % short(resp.raw_head.split(b"\r\n")[0]))
    want = {"content-type": "text/event-stream", "cache-control": "no-cache",
            "connection": "close", "x-accel-buffering": "no"}
    for n, v in want.items():
        got = resp.all(n)
        check(got == [v], "hold head %s: want [%r], got %r (head %s)" % (n, v, got, short(resp.raw_head)))
    xw = resp.all("x-worker")
    check(len(xw) == 1 and re.match(r"^%s-\d+$" % worker_pool, xw[0]),
          "hold head x-worker: want one '%s-N', got %r" % (worker_pool, xw))
    for n in ("content-length", "transfer-encoding"):
        check(not resp.has(n), "hold head has %s: %r (head %s)" % (n, resp.header(n), short(resp.raw_head)))
    m0 = [n for n in resp.names() if n.startswith("m0-")]
    check(not m0, "hold head still carries %r" % m0)
    check_server_headers(resp)
    if exact_names:
        extra = set(resp.names()) - set(want) - {"x-worker", "date", "server"}
        check(not extra, "hold head has extra headers %r (head %s)" % (sorted(extra), short(resp.raw_head)))
        check(len(resp.headers) == 7, "hold head has %d header lines, want 7: %s" % (
            len(resp.headers), short(resp.raw_head)))


def read_head_body(conn, head_body, timeout=3.0):
    """Waits for the stream's first bytes and checks they are head_body."""
    conn.read_until(lambda b: len(b) >= len(head_body), timeout)
    if not conn.buf.startswith(head_body):
        if conn.eof and head_body.startswith(conn.buf):
            raise Fail("the server closed the hold %s; got body %s" % (
                "right after its head" if not conn.buf else "inside its head body", short(conn.buf)))
        raise Fail("stream body does not start with %s; got %s%s" % (
            short(head_body), short(conn.buf), " then EOF" if conn.eof else ""))


def check_stream(body, want, what="stream"):
    """body: a hold's bytes after its head body. want: list of
    (id, data, event). Only heartbeats may sit between the wanted events;
    returns the number of heartbeats."""
    items, rest = stream_items(body)
    bad = [it for it in items if it[0] not in ("hb", "event")]
    check(not bad, "%s has unexpected blocks %s" % (what, short([it[-1] for it in bad])))
    got = [it for it in items if it[0] == "event"]
    got_ids = [it[1] for it in got]
    want_ids = [w[0] for w in want]
    check(got_ids == want_ids, "%s delivered ids %r, want %r (body %s)" % (what, got_ids, want_ids, short(body)))
    for it, w in zip(got, want):
        exp = event_bytes(*w)
        check(it[2] == exp, "%s event %d is %s, want %s" % (what, w[0], short(it[2]), short(exp)))
    check(b"\r" not in body, "%s has CR bytes (chunk framing?): %s" % (what, short(body)))
    check(rest == b"", "%s ends in an incomplete block %s" % (what, short(rest)))
    return sum(1 for it in items if it[0] == "hb")


def expect_events(conn, head_body, want, timeout=5.0, settle=0.3, what="hold"):
    """Reads a hold until every wanted event id has arrived (or EOF or
    timeout), then settle seconds more; checks the stream is exactly the
    head body, the wanted events in order and heartbeats, and still open."""
    last = want[-1][0] if want else None
    n = len(head_body)
    conn.read_until(lambda b: last is not None and last in event_ids(b[n:]), timeout)
    if not conn.eof and settle:
        conn.read_until(lambda b: False, settle)
    read_head_body(conn, head_body, 0)
    body = conn.buf[n:]
    if last is not None and last not in event_ids(body):
        if conn.eof:
            raise Fail("%s: the server closed the stream (EOF) before event %d; body after the head %s" % (
                what, last, short(body)))
        raise Fail("%s: event %d not delivered within %.1fs (stream still open); body after the head %s" % (
            what, last, timeout, short(body)))
    hb = check_stream(body, want, what)
    check(not conn.eof, "%s: the server closed the stream after the events; body %s" % (what, short(body)))
    return hb


def leave(conn):
    """The client leaves: shutdown and close its socket."""
    try:
        conn.sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    conn.close()


def open_hold(addr, path, headers=(), timeout=5.0):
    """Connects, sends GET path, reads the head. Returns (conn, head)."""
    c = Conn(addr, timeout)
    c.send(build_request("GET", path, headers))
    return c, c.read_head(timeout)


# ---------------------------------------------------------------------------
# publish and metrics
# ---------------------------------------------------------------------------

def publish_django(addr, channel, data, event=None, timeout=5.0, expect=200):
    """POST /publish (form channel, data, event) to the Django fixture.
    Returns the id for a 200 answer, else the Response (when expect != 200)."""
    fields = [("channel", channel), ("data", data)]
    if event is not None:
        fields.append(("event", event))
    r = http(addr, "POST", "/publish",
             [("Content-Type", "application/x-www-form-urlencoded")],
             form_body(fields), timeout)
    return _publish_answer(r, "Django /publish", channel, expect)


def _publish_answer(r, what, channel, expect):
    """The id of a 200 publish answer; with expect != 200, the Response after
    checking its status."""
    if expect != 200:
        check(r.status == expect, "%s channel=%r: want %d, got %s %s" % (
            what, channel, expect, r.summary(), short(r.body, 160)))
        return r
    check(r.status == 200, "%s channel=%r: want 200, got %s %s" % (
        what, channel, r.summary(), short(r.body, 160)))
    j = r.json()
    check(isinstance(j, dict) and isinstance(j.get("id"), int), "%s answer %s" % (what, short(r.body)))
    return j["id"]


def self_signed(ctx):
    """A certificate for 127.0.0.1 (its own CA) and its key, removed at the end."""
    d = tempfile.mkdtemp(prefix="m0-cert-")
    ctx.finalizers.append(lambda: shutil.rmtree(d, ignore_errors=True))
    cert, key = os.path.join(d, "cert.pem"), os.path.join(d, "key.pem")
    p = subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                        "ec_paramgen_curve:P-256", "-nodes", "-keyout", key, "-out", cert, "-days",
                        "2", "-subj", "/CN=localhost", "-addext",
                        "subjectAltName=DNS:localhost,IP:127.0.0.1"],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=20)
    check(p.returncode == 0, "openssl req: %s" % short(p.stderr.decode("utf-8", "replace")))
    return cert, key


def publish_admin(admin, key, channel, data, event=None, timeout=5.0, expect=200, raw_json=None):
    """Admin POST /publish; returns the id on 200, else the Response."""
    payload = {"channel": channel, "data": data}
    if event is not None:
        payload["event"] = event
    headers = [("Content-Type", "application/json")]
    if key is not None:
        headers.append(("Authorization", "Bearer %s" % key))
    body = raw_json if raw_json is not None else json.dumps(payload).encode()
    r = http(admin, "POST", "/publish", headers, body, timeout)
    return _publish_answer(r, "admin /publish", channel, expect)


def pushpin_publish(srv, *args):
    """Runs Debian's pushpin-publish against the admin listener; returns
    (exit code, output)."""
    exe = shutil.which("pushpin-publish")
    check(exe, "pushpin-publish not found (make deps installs Debian's pushpin)")
    spec = "http://%s:%d" % srv.admin
    p = subprocess.run([exe, "--spec", spec] + list(args), capture_output=True, timeout=20,
                       stdin=subprocess.DEVNULL)
    return p.returncode, (p.stdout + p.stderr).decode("utf-8", "replace")


def metrics(admin, timeout=5.0):
    """GET /metrics on the admin listener -> {'name' or 'name{labels}': float}."""
    r = http(admin, "GET", "/metrics", timeout=timeout)
    check(r.status == 200, "admin /metrics: %s %s" % (r.summary(), short(r.body, 160)))
    out = {}
    for line in r.text().splitlines():
        if not line or line.startswith("#"):
            continue
        m = re.match(r"^([a-zA-Z_:][a-zA-Z0-9_:]*(?:\{[^}]*\})?)\s+(\S+)", line)
        if m:
            try:
                out[m.group(1)] = float(m.group(2))
            except ValueError:
                pass
    return out


def wait_metric(admin, name, want, timeout=3.0, what=""):
    """Polls /metrics until metric name == want; Fail shows the last value."""
    deadline = time.monotonic() + timeout
    last = None
    for _ in range(int(timeout / 0.05) + 2):
        last = metric(metrics(admin), name)
        if last == want:
            return last
        if time.monotonic() >= deadline:
            break
        time.sleep(0.05)
    raise Fail("%s%s is %g, want %g (polled %.1fs)" % (what and what + ": ", name, last, want, timeout))


def metric(ms, name):
    check(name in ms, "metric %s missing from /metrics (have %s)" % (name, short(sorted(ms), 400)))
    return ms[name]


# ---------------------------------------------------------------------------
# servers
# ---------------------------------------------------------------------------

_started = []  # every Popen this process started, for the atexit guard


@atexit.register
def _kill_leftovers():
    for p in _started:
        if p.poll() is None:
            try:
                os.kill(p.pid, signal.SIGKILL)
                p.wait(5)
            except (OSError, subprocess.TimeoutExpired):
                pass


class Server:
    """One m0serve process this script started (or, with SERVER=, one it
    reuses and never signals)."""

    def __init__(self, ctx, binary, args, label, admin=False, admin_key=None, env=None, cwd=None):
        self.ctx = ctx
        self.env = env
        self.cwd = cwd or ROOT
        self.binary = binary
        self.args = list(args)
        self.label = label
        self.proc = None
        self.log_path = None
        self.admin = None
        self.admin_key = admin_key
        self.reused = bool(os.environ.get("SERVER"))
        self.fresh = not self.reused  # started by this smoke: its counters start at 0
        self.stopped = False
        self.rc = None
        if self.reused:
            self.addr = parse_addr(os.environ["SERVER"])
            if admin:
                a = os.environ.get("SERVER_ADMIN")
                self.admin = parse_addr(a) if a else None
                self.admin_key = os.environ.get("SERVER_ADMIN_KEY", admin_key)
            self.argv = [binary, "--listen", "%s:%d" % self.addr] + self.args
            sys.stderr.write("  [%s] reusing SERVER=%s:%d; this phase expects it started as:\n    %s\n" % (
                label, self.addr[0], self.addr[1], " ".join(self.argv)))
            return
        if admin:
            port, aport = free_ports(2)
            self.admin = (HOST, aport)
            self.args += ["--admin-listen", "%s:%d" % self.admin]
        else:
            port = free_port()
        self.addr = (HOST, port)
        # Absolute: a server may run in another directory (cwd=).
        self.argv = [os.path.abspath(binary), "--listen", "%s:%d" % self.addr] + self.args

    def start(self, ready_timeout=20.0):
        if self.reused:
            return self
        if not os.path.exists(self.binary):
            raise Fail("binary %s not found (cd %s && make build)" % (self.binary, ROOT))
        os.makedirs(LOG_DIR, exist_ok=True)
        self.log_path = os.path.join(LOG_DIR, "%s.log" % self.label)
        log = open(self.log_path, "wb")
        log.write(("# cwd %s\n# %s\n" % (self.cwd, " ".join(self.argv))).encode())
        log.flush()
        env = dict(os.environ)
        env.update(self.env or {})
        self.proc = subprocess.Popen(self.argv, cwd=self.cwd, stdin=subprocess.DEVNULL,
                                     stdout=log, stderr=subprocess.STDOUT,
                                     start_new_session=True, env=env)
        log.close()
        _started.append(self.proc)
        deadline = time.monotonic() + ready_timeout
        targets = [self.addr] + ([self.admin] if self.admin else [])
        for t in targets:
            for _ in range(int(ready_timeout / 0.05) + 2):
                rc = self.proc.poll()
                if rc is not None:
                    self.rc = rc
                    self.stopped = True
                    last = [l for l in self.log_text().splitlines() if l and not l.startswith("# ")]
                    raise Fail("server exited with code %d during start-up%s" % (
                        rc, (": " + last[-1]) if last else ""))
                try:
                    s = socket.create_connection(t, timeout=0.5)
                    s.close()
                    break
                except OSError:
                    pass
                if time.monotonic() >= deadline:
                    raise Fail("server not accepting on %s:%d within %.0fs" % (t[0], t[1], ready_timeout))
                time.sleep(0.05)
        return self

    def alive(self):
        return self.reused or (self.proc is not None and self.proc.poll() is None)

    def require_own(self, why):
        if self.reused:
            raise Fail("needs a server this script starts (%s); SERVER= is set" % why)

    def log_text(self):
        if not self.log_path:
            return ""
        try:
            with open(self.log_path, "rb") as f:
                return f.read().decode("utf-8", "replace")
        except OSError:
            return ""

    def log_tail(self, n=40):
        return self.log_text().splitlines()[-n:]

    def terminate(self):
        """Sends SIGTERM by PID (only to a process this script started)."""
        self.require_own("it sends SIGTERM")
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGTERM)

    def wait_exit(self, timeout):
        """The exit code, or None if still running after timeout."""
        try:
            self.rc = self.proc.wait(timeout)
            self.stopped = True
            return self.rc
        except subprocess.TimeoutExpired:
            return None

    def kill(self):
        if self.proc and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                pass
        self.stopped = True

    def stop(self, timeout=15.0):
        """SIGTERM, then exit code 0 within timeout; else SIGKILL and Fail."""
        if self.reused or self.stopped or self.proc is None:
            return
        rc = self.proc.poll()
        if rc is not None:
            self.stopped = True
            self.rc = rc
            raise Fail("server had already exited with code %d" % rc)
        self.terminate()
        rc = self.wait_exit(timeout)
        if rc is None:
            self.kill()
            raise Fail("server did not exit within %.0fs of SIGTERM (killed)" % timeout)
        check(rc == 0, "server exited with code %d after SIGTERM, want 0" % rc)


# ---------------------------------------------------------------------------
# phases
# ---------------------------------------------------------------------------

class Ctx:
    """What a phase gets: servers and connections it opens are cleaned up
    when it ends (connections closed first, then servers stopped and their
    exit code checked)."""

    def __init__(self, smoke, number):
        self.smoke = smoke
        self.number = number
        self.binary = smoke.binary
        self.servers = []
        self.conns = []
        self.finalizers = []  # called after the servers stopped (e.g. a Redis they used)

    def server(self, args, admin=False, admin_key=None, label=None, ready_timeout=20.0, env=None,
               cwd=None):
        label = label or "%s-phase%d-%d" % (self.smoke.script, self.number, len(self.servers) + 1)
        s = Server(self, self.binary, args, label, admin=admin, admin_key=admin_key, env=env, cwd=cwd)
        self.servers.append(s)
        return s.start(ready_timeout)

    def connect(self, addr, timeout=5.0):
        if isinstance(addr, Server):
            addr = addr.addr
        c = Conn(addr, timeout)
        self.conns.append(c)
        return c

    def hold(self, addr, path, headers=(), timeout=5.0):
        if isinstance(addr, Server):
            addr = addr.addr
        c, h = open_hold(addr, path, headers, timeout)
        self.conns.append(c)
        return c, h

    def tmpfile(self, name, content):
        os.makedirs(LOG_DIR, exist_ok=True)
        path = os.path.join(LOG_DIR, "%s-phase%d-%s" % (self.smoke.script, self.number, name))
        with open(path, "w") as f:
            f.write(content)
        return path

    def run_binary(self, args, timeout=20.0, label=None):
        """Runs the binary to completion (cwd ROOT); returns (rc, stdout, stderr).
        rc is None if it had to be killed at the timeout."""
        if not os.path.exists(self.binary):
            raise Fail("binary %s not found (cd %s && make build)" % (self.binary, ROOT))
        p = subprocess.Popen([self.binary] + list(args), cwd=ROOT, stdin=subprocess.DEVNULL,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
        _started.append(p)
        try:
            out, err = p.communicate(timeout=timeout)
            rc = p.returncode
        except subprocess.TimeoutExpired:
            os.kill(p.pid, signal.SIGKILL)
            out, err = p.communicate(timeout=5)
            rc = None
        os.makedirs(LOG_DIR, exist_ok=True)
        label = label or "%s-phase%d-run" % (self.smoke.script, self.number)
        with open(os.path.join(LOG_DIR, label + ".log"), "wb") as f:
            f.write(b"# %s\n# rc %r\n# stdout:\n%s\n# stderr:\n%s" % (
                " ".join([self.binary] + list(args)).encode(), rc, out, err))
        return rc, out.decode("utf-8", "replace"), err.decode("utf-8", "replace")

    def cleanup(self):
        """Closes connections, stops servers; returns the first stop failure."""
        for c in self.conns:
            c.close()
        problem = None
        for s in self.servers:
            try:
                s.stop()
            except Fail as e:
                problem = problem or "%s: %s" % (s.label, e)
            except Exception as e:  # noqa: BLE001 - report, keep cleaning
                s.kill()
                problem = problem or "%s: stop: %r" % (s.label, e)
        for fn in self.finalizers:
            try:
                fn()
            except Exception as e:  # noqa: BLE001
                problem = problem or "cleanup: %r" % e
        return problem


class Smoke:
    """The phase runner of one script."""

    def __init__(self, script, doc, phase_timeout=60.0):
        self.script = script
        self.doc = doc
        self.phase_timeout = phase_timeout
        self.phases = []  # (number, what, fn, timeout)
        self.binary = DEFAULT_BINARY

    def phase(self, number, what, timeout=None):
        def deco(fn):
            self.phases.append((number, what, fn, timeout or self.phase_timeout))
            return fn
        return deco

    def _parser(self):
        listing = "\n".join("  phase %d: %s" % (n, w) for n, w, _, _ in sorted(self.phases, key=lambda p: p[0]))
        epilog = ("phases:\n%s\n\nenvironment:\n"
                  "  SERVER=host:port        reuse a running server (never start/stop one)\n"
                  "  SERVER_ADMIN=host:port  its admin listener;  SERVER_ADMIN_KEY=key\n"
                  "  M0_FIGURES=path         where emit.py appends figures (build/figures.jsonl)\n\n"
                  "examples:\n"
                  "  /usr/bin/python3 smoke/%s.py --binary build/m0serve\n"
                  "  /usr/bin/python3 smoke/%s.py --phase 2\n" % (listing, self.script, self.script))
        p = argparse.ArgumentParser(prog="smoke/%s.py" % self.script, description=self.doc,
                                    epilog=epilog, formatter_class=argparse.RawDescriptionHelpFormatter)
        p.add_argument("--binary", default=DEFAULT_BINARY,
                       help="the m0serve binary (default: %(default)s)")
        p.add_argument("--phase", type=int, action="append", metavar="N",
                       help="run only phase N (repeatable)")
        p.add_argument("--list", action="store_true", help="list the phases and exit")
        return p

    def main(self, argv=None):
        args = self._parser().parse_args(argv)
        self.binary = os.path.abspath(args.binary)
        phases = sorted(self.phases, key=lambda p: p[0])
        if args.list:
            for n, w, _, _ in phases:
                print("phase %d: %s" % (n, w))
            return 0
        if args.phase:
            known = {p[0] for p in phases}
            bad = [n for n in args.phase if n not in known]
            if bad:
                sys.stderr.write("smoke/%s.py: no phase %s (have %s)\n" % (
                    self.script, ",".join(map(str, bad)), ",".join(str(n) for n in sorted(known))))
                return 2
            phases = [p for p in phases if p[0] in args.phase]
        failed = 0
        self.skipped = 0
        started = time.monotonic()
        for number, what, fn, timeout in phases:
            ok = self._run_phase(number, what, fn, timeout)
            failed += 0 if ok else 1
        print("smoke %s: %d of %d phases passed%s in %.0f s" % (
            self.script, len(phases) - failed - self.skipped, len(phases),
            " (%d skipped)" % self.skipped if self.skipped else "", time.monotonic() - started), flush=True)
        return 1 if failed else 0

    def _run_phase(self, number, what, fn, timeout):
        ctx = Ctx(self, number)
        began = time.monotonic()
        reason = None
        tb = None
        skipped = None

        def on_alarm(signum, frame):
            raise PhaseTimeout("phase ran past its %.0fs deadline" % timeout)

        old = signal.signal(signal.SIGALRM, on_alarm)
        signal.setitimer(signal.ITIMER_REAL, timeout)
        try:
            fn(ctx)
        except Skip as e:
            skipped = str(e)
        except Fail as e:
            reason = str(e)
        except PhaseTimeout as e:
            reason = str(e)
            tb = traceback.format_exc()
        except AssertionError as e:
            reason = "assertion: %s" % (e or "failed")
            tb = traceback.format_exc()
        except Exception as e:  # noqa: BLE001 - any error is this phase's failure
            reason = "%s: %s" % (type(e).__name__, e)
            tb = traceback.format_exc()
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, old)
        try:
            problem = ctx.cleanup()
        except Exception as e:  # noqa: BLE001
            problem = "cleanup: %r" % e
        if problem:
            reason = reason + "; also " + problem if reason else problem
        if reason is None and skipped is not None:
            print("SKIP %s phase %d: %s: %s" % (self.script, number, what, skipped), flush=True)
            self.skipped += 1
            return True
        if reason is None:
            print("PASS %s phase %d: %s (%.1f s)" % (self.script, number, what, time.monotonic() - began),
                  flush=True)
            return True
        print("FAIL %s phase %d: %s: %s" % (self.script, number, what, one_line(reason)), flush=True)
        if tb:
            sys.stderr.write(tb)
        for s in ctx.servers:
            if s.reused or not s.log_path:
                continue
            sys.stderr.write("  --- %s log tail (%s):\n" % (s.label, s.log_path))
            for line in s.log_tail():
                sys.stderr.write("  | %s\n" % line)
        # The last line: what reproduces this failure, with each server's
        # exact command line and log.
        started = ["server: %s (log %s)" % (" ".join(s.argv), s.log_path)
                   for s in ctx.servers if not s.reused and getattr(s, "argv", None)]
        print("reproduce: %s smoke/%s.py --binary %s --phase %d%s" % (
            "/usr/bin/python3", self.script, os.path.relpath(self.binary, ROOT), number,
            "".join("   # " + x for x in started)), flush=True)
        sys.stderr.flush()
        return False


def sha256(data):
    return hashlib.sha256(data).hexdigest()
