"""An HTTP/2 client for the smokes that check streams precisely: Debian's
python3-h2 over a real socket, h2c with prior knowledge on a plain
listener, or TLS whose ALPN must choose h2. Many streams share the
connection; each keeps its head, its DATA and how it ended. Every read is
bounded by time; flow control is acknowledged as DATA is taken, so a
hold's window never closes on the server."""

import socket
import ssl
import time

import h2.config
import h2.connection
import h2.events

from m0smoke import Fail, check, short


class Stream:
    """One request's answer as it arrives."""

    def __init__(self, sid, path):
        self.sid = sid
        self.path = path
        self.headers = None  # [(name, value)] of the answer's HEADERS, str
        self.body = b""      # DATA so far
        self.ended = False   # END_STREAM came
        self.reset = None    # the RST_STREAM error code, when the server reset it
        self.t_end = None    # time.monotonic() at END_STREAM or RST_STREAM

    def status(self):
        return int(self.header(":status") or 0)

    def header(self, name):
        """The answer's one value of `name`, or None."""
        got = [v for n, v in self.headers or () if n == name]
        check(len(got) <= 1, "stream %d (%s): %s repeats: %r" % (self.sid, self.path, name, got))
        return got[0] if got else None

    def names(self):
        return [n for n, _ in self.headers or ()]

    def done(self):
        return self.ended or self.reset is not None


class H2Client:
    """One HTTP/2 connection: over TLS (`ca` given: ALPN offers h2 alone and
    must get it, the certificate checked against `ca` for 127.0.0.1) or h2c
    with prior knowledge."""

    def __init__(self, addr, ca=None, timeout=5.0):
        raw = socket.create_connection(addr, timeout=timeout)
        raw.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.scheme = "http"
        if ca:
            ctx = ssl.create_default_context(cafile=ca)
            ctx.set_alpn_protocols(["h2"])
            raw = ctx.wrap_socket(raw, server_hostname=addr[0])
            check(raw.selected_alpn_protocol() == "h2",
                  "ALPN chose %r, not h2" % raw.selected_alpn_protocol())
            self.scheme = "https"
        self.sock = raw
        self.authority = "%s:%d" % addr
        config = h2.config.H2Configuration(client_side=True, header_encoding="utf-8")
        self.conn = h2.connection.H2Connection(config)
        self.conn.initiate_connection()
        self.streams = {}   # sid -> Stream
        self.goaway = None  # the ConnectionTerminated event, once the server sent GOAWAY
        self.stalled = set()  # sids whose window is never opened again: a reader that stopped
        self.eof = False
        self.flush()

    def flush(self):
        data = self.conn.data_to_send()
        if data:
            self.sock.sendall(data)

    def get(self, path, headers=()):
        """Sends GET `path` (with `headers`, lowercase names) on a new
        stream; returns its Stream."""
        sid = self.conn.get_next_available_stream_id()
        fields = [(":method", "GET"), (":scheme", self.scheme), (":authority", self.authority),
                  (":path", path), ("user-agent", "m0smoke-h2")] + list(headers)
        self.conn.send_headers(sid, fields, end_stream=True)
        self.flush()
        self.streams[sid] = Stream(sid, path)
        return self.streams[sid]

    def stall(self, stream):
        """The client stops reading `stream`: its window is no longer opened
        again (the connection's is, so the other streams go on); opens the
        connection's window wide first, so the stalled stream's bytes never
        hold the others back."""
        self.conn.increment_flow_control_window(1 << 30)
        self.flush()
        self.stalled.add(stream.sid)

    def cancel(self, stream):
        """The client leaves the stream (RST_STREAM CANCEL), as a closed
        EventSource does); nothing for a stream that has ended."""
        if stream.done():
            return
        self.conn.reset_stream(stream.sid, 8)
        self.flush()

    def _take(self, ev):
        s = self.streams.get(getattr(ev, "stream_id", None))
        if isinstance(ev, h2.events.ResponseReceived) and s:
            s.headers = list(ev.headers)
        elif isinstance(ev, h2.events.DataReceived) and ev.stream_id in self.stalled:
            if s:
                s.body += ev.data
        elif isinstance(ev, h2.events.DataReceived):
            self.conn.acknowledge_received_data(ev.flow_controlled_length, ev.stream_id)
            if s:
                s.body += ev.data
        elif isinstance(ev, h2.events.StreamEnded) and s:
            s.ended, s.t_end = True, time.monotonic()
        elif isinstance(ev, h2.events.StreamReset) and s:
            s.reset, s.t_end = ev.error_code, time.monotonic()
        elif isinstance(ev, h2.events.ConnectionTerminated):
            self.goaway = ev

    def read(self, timeout):
        """Takes what arrives within `timeout` (at most one read's worth)."""
        if self.eof:
            return
        self.sock.settimeout(max(0.001, timeout))
        try:
            data = self.sock.recv(65536)
        except (socket.timeout, ssl.SSLWantReadError):
            return
        except (ConnectionResetError, ssl.SSLError):
            data = b""
        if not data:
            self.eof = True
            return
        for ev in self.conn.receive_data(data):
            self._take(ev)
        self.flush()

    def until(self, pred, timeout, what):
        """Reads until pred() is true; Fail naming `what` (and every
        stream's state) when `timeout` passes or the connection ends first."""
        deadline = time.monotonic() + timeout
        for _ in range(100000):
            if pred():
                return
            left = deadline - time.monotonic()
            if left <= 0 or self.eof:
                break
            self.read(min(left, 0.2))
        if pred():
            return
        raise Fail("%s: not within %.1fs%s; streams: %s" % (
            what, timeout, " (the connection ended)" if self.eof else "", self.describe()))

    def settle(self, seconds):
        """Takes whatever arrives for `seconds` more."""
        deadline = time.monotonic() + seconds
        for _ in range(100000):
            left = deadline - time.monotonic()
            if left <= 0 or self.eof:
                return
            self.read(left)

    def heads(self, streams, timeout=5.0):
        """Waits for the answer's HEADERS of each of `streams`."""
        self.until(lambda: all(s.headers is not None for s in streams), timeout,
                   "the answers' HEADERS")

    def describe(self):
        return "; ".join("%d %s: %s %s%s" % (
            s.sid, short(s.path, 60), s.header(":status") if s.headers else "no head",
            short(s.body, 200), " END" if s.ended else (" RST %d" % s.reset if s.reset is not None else ""))
            for s in self.streams.values())

    def close(self):
        try:
            self.conn.close_connection()
            self.flush()
        except Exception:  # noqa: BLE001 - the server may have gone already
            pass
        self.sock.close()
