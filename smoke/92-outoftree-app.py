#!/usr/bin/python3
"""smoke-outoftree-app: an application builds its own m0serve from the
installed package, with a mojo mount type of its own.

Phase 1 installs the build folder of --binary (`cmake --install`, as `make
install` does) with DESTDIR=TMP/stage and --prefix TMP/prefix, never into
the machine's /usr/local: the files land under TMP/stage/TMP/prefix, a prefix
they were not installed for, so the package must be relocatable. Phase 2
configures and builds fixtures/outoftree against that tree alone
(-DCMAKE_PREFIX_PATH), with m0serve's warnings as errors: `ticker` (the
built-in mount and the app's TickerMount) and `ticker-dup` (a second mount
named "mojo"). The later phases start what was built, on free loopback ports,
with the Django fixture mounted too, so the installed m0 Python package is the
one the embedded interpreter imports; the last, that a plain Python imports
it through the m0serve.pth the install put in PREFIX's dist-packages. TMP is
removed when the script ends; the logs of every command are in
build/smoke-logs/.

Every phase needs the install and the build; run alone, a phase does them
first. SERVER= does not apply: these phases start binaries of their own.
"""

import atexit
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import emit  # noqa: E402
from m0smoke import (  # noqa: E402
    DJANGO_ARGS, LOG_DIR, ROOT, Fail, Server, Smoke, check, check_hold_head, expect_events,
    http, publish_django, read_head_body, short)

SCRIPT = "92-outoftree-app"
FIXTURE = os.path.join(ROOT, "fixtures", "outoftree")
SITE_DIR = "lib/python%d.%d/dist-packages" % sys.version_info[:2]  # Debian's, under PREFIX
PHASE_S = 300.0  # the install and the app's build come first in whichever phase runs first
PUBLIC_HEADERS = ["app/app.hpp", "mojo/registry.hpp", "mojo/mojo.hpp", "mojo/builtin.hpp",
                  "mojo/ws_handler.hpp", "http/message.hpp", "http/ws_events.hpp"]
TICKER_HEAD = b": ticker room r1\n\n"

smoke = Smoke(SCRIPT, __doc__, phase_timeout=PHASE_S)


def run(cmd, label, env=None, timeout=240.0):
    """Runs cmd to completion, its output in build/smoke-logs/LABEL.log.
    Returns (rc, output); rc None when it had to be killed."""
    os.makedirs(LOG_DIR, exist_ok=True)
    path = os.path.join(LOG_DIR, "%s-%s.log" % (SCRIPT, label))
    full_env = dict(os.environ)
    full_env.update(env or {})
    p = subprocess.Popen(cmd, cwd=ROOT, env=full_env, stdin=subprocess.DEVNULL,
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        out, _ = p.communicate(timeout=timeout)
        rc = p.returncode
    except subprocess.TimeoutExpired:
        p.kill()
        out, _ = p.communicate(timeout=5)
        rc = None
    text = out.decode("utf-8", "replace")
    with open(path, "w") as f:
        f.write("# %s\n# env %r\n# rc %r\n%s" % (" ".join(cmd), env or {}, rc, text))
    return rc, text


def run_ok(cmd, label, env=None, timeout=240.0):
    rc, text = run(cmd, label, env, timeout)
    if rc != 0:
        tail = " | ".join(text.strip().splitlines()[-8:])
        raise Fail("%s exited %r (log %s-%s.log): %s" % (" ".join(cmd[:3]), rc, SCRIPT, label, tail))
    return text


class Built:
    """The install and the app's build, done once per run of this script."""
    tmp = None
    prefix = None  # where the files are: TMP/stage/TMP/prefix
    app_build = None
    install_s = None
    build_s = None
    failed = None


def built():
    if Built.failed:
        raise Fail("the install or the app's build failed earlier: %s" % Built.failed)
    if Built.app_build:
        return Built
    try:
        _install_and_build()
    except Fail as e:
        Built.failed = str(e)
        raise
    return Built


def _install_and_build():
    check(not os.environ.get("SERVER"), "SERVER= is set; this smoke starts binaries it built itself")
    build_dir = os.path.dirname(smoke.binary)
    check(os.path.exists(os.path.join(build_dir, "CMakeCache.txt")),
          "%s is not a CMake build folder (cd %s && make build)" % (build_dir, ROOT))
    Built.tmp = tempfile.mkdtemp(prefix="m0-outoftree-")
    atexit.register(shutil.rmtree, Built.tmp, True)
    intended = os.path.join(Built.tmp, "prefix")
    stage = os.path.join(Built.tmp, "stage")
    t0 = time.monotonic()
    run_ok(["cmake", "--install", build_dir, "--prefix", intended], "install",
           env={"DESTDIR": stage})
    Built.install_s = time.monotonic() - t0
    check(not os.path.exists(intended),
          "cmake --install wrote into the prefix itself (%s), not under DESTDIR" % intended)
    Built.prefix = stage + intended
    Built.app_build = os.path.join(Built.tmp, "app")
    t0 = time.monotonic()
    run_ok(["cmake", "-S", FIXTURE, "-B", Built.app_build, "-DCMAKE_PREFIX_PATH=" + Built.prefix,
            "-DCMAKE_EXPORT_COMPILE_COMMANDS=ON"], "configure")
    run_ok(["cmake", "--build", Built.app_build, "-j", "2"], "build")
    Built.build_s = time.monotonic() - t0


def python_dir():
    return os.path.join(built().prefix, "share", "m0serve", "python")


def start(ctx, binary, args, name):
    label = "%s-phase%d-%s" % (SCRIPT, ctx.number, name)
    s = Server(ctx, binary, args, label)
    ctx.servers.append(s)
    return s.start()


def get_text(srv, path, want_status=200):
    r = http(srv.addr, "GET", path)
    check(r.status == want_status, "GET %s: status %d, want %d; body %s" % (
        path, r.status, want_status, short(r.body)))
    return r.text()


def check_package_logged(srv):
    # The listener accepts (into its backlog) before the interpreter is up
    # and the configuration block logged: looked for until it is, bounded
    # (a sanitizer build starts slowly).
    want = "config: python package m0 from %s" % python_dir()
    deadline = time.monotonic() + 30
    while want not in srv.log_text() and time.monotonic() < deadline:
        time.sleep(0.05)
    check(want in srv.log_text(), "the log does not say %r: %s" % (
        want, short([l for l in srv.log_text().splitlines() if "python package" in l])))


@smoke.phase(1, "install into DESTDIR + a temp prefix: binary, libraries, headers, CMake package, m0 package, publish.lua")
def phase1(ctx):
    b = built()
    p = b.prefix
    want = (["bin/m0serve", "lib/libm0core.a", "lib/libm0wsgi.a", "lib/libm0app.a",
             "lib/cmake/m0serve/m0serveConfig.cmake",
             "lib/cmake/m0serve/m0serveConfigVersion.cmake",
             "lib/cmake/m0serve/m0serveTargets.cmake",
             "share/m0serve/python/m0/__init__.py", "share/m0serve/python/m0/redis_bus.py",
             "share/m0serve/python/m0/grant.py", "share/m0serve/bus/publish.lua",
             SITE_DIR + "/m0serve.pth"] +
            ["include/m0serve/" + h for h in PUBLIC_HEADERS])
    missing = [w for w in want if not os.path.isfile(os.path.join(p, w))]
    check(not missing, "not installed under %s: %s" % (p, missing))
    headers = sorted(os.path.relpath(os.path.join(d, f), os.path.join(p, "include", "m0serve"))
                     for d, _, fs in os.walk(os.path.join(p, "include")) for f in fs)
    check(headers == sorted(PUBLIC_HEADERS), "installed headers %r, want exactly %r" % (
        headers, sorted(PUBLIC_HEADERS)))
    # The package's Python side finds the installed publish script by its
    # place relative to itself, as it finds src/bus/publish.lua in the tree.
    rc, out = run(["/usr/bin/python3", "-c",
                   "import os, sys; sys.path.insert(0, sys.argv[1]); import m0.redis_bus as r; "
                   "print(os.path.realpath(r._SCRIPT))", python_dir()], "phase1-lua")
    lua = os.path.realpath(os.path.join(p, "share", "m0serve", "bus", "publish.lua"))
    check(rc == 0 and out.strip() == lua, "the installed m0.redis_bus reads %s, want %s (rc %r)" % (
        short(out.strip()), lua, rc))
    emit.emit("outoftree-install-s", round(b.install_s, 3), "s", out=sys.stderr)


@smoke.phase(2, "the app builds against the installed tree alone, with -Werror, nothing from the source tree")
def phase2(ctx):
    b = built()
    for exe in ("ticker", "ticker-dup"):
        check(os.access(os.path.join(b.app_build, exe), os.X_OK), "%s was not built" % exe)
    with open(os.path.join(b.app_build, "compile_commands.json")) as f:
        commands = [c["command"] for c in json.load(f)]
    check(len(commands) == 2, "the app compiled %d files, want 2 (main.cpp, duplicate.cpp)" % len(commands))
    for c in commands:
        check(os.path.join(ROOT, "src") not in c and os.path.join(ROOT, "build") not in c,
              "a compile command reaches into m0serve's tree: %s" % short(c, 600))
        check("-I%s" % os.path.join(b.prefix, "include", "m0serve") in c,
              "a compile command lacks the installed include folder: %s" % short(c, 600))
        check('M0_PYTHON_PACKAGE_DIR=\\"%s\\"' % python_dir() in c,
              "M0_PYTHON_PACKAGE_DIR is not the installed package: %s" % short(c, 600))
        check("-Werror" in c, "the app is not built with -Werror: %s" % short(c, 600))
    emit.emit("outoftree-build-s", round(b.build_s, 3), "s", out=sys.stderr)


@smoke.phase(3, "the app's mount answers beside the built-in mount and Django")
def phase3(ctx):
    b = built()
    srv = start(ctx, os.path.join(b.app_build, "ticker"),
                DJANGO_ARGS + ["--mount", "/ticker=ticker"], "ticker")
    got = get_text(srv, "/ticker/whoami")
    check(got == "ticker: built outside m0serve\n", "GET /ticker/whoami: %s" % short(got))
    got = get_text(srv, "/native/hello")
    check(got == "hello from mojo\n", "GET /native/hello (the built-in mount): %s" % short(got))
    get_text(srv, "/ticker/nope", 404)
    get_text(srv, "/ticker/watch?room=Bad!", 400)
    r = http(srv.addr, "GET", "/")
    check(r.status == 200, "GET / (Django): status %d; body %s" % (r.status, short(r.body)))
    check_package_logged(srv)


@smoke.phase(4, "a hold from the app's mount gets events Django publishes through the installed m0 package")
def phase4(ctx):
    b = built()
    srv = start(ctx, os.path.join(b.app_build, "ticker"),
                DJANGO_ARGS + ["--mount", "/ticker=ticker", "--realtime"], "ticker")
    c, head = ctx.hold(srv, "/ticker/watch?room=r1")
    check_hold_head(head, "mojo")
    read_head_body(c, TICKER_HEAD)
    id1 = publish_django(srv.addr, "ticker.r1", "first")
    id2 = publish_django(srv.addr, "ticker.r1", "second")
    check(id2 == id1 + 1, "Django /publish answered ids %r: not consecutive" % ((id1, id2),))
    expect_events(c, TICKER_HEAD, [(id1, "first"), (id2, "second")], what="ticker hold")
    check_package_logged(srv)


@smoke.phase(5, "a mount name listed twice: exit 2 with one line naming it; the stock binary knows no ticker")
def phase5(ctx):
    b = built()
    dup = os.path.join(b.app_build, "ticker-dup")
    rc, out = run([dup, "--check", "--listen", "127.0.0.1:0", "--mount", "/=mojo"], "phase5-dup",
                  timeout=20)
    lines = out.strip().splitlines()
    check(rc == 2, "ticker-dup exited %r, want 2; output %s" % (rc, short(out)))
    check(len(lines) == 1 and "mojo mount name 'mojo' is registered twice" in lines[0],
          "ticker-dup said %s, want one line naming 'mojo' as registered twice" % short(out))
    rc, out = run([os.path.join(b.prefix, "bin", "m0serve"), "--check", "--listen", "127.0.0.1:0",
                   "--mount", "/t=ticker"], "phase5-stock", timeout=20)
    check(rc == 2 and "'ticker'" in out, "the installed m0serve with --mount /t=ticker: exit %r, %s" % (
        rc, short(out)))


@smoke.phase(6, "the installed m0serve finds the installed m0 package (PREFIX/share/m0serve/python)")
def phase6(ctx):
    b = built()
    srv = start(ctx, os.path.join(b.prefix, "bin", "m0serve"), DJANGO_ARGS + ["--realtime"],
                "installed")
    check_package_logged(srv)
    publish_django(srv.addr, "installed", "one")  # m0.publish from the installed package
    got = get_text(srv, "/native/hello")
    check(got == "hello from mojo\n", "GET /native/hello: %s" % short(got))


@smoke.phase(7, "import m0 in a plain /usr/bin/python3 (manage.py, Celery) through the installed m0serve.pth alone")
def phase7(ctx):
    site_dir = os.path.join(built().prefix, SITE_DIR)
    # -I -S: no PYTHONPATH, no site-packages of the machine; only the
    # installed dist-packages, read as site reads it (its .pth files run).
    probe = ("import site, sys; site.addsitedir(sys.argv[1]); import m0, m0.redis_bus; "
             "print(m0.__file__)")
    rc, out = run(["/usr/bin/python3", "-I", "-S", "-c", probe, site_dir], "phase7-import")
    want = os.path.join(python_dir(), "m0", "__init__.py")
    check(rc == 0 and out.strip() == want, "import m0 through %s/m0serve.pth: rc %r, %s; want %s" % (
        site_dir, rc, short(out.strip()), want))
    rc, out = run(["/usr/bin/python3", "-I", "-S", "-c", "import m0"], "phase7-without")
    check(rc != 0, "import m0 works without the installed .pth (%s): the phase proves nothing" % (
        short(out.strip())))


if __name__ == "__main__":
    sys.exit(smoke.main())
