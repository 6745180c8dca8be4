"""textshelf_lib: what the textshelf smokes (40-textshelf, 50-textshelf-browser)
share on top of m0smoke: seeding the fixture's database, grant key files, the
server command line, a logged-in user (cookie jar, CSRF), the grant token's
parts, and reading annotation events off a hold.

The smokes use a database of their own (TEXTSHELF_DB, by default
build/smoke-logs/textshelf-smoke.sqlite3), never the demo's: the scripts run
`manage.py seed` (migrate + demo data, idempotent) on it before they start a
server, and every server they start inherits the variable.
Key files are absolute paths: m0serve applies --chdir before it reads
--grant-key-file, and Django reads M0_GRANT_KEY_FILE from that directory too.

Run the scripts with /usr/bin/python3 (Debian's); never the python3 on PATH.
"""

import base64
import json
import os
import re
import secrets
import subprocess
import sys

from m0smoke import (
    ROOT, Conn, Fail, build_request, check, event_ids, form_body, parse_block,
    read_head_body, short, stream_items)

PY = "/usr/bin/python3"
FIXTURE = os.path.join(ROOT, "fixtures", "textshelf")
os.makedirs(os.path.join(ROOT, "build", "smoke-logs"), exist_ok=True)
os.environ.setdefault("TEXTSHELF_DB",
                      os.path.join(ROOT, "build", "smoke-logs", "textshelf-smoke.sqlite3"))
PASSWORD = "textshelf-demo"
MOJO_HEAD = b": mojo hold\n\n"
WSGI_HEAD = b": textshelf\n\n"   # textshelf.realtime.STREAM_HEAD
ADMIN_KEY = "smoke-textshelf-admin-" + secrets.token_hex(8)
DOC = 1        # "The Raven": alice and bob are members, mallory is not
OTHER_DOC = 2  # "Ozymandias": alice and mallory

# The textshelf mount, as fixtures/textshelf/README.md starts it.
TEXTSHELF_ARGS = ["--chdir", "fixtures/textshelf",
                  "--mount", "/=textshelf_site.wsgi:application",
                  "--mount", "/native=mojo", "--realtime", "--ws-over-http", "/presence"]

_seeded = []


def seed(timeout=120.0):
    """Runs `manage.py seed` once per process, on TEXTSHELF_DB."""
    if _seeded:
        return
    env = dict(os.environ)
    env.pop("M0_GRANT_KEY_FILE", None)
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    try:
        p = subprocess.run([PY, "manage.py", "seed"], cwd=FIXTURE, env=env, timeout=timeout,
                           stdin=subprocess.DEVNULL, capture_output=True, text=True)
    except subprocess.TimeoutExpired:
        raise Fail("manage.py seed did not finish within %.0fs" % timeout)
    if p.returncode != 0:
        tail = [l for l in (p.stderr or p.stdout).splitlines() if l.strip()][-1:]
        raise Fail("manage.py seed exited %d: %s" % (p.returncode, tail[0] if tail else "(no output)"))
    _seeded.append(True)


# ---- keys ------------------------------------------------------------------

def new_key(kid):
    """(kid, hex secret of 32 random bytes)."""
    return (kid, secrets.token_hex(32))


def key_file(ctx, name, keys):
    """Writes a grant key file (`KID HEX` a line, the first signs); returns its absolute path."""
    path = ctx.tmpfile(name, "".join("%s %s\n" % k for k in keys))
    os.chmod(path, 0o600)
    return path


def ring(keys):
    """The keys as m0.grant takes them: [(kid, secret bytes)]."""
    return [(kid, bytes.fromhex(h)) for kid, h in keys]


def m0grant():
    """The m0.grant module from the source tree (the one Django signs with)."""
    src = os.path.join(ROOT, "src", "wsgi")
    if src not in sys.path:
        sys.path.insert(0, src)
    import m0.grant  # noqa: E402
    return m0.grant


def textshelf_server(ctx, grant_keys_path, extra=(), label=None):
    """m0serve serving textshelf with the mojo mount, --realtime, the grant key
    file on both sides, and an admin listener."""
    admin_key = ctx.tmpfile("admin.key", ADMIN_KEY + "\n")
    os.chmod(admin_key, 0o600)
    args = TEXTSHELF_ARGS + ["--grant-key-file", grant_keys_path, "--admin-key-file", admin_key]
    args += list(extra)
    return ctx.server(args, admin=True, admin_key=ADMIN_KEY, label=label,
                      env={"M0_GRANT_KEY_FILE": grant_keys_path, "PYTHONDONTWRITEBYTECODE": "1"})


# ---- the grant token ---------------------------------------------------------

def b64d(text):
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def b64e(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def token_of(url):
    """The grant token in a /native/live?grant=TOKEN url."""
    m = re.match(r"^/native/live\?grant=([A-Za-z0-9_.-]+)$", url or "")
    check(m, "stream url %s is not /native/live?grant=TOKEN" % short(url))
    return m.group(1)


def payload_of(token):
    """The decoded payload of a token: (kid, expires, channels list)."""
    p = b64d(token.split(".")[0]).decode("utf-8")
    parts = p.split("\n")
    check(len(parts) == 4 and parts[0] == "v1", "grant payload %s is not v1" % short(p))
    return parts[1], int(parts[2]), parts[3].split(",")


def live_url(token):
    return "/native/live?grant=%s" % token


# ---- a logged-in user -----------------------------------------------------------

class User:
    """A browser-like user of the site: a cookie jar, a new connection per request."""

    def __init__(self, addr, name=None):
        self.addr = addr
        self.name = name
        self.cookies = {}

    def cookie_header(self):
        return [("Cookie", "; ".join("%s=%s" % kv for kv in sorted(self.cookies.items())))] \
            if self.cookies else []

    def request(self, method, path, headers=(), body=b"", timeout=10.0):
        """One request on a new connection. A hold answer (200
        text/event-stream) is not read to its end: its body is what arrived
        within 0.2 s and r.hold is True, so a refusal check that gets a hold
        fails at once, naming it."""
        c = Conn(self.addr, timeout)
        try:
            c.send(build_request(method, path, self.cookie_header() + list(headers), body))
            r = c.read_head(timeout)
            r.hold = r.status == 200 and (r.header("content-type") or "").startswith("text/event-stream")
            if r.hold:
                c.read_until(lambda b: False, 0.2)
                r.body, r.framing = c.buf, "hold"
            else:
                c.read_body(r, method, timeout)
        finally:
            c.close()
        for k, v in r.cookies().items():
            if v in ("", '""'):
                self.cookies.pop(k, None)
            else:
                self.cookies[k] = v
        return r

    def get(self, path, **kw):
        return self.request("GET", path, **kw)

    def form_token(self, r, what):
        m = re.search(rb'name="csrfmiddlewaretoken" value="([^"]+)"', r.body)
        check(m, "%s: no csrfmiddlewaretoken in the page (%s)" % (what, r.summary()))
        return m.group(1).decode()

    def post_form(self, path, fields):
        return self.request("POST", path, [("Content-Type", "application/x-www-form-urlencoded")],
                            form_body(fields))

    def login(self):
        """Logs in through the real login form (GET for the CSRF token, POST)."""
        r = self.get("/accounts/login/")
        check(r.status == 200, "GET /accounts/login/: %s %s" % (r.summary(), short(r.body, 120)))
        check("csrftoken" in self.cookies, "the login page set no csrftoken cookie")
        token = self.form_token(r, "login page")
        r = self.post_form("/accounts/login/", [("username", self.name), ("password", PASSWORD),
                                                ("csrfmiddlewaretoken", token), ("next", "/")])
        check(r.status == 302 and r.header("location") == "/",
              "%s's login POST: want 302 to /, got %s Location %r %s" % (
                  self.name, r.summary(), r.header("location"), short(r.body, 120)))
        check("sessionid" in self.cookies, "%s's login set no sessionid cookie" % self.name)
        r = self.get("/")
        who = re.search(rb'data-testid="whoami">([^<]*)<', r.body)
        check(r.status == 200 and who and who.group(1).decode() == self.name,
              "%s's front page after login: %s, whoami %r" % (
                  self.name, r.summary(), who and who.group(1)))
        return self

    def grant(self, path):
        """GET a /grant/... view -> Response (JSON)."""
        return self.get(path)

    def stream_url(self, path):
        r = self.grant(path)
        check(r.status == 200, "%s GET %s: want 200, got %s %s" % (self.name, path, r.summary(), short(r.body, 160)))
        j = r.json()
        check(isinstance(j, dict) and isinstance(j.get("url"), str), "%s GET %s: %s" % (self.name, path, short(r.body)))
        return j["url"]

    def annotate(self, document_id, quote, comment):
        """Posts an annotation through the document page's form; returns its id."""
        r = self.get("/documents/%d/" % document_id)
        check(r.status == 200, "%s GET /documents/%d/: %s" % (self.name, document_id, r.summary()))
        m = re.search(rb'action="(/documents/%d/submissions/(\d+)/annotate)"' % document_id, r.body)
        check(m, "%s: no annotate form on /documents/%d/" % (self.name, document_id))
        token = self.form_token(r, "document page")
        r = self.post_form(m.group(1).decode(), [("csrfmiddlewaretoken", token), ("path", "mojo"),
                                                 ("quote", quote), ("comment", comment)])
        loc = r.header("location") or ""
        m2 = re.search(r"#annotation-(\d+)$", loc)
        check(r.status == 302 and m2, "%s's annotate POST: want 302 to ...#annotation-N, got %s Location %r %s" % (
            self.name, r.summary(), loc, short(r.body, 160)))
        return int(m2.group(1))

    def hold_headers(self):
        return self.cookie_header()


# ---- annotation events on a hold -------------------------------------------------------

def read_events(conn, head_body, n, timeout=10.0):
    """Reads a hold until n events arrived after head_body (or EOF/timeout);
    returns the parsed event blocks (dicts of parse_block)."""
    k = len(head_body)
    conn.read_until(lambda b: len(event_ids(b[k:])) >= n, timeout)
    read_head_body(conn, head_body, 0)
    items, _ = stream_items(conn.buf[k:])
    return [parse_block(it[2]) for it in items if it[0] == "event"]


def annotation_json(annotation):
    """The exact data line textshelf publishes for an annotation (realtime.publish)."""
    return json.dumps(annotation, separators=(",", ":"), sort_keys=True)
