"""m0.publish outside m0serve: the Redis bus from a plain Python process.

A management command or a cron job runs with no m0serve around it. With
``M0_BUS`` set to the URL the servers were started with (``--bus
redis://HOST[:PORT][/DB]`` or ``redis+unix:///PATH[?db=N]``),
:func:`m0.publish` runs the same publish script the servers run,
``src/bus/publish.lua`` (``M0_PUBLISH_LUA`` names another copy of it), on
that Redis, through Debian's ``python3-redis``: the next id of the shared
counter, the event appended to its channel's stream, and published to every
server that holds the channel. The stream is trimmed to the ``--history``
the servers set in Redis (64 if none has).

An event larger than ``M0_MAX_EVENT_SIZE`` (default 262144, the servers'
default ``--max-event-size``) is refused with ValueError; an unreachable
Redis, or one that refuses the script, is RuntimeError: never silence.
"""

import os
import threading
from urllib.parse import urlsplit

# The keys and the pub/sub channel, as src/bus/hiredis.hpp names them.
COUNTER_KEY = "m0:id"
EPOCH_KEY = "m0:epoch"
HISTORY_KEY = "m0:history"
DEFAULT_MAX_EVENT_SIZE = 256 * 1024
_ID_DIGITS = 20  # the widest id, as the server counts an event's size

_SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                       os.pardir, os.pardir, "bus", "publish.lua")
_lock = threading.Lock()
_clients = {}  # url -> (redis.Redis, its registered Script); under _lock


def parse_url(url):
    """Return a dict of redis.Redis arguments for an m0serve --bus URL.

    Raises ValueError naming what is wrong, as m0serve does for --bus."""
    parts = urlsplit(url)
    db = 0
    if parts.scheme == "redis+unix":
        if not parts.path.startswith("/"):
            raise ValueError(f"M0_BUS {url}: wants redis+unix:///PATH[?db=N]")
        if parts.query:
            key, _, value = parts.query.partition("=")
            if key != "db" or not value.isdigit():
                raise ValueError(f"M0_BUS {url}: the only query is db=N")
            db = int(value)
        return {"unix_socket_path": parts.path, "db": db}
    if parts.scheme != "redis" or not parts.hostname or "@" in parts.netloc:
        raise ValueError(f"M0_BUS {url}: wants redis://HOST[:PORT][/DB] "
                         "or redis+unix:///PATH[?db=N]")
    path = parts.path.lstrip("/")
    if path:
        if not path.isdigit():
            raise ValueError(f"M0_BUS {url}: the database after '/' must be a number")
        db = int(path)
    try:
        port = parts.port or 6379
    except ValueError:
        raise ValueError(f"M0_BUS {url}: the port must be a number") from None
    return {"host": parts.hostname, "port": port, "db": db}


def encoded_size(event, data):
    """The bytes one hold is written for the event (its id at 20 digits),
    as the server's sse::encoded_size counts them; ``data`` has LF line ends."""
    size = 4 + _ID_DIGITS + 1
    if event:
        size += 7 + len(event.encode("utf-8")) + 1
    lines = data.split("\n")
    return size + sum(6 + len(line.encode("utf-8")) + 1 for line in lines) + 1


def _client(url):
    with _lock:
        if url not in _clients:
            import redis  # Debian's python3-redis

            kwargs = parse_url(url)
            path = os.environ.get("M0_PUBLISH_LUA", _SCRIPT)
            try:
                with open(path, encoding="utf-8") as f:
                    source = f.read()
            except OSError as e:
                raise RuntimeError(f"m0.publish: cannot read the publish script {path}: {e}") from None
            client = redis.Redis(socket_timeout=2, socket_connect_timeout=2, **kwargs)
            _clients[url] = (client, client.register_script(source), kwargs["db"])
        return _clients[url]


def publish(url, channel, data, event=None):
    """Publish on the Redis bus at ``url``; return the event's id.

    ``channel``, ``event`` and ``data`` are already checked and normalised by
    m0.publish. Raises ValueError for an event over M0_MAX_EVENT_SIZE, and
    RuntimeError when Redis cannot be reached or refuses the script."""
    limit = int(os.environ.get("M0_MAX_EVENT_SIZE", DEFAULT_MAX_EVENT_SIZE))
    size = encoded_size(event, data)
    if size > limit:
        raise ValueError(f"event is {size} bytes, over --max-event-size {limit}")
    import redis

    client, script, db = _client(url)
    keys = [COUNTER_KEY, EPOCH_KEY, "m0:s:" + channel, HISTORY_KEY, "m0:m:" + channel]
    # "" for the history: the length the servers set (HISTORY_KEY).
    args = [f"m0:{db}:e:{channel}", "", event or "", data]
    try:
        return int(script(keys=keys, args=args, client=client))
    except redis.exceptions.RedisError as e:
        raise RuntimeError(f"m0.publish: redis bus {url}: {e}") from None
