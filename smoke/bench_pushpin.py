#!/usr/bin/python3
"""bench_pushpin: Pushpin as a peer of the hold rows (bench.py's kinds
pushpin and pushpin-unlimited).

Debian's Pushpin runs its runner (condure, pushpin-proxy, pushpin-handler)
and reaches backends through zurl; both start here from a temporary folder,
with their own config files (every ZeroMQ socket an ipc:// file in that
folder, every TCP port a free one), and stop by PID. The backend is this
file run as a script: a small http.server that answers every GET with
GRIP's `Grip-Hold: stream` and `Grip-Channel: <?channel=>` and a comment
as the stream's first bytes, as a Django view behind django-grip would.
The driver publishes through the handler's HTTP control port, `POST
/publish/` with Pushpin's items, the http-stream content being the SSE
event itself (`data: seq=N t=NS`, blank line).

    pushpin            pushpin.conf's limits as shipped: message_rate=2500,
                       message_hwm=25000 (a burst past them is dropped)
    pushpin-unlimited  message_rate=0, message_hwm=0: the handler's rate
                       limiter neither paces nor drops

RSS and CPU count the runner with its children and zurl; the backend, which
takes part only in a hold's first request, does not. The driver opens
Pushpin's holds 50 at a time, not 500: at 500 its proxy answers a tenth to a
fifth of them 502 or 500 (and the bench waits for the first hold to be
answered 200 before it starts: condure listens before the proxy and the
handler are connected).
"""

import http.server
import os
import socket
import sys
import time
import urllib.parse

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_util import free_ports, start, stop, wait_port  # noqa: E402

INTERNAL_CONF = "/usr/lib/pushpin/internal.conf"
BACKEND_HEAD = b": pushpin hold\n\n"

# Pushpin's JSON items: one item, its http-stream content the SSE event
# (or, to WebSocket-over-HTTP subscribers, its ws-message content the data).
PUBLISH_BODY = '{"items": [{"channel": "{ch}", "formats": {"http-stream": {"content": "data: {data}\\n\\n"}}}]}'
PUBLISH_WS_BODY = '{"items": [{"channel": "{ch}", "formats": {"ws-message": {"content": "{data}"}}}]}'

ZURL_CONF = """[General]
instance_id=bench
in_spec=ipc://%(tmp)s/zurl-in
in_stream_spec=ipc://%(tmp)s/zurl-in-stream
out_spec=ipc://%(tmp)s/zurl-out
defpolicy=allow
allow=
deny=
max_open_requests=%(conns)d
buffer_size=200000
timeout=600
in_hwm=1000
out_hwm=1000
"""

# As /etc/pushpin/pushpin.conf ships, apart from where things are and the
# limits under test.
PUSHPIN_CONF = """[global]
include=%(tmp)s/internal.conf
rundir=%(tmp)s
ipc_prefix=pushpin-
port_offset=0
stats_connection_ttl=120

[runner]
services=condure,pushpin-proxy,pushpin-handler
http_port=127.0.0.1:%(port)d
logdir=%(tmp)s
log_level=2
client_buffer_size=8192
client_maxconn=%(conns)d
condure_bin=condure

[proxy]
routesfile=%(tmp)s/routes
debug=false
auto_cross_origin=false
accept_x_forwarded_protocol=false
set_x_forwarded_protocol=proto-only
x_forwarded_for=
x_forwarded_for_trusted=
orig_headers_need_mark=
accept_pushpin_route=false
log_from=false
log_user_agent=false
sig_iss=pushpin
sig_key=changeme
upstream_key=
updates_check=off

[handler]
push_in_spec=tcp://127.0.0.1:%(push_in)d
push_in_sub_specs=tcp://127.0.0.1:%(push_in_sub)d
push_in_sub_connect=false
push_in_http_addr=127.0.0.1
push_in_http_port=%(pub_port)d
push_in_http_max_headers_size=10000
push_in_http_max_body_size=1000000
stats_spec=ipc://{rundir}/{ipc_prefix}stats
command_spec=tcp://127.0.0.1:%(command)d
message_rate=%(rate)d
message_hwm=%(hwm)d
message_wait=5000
id_cache_ttl=60
connection_subscription_max=20
subscription_linger=60
stats_subscription_ttl=60
stats_report_interval=10
stats_format=tnetstring
"""


class PushpinServer:
    """Pushpin, zurl and the GRIP backend, started fresh in tmp."""

    def __init__(self, kind, holds, tmp, ws=False, backend=None):
        """ws: the holds are WebSockets, relayed to the backend as
        WebSocket-over-HTTP (the route's over_http). backend: the port of a
        backend already running (smoke-websocket puts m0serve there) instead
        of this module's GRIP backend."""
        self.kind, self.tmp = kind, tmp
        self.port, self.pub_port, own_backend, push_in, push_in_sub, command = free_ports(6)
        started_backend = backend is None
        backend = own_backend if started_backend else backend
        self.procs = []
        limits = (2500, 25000) if kind == "pushpin" else (0, 0)
        with open(INTERNAL_CONF) as f:
            internal = f.read().replace("ipc:///var/run/zurl/", "ipc://%s/" % tmp)
        files = {
            "internal.conf": internal,
            "zurl.conf": ZURL_CONF % {"tmp": tmp, "conns": holds + 1024},
            "routes": "* 127.0.0.1:%d%s\n" % (backend, ",over_http" if ws else ""),
            "pushpin.conf": PUSHPIN_CONF % {
                "tmp": tmp, "port": self.port, "pub_port": self.pub_port, "conns": holds + 1024,
                "push_in": push_in, "push_in_sub": push_in_sub, "command": command,
                "rate": limits[0], "hwm": limits[1]},
        }
        for name, text in files.items():
            with open(os.path.join(tmp, name), "w") as f:
                f.write(text)
        try:
            if started_backend:
                self.backend = self._start([sys.executable, os.path.abspath(__file__), str(backend)], "backend")
                wait_port(backend, self.backend, "the GRIP backend")
            self.zurl = self._start(["zurl", "--config=" + os.path.join(tmp, "zurl.conf")], "zurl")
            self.proc = self._start(["pushpin", "--config=" + os.path.join(tmp, "pushpin.conf")], "pushpin")
            wait_port(self.port, self.proc, kind)
            wait_port(self.pub_port, self.proc, kind + "'s control port")
            self._wait_ready()
        except BaseException:
            self.stop()
            raise
        self.url = "%s://127.0.0.1:%d/hold?channel={ch}" % ("ws" if ws else "http", self.port)
        # Opened 50 at a time: with the driver's 500, Pushpin's proxy answers
        # 502 (or 500) to a tenth to a fifth of them.
        self.connecting = 50
        self.publish = ["--publish-url", "http://127.0.0.1:%d/publish/" % self.pub_port,
                        "--publish-header", "Content-Type: application/json",
                        "--publish-body", PUBLISH_WS_BODY if ws else PUBLISH_BODY]

    def _wait_ready(self, timeout=20.0):
        """Until a hold's head comes back 200: condure listens before the
        proxy and the handler are connected, and answers 500 meanwhile."""
        deadline = time.monotonic() + timeout
        head = b""
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise SystemExit("bench: pushpin exited %s while starting: %s" % (
                    self.proc.returncode, self._log_tail()))
            head = b""
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=2) as s:
                    s.sendall(b"GET /hold?channel=ready HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
                    while b"\r\n\r\n" not in head:
                        chunk = s.recv(4096)
                        if not chunk:
                            break
                        head += chunk
            except OSError:
                pass  # not answered in time: try again
            if head.startswith(b"HTTP/1.1 200"):
                return
            time.sleep(0.2)
        raise SystemExit("bench: pushpin answered no hold in %.0fs: %r" % (timeout, head[:80]))

    def _log_tail(self):
        text = ""
        for name in ("pushpin.out", "pushpin-proxy.log", "pushpin-handler.log", "condure.log"):
            try:
                with open(os.path.join(self.tmp, name), errors="replace") as f:
                    text += "\n%s: %s" % (name, "".join(f.readlines()[-5:]))
            except OSError:
                pass
        return text

    def _start(self, cmd, name):
        proc, log = start(cmd, os.path.join(self.tmp, name + ".out"))
        self.procs.append((proc, log))
        return proc

    def pids(self):
        """The runner (its children found by the driver) and zurl."""
        return [self.proc.pid, self.zurl.pid]

    def stop(self):
        for proc, log in reversed(self.procs):
            stop(proc)
            log.close()
        self.procs = []


class GripBackend(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self):
        query = urllib.parse.parse_qs(urllib.parse.urlsplit(self.path).query)
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Grip-Hold", "stream")
        self.send_header("Grip-Channel", query.get("channel", ["bench0"])[0])
        self.send_header("Content-Length", str(len(BACKEND_HEAD)))
        self.end_headers()
        self.wfile.write(BACKEND_HEAD)

    def do_POST(self):
        """WebSocket-over-HTTP: the connection's OPEN is accepted with GRIP's
        extension and a subscribe control message to <?channel=>; every
        other request's events (the client's CLOSE, pings) get no events
        back."""
        query = urllib.parse.parse_qs(urllib.parse.urlsplit(self.path).query)
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        out = b""
        if body.startswith(b"OPEN\r\n"):
            sub = ('c:{"type": "subscribe", "channel": "%s"}' % query.get("channel", ["bench0"])[0]).encode()
            out = b"OPEN\r\nTEXT %x\r\n%s\r\n" % (len(sub), sub)
        self.send_response(200)
        self.send_header("Content-Type", "application/websocket-events")
        self.send_header("Sec-WebSocket-Extensions", "grip")
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)

    def log_message(self, *args):
        pass


class Backend(http.server.ThreadingHTTPServer):
    request_queue_size = 1024  # zurl opens hundreds at once
    daemon_threads = True


if __name__ == "__main__":
    Backend(("127.0.0.1", int(sys.argv[1])), GripBackend).serve_forever()
