"""m0.wsevents: Pushpin's WebSocket-over-HTTP events, for a Django view.

With ``--ws-over-http PREFIX`` m0serve serves a WebSocket under PREFIX by
POSTing the connection's events to the view (``Content-Type:
application/websocket-events``) and carrying out the events of its answer
(README, "WebSocket-over-HTTP"). This is the codec django-grip and
pygripcontrol give a view (``decode_websocket_events``,
``encode_websocket_events``, ``WebSocketContext``'s ``m:`` and ``c:``
messages); neither is packaged by Debian.

Each event is ``TYPE`` (OPEN, TEXT, BINARY, PING, PONG, CLOSE, DISCONNECT)
and its content (bytes, or None for none), encoded as ``TYPE\\r\\n`` or
``TYPE SIZE_HEX\\r\\nCONTENT\\r\\n``.
"""

import json
import struct

CONTENT_TYPE = "application/websocket-events"

__all__ = ["CONTENT_TYPE", "close", "control", "decode_events", "encode_events", "message"]


def decode_events(body):
    """The events of a request body: a list of (type, bytes or None).

    Raises ValueError for a body that is not well-formed events.
    """
    out, start = [], 0
    while start < len(body):
        at = body.find(b"\r\n", start)
        if at == -1:
            raise ValueError("an event line without CRLF")
        line, start = body[start:at], at + 2
        if b" " not in line:
            out.append((line.decode("ascii"), None))
            continue
        etype, size = line.split(b" ", 1)
        size = int(size, 16)
        if size < 0 or start + size + 2 > len(body) or body[start + size:start + size + 2] != b"\r\n":
            raise ValueError("an event's content is cut short")
        out.append((etype.decode("ascii"), body[start:start + size]))
        start += size + 2
    return out


def encode_events(events):
    """The answer body of (type, bytes or None) events."""
    out = []
    for etype, content in events:
        out.append(etype.encode("ascii"))
        if content is not None:
            out.append(b" %x\r\n" % len(content) + content)
        out.append(b"\r\n")
    return b"".join(out)


def message(text):
    """A TEXT event the client receives as ``text`` (the grip extension's ``m:`` prefix)."""
    return ("TEXT", b"m:" + text.encode("utf-8"))


def control(kind, **args):
    """A grip control message: ``control("subscribe", channel="news")``,
    ``unsubscribe``, ``detach``, ``keep-alive``, ``set-meta``."""
    args["type"] = kind
    return ("TEXT", b"c:" + json.dumps(args, separators=(",", ":")).encode("utf-8"))


def close(code, reason=""):
    """A CLOSE event: the client is closed with `code` and `reason`."""
    return ("CLOSE", struct.pack(">H", code) + reason.encode("utf-8"))
