"""bench_wrk: requests under wrk (bench.py's request rows).

Each server starts fresh in its own temporary folder, is warmed up for a
second (wrk -t1 -c4), then measured with `wrk -t2 -c50 -d<seconds>s
--latency`, and stopped by its PID. Requests/s and p50/p99 latency come from
wrk's output; the server's CPU and its task switches per request (every
process under its PID, every thread) from /proc before and after. Django's
requests cost m0serve about 3 task switches each; 15 and more is the GIL
and the app's locks handed back and forth inside requests (docs/BENCHMARK.md,
the switch interval).

    m0serve   fixtures/djangoproj on m0serve, --blocking-threads 4
    m0serve-1loop  the same with --loops 1
    gunicorn  the same project, gunicorn --worker-class gthread --threads 4
              --workers 1
    uwsgi     the same project, uwsgi --plugin python3 --threads 4
              --processes 1 --http-socket (which closes after each answer:
              wrk connects again for every request)
    m0-mojo   m0serve's built-in mojo mount, GET /native/hello
    m0-mojo-inloop  the same with --mojo-in-loop (the loop runs it in place)
    nginx     one worker, `return 200 "hello\\n";`

Django serves two paths: `/` (the index page, a template) and `/hello` (a
plain "hello"); the mojo mount and nginx serve one hello each.

The server's own cost, `/wsgi-hello`: fixtures/hellowsgi, a WSGI callable
answering six bytes with no framework, so what is measured is the server's
parse, hand-off, GIL, environ, start_response and write:

    m0-hello-1t    m0serve --blocking-threads 1
    m0-hello       m0serve with its default threads (4)
    gthread-hello  gunicorn --worker-class gthread --workers 1 --threads 1
                   (Granian's published comparison: one worker, one thread)
    sync-hello     gunicorn --worker-class sync --workers 1
    uwsgi-hello    uwsgi --threads 4 --processes 1 --http-socket
"""

import os
import re
import signal
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_util import (ROOT, cpu_seconds, free_port, start, stop, task_switches, wait_port,  # noqa: E402
                        with_descendants)

DJANGO = os.path.join(ROOT, "fixtures", "djangoproj")
HELLO = os.path.join(ROOT, "fixtures", "hellowsgi")

# (path, servers): the rows of the table, in order.
PLAN = [("/", ["m0serve", "m0serve-1loop", "gunicorn", "uwsgi"]),
        ("/hello", ["m0serve", "m0serve-1loop", "gunicorn", "uwsgi"]),
        ("/native/hello", ["m0-mojo", "m0-mojo-inloop", "nginx"]),
        ("/wsgi-hello", ["m0-hello-1t", "m0-hello", "gthread-hello", "sync-hello", "uwsgi-hello"])]

NGINX_HELLO = """
worker_processes 1;
pid %(tmp)s/nginx.pid;
error_log %(tmp)s/error.log warn;
events { worker_connections 1024; }
http {
    access_log off;
    client_body_temp_path %(tmp)s/body;
    proxy_temp_path %(tmp)s/proxy;
    fastcgi_temp_path %(tmp)s/fastcgi;
    uwsgi_temp_path %(tmp)s/uwsgi;
    scgi_temp_path %(tmp)s/scgi;
    server {
        listen 127.0.0.1:%(port)d;
        location / { default_type text/plain; return 200 "hello\\n"; }
    }
}
"""


def command(kind, binary, port, tmp):
    """The command line of one server on port, and the signal that stops it."""
    listen = "127.0.0.1:%d" % port
    if kind in ("m0serve", "m0serve-1loop"):
        return [binary, "--listen", listen, "--chdir", DJANGO, "--mount", "/=djangoproj.wsgi:application",
                "--blocking-threads", "4", "--log-level", "warn"] + (
                    ["--loops", "1"] if kind == "m0serve-1loop" else []), signal.SIGTERM
    if kind in ("m0-mojo", "m0-mojo-inloop"):
        return [binary, "--listen", listen, "--mount", "/native=mojo", "--log-level", "warn"] + (
            ["--mojo-in-loop"] if kind == "m0-mojo-inloop" else []), signal.SIGTERM
    if kind == "gunicorn":
        return ["gunicorn", "--worker-class", "gthread", "--threads", "4", "--workers", "1",
                "--bind", listen, "--chdir", DJANGO, "--log-level", "warning",
                "djangoproj.wsgi:application"], signal.SIGTERM
    if kind == "uwsgi":
        return ["uwsgi", "--plugin", "python3", "--threads", "4", "--processes", "1",
                "--http-socket", listen, "--chdir", DJANGO, "--module", "djangoproj.wsgi:application",
                "--need-app", "--die-on-term", "--disable-logging"], signal.SIGTERM
    if kind in ("m0-hello-1t", "m0-hello"):
        return [binary, "--listen", listen, "--chdir", HELLO, "--mount", "/=hellowsgi:application",
                "--log-level", "warn"] + (["--blocking-threads", "1"] if kind == "m0-hello-1t" else []), \
            signal.SIGTERM
    if kind in ("gthread-hello", "sync-hello"):
        worker = ["--worker-class", "gthread", "--threads", "1"] if kind == "gthread-hello" else [
            "--worker-class", "sync"]
        return ["gunicorn", *worker, "--workers", "1", "--bind", listen, "--chdir", HELLO,
                "--log-level", "warning", "hellowsgi:application"], signal.SIGTERM
    if kind == "uwsgi-hello":
        return ["uwsgi", "--plugin", "python3", "--threads", "4", "--processes", "1",
                "--http-socket", listen, "--chdir", HELLO, "--module", "hellowsgi:application",
                "--need-app", "--die-on-term", "--disable-logging"], signal.SIGTERM
    if kind == "nginx":
        conf = os.path.join(tmp, "nginx.conf")
        with open(conf, "w") as f:
            f.write(NGINX_HELLO % {"tmp": tmp, "port": port})
        return ["nginx", "-c", conf, "-p", tmp, "-g", "daemon off;"], signal.SIGQUIT
    raise SystemExit("bench: no request server %r" % kind)


UNITS = {"us": 1e-3, "ms": 1.0, "s": 1e3, "m": 60e3}


def to_ms(text):
    m = re.fullmatch(r"([\d.]+)(us|ms|s|m)", text)
    if not m:
        raise ValueError(text)
    return float(m.group(1)) * UNITS[m.group(2)]


def parse_wrk(out):
    """wrk --latency's text -> requests_per_s, p50_ms, p99_ms, requests,
    bytes_read, socket_errors (wrk counts a connection the server closes
    without `Connection: close` as a read error: uWSGI's --http-socket does
    so after every answer) and non_2xx (answers other than 2xx/3xx)."""
    fig = {}
    m = re.search(r"Requests/sec:\s+([\d.]+)", out)
    fig["requests_per_s"] = float(m.group(1)) if m else None
    for pct, key in (("50", "p50_ms"), ("99", "p99_ms")):
        m = re.search(r"^\s+%s%%\s+(\S+)" % pct, out, re.M)
        fig[key] = to_ms(m.group(1)) if m else None
    m = re.search(r"(\d+) requests in \S+, ([\d.]+)([KMGTP]?)B read", out)
    fig["requests"] = int(m.group(1)) if m else 0
    # wrk counts every byte it read, headers and bodies, and a response
    # the duration's end cut short; in binary units, two decimals.
    fig["bytes_read"] = float(m.group(2)) * 1024 ** " KMGTP".index(m.group(3) or " ") if m else None
    m = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", out)
    fig["socket_errors"] = sum(int(x) for x in m.groups()) if m else 0
    m = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    fig["non_2xx"] = int(m.group(1)) if m else 0
    return fig


def measure(kind, path, binary, seconds, tmp, wrk_args=("-t2", "-c50"), warm_args=("-t1", "-c4"),
            env=None, probe=None):
    """One server, fresh: warm-up, then wrk; returns its figures.

    wrk_args and warm_args are the measurement's and the warm-up's wrk
    options (warm_args None: no warm-up); env, the server's environment;
    probe(url), called once before the warm-up, returns figures of its own
    to add."""
    port = free_port()
    cmd, sig = command(kind, binary, port, tmp)
    proc, log = start(cmd, os.path.join(tmp, kind + ".log"), env=env)
    try:
        wait_port(port, proc, kind, timeout=30)
        url = "http://127.0.0.1:%d%s" % (port, path)
        extra = probe(url) if probe else {}
        if warm_args is not None:
            subprocess.run(["wrk", *warm_args, "-d1s", url], stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL, timeout=60)
        pids = with_descendants([proc.pid])
        cpu0, switches0 = cpu_seconds(pids), task_switches(pids)
        out = subprocess.run(["wrk", *wrk_args, "-d%ds" % seconds, "--latency", url],
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=seconds + 60)
        cpu, switches = cpu_seconds(pids) - cpu0, task_switches(pids) - switches0
        if proc.poll() is not None:
            raise SystemExit("bench: %s exited %s under wrk; its log: %s" % (kind, proc.returncode, log.name))
    finally:
        stop(proc, sig)
        log.close()
    fig = parse_wrk(out.stdout.decode(errors="replace"))
    if fig["requests_per_s"] is None:
        raise SystemExit("bench: wrk printed no Requests/sec for %s %s: %s" % (
            kind, path, out.stdout.decode(errors="replace")[-400:]))
    fig.update(extra)
    fig.update(cpu_s=round(cpu, 3), cpu_pct=round(100 * cpu / seconds, 1), seconds=seconds,
               cpu_us_per_req=round(1e6 * cpu / fig["requests"], 2) if fig["requests"] else None,
               switches_per_req=round(switches / fig["requests"], 2) if fig["requests"] else None)
    return fig
