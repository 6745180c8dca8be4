"""Grants: authorization that travels from a Django view to the mojo mount.

A view authorizes (session, membership), then hands the browser a stream URL
carrying a grant the server checks without asking Python:

    from m0 import stream_url
    return JsonResponse({"url": stream_url("/native/live", f"notifications_user_{uid}", 300)})

The format is the one in src/grant/grant.hpp, where the C++ verifier lives:

    token   = B64(payload) "." B64(HMAC-SHA256(secret, payload))
    payload = "v1\\n" kid "\\n" expires "\\n" channel ("," channel)*

B64 is base64url without "=" padding and with zero trailing bits, so each
grant has exactly one spelling. kid is [A-Za-z0-9_-]{1,32}; expires is unix
seconds in canonical decimal; a channel is 1..256 bytes of UTF-8 without CR,
LF, NUL or ",", without a space or tab as its first or last byte (the server
trims those around M0-Channel's commas), not starting with "m0.slot.", and
none repeats; the token is at most 4096 bytes. src/grant/vectors.txt pins the format for both sides.

Keys come from the file named by M0_GRANT_KEY_FILE (the server's
--grant-key-file): one `KID SECRET_HEX` a line (64+ hex digits), "#" comments
and blank lines allowed; the first key signs, all of them verify.

Standard library only; every function may be called from any thread.
"""

import base64
import binascii
import hashlib
import hmac
import math
import os
import re
import time

__all__ = ["GrantError", "load_keys", "parse_keys", "sign_grant", "verify_grant", "stream_url"]

MAX_TOKEN_SIZE = 4096
MAX_CHANNEL_SIZE = 256
MIN_SECRET_SIZE = 32
INT64_MAX = 2**63 - 1
RESERVED_PREFIX = b"m0.slot."
KEY_FILE_ENV = "M0_GRANT_KEY_FILE"

# The one short phrase per verdict; the same words as m0::grant::reason().
REASONS = {
    "ok": "grant ok",
    "malformed": "malformed grant",
    "unknown_key": "unknown grant key",
    "bad_signature": "bad grant signature",
    "expired": "grant expired",
}

_KID = re.compile(r"[A-Za-z0-9_-]{1,32}\Z")
_B64 = re.compile(rb"[A-Za-z0-9_-]*\Z")
_EXPIRES = re.compile(rb"(?:0|[1-9][0-9]{0,18})\Z")
_HEX = re.compile(r"(?:[0-9A-Fa-f]{2})*\Z")


class GrantError(ValueError):
    """A refused grant. `verdict` is one of "malformed", "unknown_key",
    "bad_signature", "expired"; str(error) is the matching reason phrase."""

    def __init__(self, verdict):
        super().__init__(REASONS[verdict])
        self.verdict = verdict


# ---- keys ----------------------------------------------------------------

def parse_keys(text):
    """Return the keys in key-file `text` as a list of (kid, secret bytes),
    the signing key first. Raise ValueError with one line ("line N: ...",
    or "no keys") on a line that is not `KID SECRET_HEX`, a bad kid, a
    secret that is not hex or shorter than 32 bytes, a duplicate kid, or no
    key at all. The same rules as m0::grant::KeyRing::from_text()."""
    keys = []
    seen = set()
    for number, line in enumerate(text.split("\n"), 1):
        line = line[:-1] if line.endswith("\r") else line
        line = line.strip(" \t")
        if not line or line.startswith("#"):
            continue
        fields = [f for f in re.split(r"[ \t]+", line) if f]
        where = "line %d: " % number
        if len(fields) != 2:
            raise ValueError(where + "expected `KID SECRET_HEX`")
        kid, hex_secret = fields
        if not _KID.match(kid):
            raise ValueError(where + "bad key id (want [A-Za-z0-9_-]{1,32})")
        if not _HEX.match(hex_secret):
            raise ValueError(where + "secret is not hex (an even number of 0-9a-fA-F digits)")
        secret = bytes.fromhex(hex_secret)
        if len(secret) < MIN_SECRET_SIZE:
            raise ValueError(where + "secret is %d bytes, need at least 32 (64 hex digits)"
                             % len(secret))
        if kid in seen:
            raise ValueError(where + "duplicate key id " + kid)
        seen.add(kid)
        keys.append((kid, secret))
    if not keys:
        raise ValueError("no keys")
    return keys


_cache = {}  # path -> ((mtime_ns, size, inode), keys); replaced whole, so thread-safe


def load_keys(path=None):
    """Return the keys of the key file `path` (default: $M0_GRANT_KEY_FILE) as
    a list of (kid, secret bytes), the signing key first. The file is re-read
    when it changes (rotation without a restart). Raise ValueError when no
    path is given and the variable is unset, the file cannot be read, or its
    content is refused (see parse_keys); the message names the file."""
    if path is None:
        path = os.environ.get(KEY_FILE_ENV)
        if not path:
            raise ValueError("no grant key file: pass a path or set " + KEY_FILE_ENV)
    path = os.fspath(path)
    try:
        st = os.stat(path)
        stamp = (st.st_mtime_ns, st.st_size, st.st_ino)
        hit = _cache.get(path)
        if hit is not None and hit[0] == stamp:
            return hit[1]
        with open(path, "rb") as f:
            data = f.read((1 << 20) + 1)
    except OSError as e:
        raise ValueError("%s: cannot open: %s" % (path, e.strerror or e)) from None
    if len(data) > 1 << 20:
        raise ValueError("%s: larger than 1 MiB, not a key file" % path)
    try:
        keys = parse_keys(data.decode("utf-8", "surrogateescape"))
    except ValueError as e:
        raise ValueError("%s: %s" % (path, e)) from None
    _cache[path] = (stamp, keys)
    return keys


def _ring(keys):
    if keys is None:
        return load_keys()
    keys = list(keys)
    if not keys:
        raise ValueError("no keys")
    return keys


# ---- encoding --------------------------------------------------------------

def _b64encode(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=")


def _b64decode(text):
    """Bytes of canonical unpadded base64url `text` (bytes), or None."""
    if len(text) % 4 == 1 or not _B64.match(text):
        return None
    data = base64.urlsafe_b64decode(text + b"=" * (-len(text) % 4))
    # RFC 4648 3.5: nonzero pad bits are a second spelling of the same bytes.
    return data if _b64encode(data) == text else None


def _channel_list(channels):
    """Channel names as UTF-8 bytes: a str is one name or several joined by
    "," (as in M0-Channel); a list holds one name per item (a "," in an item
    is then refused by _valid_channel)."""
    if isinstance(channels, str):
        return [_utf8(name) for name in channels.split(",")]
    if isinstance(channels, bytes):
        raise TypeError("channels is a str or a list of str")
    return [_utf8(name) for name in channels]


def _utf8(name):
    if not isinstance(name, str):
        raise TypeError("a channel is a str, not %s" % type(name).__name__)
    return name.encode("utf-8")  # a lone surrogate: UnicodeEncodeError, a ValueError


def _valid_channel(name):
    return (0 < len(name) <= MAX_CHANNEL_SIZE
            and not name.startswith(RESERVED_PREFIX)
            and name[:1] not in (b" ", b"\t") and name[-1:] not in (b" ", b"\t")
            and not any(c in name for c in (b"\r", b"\n", b"\0", b",")))


def _payload(kid, expires, names):
    return b"v1\n" + kid.encode("ascii") + b"\n" + str(expires).encode("ascii") + b"\n" + b",".join(names)


def _mac(secret, data):
    return hmac.new(secret, data, hashlib.sha256).digest()


def _sign(key, names, expires):
    kid, secret = key
    if not isinstance(kid, str) or not _KID.match(kid):
        raise ValueError("bad key id %r" % (kid,))
    if len(secret) < MIN_SECRET_SIZE:
        raise ValueError("key secret shorter than 32 bytes")
    if not 0 <= expires <= INT64_MAX:
        raise ValueError("expiry out of range")
    if not names:
        raise ValueError("no channel")
    for name in names:
        if not _valid_channel(name):
            raise ValueError("bad channel name %r" % name.decode("utf-8", "replace"))
    if len(set(names)) != len(names):
        raise ValueError("duplicate channel")
    payload = _payload(kid, expires, names)
    token = (_b64encode(payload) + b"." + _b64encode(_mac(secret, payload))).decode("ascii")
    if len(token) > MAX_TOKEN_SIZE:
        raise ValueError("grant over 4096 bytes: too many or too long channels")
    return token


# ---- public API ------------------------------------------------------------

def sign_grant(channels, ttl, *, keys=None, now=None):
    """Return a grant token for `channels` valid for `ttl` seconds from `now`
    (default: time.time()), signed with the first of `keys` (default:
    load_keys()). `channels` is a str (one name, or names joined by ",") or
    a list of str. expires = floor(now) + ceil(ttl). Raise ValueError when
    ttl <= 0, a channel is empty, longer than 256 bytes, holds CR/LF/NUL,
    begins or ends with a space or tab, starts with "m0.slot." or repeats, the token would pass 4096 bytes, or
    the keys cannot be loaded; TypeError when a channel is not a str."""
    if isinstance(ttl, bool) or not isinstance(ttl, (int, float)):
        raise TypeError("ttl is a number of seconds")
    if not ttl > 0 or math.isinf(ttl):
        raise ValueError("ttl must be a positive number of seconds")
    if now is None:
        now = time.time()
    expires = math.floor(now) + math.ceil(ttl)
    return _sign(_ring(keys)[0], _channel_list(channels), expires)


def verify_grant(token, *, keys=None, now=None):
    """Return the channels (list of str, in grant order) of `token` when it is
    valid at `now` (default: time.time()) for `keys` (default: load_keys()).
    Raise GrantError (a ValueError) with .verdict and the reason phrase:
    "malformed" (size, shape, encoding or payload not canonical),
    "unknown_key", "bad_signature" (compared in constant time), "expired"
    (expires <= now), in that order of checks, as the C++ verify(). A key
    file that cannot be loaded raises a plain ValueError (see load_keys)."""
    ring = _ring(keys)
    if now is None:
        now = time.time()
    if isinstance(token, str):
        try:
            token = token.encode("ascii")
        except UnicodeEncodeError:
            raise GrantError("malformed") from None
    if not token or len(token) > MAX_TOKEN_SIZE or b"." not in token:
        raise GrantError("malformed")
    text_payload, _, text_mac = token.partition(b".")
    payload = _b64decode(text_payload)
    mac = _b64decode(text_mac)  # a second "." fails here
    if payload is None or mac is None or len(mac) != 32:
        raise GrantError("malformed")
    fields = _parse_payload(payload)
    if fields is None:
        raise GrantError("malformed")
    kid, expires, names = fields

    secret = next((s for k, s in ring if k == kid), None)  # the first, as KeyRing::find
    if secret is None:
        raise GrantError("unknown_key")
    if not hmac.compare_digest(_mac(secret, payload), mac):
        raise GrantError("bad_signature")
    if expires <= now:
        raise GrantError("expired")
    return [name.decode("utf-8", "surrogateescape") for name in names]


def _parse_payload(payload):
    """(kid, expires, channel bytes list) of a canonical payload, or None."""
    parts = payload.split(b"\n", 3)
    if len(parts) != 4 or parts[0] != b"v1":
        return None
    kid, expires, channels = parts[1], parts[2], parts[3]
    try:
        kid = kid.decode("ascii")
    except UnicodeDecodeError:
        return None
    if not _KID.match(kid) or not _EXPIRES.match(expires):
        return None
    expires = int(expires)
    if expires > INT64_MAX:
        return None
    names = channels.split(b",")
    if not all(_valid_channel(n) for n in names) or len(set(names)) != len(names):
        return None
    return kid, expires, names


def stream_url(path, channels, ttl, **kw):
    """Return `path` with the grant for `channels` (see sign_grant, which
    takes the keyword arguments and raises its errors) as the query
    parameter "grant": f"{path}?grant={token}", or "&grant=" when `path`
    already has a query. The token is URL-safe as is."""
    token = sign_grant(channels, ttl, **kw)
    return "%s%sgrant=%s" % (path, "&" if "?" in path else "?", token)
