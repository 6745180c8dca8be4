#!/usr/bin/env python3
"""Generate src/grant/vectors.txt, the grant test vectors both sides check.

    /usr/bin/python3 src/grant/make_vectors.py            # print to stdout
    /usr/bin/python3 src/grant/make_vectors.py --write    # (re)write vectors.txt
    /usr/bin/python3 src/grant/make_vectors.py --check    # exit 1 if it differs

Fixed keys, fixed times: the output never changes unless this file does.
The tokens are built here by hand from the format in src/grant/grant.hpp
(standard library only, no import of either implementation), so the C++
verifier (src/grant/test_grant.cpp) and the Python one
(src/wsgi/tests/test_grant.py) are both checked against a third spelling.

File format, one record a line (blank lines and "# ..." ignored):

    key KID SECRET_HEX
        The key ring, in order: the first key signs, every key verifies.
    vector NAME now=UNIX expect=VERDICT [channels=A,B,...] token=TOKEN
        verify(ring, TOKEN, now) must give VERDICT (ok, malformed,
        unknown_key, bad_signature, expired); on ok the grant's channels
        must be exactly A,B,... in that order. Fields are separated by one
        space; every value is percent-decoded (%HH) after splitting, so a
        token or a channel may hold any byte.
"""

import base64
import hashlib
import hmac
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "vectors.txt")


def secret(label):
    return hashlib.sha256(b"m0serve grant test key " + label.encode()).digest()


RING = [("k2026", secret("k2026")), ("k2025", secret("k2025"))]  # k2026 signs
OUTSIDE = ("k2024", secret("k2024"))  # retired: not in the ring
CURRENT, OLD = RING
NOW = 1700000000
EXP = NOW + 600
INT64_MAX = 2**63 - 1


def b64(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def payload(kid, expires, channels):
    """The canonical payload; expires and channels are taken as given text."""
    if isinstance(channels, list):
        channels = ",".join(channels)
    return b"v1\n" + kid.encode() + b"\n" + str(expires).encode() + b"\n" + channels.encode()


def mac(key, data):
    return hmac.new(key[1], data, hashlib.sha256).digest()


def token(key, raw_payload, raw_mac=None):
    if raw_mac is None:
        raw_mac = mac(key, raw_payload)
    return b64(raw_payload) + "." + b64(raw_mac)


def grant(key, channels, expires=EXP):
    return token(key, payload(key[0], expires, channels))


def flip_trailing_bits(text):
    """Same bytes, other text: set the unused low bits of the last character."""
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
    unused = {0: 0, 2: 4, 3: 2}[len(text) % 4]
    assert unused, "no trailing bits in a length that is 0 mod 4"
    last = alphabet.index(text[-1])
    changed = text[:-1] + alphabet[last | 1]
    assert changed != text
    pad = "=" * (-len(text) % 4)
    assert base64.urlsafe_b64decode(changed + pad) == base64.urlsafe_b64decode(text + pad)
    return changed


def fill_channels(size):
    """Distinct channels of at most 256 bytes whose comma-joined size is `size`."""
    names = []
    while size > 0:
        n = size if size <= 256 else min(256, size - 6)  # leave room for ",cNNN"
        prefix = "c%03d" % len(names)
        assert n >= len(prefix)
        names.append(prefix + "x" * (n - len(prefix)))
        size -= n + (1 if size > n else 0)
    return names


def pct(value):
    """Percent-encode every byte outside printable ASCII, and space and '%'."""
    if isinstance(value, str):
        value = value.encode("utf-8")
    return "".join(chr(b) if 0x21 <= b <= 0x7E and b != 0x25 else "%%%02X" % b for b in value)


def vectors():
    v = []  # (name, now, expect, channels or None, token)

    def add(name, expect, tok, channels=None, now=NOW):
        v.append((name, now, expect, channels, tok))

    news = grant(CURRENT, ["news"])
    news_payload, news_mac = news.split(".")
    multi = ["notate_submission_42", "notifications_user_7", "news"]

    # --- good grants
    add("valid-single-channel", "ok", news, ["news"])
    add("valid-multi-channel", "ok", grant(CURRENT, multi), multi)
    add("valid-rotated-key", "ok", grant(OLD, ["news"]), ["news"])
    add("valid-one-second-left", "ok", news, ["news"], now=EXP - 1)
    add("valid-channel-256-bytes", "ok", grant(CURRENT, ["w" * 256]), ["w" * 256])
    add("valid-channel-utf8-with-space", "ok", grant(CURRENT, ["salle de réunion"]),
        ["salle de réunion"])
    add("valid-max-expiry", "ok", grant(CURRENT, ["news"], INT64_MAX), ["news"])
    head = len(payload("k2026", EXP, ""))
    wide = fill_channels(3039 - head)  # 3039-byte payload -> 4052 + 1 + 43 = 4096
    wide_token = grant(CURRENT, wide)
    assert len(wide_token) == 4096
    add("valid-token-4096-bytes", "ok", wide_token, wide)

    # --- expired (checked last, only on an authentic grant)
    add("expired-at-expiry", "expired", news, now=EXP)
    add("expired-past-expiry", "expired", news, now=EXP + 1)
    add("expired-zero", "expired", grant(CURRENT, ["news"], 0))
    add("expired-rotated-key", "expired", grant(OLD, ["news"]), now=EXP + 3600)

    # --- forged: payload or mac edited, the mac no longer matches
    raw = payload("k2026", EXP, ["news"])
    bad = bytearray(mac(CURRENT, raw))
    bad[0] ^= 0x01
    add("forged-mac-bit-flipped", "bad_signature", token(CURRENT, raw, bytes(bad)))
    add("forged-mac-unknown-secret", "bad_signature", token(OUTSIDE, raw))
    add("forged-mac-other-ring-key", "bad_signature", token(OLD, raw))
    add("forged-mac-all-zero", "bad_signature", token(CURRENT, raw, bytes(32)))
    old_mac = mac(CURRENT, raw)
    add("channel-swapped", "bad_signature",
        token(CURRENT, payload("k2026", EXP, ["admin"]), old_mac))
    add("channel-added", "bad_signature",
        token(CURRENT, payload("k2026", EXP, ["news", "admin"]), old_mac))
    multi_raw = payload("k2026", EXP, multi)
    add("channel-dropped", "bad_signature",
        token(CURRENT, payload("k2026", EXP, multi[:2]), mac(CURRENT, multi_raw)))
    add("channels-reordered", "bad_signature",
        token(CURRENT, payload("k2026", EXP, multi[::-1]), mac(CURRENT, multi_raw)))
    add("expiry-extended", "bad_signature",
        token(CURRENT, payload("k2026", EXP + 86400, ["news"]), old_mac))
    add("kid-swapped", "bad_signature", token(CURRENT, payload("k2025", EXP, ["news"]), old_mac))

    # --- unknown key
    add("unknown-kid", "unknown_key", grant(OUTSIDE, ["news"]))
    add("unknown-kid-expired", "unknown_key", grant(OUTSIDE, ["news"]), now=EXP + 1)

    # --- not a token at all
    add("empty", "malformed", "")
    add("garbage-text", "malformed", "not a grant")
    add("garbage-dots", "malformed", "...")
    add("garbage-lone-dot", "malformed", ".")
    add("garbage-binary", "malformed", b"\x00\xff\xfe.\x01\x80")
    add("garbage-percent-encoded", "malformed", news.replace("-", "%2D").replace("d", "%64"))

    # --- truncated
    add("truncated-mac-one-char", "malformed", news[:-1])
    add("truncated-mac-half", "malformed", news_payload + "." + news_mac[:22])
    add("truncated-at-dot", "malformed", news_payload + ".")
    add("truncated-no-mac", "malformed", news_payload)
    add("truncated-payload", "malformed", news[:10])
    add("mac-31-bytes", "malformed", token(CURRENT, raw, old_mac[:31]))
    add("mac-33-bytes", "malformed", token(CURRENT, raw, old_mac + b"\x00"))

    # --- re-encoded: same bytes, or nearly, in another spelling
    sports_raw = payload("k2026", EXP, ["sports"])  # 26 bytes: the text has spare bits
    sports = grant(CURRENT, ["sports"])
    sports_payload, sports_mac = sports.split(".")
    assert len(sports_payload) % 4 and len(sports_mac) % 4
    add("reencoded-control-valid", "ok", sports, ["sports"])
    add("reencoded-mac-padding", "malformed", sports + "=")
    padded = base64.urlsafe_b64encode(sports_raw).decode()
    assert padded.endswith("=")
    add("reencoded-payload-padding", "malformed", padded + "." + sports_mac)
    add("reencoded-mac-trailing-bits", "malformed",
        sports_payload + "." + flip_trailing_bits(sports_mac))
    add("reencoded-payload-trailing-bits", "malformed",
        flip_trailing_bits(sports_payload) + "." + sports_mac)
    for i in range(1000):  # find a grant whose text has "-" or "_" to respell
        std = grant(CURRENT, ["news-%d" % i])
        if "-" in std or "_" in std:
            break
    assert "-" in std or "_" in std
    # 32 characters + "A": six zero bits that decode to nothing in a lax decoder
    assert len(news_payload) % 4 == 0
    add("reencoded-payload-extra-zero-char", "malformed", news_payload + "A." + news_mac)
    add("reencoded-standard-alphabet", "malformed", std.replace("-", "+").replace("_", "/"))
    add("extra-dot-segment", "malformed", news + ".AAAA")
    add("trailing-newline", "malformed", news + "\n")
    add("leading-space", "malformed", " " + news)
    add("inner-space", "malformed", news_payload + " ." + news_mac)

    # --- signed with the ring's own key, but the payload is not canonical
    def signed(name, text):
        add(name, "malformed", token(CURRENT, text))

    signed("payload-version-v2", b"v2" + raw[2:])
    signed("payload-version-missing", raw[3:])
    signed("payload-crlf", raw.replace(b"\n", b"\r\n"))
    signed("payload-expiry-leading-zero", payload("k2026", "0%d" % EXP, "news"))
    signed("payload-expiry-plus-sign", payload("k2026", "+%d" % EXP, "news"))
    signed("payload-expiry-negative", payload("k2026", "-1", "news"))
    signed("payload-expiry-fraction", payload("k2026", "%d.5" % EXP, "news"))
    signed("payload-expiry-empty", payload("k2026", "", "news"))
    signed("payload-expiry-overflow", payload("k2026", str(INT64_MAX + 1), "news"))
    signed("payload-expiry-space", payload("k2026", " %d" % EXP, "news"))
    signed("payload-no-channel", payload("k2026", EXP, ""))
    signed("payload-channel-line-missing", b"v1\nk2026\n%d" % EXP)
    signed("payload-empty-channel", payload("k2026", EXP, "news,,weather"))
    signed("payload-leading-comma", payload("k2026", EXP, ",news"))
    signed("payload-trailing-comma", payload("k2026", EXP, "news,"))
    signed("payload-duplicate-channel", payload("k2026", EXP, "news,weather,news"))
    signed("payload-channel-257-bytes", payload("k2026", EXP, "w" * 257))
    signed("payload-channel-cr", payload("k2026", EXP, "news\rx"))
    signed("payload-channel-nul", payload("k2026", EXP, "news\x00x"))
    signed("payload-extra-line", payload("k2026", EXP, "news\nextra"))
    signed("payload-reserved-channel", payload("k2026", EXP, "m0.slot.7"))
    # A channel may not begin or end with SP or HTAB: the hold trims them
    # around M0-Channel's commas, so " admin" would be held as "admin".
    signed("payload-channel-leading-space", payload("k2026", EXP, " admin"))
    signed("payload-channel-trailing-space", payload("k2026", EXP, "admin "))
    signed("payload-channel-leading-tab", payload("k2026", EXP, "\tadmin"))
    signed("payload-channel-space-after-comma", payload("k2026", EXP, "news, admin"))
    signed("payload-channel-only-space", payload("k2026", EXP, " "))
    signed("payload-kid-bad-char", payload("k2026.", EXP, "news"))
    signed("payload-kid-empty", payload("", EXP, "news"))
    signed("payload-kid-33-chars", payload("k" * 33, EXP, "news"))
    signed("payload-empty", b"")

    # --- too large, though correctly signed and otherwise valid
    big = fill_channels(3040 - head)  # 3040-byte payload -> 4054 + 1 + 43 = 4098
    big_token = grant(CURRENT, big)
    assert len(big_token) == 4098
    add("oversized-token-4098-bytes", "malformed", big_token)
    return v


def generate():
    lines = [
        "# m0serve grant test vectors. Generated by src/grant/make_vectors.py: do not edit,",
        "# run `/usr/bin/python3 src/grant/make_vectors.py --write`. Format: see that script.",
        "# Token: B64(payload) \".\" B64(HMAC-SHA256(secret, payload)), base64url unpadded;",
        "# payload = \"v1\\n\" kid \"\\n\" expires \"\\n\" channels joined by \",\" (src/grant/grant.hpp).",
        "",
    ]
    for kid, key in RING:
        lines.append("key %s %s" % (kid, key.hex()))
    lines.append("")
    seen = set()
    for name, now, expect, channels, tok in vectors():
        assert name not in seen, name
        seen.add(name)
        fields = ["vector", name, "now=%d" % now, "expect=" + expect]
        if channels is not None:
            fields.append("channels=" + ",".join(pct(c) for c in channels))
        fields.append("token=" + pct(tok))
        lines.append(" ".join(fields))
    return "\n".join(lines) + "\n"


def main(argv):
    text = generate()
    if argv[1:] == ["--write"]:
        with open(OUT, "w", encoding="utf-8") as f:
            f.write(text)
    elif argv[1:] == ["--check"]:
        with open(OUT, encoding="utf-8") as f:
            if f.read() != text:
                print("%s is stale: run make_vectors.py --write" % OUT, file=sys.stderr)
                return 1
    elif argv[1:] == []:
        sys.stdout.write(text)
    else:
        print("usage: make_vectors.py [--write | --check]", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
