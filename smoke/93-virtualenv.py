#!/usr/bin/python3
"""smoke-virtualenv: the project's virtualenv (--virtualenv DIR, VIRTUAL_ENV).

The first phase that runs makes, in build/smoke-cache/ and offline, what a
Django shop has (once: a later run with the same script and Python, such as
a sanitizer run's, takes it as it is): a venv by Debian's `/usr/bin/python3 -m venv` (pip and
setuptools from Debian's own wheels), a package built into a wheel by the
system's pip (`pip wheel --no-deps --no-build-isolation`) and installed in
the venv (`pip install --no-index`), and a second package installed
editable (`pip install --no-build-isolation --no-index -e`), which only a
.pth file in the venv's site-packages makes importable. A WSGI app imports
both and answers sys.prefix and what it found. The phases serve it with
--virtualenv and with VIRTUAL_ENV, then check include-system-site-packages
(Django, a system package, imports only with it true), the refusals (a
folder that is not a venv, a venv of another Python: exit 2, one line), and
that without a venv nothing changed. What the phases add goes to a
temporary folder, removed when the script ends; command logs are in
build/smoke-logs/.

SERVER= does not apply: the phases start servers with their own venvs.
"""

import atexit
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from m0smoke import DJANGO_ARGS, LOG_DIR, ROOT, Fail, Smoke, check, http, once, short  # noqa: E402

SCRIPT = "93-virtualenv"
PY = "/usr/bin/python3"
os.environ.pop("VIRTUAL_ENV", None)  # the phases say when there is one

smoke = Smoke(SCRIPT, __doc__, phase_timeout=120.0)

APP = '''import json, sys
def application(environ, start_response):
    found = {"prefix": sys.prefix, "executable": sys.executable}
    for name in ("m0vwheel", "m0vedit", "django"):
        try:
            found[name] = getattr(__import__(name), "WHERE", "system")
        except ImportError:
            found[name] = None
    body = json.dumps(found).encode()
    start_response("200 OK", [("Content-Type", "application/json"),
                              ("Content-Length", str(len(body)))])
    return [body]
'''
PYPROJECT = '''[build-system]
requires = ["setuptools"]
build-backend = "setuptools.build_meta"

[project]
name = "m0vwheel"
version = "1.0"
'''
# No pyproject.toml: pip installs it editable by `setup.py develop`, which
# writes easy-install.pth (setuptools' PEP 660 path would need `wheel` in
# the venv, which Debian's ensurepip does not put there).
SETUP_PY = 'from setuptools import setup\nsetup(name="m0vedit", version="1.0", packages=["m0vedit"])\n'


def sh(cmd, label, env=None):
    """Runs cmd; its output goes to build/smoke-logs/SCRIPT-LABEL.log. Fails
    with the output's tail unless it exits 0; returns the output."""
    os.makedirs(LOG_DIR, exist_ok=True)
    full = dict(os.environ, PIP_NO_INDEX="1", PIP_DISABLE_PIP_VERSION_CHECK="1", **(env or {}))
    try:
        p = subprocess.run(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, env=full, timeout=100)
    except subprocess.TimeoutExpired:
        raise Fail("%s: still running after 100s" % " ".join(cmd[:4]))
    out = p.stdout.decode("utf-8", "replace")
    with open(os.path.join(LOG_DIR, "%s-%s.log" % (SCRIPT, label)), "w") as f:
        f.write("# %s\n# rc %d\n%s" % (" ".join(cmd), p.returncode, out))
    if p.returncode != 0:
        raise Fail("%s exited %d: %s" % (" ".join(cmd[:5]), p.returncode,
                                         " | ".join(out.strip().splitlines()[-6:])))
    return out


def write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)


class Made:
    """The venv, its packages and the app (made() makes them once); `tmp` is
    this run's own folder, for what the phases add."""
    tmp = venv = app = None


def _make():
    tmp = tempfile.mkdtemp(prefix="m0-venv-")
    atexit.register(shutil.rmtree, tmp, True)
    # The venv and its packages are kept in build/smoke-cache/, named by this
    # script's bytes and the Python it is made with: `make test` makes them,
    # the sanitizer runs of this smoke take them as they are (they do not
    # depend on the binary under test, and making them took most of its time).
    version = sh([PY, "-c", "import sys; print(sys.version)"], "python-version")
    with open(os.path.abspath(__file__), "rb") as f:
        key = hashlib.sha256(f.read() + version.encode()).hexdigest()[:16]
    cache = os.path.join(ROOT, "build", "smoke-cache", "%s-%s" % (SCRIPT, key))
    venv, app = os.path.join(cache, "venv"), os.path.join(cache, "app")
    Made.tmp, Made.venv, Made.app = tmp, venv, app
    if os.path.exists(os.path.join(cache, "complete")):
        print("93-virtualenv: the venv made by an earlier run: %s" % cache, flush=True)
        return Made
    shutil.rmtree(cache, True)
    src = os.path.join(cache, "src")
    sh([PY, "-m", "venv", venv], "venv")
    write(os.path.join(src, "whl", "pyproject.toml"), PYPROJECT)
    write(os.path.join(src, "whl", "m0vwheel", "__init__.py"), 'WHERE = "wheel"\n')
    write(os.path.join(src, "edit", "setup.py"), SETUP_PY)
    write(os.path.join(src, "edit", "m0vedit", "__init__.py"), 'WHERE = "editable"\n')
    wheels = os.path.join(cache, "wheels")
    sh([PY, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index", "-w", wheels,
        os.path.join(src, "whl")], "wheel")
    built = [os.path.join(wheels, w) for w in os.listdir(wheels) if w.endswith(".whl")]
    check(len(built) == 1, "pip wheel made %r, want one wheel" % built)
    vpy = os.path.join(venv, "bin", "python3")
    sh([vpy, "-m", "pip", "install", "--no-index"] + built, "install-wheel")
    sh([vpy, "-m", "pip", "install", "--no-build-isolation", "--no-index", "-e",
        os.path.join(src, "edit")], "install-editable")
    write(os.path.join(app, "venvapp.py"), APP)
    write(os.path.join(cache, "complete"), "")
    return Made


made = once(_make, "making the venv")


def serve_app(ctx, args=(), env=None):
    """The app served with `args`; its answer to GET / as a dict."""
    srv = ctx.server(["--chdir", made().app, "venvapp"] + list(args), env=env)
    r = http(srv.addr, "GET", "/")
    check(r.status == 200, "GET /: %s %s" % (r.summary(), short(r.body)))
    return srv, r.json()


def check_in_venv(srv, got, source):
    want = {"prefix": Made.venv, "executable": os.path.join(Made.venv, "bin", "python3"),
            "m0vwheel": "wheel", "m0vedit": "editable", "django": None}
    check(got == want, "the app in the venv found %s, want %s" % (got, want))
    line = "config: python virtualenv %s (from %s" % (Made.venv, source)
    check(line in srv.log_text(), "the log does not say %r: %s" % (line, short(
        [l for l in srv.log_text().splitlines() if "virtualenv" in l])))


def refused(ctx, args, want_parts, env=None):
    rc, out, err = ctx.run_binary(["--check", "--listen", "127.0.0.1:0"] + args)
    lines = err.strip().splitlines()
    check(rc == 2, "exit %r, want 2; stderr %s" % (rc, short(err)))
    check(len(lines) == 1 and all(p in lines[0] for p in want_parts),
          "stderr %s, want one line naming %r" % (short(err), want_parts))


@smoke.phase(1, "offline: a venv by /usr/bin/python3 -m venv, a wheel and an editable install in it")
def phase1(ctx):
    m = made()
    out = sh([os.path.join(m.venv, "bin", "python3"), "-c",
              "import m0vwheel, m0vedit; print(m0vwheel.WHERE, m0vedit.WHERE)"], "venv-python")
    check(out.split() == ["wheel", "editable"], "the venv's own python3 found %s" % short(out))
    site = os.path.join(m.venv, "lib", "python%d.%d" % sys.version_info[:2], "site-packages")
    pth = [f for f in os.listdir(site) if f.endswith(".pth")]
    check("easy-install.pth" in pth, "the editable install left no .pth file: %r" % pth)


@smoke.phase(2, "--virtualenv DIR: both packages import, sys.prefix is the venv, Django (a system package) does not")
def phase2(ctx):
    srv, got = serve_app(ctx, ["--virtualenv", made().venv])
    check_in_venv(srv, got, "--virtualenv)")


@smoke.phase(3, "VIRTUAL_ENV=DIR without the flag serves the same; with both, the flag wins and the log says so")
def phase3(ctx):
    srv, got = serve_app(ctx, env={"VIRTUAL_ENV": made().venv})
    check_in_venv(srv, got, "VIRTUAL_ENV)")
    other = os.path.join(Made.tmp, "elsewhere")
    srv, got = serve_app(ctx, ["--virtualenv", Made.venv], env={"VIRTUAL_ENV": other})
    check_in_venv(srv, got, "--virtualenv; VIRTUAL_ENV %s unused)" % other)


@smoke.phase(4, "include-system-site-packages: false keeps Django out (the project does not load), true lets it in")
def phase4(ctx):
    venv = made().venv
    rc, _, err = ctx.run_binary(["--check", "--listen", "127.0.0.1:0", "--virtualenv", venv] +
                                DJANGO_ARGS)
    check(rc == 2 and "No module named 'django'" in err,
          "the Django fixture in a venv without system packages: exit %r, %s" % (rc, short(err)))
    with_system = os.path.join(Made.tmp, "venv-system")
    sh([PY, "-m", "venv", "--without-pip", "--system-site-packages", with_system], "venv-system")
    srv = ctx.server(DJANGO_ARGS + ["--virtualenv", with_system])
    r = http(srv.addr, "GET", "/")
    check(r.status == 200, "Django in a venv with system packages: GET / %s" % r.summary())
    check("system site-packages included" in srv.log_text(), "the log does not say included")
    srv, got = serve_app(ctx, ["--virtualenv", with_system])
    check(got["prefix"] == with_system and got["django"] == "system" and got["m0vwheel"] is None,
          "the app in the venv with system packages found %s" % got)


@smoke.phase(5, "refused, exit 2 with one line: a folder that is not a venv; a venv made for another Python (both versions named)")
def phase5(ctx):
    m = made()
    refused(ctx, ["--virtualenv", m.app, "--chdir", m.app, "venvapp"],
            ["--virtualenv %s is not a virtualenv" % m.app, "pyvenv.cfg"])
    other = os.path.join(m.tmp, "venv-3.99")
    os.makedirs(other, exist_ok=True)
    with open(os.path.join(m.venv, "pyvenv.cfg")) as f:
        cfg = f.read()
    check("version = " in cfg, "pyvenv.cfg names no version: %s" % short(cfg))
    write(os.path.join(other, "pyvenv.cfg"),
          "".join("version = 3.99.1\n" if l.startswith("version") else l + "\n"
                  for l in cfg.splitlines()))
    embedded = "%d.%d.%d" % sys.version_info[:3]
    refused(ctx, ["--virtualenv", other, "--chdir", m.app, "venvapp"],
            ["Python 3.99.1", "embeds Python %s" % embedded])
    os.environ["VIRTUAL_ENV"] = other
    try:
        refused(ctx, ["--chdir", m.app, "venvapp"], ["VIRTUAL_ENV %s was made for" % other])
    finally:
        del os.environ["VIRTUAL_ENV"]


@smoke.phase(6, "without a venv nothing changes: sys.prefix /usr, Django imports, the venv's packages do not")
def phase6(ctx):
    srv, got = serve_app(ctx)
    want = {"prefix": "/usr", "executable": PY, "m0vwheel": None, "m0vedit": None,
            "django": "system"}
    check(got == want, "the app without a venv found %s, want %s" % (got, want))
    check("config: python virtualenv none" in srv.log_text(), "the log does not say none")


if __name__ == "__main__":
    sys.exit(smoke.main())
