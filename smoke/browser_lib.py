"""What the browser smokes share: Debian's Chromium, the playwright-core
package of fixtures/textshelf/browser (installed by `npm ci` there when
missing), a node script run with its lines relayed, and the rule for a
machine without Chromium (one SKIP line, exit 0; FAIL with
M0_REQUIRE_BROWSER=1, as `make test-browser` and CI set it)."""

import os
import shutil
import subprocess
import sys
import threading

import m0smoke
from m0smoke import ROOT, Fail, Skip, check

CHROMIUM = "/usr/bin/chromium"
BROWSER_DIR = os.path.join(ROOT, "fixtures", "textshelf", "browser")


def relay(cmd, cwd, env, budget, prefix, on_line=None):
    """Runs cmd, copying its output lines to stderr as they come; returns
    (rc, lines). rc is None when it was killed at the budget. With on_line,
    each line is also passed to it, and what it returns (a line) is written
    to cmd's stdin."""
    p = subprocess.Popen(cmd, cwd=cwd, env=env, stdin=subprocess.PIPE if on_line else subprocess.DEVNULL,
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
    m0smoke._started.append(p)  # stopped at the end if the smoke fails first
    lines = []

    def pump():
        for raw in p.stdout:
            line = raw.decode("utf-8", "replace").rstrip("\n")
            lines.append(line)
            sys.stderr.write("%s%s\n" % (prefix, line))
            sys.stderr.flush()
            answer = on_line(line) if on_line else None
            if answer is not None:
                try:
                    p.stdin.write(answer.encode("utf-8") + b"\n")
                    p.stdin.flush()
                except OSError as e:
                    sys.stderr.write("  could not answer %r: %s\n" % (line, e))

    t = threading.Thread(target=pump, daemon=True)
    t.start()
    try:
        rc = p.wait(budget)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, 9)  # its own session: node and the chromium it started
        p.wait(10)
        rc = None
    t.join(5)
    if p.stdin:
        try:
            p.stdin.close()
        except OSError:
            pass
    return rc, lines


def node(browser_dir=BROWSER_DIR):
    """node's path, with playwright-core installed in browser_dir (its
    package-lock.json pins it)."""
    path = shutil.which("node")
    check(path, "node is not installed")
    if os.path.isdir(os.path.join(browser_dir, "node_modules", "playwright-core")):
        return path
    npm = shutil.which("npm")
    check(npm, "%s/node_modules is missing and npm is not installed" % os.path.relpath(browser_dir, ROOT))
    sys.stderr.write("  node_modules missing: npm ci --no-audit --no-fund (in %s)\n" % browser_dir)
    rc, lines = relay([npm, "ci", "--no-audit", "--no-fund"], browser_dir, dict(os.environ), 600.0, "  npm| ")
    check(rc == 0, "npm ci exited %r: %s" % (rc, lines[-1] if lines else "(no output)"))
    return path


def require_chromium():
    """For a browser phase of a smoke that has others: Skip (one SKIP line,
    the other phases run) without Chromium, or Fail with M0_REQUIRE_BROWSER=1."""
    if os.path.exists(CHROMIUM):
        return
    if os.environ.get("M0_REQUIRE_BROWSER"):
        raise Fail("%s not installed (make deps installs it)" % CHROMIUM)
    raise Skip("%s not installed" % CHROMIUM)


def main(smoke, what):
    """Runs the smoke, or says why not on a machine without Chromium."""
    if not os.path.exists(CHROMIUM) and not {"-h", "--help", "--list"} & set(sys.argv[1:]):
        # `make test-browser` sets M0_REQUIRE_BROWSER: `make deps` installs
        # Chromium, so its absence there is a failure, not a skip.
        if os.environ.get("M0_REQUIRE_BROWSER"):
            print("FAIL %s: %s not installed (make deps installs it)" % (what, CHROMIUM), flush=True)
            sys.exit(1)
        print("SKIP %s: %s not installed" % (what, CHROMIUM), flush=True)
        sys.exit(0)
    sys.exit(smoke.main())
