#!/usr/bin/python3
"""smoke-textshelf: textshelf (fixtures/textshelf) served by m0serve, its
realtime streams authorized on both paths: the mojo mount's /native/live
checking HMAC grants signed by Django, and the WSGI hold /events/....

Every server is started as fixtures/textshelf/README.md starts it:

    M0_GRANT_KEY_FILE=K m0serve --listen 127.0.0.1:P --chdir fixtures/textshelf \\
        --mount /=textshelf_site.wsgi:application --mount /native=mojo --realtime \\
        --grant-key-file K --admin-listen 127.0.0.1:P2 --admin-key-file A

with K and A fresh files in build/smoke-logs/ (K: `KID HEX` lines, the
first key signs, 32 random bytes each). The database is the fixture's own
(its path is fixed by the settings): `manage.py seed` runs first.

Users come in through the site's real login form (CSRF token from the page,
the session cookie it sets); annotations are posted through the document
page's form. Tokens are taken apart and re-signed with m0.grant from
src/wsgi, the module Django signs with.
"""

import os
import secrets
import signal
import sys
import time

sys.dont_write_bytecode = True  # no __pycache__ in smoke/ or src/wsgi/m0/
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from m0smoke import (  # noqa: E402
    LOG_DIR, Fail, Smoke, check, check_error, check_hold_head, check_stream, free_port,
    publish_admin, read_head_body, short)
from textshelf_lib import (  # noqa: E402
    DOC, MOJO_HEAD, OTHER_DOC, TEXTSHELF_ARGS, WSGI_HEAD, User, annotation_json,
    b64d, b64e, key_file, live_url, m0grant, new_key, payload_of, read_events,
    ring, seed, textshelf_server, token_of)

SCRIPT = "40-textshelf"
smoke = Smoke(SCRIPT, __doc__, phase_timeout=90.0)

DOC_CHANNEL = "notate_document_%d" % DOC


def start(ctx, keys, label_suffix="", extra=()):
    """Seeds, writes the key file, starts the server; returns (server, key file path)."""
    seed()
    path = key_file(ctx, "grant%s.keys" % label_suffix, keys)
    return textshelf_server(ctx, path, extra), path


def mojo_hold(ctx, srv, url, headers=(), what="mojo hold"):
    """Opens a /native/live url; the hold's head must be the mojo mount's."""
    c, head = ctx.hold(srv, url, headers, timeout=10.0)
    if head.status != 200:
        raise Fail("%s %s: want the hold, got %s %s" % (what, short(url, 80), head.summary(),
                                                         short(c.pending(), 160)))
    check_hold_head(head, "mojo")
    read_head_body(c, MOJO_HEAD)
    return c


def refused(srv, url, reason, what):
    """GET url -> 403 text/plain with exactly `reason` as the body."""
    r = User(srv.addr).get(url)
    check_error(r, 403, what)
    got = r.text().strip()
    check(got == reason, "%s: 403 body %r, want %r" % (what, got, reason))
    return r


def annotations_of(user, document_id):
    r = user.get("/documents/%d/annotations.json" % document_id)
    check(r.status == 200, "%s GET annotations.json: %s" % (user.name, r.summary()))
    return {a["id"]: a for a in r.json()["annotations"]}


@smoke.phase(1, "authorized stream: alice's grant holds on the mojo mount and her WSGI hold opens; "
                "bob's form-posted annotation arrives on both as event: annotation with the saved JSON")
def phase1(ctx):
    srv, _ = start(ctx, [new_key("k1")])
    alice = User(srv.addr, "alice").login()
    bob = User(srv.addr, "bob").login()

    url = alice.stream_url("/grant/document/%d" % DOC)
    kid, expires, channels = payload_of(token_of(url))
    check(channels == [DOC_CHANNEL] and kid == "k1",
          "alice's grant names %r signed by %r, want [%r] by 'k1'" % (channels, kid, DOC_CHANNEL))
    check(0 < expires - time.time() <= 301, "alice's grant expires in %.0fs, want ~300" % (expires - time.time()))
    mojo = mojo_hold(ctx, srv, url, what="alice's /native/live")

    wsgi, head = ctx.hold(srv, "/events/document/%d" % DOC, alice.hold_headers(), timeout=10.0)
    check(head.status == 200, "alice GET /events/document/%d: %s %s" % (DOC, head.summary(), short(wsgi.pending(), 160)))
    check_hold_head(head, "wsgi", exact_names=False)  # Django adds X-Frame-Options & co
    read_head_body(wsgi, WSGI_HEAD)

    comment = "smoke %s: the raven stays" % secrets.token_hex(4)
    aid = bob.annotate(DOC, "Nevermore", comment)

    saved = annotations_of(alice, DOC).get(aid)
    check(saved is not None, "annotation %d is not in annotations.json" % aid)
    check((saved["author"], saved["quote"], saved["comment"], saved["document"]) == ("bob", "Nevermore", comment, DOC),
          "annotation %d saved as %s" % (aid, short(saved)))
    data = annotation_json(saved)

    for conn, head_body, what in ((mojo, MOJO_HEAD, "alice's mojo stream"),
                                  (wsgi, WSGI_HEAD, "alice's WSGI stream")):
        events = read_events(conn, head_body, 1, timeout=10.0)
        check(events, "%s: no event within 10s of bob's annotation %d%s; body %s" % (
            what, aid, " (EOF)" if conn.eof else "", short(conn.buf[len(head_body):])))
        eid = int(events[0]["id"])
        conn.read_until(lambda b: False, 0.3)  # nothing else may follow
        check_stream(conn.buf[len(head_body):], [(eid, data, "annotation")], what)
        check(not conn.eof, "%s: closed after the event" % what)
        if what.startswith("alice's mojo"):
            mojo_id = eid
        else:
            check(eid == mojo_id, "the WSGI stream got the event as id %d, the mojo stream as id %d" % (eid, mojo_id))


@smoke.phase(2, "unauthorized gets 403: mallory's grant and hold, logged-out requests, "
                "a channel-swapped grant, forged and truncated grants")
def phase2(ctx):
    srv, _ = start(ctx, [new_key("k1")])
    mallory = User(srv.addr, "mallory").login()
    anon = User(srv.addr, None)

    for who, u in (("mallory", mallory), ("logged out", anon)):
        r = u.get("/grant/document/%d" % DOC)
        check(r.status == 403, "%s GET /grant/document/%d: want 403, got %s %s" % (who, DOC, r.summary(), short(r.body, 160)))
        j = r.json()
        check(j.get("error") == "forbidden" and j.get("reason"), "%s's 403 from /grant: %s" % (who, short(r.body)))
        r = u.get("/events/document/%d" % DOC)
        check(r.status == 403, "%s GET /events/document/%d: want 403 (not a hold, not a redirect), got %s %s" % (
            who, DOC, r.summary(), short(r.body, 160)))
        check(not (r.header("content-type") or "").startswith("text/event-stream"),
              "%s's 403 from /events is an event stream" % who)

    # mallory's own grant, for document 2, holds: the refusals below are about the token.
    own = mallory.stream_url("/grant/document/%d" % OTHER_DOC)
    token = token_of(own)
    c = mojo_hold(ctx, srv, own, what="mallory's own document-%d grant" % OTHER_DOC)
    c.close()

    p64, mac = token.split(".")
    payload = b64d(p64)
    want_tail = ("\nnotate_document_%d" % OTHER_DOC).encode()
    check(payload.endswith(want_tail), "mallory's payload %s" % short(payload))
    swapped = b64e(payload[:-len(want_tail)] + ("\nnotate_document_%d" % DOC).encode()) + "." + mac
    refused(srv, live_url(swapped), "bad grant signature", "channel-swapped grant")

    forged_mac = b64e(secrets.token_bytes(32))
    refused(srv, live_url(p64 + "." + forged_mac), "bad grant signature", "grant with a random MAC")
    refused(srv, live_url(token[:-6]), "malformed grant", "truncated grant")
    refused(srv, live_url(p64), "malformed grant", "grant without its MAC")
    refused(srv, "/native/live", "missing grant", "/native/live without a grant")


@smoke.phase(3, "expired grant: signed by the server's own key with now= in the past -> 403 'grant expired'")
def phase3(ctx):
    key = new_key("k1")
    srv, path = start(ctx, [key])
    g = m0grant()
    keys = g.load_keys(path)  # the very file the server and Django read
    fresh = g.sign_grant(DOC_CHANNEL, 60, keys=keys)
    c = mojo_hold(ctx, srv, live_url(fresh), what="a fresh grant from the same key")
    c.close()
    old = g.sign_grant(DOC_CHANNEL, 60, keys=keys, now=time.time() - 3600)
    check(payload_of(old)[1] < time.time(), "the test grant is not expired")
    refused(srv, live_url(old), "grant expired", "grant expired an hour ago")
    # One second past: expires = floor(now - 2) + 1 <= now.
    just = g.sign_grant(DOC_CHANNEL, 1, keys=keys, now=time.time() - 2)
    refused(srv, live_url(just), "grant expired", "grant expired a second ago")
    # An expired grant that is not authentic is refused for its signature:
    # "expired" is never said of a token the server cannot vouch for.
    p64, _ = old.split(".")
    refused(srv, live_url(p64 + "." + b64e(secrets.token_bytes(32))), "bad grant signature",
            "expired grant with a forged MAC")


@smoke.phase(4, "rotated key: with 'new' then 'old' in the file an old-key grant holds and gets events; "
                "an unknown key id is 403; a server with only 'new' refuses the old grant")
def phase4(ctx):
    g = m0grant()
    new, old = new_key("new"), new_key("old")
    srv, _ = start(ctx, [new, old], "-rotated")

    # Django signs with the first key of the shared file.
    alice = User(srv.addr, "alice").login()
    url = alice.stream_url("/grant/document/%d" % DOC)
    check(payload_of(token_of(url))[0] == "new", "Django signed with key %r, want 'new' (the first)" % (
        payload_of(token_of(url))[0],))

    old_grant = g.sign_grant(DOC_CHANNEL, 120, keys=ring([old]))
    check(payload_of(old_grant)[0] == "old", "grant not signed by 'old'")
    c = mojo_hold(ctx, srv, live_url(old_grant), what="old-key grant on the rotated server")
    eid = publish_admin(srv.admin, srv.admin_key, DOC_CHANNEL, "after rotation", event="annotation")
    events = read_events(c, MOJO_HEAD, 1, timeout=5.0)
    check(events and int(events[0]["id"]) == eid,
          "old-key hold: event %d not delivered within 5s; body %s" % (eid, short(c.buf[len(MOJO_HEAD):])))
    c.read_until(lambda b: False, 0.2)
    check_stream(c.buf[len(MOJO_HEAD):], [(eid, "after rotation", "annotation")], "old-key hold")

    stranger = g.sign_grant(DOC_CHANNEL, 120, keys=ring([new_key("stranger")]))
    refused(srv, live_url(stranger), "unknown grant key", "grant signed by a key id not in the file")
    # Same kid as a known key, other secret: a signature failure, not an unknown key.
    impostor = g.sign_grant(DOC_CHANNEL, 120, keys=ring([("old", secrets.token_hex(32))]))
    refused(srv, live_url(impostor), "bad grant signature", "grant signed by kid 'old' with another secret")

    srv2, _ = start(ctx, [new], "-new-only")
    refused(srv2, live_url(old_grant), "unknown grant key", "old-key grant on a server with only 'new'")
    new_grant = g.sign_grant(DOC_CHANNEL, 120, keys=ring([new]))
    c2 = mojo_hold(ctx, srv2, live_url(new_grant), what="new-key grant on the new-only server")
    c2.close()


def startup_error(ctx, keys_path, what):
    args = ["--listen", "127.0.0.1:%d" % free_port()] + TEXTSHELF_ARGS + ["--grant-key-file", keys_path]
    rc, out, err = ctx.run_binary(args, 20.0, label="%s-phase%d-%s" % (SCRIPT, ctx.number, what))
    check(rc is not None, "%s: still running after 20s (it should refuse to start)" % what)
    lines = [l for l in err.splitlines() if l.strip()]
    check(rc == 2, "%s: exit code %r, want 2 (stderr %s)" % (what, rc, short(err)))
    check(len(lines) == 1, "%s: %d lines on stderr, want 1: %s" % (what, len(lines), short(err)))
    check(keys_path in lines[0] and "--grant-key-file" in lines[0],
          "%s: the line does not name --grant-key-file and the file: %r" % (what, lines[0]))
    return lines[0]


@smoke.phase(5, "start-up errors: --grant-key-file missing / a 16-byte key -> exit 2, one line on stderr")
def phase5(ctx):
    missing = os.path.join(LOG_DIR, "%s-phase5-no-such.keys" % SCRIPT)
    if os.path.exists(missing):
        os.unlink(missing)
    startup_error(ctx, missing, "missing-file")
    short_key = key_file(ctx, "short.keys", [("k1", secrets.token_hex(16))])
    line = startup_error(ctx, short_key, "short-key")
    check("line 1" in line, "short key: the line does not say which line: %r" % line)


def wait_log(srv, text, timeout=5.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if text in srv.log_text():
            return
        time.sleep(0.05)
    raise Fail("the server log never said %r within %.0fs" % (text, timeout))


@smoke.phase(6, "SIGHUP reads the key files again: a grant of a key added to the file holds, Django signs "
                "with the new first key, a new admin key replaces the old; a file that no longer reads "
                "keeps the keys in use")
def phase6(ctx):
    g = m0grant()
    old, new = new_key("old"), new_key("new")
    srv, path = start(ctx, [old], "-sighup")
    new_grant = g.sign_grant(DOC_CHANNEL, 120, keys=ring([new]))
    refused(srv, live_url(new_grant), "unknown grant key", "a 'new' grant before the reload")

    key_file(ctx, "grant-sighup.keys", [new, old])
    admin_path = [a for a in srv.args if a.endswith("admin.key")][0]
    new_admin = secrets.token_hex(24)
    with open(admin_path, "w") as f:
        f.write(new_admin + "\n")
    srv.proc.send_signal(signal.SIGHUP)
    wait_log(srv, "SIGHUP: --grant-key-file read again: 2 keys")
    wait_log(srv, "SIGHUP: --admin-key-file read again")
    c = mojo_hold(ctx, srv, live_url(new_grant), what="a 'new' grant after SIGHUP")
    alice = User(srv.addr, "alice").login()
    url = alice.stream_url("/grant/document/%d" % DOC)
    check(payload_of(token_of(url))[0] == "new", "Django signed with %r after the reload, want 'new'" % (
        payload_of(token_of(url))[0],))
    r = publish_admin(srv.admin, srv.admin_key, DOC_CHANNEL, "x", expect=401)
    check(r.status == 401, "the old admin key after SIGHUP: %s" % r.summary())
    eid = publish_admin(srv.admin, new_admin, DOC_CHANNEL, "after reload", event="annotation")
    events = read_events(c, MOJO_HEAD, 1, timeout=5.0)
    check(events and int(events[0]["id"]) == eid, "the hold of the reloaded grant did not get event %d" % eid)

    with open(path, "w") as f:
        f.write("new not-hex\n")
    srv.proc.send_signal(signal.SIGHUP)
    wait_log(srv, "the keys in use are kept")
    mojo_hold(ctx, srv, live_url(new_grant), what="a 'new' grant after a reload of a broken file").close()
    c.close()


if __name__ == "__main__":
    sys.exit(smoke.main())
