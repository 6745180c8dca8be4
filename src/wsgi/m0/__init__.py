"""m0: the Python side of m0serve's realtime layer.

A view asks m0serve to *hold* its connection by answering with two response
headers: ``M0-Hold: stream`` and ``M0-Channel: NAME`` (several names joined
with ","). The server consumes both, turns the response into the head of a
Server-Sent-Events stream (``200``, ``Content-Type: text/event-stream``,
close-delimited) whose first bytes are the response body, subscribes the
connection to the named channels and frees the pool thread. Every event
published to one of those channels afterwards is written to the connection
as ``id: N`` / ``event: NAME`` / ``data: ...`` lines; ``N`` comes from one
server-wide counter. A reconnecting client's ``Last-Event-ID`` is replayed
what the channel's history kept after it, then hears live events; when the
history cannot fill the gap the stream first carries ``event: m0-reset``
(no id), and the application reloads its state.
:func:`hold_stream_response` builds that answer.

:func:`publish` hands an event to the server's bus (in process, or the
Redis bus of ``--bus redis://...``) through the built-in module ``_m0``,
which only m0serve provides. Outside m0serve (a management command, a cron
job), with ``M0_BUS`` set to the servers' Redis URL, :func:`publish` runs the
same publish script on that Redis (m0/redis_bus.py), so the event reaches
every server's holds. On the in-process bus, with ``M0_ADMIN_URL`` set to the
server's admin listener (and ``M0_ADMIN_KEY_FILE`` to its ``--admin-key-file``),
:func:`publish` posts the event to its admin API (m0/admin_publish.py), so a
management command or a Celery task publishes with the same call on either
bus. Without ``--realtime``, or outside m0serve with neither ``M0_BUS`` nor
``M0_ADMIN_URL`` (``manage.py runserver``, unit tests), :func:`publish` raises
:class:`RuntimeError`; :func:`realtime` returns ``False`` outside m0serve; a hold answer served by m0serve without ``--realtime`` degrades
to an ordinary response whose body is the head. Channel names are checked
here as at every publish boundary of the server: not empty, at most 256
bytes of UTF-8, no CR, LF or NUL, no space or tab as the first or last
character, and not in the namespace the server reserves for its own
per-connection channels (``m0.slot.``). A name is the same bytes everywhere:
the server trims spaces and tabs around the commas of ``M0-Channel``, so a
name that began or ended with one would be held as another name.
"""

import os

RESERVED_PREFIX = "m0.slot."
MAX_CHANNEL_BYTES = 256
_FORBIDDEN = ("\r", "\n", "\0")
_EDGE = (" ", "\t")  # SP and HTAB: trimmed around M0-Channel's commas

__all__ = [
    "MAX_CHANNEL_BYTES",
    "RESERVED_PREFIX",
    "hold_stream_response",
    "publish",
    "realtime",
    "validate_channel",
]


def validate_channel(name):
    """Return ``name`` if m0serve accepts it as a channel name.

    Raises TypeError if ``name`` is not a str and ValueError (with the reason)
    if it is empty, longer than 256 bytes in UTF-8, contains CR, LF or NUL,
    begins or ends with a space or tab, or starts with the reserved prefix
    ``m0.slot.``.
    """
    if not isinstance(name, str):
        raise TypeError(f"channel name must be str, not {type(name).__name__}")
    if not name:
        raise ValueError("channel name is empty")
    try:
        size = len(name.encode("utf-8"))
    except UnicodeEncodeError:
        raise ValueError("channel name is not encodable as UTF-8") from None
    if size > MAX_CHANNEL_BYTES:
        raise ValueError(f"channel name is {size} bytes of UTF-8; "
                         f"the limit is {MAX_CHANNEL_BYTES}")
    if any(c in name for c in _FORBIDDEN):
        raise ValueError(f"channel name {name!r} contains CR, LF or NUL")
    if name[0] in _EDGE or name[-1] in _EDGE:
        raise ValueError(f"channel name {name!r} begins or ends with a space or tab")
    if name.startswith(RESERVED_PREFIX):
        raise ValueError(f"channel name {name!r} is in the reserved "
                         f"namespace {RESERVED_PREFIX!r}")
    return name


def _validate_event(event):
    """Return ``event`` if it is None or a usable SSE event name."""
    if event is None:
        return None
    if not isinstance(event, str):
        raise TypeError(f"event name must be str or None, "
                        f"not {type(event).__name__}")
    if not event:
        raise ValueError("event name is empty (pass None for no event name)")
    if any(c in event for c in _FORBIDDEN):
        raise ValueError(f"event name {event!r} contains CR, LF or NUL")
    return event


def _native():
    """Return the server's built-in ``_m0`` module, or None outside m0serve."""
    try:
        import _m0
    except ImportError:
        return None
    return _m0


def realtime():
    """Return True when running inside ``m0serve --realtime``."""
    native = _native()
    return native is not None and bool(native.realtime())


def _checked(channel, data, event=None):
    """Return (channel, data, event) checked and normalised as publish takes them."""
    validate_channel(channel)
    event = _validate_event(event)
    if isinstance(data, (bytes, bytearray, memoryview)):
        data = bytes(data).decode("utf-8")
    elif not isinstance(data, str):
        raise TypeError("data must be str or bytes, "
                        f"not {type(data).__name__}")
    # WHATWG SSE: CRLF, CR and LF all end a line; a lone CR left in the data
    # would let it forge fields of its own.
    data = data.replace("\r\n", "\n").replace("\r", "\n")
    return channel, data, event


def publish(channel, data, event=None):
    """Publish ``data`` on ``channel``; return the event's id (an int).

    ``data`` is str or UTF-8 bytes; it may span lines (one ``data:`` line
    each). CRLF and lone CR are normalised to LF, as an SSE client would
    read them anyway. ``event`` is an optional SSE event name.

    Raises ValueError for a refused channel or event name, undecodable
    bytes, or an event larger than the server's ``--max-event-size`` (the
    message names the limit; the size is the event's bytes on the wire, its
    ``id:``, ``event:`` and ``data:`` lines), TypeError for arguments of the
    wrong type, and RuntimeError when the server does not run with
    ``--realtime`` (or this is not m0serve and neither ``M0_BUS`` nor
    ``M0_ADMIN_URL`` is set), its bus channel is full, its Redis bus cannot
    take the event, or its admin API refuses it or cannot be reached (the
    reason said). Outside m0serve ``M0_BUS`` is used when both are set.
    """
    channel, data, event = _checked(channel, data, event)
    native = _native()
    if native is None:
        url = os.environ.get("M0_BUS")
        if url:
            from . import redis_bus

            return redis_bus.publish(url, channel, data, event)
        admin = os.environ.get("M0_ADMIN_URL")
        if admin:
            from . import admin_publish

            return admin_publish.publish(admin, os.environ.get("M0_ADMIN_KEY_FILE"), channel,
                                         data, event)
        raise RuntimeError("m0.publish needs m0serve --realtime, or outside m0serve "
                           "M0_BUS=redis://... or M0_ADMIN_URL=http://HOST:PORT")
    return native.publish(channel, data, event)


def publish_many(events):
    """Publish several events at once; return their ids, in order (a list).

    ``events`` is an iterable of ``(channel, data)`` or ``(channel, data,
    event)`` tuples, or of dicts with the keys ``channel``, ``data`` and
    optionally ``event``; each is checked and normalised as :func:`publish`
    does. Every event is checked before any is sent: a bad one raises
    ValueError or TypeError naming its index (``event 3: ...``) and nothing
    is published. The events then go as one batch, where :func:`publish`
    would send them: in m0serve one step on its bus (in process, one lock
    and one wake-up of each loop; on Redis one round trip); outside m0serve
    one pipelined round trip to ``M0_BUS``, or one ``POST`` of a JSON array
    to ``M0_ADMIN_URL`` (at most the server's ``--publish-batch-max``
    events). Ids come from the one shared counter, in the batch's order.

    RuntimeError as for :func:`publish`; a batch is taken whole or not at
    all (on Redis one call of the publish script): after a RuntimeError no
    event of it was published, unless the answer was lost on the way (the
    message says so), when whether Redis took the batch is unknown.
    """
    checked = []
    for i, item in enumerate(events):
        try:
            if isinstance(item, dict):
                unknown = set(item) - {"channel", "data", "event"}
                if unknown:
                    raise ValueError(f"unknown key {sorted(unknown)[0]!r}")
                if "channel" not in item or "data" not in item:
                    raise ValueError("needs 'channel' and 'data'")
                item = (item["channel"], item["data"], item.get("event"))
            elif not isinstance(item, (tuple, list)) or len(item) not in (2, 3):
                raise TypeError("not a (channel, data[, event]) tuple or a dict")
            checked.append(_checked(*item))
        except (ValueError, TypeError) as e:
            raise type(e)(f"event {i}: {e}") from None
    if not checked:
        return []
    native = _native()
    if native is None:
        url = os.environ.get("M0_BUS")
        if url:
            from . import redis_bus

            return redis_bus.publish_many(url, checked)
        admin = os.environ.get("M0_ADMIN_URL")
        if admin:
            from . import admin_publish

            return admin_publish.publish_many(admin, os.environ.get("M0_ADMIN_KEY_FILE"),
                                              checked)
        raise RuntimeError("m0.publish_many needs m0serve --realtime, or outside m0serve "
                           "M0_BUS=redis://... or M0_ADMIN_URL=http://HOST:PORT")
    return native.publish_many(checked)


def hold_stream_response(channel, head=""):
    """Return a Django HttpResponse that asks m0serve to hold the connection.

    ``channel`` is a channel name or a list/tuple of names; ``head`` (str or
    bytes) is the start of the stream, typically an SSE comment such as
    ``": hello\\n\\n"``. Names are validated as for :func:`publish` and may
    not contain "," (it separates names in ``M0-Channel``); a refused name
    raises ValueError, a name that is not a str TypeError.
    """
    from django.http import HttpResponse

    names = [channel] if isinstance(channel, str) else channel
    if not isinstance(names, (list, tuple)):
        raise TypeError("channel must be a str or a list/tuple of str, "
                        f"not {type(channel).__name__}")
    if not names:
        raise ValueError("no channel name given")
    for name in names:
        validate_channel(name)
        if "," in name:
            raise ValueError(f"channel name {name!r} contains ',', "
                             "which separates names in M0-Channel")
    response = HttpResponse(head, content_type="text/event-stream")
    response["M0-Hold"] = "stream"
    # PEP 3333: header values are latin-1 strs; carry the UTF-8 bytes.
    response["M0-Channel"] = ",".join(names).encode("utf-8").decode("latin-1")
    return response


# ---- grants -------------------------------------------------------------
# Authorization that travels: see m0/grant.py and the README's "Grants".
from .grant import load_keys, sign_grant, stream_url, verify_grant  # noqa: E402,F401

__all__ += ["load_keys", "sign_grant", "stream_url", "verify_grant"]
