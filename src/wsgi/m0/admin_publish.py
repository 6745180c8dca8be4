"""m0.publish outside m0serve through a server's admin API.

On the default in-process bus the events live in the one m0serve process,
so a management command, the project's tests, a Celery task or a cron job
reaches them through that server's admin listener. With ``M0_ADMIN_URL``
set to it (``http://127.0.0.1:8001``, what ``--admin-listen`` says),
:func:`m0.publish` POSTs the event to ``/publish`` with the key in the file
``M0_ADMIN_KEY_FILE`` names (the server's ``--admin-key-file``) as the
bearer key; without that variable no key is sent (``--admin-open``). It works
on a Redis bus as well, where ``M0_BUS`` is the shorter way. Standard
library only (http.client), never through a proxy; TCP_NODELAY, for
http.client writes the head and the body apart, and Nagle's wait for the
head's ACK (which the server may delay 40 ms) capped a publisher at about
120 events a second.

The server's answers become the errors m0.publish raises inside it: 400 and
413 (a refused name, an event over ``--max-event-size``, naming the limit)
are ValueError; any other refusal (401 for a wrong key, 403 for a server
without a key, 503 without ``--realtime`` or with its bus full), a server
that cannot be reached and an ``M0_ADMIN_URL`` or key file that is not
usable are RuntimeError, each with the reason.
"""

import http.client
import json
import socket
from urllib.parse import urlsplit

TIMEOUT = 5.0  # seconds for the connect and for the answer


def endpoint(url):
    """Return the ``/publish`` URL of the admin listener at ``url``.

    Raises RuntimeError unless ``url`` is http://HOST:PORT (a trailing "/"
    allowed), as ``--admin-listen`` serves it."""
    parts = urlsplit(url)
    try:
        port = parts.port
    except ValueError:
        port = None
    if (parts.scheme != "http" or not parts.hostname or not port or parts.path not in ("", "/")
            or parts.query or parts.fragment or "@" in parts.netloc):
        raise RuntimeError(f"m0.publish: M0_ADMIN_URL {url!r} wants http://HOST:PORT, "
                           "the server's --admin-listen")
    return f"http://{parts.netloc}/publish"


def read_key(path):
    """Return the bearer key in ``path`` (one line, as --admin-key-file
    holds it); RuntimeError when it cannot be read or is empty."""
    try:
        with open(path, encoding="utf-8") as f:
            key = f.read().strip()
    except (OSError, UnicodeDecodeError) as e:
        raise RuntimeError(f"m0.publish: M0_ADMIN_KEY_FILE {path}: {e}") from None
    if not key or any(c.isspace() for c in key):
        raise RuntimeError(f"m0.publish: M0_ADMIN_KEY_FILE {path}: not one line of a key")
    return key


def publish(url, key_file, channel, data, event=None):
    """Publish through the admin API at ``url``; return the event's id.

    ``channel``, ``event`` and ``data`` are already checked and normalised by
    m0.publish; ``key_file`` is None or the file of the bearer key."""
    fields = {"channel": channel, "data": data}
    if event is not None:
        fields["event"] = event
    answer = _post(url, key_file, fields)
    try:
        return int(answer["id"])
    except (KeyError, TypeError, ValueError):
        raise RuntimeError(f"m0.publish: admin API {url} answered {answer!r:.120}, "
                           "not an event id") from None


def publish_many(url, key_file, events):
    """Publish (channel, data, event) tuples, checked by m0.publish_many, in
    one POST of a JSON array; return their ids, in order."""
    body = []
    for channel, data, event in events:
        body.append({"channel": channel, "data": data})
        if event is not None:
            body[-1]["event"] = event
    answer = _post(url, key_file, body)
    try:
        ids = [int(i) for i in answer["ids"]]
    except (KeyError, TypeError, ValueError):
        ids = None
    if ids is None or len(ids) != len(events):
        raise RuntimeError(f"m0.publish_many: admin API {url} answered {answer!r:.120}, "
                           "not an id for each event")
    return ids


def _post(url, key_file, fields):
    """POST ``fields`` as JSON to the admin API's /publish; its JSON answer."""
    target = endpoint(url)
    # UnicodeEncodeError (a ValueError) for a lone surrogate, before sending.
    body = json.dumps(fields, ensure_ascii=False).encode("utf-8")
    headers = {"Content-Type": "application/json"}
    if key_file:
        headers["Authorization"] = "Bearer " + read_key(key_file)
    # The admin listener is on loopback or a private network: asked
    # directly, never through a proxy that http_proxy happens to name.
    parts = urlsplit(target)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=TIMEOUT)
    try:
        conn.connect()
        conn.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        conn.request("POST", parts.path, body=body, headers=headers)
        answer = conn.getresponse()
        text, status, phrase = answer.read(), answer.status, answer.reason
    except (OSError, http.client.HTTPException) as e:  # refused, unreachable, timed out
        raise RuntimeError(f"m0.publish: admin API {url} cannot be reached: {e}") from None
    finally:
        conn.close()
    if not 200 <= status < 300:
        reason = text.decode("utf-8", "replace").strip() or phrase
        if status in (400, 413):
            raise ValueError(f"m0.publish: {reason}")
        raise RuntimeError(f"m0.publish: admin API {url} refused ({status}): {reason}")
    try:
        return json.loads(text)
    except ValueError:
        raise RuntimeError(f"m0.publish: admin API {url} answered {text[:120]!r}, "
                           "not JSON") from None
