"""m0redis: a real redis-server for the smokes (stdlib only).

Started on a free 127.0.0.1 port with its own directory under
build/smoke-logs/, stopped by its PID (SIGTERM, or SIGKILL to make it crash),
started again on the same port and directory: with persist=True it keeps its
data in an append-only file across that, without it comes back empty.
"""

import os
import shutil
import signal
import socket
import subprocess
import time

from m0smoke import LOG_DIR, Fail, _started, free_port


class RedisServer:
    def __init__(self, label, persist=False, extra=()):
        self.label = label
        self.persist = persist
        self.extra = list(extra)  # more redis-server arguments (--requirepass, --user ...)
        self.port = free_port()
        self.dir = os.path.join(LOG_DIR, "%s-redis" % label)
        shutil.rmtree(self.dir, ignore_errors=True)
        os.makedirs(self.dir)
        self.proc = None
        self.start()

    @property
    def url(self):
        return "redis://127.0.0.1:%d/0" % self.port

    def start(self, timeout=10.0):
        log = open(os.path.join(self.dir, "redis.log"), "ab")
        self.proc = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--dir", self.dir,
             "--save", "", "--appendonly", "yes" if self.persist else "no",
             "--appendfsync", "always"] + self.extra,
            stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        log.close()
        _started.append(self.proc)
        deadline = time.monotonic() + timeout
        for _ in range(int(timeout / 0.02) + 2):
            if self.proc.poll() is not None:
                raise Fail("redis-server exited with code %d at start (log %s/redis.log)" % (
                    self.proc.returncode, self.dir))
            try:
                socket.create_connection(("127.0.0.1", self.port), 0.2).close()
                return self
            except OSError:
                if time.monotonic() >= deadline:
                    break
                time.sleep(0.02)
        raise Fail("redis-server not accepting on port %d within %.0fs" % (self.port, timeout))

    def stop(self, crash=False):
        """SIGTERM (or SIGKILL: a crash) by PID, and waits for the exit."""
        if self.proc and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL if crash else signal.SIGTERM)
            self.proc.wait(10)
        self.proc = None

    def restart(self, crash=False):
        self.stop(crash)
        self.start()

    def command(self, *args):
        """One command through redis-cli; its output as text."""
        out = subprocess.run(["redis-cli", "-p", str(self.port)] + [str(a) for a in args],
                             capture_output=True, text=True, timeout=10)
        return out.stdout.strip()
