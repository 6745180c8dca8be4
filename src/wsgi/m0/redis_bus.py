"""m0.publish outside m0serve: the Redis bus from a plain Python process.

A management command or a cron job runs with no m0serve around it. With
``M0_BUS`` set to the URL the servers were started with (``--bus
redis://HOST[:PORT][/DB]``, ``redis+unix:///PATH[?db=N]`` or
``redis+sentinel://HOST:PORT,.../MASTER[/DB]``, each with
``USER:PASSWORD@`` when Redis wants one; ``M0_BUS_PASSWORD_FILE`` names a
file whose first line is the password, as ``--bus-password-file`` does),
:func:`m0.publish` runs the same publish script the servers run,
``src/bus/publish.lua`` (``M0_PUBLISH_LUA`` names another copy of it), on
that Redis, through Debian's ``python3-redis``: the next id of the shared
counter, the event appended to its channel's stream, and published to every
server that holds the channel (a batch from :func:`publish_many`: one
message a run of it on one channel, read by the servers as they read the
server's own batches; publish.lua's header). The stream is trimmed to the
``--history`` the servers set in Redis (64 if none has).

An event larger than ``M0_MAX_EVENT_SIZE`` (default 262144, the servers'
default ``--max-event-size``) is refused with ValueError; an unreachable
Redis, or one that refuses the script, is RuntimeError: never silence.
"""

import json
import os
import re
import threading
from urllib.parse import unquote, urlsplit

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


def _hostport(item, default_port, url):
    """(host, port) of HOST[:PORT] or [V6][:PORT]."""
    parts = urlsplit("//" + item)
    try:
        port = parts.port or default_port
    except ValueError:
        raise ValueError(f"M0_BUS {url}: the port must be a number") from None
    if not parts.hostname:
        raise ValueError(f"M0_BUS {url}: no host")
    return parts.hostname, port


def _decoded(text, what, shown):
    """``text`` percent-decoded; a '%' not followed by two hex digits is refused."""
    if re.search(r"%(?![0-9A-Fa-f]{2})", text):
        raise ValueError(f"M0_BUS {shown}: a '%' in the {what} not followed by two hex digits")
    return unquote(text, errors="strict")


def masked(url):
    """``url`` with its password shown as ``***``, as m0serve logs it."""
    scheme, sep, rest = url.partition("://")
    authority, slash, path = rest.partition("/")
    userinfo, at, hosts = authority.rpartition("@")
    if not sep or not at or ":" not in userinfo:
        return url
    return f"{scheme}://{userinfo.split(':', 1)[0]}:***@{hosts}{slash}{path}"


def parse_url(url, password_file=None):
    """Return a dict of redis.Redis arguments for an m0serve --bus URL.

    ``redis://[USER:PASSWORD@]HOST[:PORT][/DB]``,
    ``redis+unix://[USER:PASSWORD@]/PATH[?db=N]`` or
    ``redis+sentinel://[USER:PASSWORD@]HOST[:PORT][,HOST[:PORT]...]/MASTER[/DB]``
    (then the dict has ``sentinels`` and ``service``). USER and PASSWORD are
    percent-decoded; ``password_file`` (M0_BUS_PASSWORD_FILE) gives the
    password instead, its first line. Raises ValueError naming what is wrong,
    as m0serve does for --bus, the password masked."""
    shown = masked(url)
    scheme, sep, rest = url.partition("://")
    authority, slash, path = rest.partition("/")
    userinfo, at, hosts = authority.rpartition("@")
    creds = {}
    if at:
        user, colon, password = userinfo.partition(":")
        if user:
            creds["username"] = _decoded(user, "user", shown)
        if colon:
            if not password:
                raise ValueError(f"M0_BUS {shown}: an empty password after ':'")
            creds["password"] = _decoded(password, "password", shown)
    if password_file:
        if "password" in creds:
            raise ValueError(f"M0_BUS {shown} carries a password, and "
                             "M0_BUS_PASSWORD_FILE too; give it once")
        try:
            with open(password_file, encoding="utf-8") as f:
                line = f.readline().rstrip("\r\n")
        except OSError as e:
            raise ValueError(f"M0_BUS_PASSWORD_FILE: cannot read {password_file}: "
                             f"{e.strerror}") from None
        if not line:
            raise ValueError(f"M0_BUS_PASSWORD_FILE: {password_file}: the first line is "
                             "empty (it is the password)")
        creds["password"] = line
    db = 0
    if scheme == "redis+unix" and sep:
        parts = urlsplit("redis+unix:///" + path)
        if hosts or not slash or not parts.path.startswith("/") or parts.path == "/":
            raise ValueError(f"M0_BUS {shown}: wants redis+unix:///PATH[?db=N]")
        if parts.query:
            key, _, value = parts.query.partition("=")
            if key != "db" or not value.isdigit():
                raise ValueError(f"M0_BUS {shown}: the only query is db=N")
            db = int(value)
        return {"unix_socket_path": parts.path, "db": db, **creds}
    if scheme == "redis+sentinel" and sep:
        sentinels = [_hostport(item, 26379, shown) for item in hosts.split(",")]
        service, _, dbtext = path.partition("/")
        if not service:
            raise ValueError(f"M0_BUS {shown}: no master name after the sentinels "
                             "(.../MASTER[/DB])")
        if dbtext:
            if not dbtext.isdigit():
                raise ValueError(f"M0_BUS {shown}: the database after the master's name "
                                 "must be a number")
            db = int(dbtext)
        return {"sentinels": sentinels, "service": service, "db": db, **creds}
    if scheme != "redis" or not sep or not hosts:
        raise ValueError(f"M0_BUS {shown}: wants redis://[USER:PASSWORD@]HOST[:PORT][/DB], "
                         "redis+unix://[USER:PASSWORD@]/PATH[?db=N] or "
                         "redis+sentinel://[USER:PASSWORD@]HOST:PORT[,...]/MASTER[/DB]")
    if path:
        if not path.isdigit():
            raise ValueError(f"M0_BUS {shown}: the database after '/' must be a number")
        db = int(path)
    host, port = _hostport(hosts, 6379, shown)
    return {"host": host, "port": port, "db": db, **creds}


def encoded_size(event, data):
    """The most bytes one subscriber is written for the event (its id at 20
    digits), as the server's codec measures it (src/server/codec.cpp): its SSE
    event or its WebSocket message, whichever is longer; ``data`` has LF line
    ends."""
    size = 4 + _ID_DIGITS + 1
    if event:
        size += 7 + len(event.encode("utf-8")) + 1
    lines = data.split("\n")
    sse = size + sum(6 + len(line.encode("utf-8")) + 1 for line in lines) + 1
    # {"id":"N","event":E,"data":D} in one text frame (http/websocket.hpp).
    envelope = {"id": "9" * _ID_DIGITS}
    if event:
        envelope["event"] = event
    envelope["data"] = data
    n = len(json.dumps(envelope, ensure_ascii=False, separators=(",", ":")).encode("utf-8", "replace"))
    return max(sse, n + (2 if n < 126 else 4 if n <= 0xFFFF else 10))


def _client(url):
    with _lock:
        if url not in _clients:
            import redis  # Debian's python3-redis

            kwargs = parse_url(url, os.environ.get("M0_BUS_PASSWORD_FILE"))
            path = os.environ.get("M0_PUBLISH_LUA", _SCRIPT)
            try:
                with open(path, encoding="utf-8") as f:
                    source = f.read()
            except OSError as e:
                raise RuntimeError(f"m0.publish: cannot read the publish script {path}: {e}") from None
            timeouts = {"socket_timeout": 2, "socket_connect_timeout": 2}
            if "sentinels" in kwargs:
                # The master the sentinels name, asked again when a link to it
                # fails or it answers READONLY (it became a replica).
                from redis.sentinel import Sentinel

                sentinels = kwargs.pop("sentinels")
                service = kwargs.pop("service")
                client = Sentinel(sentinels, sentinel_kwargs=timeouts).master_for(
                    service, **timeouts, **kwargs)
            else:
                client = redis.Redis(**timeouts, **kwargs)
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
    try:
        return int(script(**_call(db, channel, data, event), client=client))
    except redis.exceptions.RedisError as e:
        raise RuntimeError(f"m0.publish: redis bus {masked(url)}: {e}") from None


def _call(db, channel, data, event):
    """The publish script's keys and arguments for one event."""
    keys = [COUNTER_KEY, EPOCH_KEY, "m0:s:" + channel, HISTORY_KEY, "m0:m:" + channel]
    # "" for the history: the length the servers set (HISTORY_KEY).
    args = [f"m0:{db}:e:{channel}", "", event or "", data]
    return {"keys": keys, "args": args}


def publish_many(url, events):
    """Publish (channel, data, event) tuples, checked by m0.publish_many, in
    one call of the publish script (one round trip, one atomic step: the
    shared counter numbers them consecutively in the batch's order); return
    their ids. RuntimeError when Redis fails: then no event was taken, or
    (the answer lost) whether they were is unknown."""
    limit = int(os.environ.get("M0_MAX_EVENT_SIZE", DEFAULT_MAX_EVENT_SIZE))
    for i, (channel, data, event) in enumerate(events):
        size = encoded_size(event, data)
        if size > limit:
            raise ValueError(f"event {i}: event is {size} bytes, over --max-event-size {limit}")
    import redis

    client, script, db = _client(url)
    # The script's batch layout: every event's 5 keys, then its 5 arguments.
    keys, args = [], []
    for channel, data, event in events:
        call = _call(db, channel, data, event)
        keys += call["keys"]
        args += call["args"] + [""]  # not raw
    try:
        first = int(script(keys=keys, args=args, client=client))
    except redis.exceptions.RedisError as e:
        raise RuntimeError(f"m0.publish_many: redis bus {masked(url)}: {e} "
                           f"(none of the batch's {len(events)} events answered as taken)") from None
    return list(range(first, first + len(events)))
