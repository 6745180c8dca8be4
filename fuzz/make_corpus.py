#!/usr/bin/python3
"""Writes the seed corpora of the fuzzers into fuzz/corpus/<what>/.

Each fuzzer src/<dir>/fuzz_<what>.cpp reads its input in its own layout (the
comment at the top of the file says which); the seeds here follow those
layouts so the first runs already reach past the parsers' first checks. The
files named regress-* are inputs that once found a bug: they stay, and the
unit test named in their comment pins the fix.

    /usr/bin/python3 fuzz/make_corpus.py     # rewrites every seed file
"""
import base64
import hashlib
import hmac
import os
import struct
import zlib

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")


def write(target, name, data):
    folder = os.path.join(ROOT, target)
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, name), "wb") as f:
        f.write(data)


class Provider:
    """Builds bytes that libFuzzer's FuzzedDataProvider reads back as given:
    strings from the front, integers and bools from the back."""

    def __init__(self):
        self.front = bytearray()
        self.back = bytearray()  # in the order they are consumed

    def string(self, s):  # ConsumeRandomLengthString: "\\" doubles, "\\" + other ends
        self.front += s.replace(b"\\", b"\\\\") + b"\\x"

    def rest(self, s):  # ConsumeRemainingBytes
        self.front += s

    def integer(self, value, nbytes):  # ConsumeIntegralInRange, value already offset
        for i in range(nbytes):  # the least significant byte is read last
            self.back.append((value >> (8 * (nbytes - 1 - i))) & 0xFF)

    def bool(self, b):
        self.integer(1 if b else 0, 1)

    def bytes(self):
        return bytes(self.front) + bytes(reversed(self.back))


# ---- the request path: fuzz_parser (bytes) and fuzz_request (flags + bytes) --
H = b"Host: h\r\n"
REQUESTS = {
    "get": b"GET / HTTP/1.1\r\n" + H + b"\r\n",
    "get-query": b"GET /a/b?x=1&lastEventID=7 HTTP/1.1\r\n" + H + b"Last-Event-ID: 9\r\n\r\n",
    "pipelined": b"GET /1 HTTP/1.1\r\n" + H + b"\r\n"
    + b"POST /2 HTTP/1.1\r\n" + H + b"Content-Length: 5\r\n\r\nhello"
    + b"GET /3 HTTP/1.1\r\n" + H + b"\r\n",
    "chunked-trailer": b"POST /c HTTP/1.1\r\n" + H + b"Transfer-Encoding: chunked\r\n\r\n"
    + b"5;ext=1\r\nhello\r\n3\r\nabc\r\n0\r\nX-Trailer: t\r\n\r\n",
    "expect-continue": b"PUT /e HTTP/1.1\r\n" + H
    + b"Expect: 100-continue\r\nContent-Length: 3\r\n\r\nabc",
    "head": b"HEAD /h HTTP/1.1\r\n" + H + b"\r\nGET /after HTTP/1.1\r\n" + H + b"\r\n",
    "http10-keepalive": b"GET /k HTTP/1.0\r\nConnection: keep-alive\r\n\r\nGET /k2 HTTP/1.0\r\n\r\n",
    "connection-close": b"GET /c HTTP/1.1\r\n" + H + b"Connection: close\r\n\r\nGET /never HTTP/1.1\r\n" + H + b"\r\n",
    "options-star": b"OPTIONS * HTTP/1.1\r\n" + H + b"\r\n",
    "absolute-form": b"GET http://h:8000/x/y?z HTTP/1.1\r\nHost: h:8000\r\n\r\n",
    "stream": b"GET /stream HTTP/1.1\r\n" + H + b"\r\nGET /stream2 HTTP/1.1\r\n" + H + b"\r\n",
    "stream-http10": b"GET /stream HTTP/1.0\r\nConnection: keep-alive\r\n\r\n",
    "stream-head": b"HEAD /stream HTTP/1.1\r\n" + H + b"\r\n",
    "leading-crlf": b"\r\n\r\nGET / HTTP/1.1\r\n" + H + b"\r\n",
    "obs-fold": b"GET / HTTP/1.1\r\n" + H + b"X-Folded: a\r\n  b\r\n\r\n",
    "cl-and-te": b"POST / HTTP/1.1\r\n" + H + b"Content-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
    "te-gzip-chunked": b"POST / HTTP/1.1\r\n" + H + b"Transfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n",
    "two-cl": b"POST / HTTP/1.1\r\n" + H + b"Content-Length: 1\r\nContent-Length: 2\r\n\r\nab",
    "space-before-colon": b"GET / HTTP/1.1\r\n" + H + b"Transfer-Encoding : chunked\r\n\r\n",
    "two-hosts": b"GET / HTTP/1.1\r\n" + H + H + b"\r\n",
    "host-ipv6": b"GET / HTTP/1.1\r\nHost: [::1]:80\r\n\r\n",
    "no-host": b"GET / HTTP/1.1\r\n\r\n",
    "head-too-large": b"GET / HTTP/1.1\r\n" + H + b"X-Big: " + b"v" * 2100 + b"\r\n\r\n",
    "body-too-large": b"POST / HTTP/1.1\r\n" + H + b"Content-Length: 5000\r\n\r\n",
    "bad-version": b"GET / HTTP/2.0\r\n" + H + b"\r\n",
    "connect": b"CONNECT h:443 HTTP/1.1\r\n" + H + b"\r\n",
    "expect-other": b"GET / HTTP/1.1\r\n" + H + b"Expect: 200-ok\r\n\r\n",
    "bad-chunk": b"POST / HTTP/1.1\r\n" + H + b"Transfer-Encoding: chunked\r\n\r\nzz\r\n",
    # A trailer naming a framing field: refused 400 (RFC 9110 §6.5.1), the one
    # before it dropped.
    "trailer-content-length": b"POST /c HTTP/1.1\r\n" + H + b"Transfer-Encoding: chunked\r\n\r\n"
    + b"2\r\nab\r\n0\r\nX-Trailer: t\r\ncontent-length: 9\r\n\r\n",
    # fuzz_parser found it: a control character as a field value's first byte
    # came through (src/http/test_parser.cpp, "parser: a control character in a
    # field value is 400, the first byte too").
    "regress-nul-value-start": b"GET / HTTP/1.1\r\n" + H + b"X-A:\x00\r\n\r\n",
    "regress-ctl-value-start": b"POST / HTTP/1.1\r\n" + H
    + b"Transfer-Encoding: chunked\r\n\r\n0\r\nX-T: \x7f\r\n\r\n",
}


def admin_post(path, body):
    return (b"POST %s HTTP/1.1\r\nHost: h\r\nAuthorization: Bearer k\r\n"
            b"Content-Length: %d\r\n\r\n%s" % (path, len(body), body))


ADMIN = {
    "admin-publish": admin_post(b"/publish", b'{"channel":"news","data":"a\\nb","event":"up"}'),
    "admin-close": admin_post(b"/close", b'{"channel":"news"}'),
    "admin-metrics": b"GET /metrics HTTP/1.1\r\n" + H + b"\r\nHEAD /metrics HTTP/1.1\r\n" + H + b"\r\n",
    "admin-bad-key": b"POST /publish HTTP/1.1\r\n" + H + b"Authorization: Bearer x\r\n\r\n",
}
# HTTP/2 with prior knowledge on the client listener (fuzz_request checks its
# framing only; fuzz_h2 the rest): the preface alone, with a SETTINGS and a
# GET's HEADERS (HPACK: :method GET, :path /, :scheme http, :authority h), and
# a preface broken after its first line (HTTP/1.1's 505).
PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
H2C = {
    "h2c-preface": PREFACE,
    "h2c-get": PREFACE + b"\x00\x00\x00\x04\x00\x00\x00\x00\x00"
    + b"\x00\x00\x06\x01\x05\x00\x00\x00\x01" + b"\x82\x84\x86\x41\x01h",
    "h2c-preface-broken": b"PRI * HTTP/2.0\r\n\r\nXX\r\n\r\n",
}
for name, data in H2C.items():
    write("request", name, bytes([(len(name) % 8) << 1]) + data)
for name, data in REQUESTS.items():
    write("parser", name, data)
    # fuzz_request's first byte: bit 0 the admin listener, bits 1-3 the largest write.
    write("request", name, bytes([(len(name) % 8) << 1]) + data)
for name, data in ADMIN.items():
    write("request", name, bytes([1 | (len(name) % 8) << 1]) + data)

# ---- fuzz_json: first byte 0 publish, 1 close, 2 Pushpin items; then the body --
JSON = {
    "publish": b'\x00{"channel":"news","data":"hello","event":"update"}',
    "spaces": b'\x00 \t\r\n{ "channel" : "a" , "data" : "" } \n',
    "empty": b"\x00{}",
    "null": b'\x00{"channel":"a","event":null}',
    "escapes": b'\x00{"channel":"q\\"b\\\\s\\/n\\nr\\rt\\tb\\bf\\f"}',
    "unicode-escapes": b'\x00{"channel":"\\u0041\\u00e9\\u20AC\\ud83d\\ude00\\u0000"}',
    "raw-utf8": b"\x00" + '{"channel":"caf\u00e9","data":"\u20ac \U0001f600"}'.encode(),
    "nested": b'\x00{"channel":{"b":"c"}}',
    "number": b'\x00{"channel":1}',
    "lone-surrogate": b'\x00{"channel":"\\ud83d"}',
    "trailing": b'\x00{"channel":"b"}x',
    "close": b'\x01{"channel":"news"}',
    # nlohmann reads a NUL as the end of input: what follows must still count.
    "nul-then-more": b'\x01{"channel":"news"}\x00{',
    "pushpin": b'\x02{"items":[{"channel":"a","id":"2","prev-id":"1","formats":'
               b'{"http-stream":{"content":"event: m\\ndata: 1\\n\\n"},'
               b'"http-response":{"body":"1"},"ws-message":{"content":"1"}}}]}',
    "pushpin-bin": b'\x02{"items":[{"channel":"a","formats":{"http-stream":{"content-bin":"AAEC/w=="}}}]}',
    "pushpin-close": b'\x02{"items":[{"channel":"a","formats":{"http-stream":{"action":"close"}}}]}',
    "pushpin-skipped": b'\x02{"items":[{"channel":"a","formats":{"x-other":{"content":"x"}}},'
                       b'{"channel":"b","formats":{"http-stream":{"content":"y"}}}]}',
    # fuzz_json's own writer wrote a skipped item as an empty ws-message,
    # which is served (and refused empty) since ws-message items are.
    "regress-skipped-written-back": b'\x02{"items":[{"channel":"a","formats":{"ws-messa#e":{"content":"x"}}},'
                                    b'{"channel":"b","formats":{"http-stream":{"content":"y"}}}]}',
    "pushpin-ws": b'\x02{"items":[{"channel":"a","formats":{"ws-message":{"content":"x"}}},'
                  b'{"channel":"b","formats":{"ws-message":{"action":"close"}}}]}',
    "pushpin-hint": b'\x02{"items":[{"channel":"a","formats":{"http-stream":{"action":"hint"}}}]}',
    # The hand-written parser nlohmann replaced took bytes that were not UTF-8
    # (src/http/test_json.cpp, "json: raw bytes in a string must be UTF-8").
    "regress-invalid-utf8-key": b'\x00{"\xff":""}',
    "regress-overlong": b'\x00{"channel":"\xc0\x80"}',
    # fuzz_json found it: nlohmann throws out_of_range (not parse_error) for a
    # number past a double's range (src/http/test_json.cpp, "json: a number
    # out of range is refused, not thrown").
    "regress-number-overflow": b'\x00{"channel":"c","n":3e999999}',
}
for name, data in JSON.items():
    write("json", name, data)

# ---- fuzz_sse: event name, "\\x", data; the id in the last 8 bytes -------------
SSE = {
    "plain": (7, b"", b"hello"),
    "named": (1 << 40, b"update", b"a\nb"),
    "crlf": (0, b"e", b"a\r\nb\rc\nd"),
    "cr-lf-split": (3, b"", b"a\r\r\n\n\rb"),
    "nul": (5, b"x", b"a\x00b\x00"),
    "fields-in-data": (9, b"", b"id: 1\nevent: x\nretry: 5\n: comment\ndata: y"),
    "blank-lines": (2, b"", b"\n\n\n"),
    "leading-space": (4, b" spaced", b" a\n  b"),
    "empty": (2**64 - 1, b"", b""),
    "trailing-cr": (6, b"", b"end\r"),
}
for name, (eid, event, data) in SSE.items():
    p = Provider()
    p.integer(eid, 8)
    p.string(event)
    p.rest(data)
    write("sse", name, p.bytes())

# ---- fuzz_grant: the mode in the first byte ------------------------------------
KEYS = {"k2026": bytes.fromhex("a" * 64), "old_key-1": bytes.fromhex("7" * 66)}


def b64(b):
    import base64
    return base64.urlsafe_b64encode(b).rstrip(b"=")


def token(kid, expires, channels, key=None):
    payload = b"v1\n%s\n%d\n%s" % (kid.encode(), expires, b",".join(channels))
    mac = hmac.new(key or KEYS[kid], payload, hashlib.sha256).digest()
    return b64(payload) + b"." + b64(mac)


def verify_seed(tok, now):  # mode 0: the token, then `now` in the last 4 bytes
    p = Provider()
    p.integer(now, 4)
    p.rest(tok)
    return b"\x00" + p.bytes()


GRANT = {
    "verify-ok": verify_seed(token("k2026", 1700000600, [b"news"]), 1700000000),
    "verify-old-key": verify_seed(token("old_key-1", 1700000600, [b"a", b"b c", b"d"]), 5),
    "verify-expired": verify_seed(token("k2026", 1000, [b"news"]), 1000),
    "verify-unknown-key": verify_seed(token("k9", 1700000600, [b"news"], KEYS["k2026"]), 0),
    "verify-bad-mac": verify_seed(token("k2026", 99, [b"x"], b"\x00" * 32), 0),
    "verify-two-dots": verify_seed(b"djEK.AAAA.AAAA", 0),
    "verify-padding": verify_seed(b"djEKazIwMjYKMTcwMDAwMDYwMApuZXdz=.AA", 0),
}
for name, chans, exp, old in [
    ("sign-one", [b"news"], 1700000600, False),
    ("sign-many", [b"a", b"b", b"m0.slotx", b"x y"], 1, True),
    ("sign-reserved", [b"m0.slot.1.1"], 5, False),
    ("sign-duplicate", [b"a", b"a"], 5, False),
    ("sign-edge-space", [b" a"], 5, False),
    ("sign-negative", [b"a"], -1, False),
]:
    p = Provider()
    p.integer(exp + 2**63, 8)  # ConsumeIntegral<int64_t>: INT64_MIN + the value read
    p.bool(old)
    for c in chans:
        p.string(c)
    GRANT[name] = b"\x01" + p.bytes()
GRANT["keyfile"] = b"\x02# keys\nk2026 " + b"a" * 64 + b"\r\n\n  old\t" + b"7" * 66 + b"  \n"
GRANT["keyfile-short"] = b"\x02k " + b"ab" * 31 + b"\n"
GRANT["keyfile-duplicate"] = b"\x02k " + b"a" * 64 + b"\nk " + b"b" * 64 + b"\n"
GRANT["base64"] = b"\x03djEKazIwMjYKMTcwMDAwMDYwMApuZXdz"
GRANT["base64-pad-bits"] = b"\x03AB"
for name, data in GRANT.items():
    write("grant", name, data)

# ---- fuzz_hold: response headers ----------------------------------------------
NAMES = ["M0-Hold", "m0-hold", "M0-Channel", "m0-channel", "M0-CHANNEL", "Content-Length",
         "Transfer-Encoding", "Connection", "Content-Type", "Cache-Control", "x-worker",
         "Set-Cookie", "X-Other", "M0-Hold-Extra", "M0-Channels",
         # GRIP (appended: the indexes above stay what the older seeds say)
         "Grip-Hold", "grip-hold", "Grip-Channel", "GRIP-CHANNEL", "Grip-Keep-Alive", "Grip-Status"]
VALUES = ["stream", "STREAM", "websocket", "Stream ", "a", "a,b", " a , b ", "a,,b",
          "m0.slot.1.1", "chunked", "0", "close", "text/html", "a,a", "\t", "",
          "response", "a; prev-id=1, b", "ka\\n; format=cstring; timeout=5", "OiBrYQoK; format=base64",
          "x; timeout=0"]


def hold_seed(realtime, headers, body=b"first", status=200):
    p = Provider()
    p.bool(realtime)
    p.integer(0, 1)  # worker "mojo-1"
    p.integer(status - 100, 2)
    p.string(body)
    p.bool(False)  # no producer
    for name, value in headers:
        if name in NAMES:
            p.bool(True)
            p.integer(NAMES.index(name), 1)
        else:
            p.bool(False)
            p.string(name.encode())
        if value in VALUES:
            p.bool(True)
            p.integer(VALUES.index(value), 1)
        else:
            p.bool(False)
            p.string(value.encode())
    return p.bytes()


HOLD = {
    "stream": hold_seed(True, [("M0-Hold", "stream"), ("M0-Channel", "a,b")]),
    "stream-framing": hold_seed(True, [("Content-Length", "0"), ("M0-Hold", "stream"),
                                       ("Transfer-Encoding", "chunked"), ("Connection", "close"),
                                       ("M0-Channel", " a , b "), ("Content-Type", "text/html")],
                                status=404),
    "stream-not-realtime": hold_seed(False, [("m0-hold", "STREAM"), ("M0-CHANNEL", "a")]),
    "websocket": hold_seed(True, [("M0-Hold", "websocket"), ("m0-channel", "news, sports")]),
    "two-channel-lines": hold_seed(True, [("M0-Hold", "stream"), ("M0-Channel", "a"),
                                          ("M0-Channel", "b")]),
    "bad-mode": hold_seed(True, [("M0-Hold", "Stream "), ("M0-Channel", "a")]),
    "no-channel": hold_seed(True, [("M0-Hold", "stream"), ("X-Other", "a")]),
    "empty-channel": hold_seed(True, [("M0-Hold", "stream"), ("M0-Channel", "a,,b")]),
    "reserved": hold_seed(True, [("M0-Hold", "stream"), ("M0-Channel", "m0.slot.1.1")]),
    "no-hold": hold_seed(True, [("M0-Channel", "a"), ("Content-Length", "5")]),
    "crlf-value": hold_seed(True, [("M0-Hold", "stream"), ("M0-Channel", "a\r\nb")]),
    # GRIP, as django-grip's set_hold_stream() answers
    "grip-stream": hold_seed(True, [("Grip-Hold", "stream"), ("Grip-Channel", "a; prev-id=1, b"),
                                    ("Grip-Keep-Alive", "ka\\n; format=cstring; timeout=5")]),
    "grip-base64": hold_seed(True, [("grip-hold", "stream"), ("GRIP-CHANNEL", "a"),
                                    ("Grip-Keep-Alive", "OiBrYQoK; format=base64")]),
    "grip-repeated": hold_seed(False, [("Grip-Hold", "stream"), ("Grip-Channel", "a"),
                                       ("Grip-Channel", "a,b"), ("Grip-Status", "0")]),
    "grip-response": hold_seed(True, [("Grip-Hold", "response"), ("Grip-Channel", "a")]),
    "grip-bad-timeout": hold_seed(True, [("Grip-Hold", "stream"), ("Grip-Channel", "a"),
                                         ("Grip-Keep-Alive", "x; timeout=0")]),
    "grip-and-m0": hold_seed(True, [("Grip-Hold", "stream"), ("M0-Hold", "stream"),
                                    ("Grip-Channel", "a"), ("M0-Channel", "b")]),
    "grip-no-hold": hold_seed(True, [("Grip-Channel", "a"), ("Grip-Keep-Alive", "x")]),
}
for name, data in HOLD.items():
    write("hold", name, data)

# ---- fuzz_jwt: first byte the mode (0 verify, 1 sign then verify, 2 base64) ------
JWT_KEY = b"fuzz-admin-key-0123456789"


def b64url(b):
    return base64.urlsafe_b64encode(b).rstrip(b"=")


def jwt_token(claims, key=JWT_KEY, header=b'{"alg":"HS256","typ":"JWT"}'):
    signing = b64url(header) + b"." + b64url(claims)
    return signing + b"." + b64url(hmac.new(key, signing, hashlib.sha256).digest())


JWT = {
    "verify-ok": b"\x00" + jwt_token(b'{"iss":"pub","exp":4102444800}'),
    "verify-expired": b"\x00" + jwt_token(b'{"iss":"pub","exp":1000000000}'),
    "verify-other-key": b"\x00" + jwt_token(b'{"iss":"pub"}', key=b"another"),
    "verify-none": b"\x00" + b64url(b'{"alg":"none"}') + b"." + b64url(b"{}") + b".",
    "verify-garbage": b"\x00a.b.c",
    # mode 1: the claims, then (read from the end) flip, with_exp, exp
    "sign-claims": b"\x01" + b'{"iss":"pub"}' + bytes(17),
    "sign-exp": b"\x01" + b'{"iss":"pub"}' + bytes(8) + b"\x01" + bytes(8),
    "sign-not-object": b"\x01" + b"[1,2]" + bytes(17),
    "base64": b"\x02AAEC/w==",
    "base64url": b"\x02-_8",
}
for name, data in JWT.items():
    write("jwt", name, data)

# ---- fuzz_ws: byte 0 the mode (bit 0: 0 client frames, 1 the view's answer)
# and the largest write (bits 1-3); then the client's bytes or the answer body --


def ws_frame(op, payload, fin=True, mask=b"\x01\x02\x03\x04", rsv=0):
    head = bytes([(0x80 if fin else 0) | rsv << 4 | op])
    n = len(payload)
    m = 0x80 if mask else 0
    if n < 126:
        head += bytes([m | n])
    elif n < 65536:
        head += bytes([m | 126]) + struct.pack(">H", n)
    else:
        head += bytes([m | 127]) + struct.pack(">Q", n)
    if not mask:
        return head + payload
    return head + mask + bytes(c ^ mask[i % 4] for i, c in enumerate(payload))


def zlib_raw(data):
    """RFC 7692's compression of one message: raw DEFLATE, flushed, 00 00 FF FF taken off."""
    c = zlib.compressobj(wbits=-15)
    return (c.compress(data) + c.flush(zlib.Z_SYNC_FLUSH))[:-4]


def ws_event(etype, content=None):
    """One WebSocket-over-HTTP event, as Pushpin encodes it (size in hex)."""
    if content is None:
        return etype + b"\r\n"
    return etype + b" %x\r\n" % len(content) + content + b"\r\n"


WS = {
    "text": b"\x06" + ws_frame(1, b"hello"),
    "binary-ping-close": b"\x02" + ws_frame(2, b"\x00\xff") + ws_frame(9, b"p")
    + ws_frame(8, struct.pack(">H", 1000) + b"bye"),
    "fragments": b"\x00" + ws_frame(1, b"he", fin=False) + ws_frame(9, b"")
    + ws_frame(0, b"llo \xc3", fin=False) + ws_frame(0, b"\xa9"),
    "unmasked": b"\x04" + ws_frame(1, b"hi", mask=b""),
    "too-big": b"\x0e" + ws_frame(2, bytes(600)),
    "bad-utf8": b"\x08" + ws_frame(1, b"\xc3("),
    "answer-events": b"\x01" + ws_event(b"TEXT", b"m:ok") + ws_event(b"BINARY", b"m:\x00")
    + ws_event(b"PING", b""),
    "answer-control": b"\x03" + ws_event(b"TEXT", b'c:{"type":"subscribe","channel":"g"}')
    + ws_event(b"TEXT", b'c:{"type":"detach"}') + ws_event(b"TEXT", b'c:{"type":"keep-alive"}'),
    "answer-close": b"\x05" + ws_event(b"TEXT", b"m:by") + ws_event(b"CLOSE", b"\x0f\xa0"),
    "deflate-text": b"\x12" + ws_frame(1, zlib_raw(b"hello hello hello"), rsv=4),
    "deflate-bomb": b"\x14" + ws_frame(2, zlib_raw(bytes(100000)), rsv=4),
    "deflate-bad": b"\x16" + ws_frame(1, b"\xff\xff\xff", rsv=4),
    # test_woh: "a view that closes with a code no endpoint may send".
    "regress-close-code": b"\x05" + ws_event(b"TEXT", b"m:by") + ws_event(b"CLOSE", b"\x54\xa0"),
    "answer-garbage": b"\x07" + ws_event(b"TEXT", b"m:\xff\xfe") + ws_event(b"OPEN"),
}
for name, data in WS.items():
    write("ws", name, data)

# ---- fuzz_h2: the first byte the largest write, then frames after the preface
def h2_frame(ftype, flags, sid, payload=b""):
    return struct.pack(">I", len(payload))[1:] + bytes([ftype, flags]) + struct.pack(">I", sid) + payload


def h2_headers(sid, method, path, end_stream=True, extra=b""):
    # HPACK by hand, literal fields without indexing (RFC 7541 §6.2.2).
    block = b""
    for k, v in ((b":method", method), (b":scheme", b"http"), (b":authority", b"t"),
                 (b":path", path)):
        block += b"\x00" + bytes([len(k)]) + k + bytes([len(v)]) + v
    return h2_frame(1, (1 if end_stream else 0) | 4, sid, block + extra)


SETTINGS = h2_frame(4, 0, 0)
H2 = {
    "get": SETTINGS + h2_headers(1, b"GET", b"/a"),
    "two-streams": SETTINGS + h2_headers(1, b"GET", b"/a") + h2_headers(3, b"GET", b"/stream"),
    "post-body": SETTINGS + h2_headers(1, b"POST", b"/p", end_stream=False)
    + h2_frame(0, 0, 1, b"hello") + h2_frame(0, 1, 1, b" world"),
    "reset": SETTINGS + h2_headers(1, b"GET", b"/stream") + h2_frame(3, 0, 1, b"\0\0\0\x08"),
    "ping-window": SETTINGS + h2_frame(6, 0, 0, b"12345678") + h2_frame(8, 0, 0, b"\0\0\x10\0"),
    "continuation": SETTINGS + h2_frame(1, 1, 1, b"\x82\x86") + h2_frame(9, 4, 1, b"\x84\x01\x01t"),
    "goaway": SETTINGS + h2_headers(1, b"GET", b"/a") + h2_frame(7, 0, 0, b"\0\0\0\x01\0\0\0\0"),
}
for i, (name, data) in enumerate(H2.items()):
    write("h2", name, bytes([i % 8]) + data)
