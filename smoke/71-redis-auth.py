#!/usr/bin/python3
"""smoke-redis-auth: m0serve on a Redis that wants a password.

Each phase starts its own redis-server (a free port, a directory under
build/smoke-logs/, stopped by its PID) with `--requirepass` or an ACL user,
and m0serve with `--bus redis://[USER[:PASSWORD]@]...` and, for the
password, `--bus-password-file`:

    m0serve --chdir fixtures/djangoproj --mount /=djangoproj.wsgi:application \\
            --mount /native=mojo --realtime --bus redis://m0@127.0.0.1:R/0 \\
            --bus-password-file build/smoke-logs/.../redis.pw ...

Checked: a refused password is one line and exit code 2 at start, and never
shows the password; the password from the file is nowhere on the command
line or in the log; holds hear publishes from the admin API and from a plain
Python process (M0_BUS with M0_BUS_PASSWORD_FILE); and through
`--bus redis+sentinel://` (one redis-sentinel, the first in the URL down)
the server and plain Python find the master. The failover itself is
test_redis_sentinel's (a master, a replica, three sentinels).
"""

import os
import re
import shutil
import signal
import socket
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from m0smoke import (  # noqa: E402
    DJANGO_ARGS, LOG_DIR, ROOT, Smoke, check, check_hold_head, expect_events, free_port,
    publish_admin, read_head_body, short, wait_for, wait_metric)
from m0redis import RedisServer  # noqa: E402

SCRIPT = "71-redis-auth"
ADMIN_KEY = "smoke-admin-key-71redisauth-5c1"
PASSWORD = "smoke p@ss:w/rd 71"
ENCODED = "smoke%20p%40ss%3Aw%2Frd%2071"
ACL = ["--user", "m0", "on", ">" + PASSWORD, "~m0:*", "&m0:*", "+@connection", "+@transaction",
       "+@read", "+@write", "+@pubsub", "+@scripting", "+time", "+role",
       "--user", "default", "off"]

smoke = Smoke(SCRIPT, __doc__, phase_timeout=60.0)


def redis_for(ctx, extra):
    r = RedisServer("%s-phase%d" % (SCRIPT, ctx.number), extra=extra)
    ctx.finalizers.append(r.stop)
    return r


@smoke.phase(1, "with requirepass, a wrong password, none, or one given twice is one line and exit code 2 that never shows it; the right one (URL or file) passes --check, masked in the log")
def phase1(ctx):
    redis = redis_for(ctx, ["--requirepass", PASSWORD])
    base = "127.0.0.1:%d/0" % redis.port
    pw_file = ctx.tmpfile("redis.pw", PASSWORD + "\n")
    cases = (
        (["--bus", "redis://:wrong-secret-71@" + base], "WRONGPASS", "wrong-secret-71"),
        (["--bus", "redis://" + base], "NOAUTH", None),
        (["--bus", "redis://:" + ENCODED + "@" + base, "--bus-password-file", pw_file],
         "give it once", ENCODED),
    )
    for extra, why, secret in cases:
        rc, out, err = ctx.run_binary(DJANGO_ARGS + ["--realtime", "--check"] + extra)
        lines = err.strip().splitlines()
        check(rc == 2, "%s: exit code %r, want 2 (stderr %s)" % (extra, rc, short(err)))
        check(len(lines) == 1 and why in lines[0],
              "%s: stderr %s, want one line with '%s'" % (extra, short(err), why))
        for text in (PASSWORD, secret):
            check(not text or text not in err + out, "%s: the password is in the output" % extra)
    for extra in (["--bus", "redis://:" + ENCODED + "@" + base],
                  ["--bus", "redis://" + base, "--bus-password-file", pw_file]):
        rc, out, err = ctx.run_binary(DJANGO_ARGS + ["--realtime", "--check"] + extra)
        check(rc == 0 and "configuration ok" in out + err,
              "%s: rc %r, %s" % (extra, rc, short(err)))
        check(PASSWORD not in err + out and ENCODED not in err + out,
              "%s --check: the password is in the output %s" % (extra, short(err, 2000)))
        if "@" in extra[1]:
            check("redis://:***@" + base in err, "--check: the URL is not shown masked: %s" % short(err, 2000))


@smoke.phase(2, "an ACL user whose password is read from a file: holds hear the admin API's publishes and a plain Python process's (M0_BUS with M0_BUS_PASSWORD_FILE); the password is not on the command line")
def phase2(ctx):
    redis = redis_for(ctx, ACL)
    url = "redis://m0@127.0.0.1:%d/0" % redis.port
    pw_file = ctx.tmpfile("redis.pw", PASSWORD + "\n")
    key_file = ctx.tmpfile("admin.key", ADMIN_KEY + "\n")
    srv = ctx.server(DJANGO_ARGS + ["--realtime", "--bus", url, "--bus-password-file", pw_file,
                                    "--admin-key-file", key_file, "--blocking-threads", "2"],
                     admin=True, admin_key=ADMIN_KEY)
    srv.require_own("it starts a Redis of its own")
    wait_metric(srv.admin, "m0_bus_redis_up", 1, 5.0, "the Redis bus connected")
    with open("/proc/%d/cmdline" % srv.proc.pid, "rb") as f:
        cmdline = f.read()
    check(PASSWORD.encode() not in cmdline, "the password is on m0serve's command line")
    c, head = ctx.hold(srv, "/native/hold?channel=auth2")
    check_hold_head(head, "mojo")
    read_head_body(c, b": mojo hold\n\n")
    first = publish_admin(srv.admin, ADMIN_KEY, "auth2", "from the admin API")
    code = "import m0, sys; print(m0.publish('auth2', 'from a cron job'))"
    env = dict(os.environ, M0_BUS=url, M0_BUS_PASSWORD_FILE=pw_file,
               PYTHONPATH=os.path.join(ROOT, "src", "wsgi"))
    out = subprocess.run(["/usr/bin/python3", "-c", code], capture_output=True, text=True,
                         timeout=20, env=env, cwd="/")
    check(out.returncode == 0 and re.match(r"^\d+$", out.stdout.strip()),
          "m0.publish with M0_BUS_PASSWORD_FILE: rc %d, %s %s" % (
              out.returncode, short(out.stdout), short(out.stderr)))
    second = int(out.stdout.strip())
    expect_events(c, b": mojo hold\n\n", [(first, "from the admin API", None), (second, "from a cron job", None)],
                  what="the mojo hold")
    check(PASSWORD not in srv.log_text(), "the password is in the server's log")


def start_sentinel(ctx, master_port):
    """One redis-sentinel (quorum 1) watching 127.0.0.1:master_port as m0m,
    stopped by its PID at the phase's end; its port."""
    port = free_port()
    d = os.path.join(LOG_DIR, "%s-phase%d-sentinel" % (SCRIPT, ctx.number))
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    conf = os.path.join(d, "sentinel.conf")
    with open(conf, "w") as f:
        f.write("port %d\nbind 127.0.0.1\ndir %s\nsentinel monitor m0m 127.0.0.1 %d 1\n"
                "sentinel auth-pass m0m \"%s\"\n" % (port, d, master_port, PASSWORD))
    with open(os.path.join(d, "sentinel.log"), "ab") as log:
        proc = subprocess.Popen(["redis-sentinel", conf], stdin=subprocess.DEVNULL, stdout=log,
                                stderr=subprocess.STDOUT, start_new_session=True)

    def stop():
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGTERM)
            proc.wait(10)
    ctx.finalizers.append(stop)
    def accepts():
        try:
            socket.create_connection(("127.0.0.1", port), 0.2).close()
            return True
        except OSError:
            return False
    wait_for(accepts, 10.0, what="redis-sentinel accepting")
    return port


@smoke.phase(3, "--bus redis+sentinel:// (the first sentinel down) with the master's password from a file: the server finds the master; holds hear the admin API's publishes and plain Python's (M0_BUS the same URL)")
def phase3(ctx):
    redis = redis_for(ctx, ["--requirepass", PASSWORD])
    sentinel = start_sentinel(ctx, redis.port)
    url = "redis+sentinel://127.0.0.1:%d,127.0.0.1:%d/m0m/0" % (free_port(), sentinel)
    pw_file = ctx.tmpfile("redis.pw", PASSWORD + "\n")
    key_file = ctx.tmpfile("admin.key", ADMIN_KEY + "\n")
    srv = ctx.server(DJANGO_ARGS + ["--realtime", "--bus", url, "--bus-password-file", pw_file,
                                    "--admin-key-file", key_file, "--blocking-threads", "2"],
                     admin=True, admin_key=ADMIN_KEY)
    srv.require_own("it starts a Redis of its own")
    wait_metric(srv.admin, "m0_bus_redis_up", 1, 5.0, "the Redis bus connected")
    check("names master m0m at 127.0.0.1:%d" % redis.port in srv.log_text(),
          "the log does not say which master the sentinel named: %s" % short(srv.log_text(), 2000))
    c, head = ctx.hold(srv, "/native/hold?channel=sent3")
    check_hold_head(head, "mojo")
    read_head_body(c, b": mojo hold\n\n")
    first = publish_admin(srv.admin, ADMIN_KEY, "sent3", "from the admin API")
    code = "import m0; print(m0.publish('sent3', 'from a cron job'))"
    env = dict(os.environ, M0_BUS=url, M0_BUS_PASSWORD_FILE=pw_file,
               PYTHONPATH=os.path.join(ROOT, "src", "wsgi"))
    out = subprocess.run(["/usr/bin/python3", "-c", code], capture_output=True, text=True,
                         timeout=20, env=env, cwd="/")
    check(out.returncode == 0 and re.match(r"^\d+$", out.stdout.strip()),
          "m0.publish through the sentinel: rc %d, %s %s" % (
              out.returncode, short(out.stdout), short(out.stderr)))
    expect_events(c, b": mojo hold\n\n", [(first, "from the admin API", None),
                                           (int(out.stdout.strip()), "from a cron job", None)],
                  what="the mojo hold")


if __name__ == "__main__":
    sys.exit(smoke.main())
