"""m0.publish outside m0serve with M0_ADMIN_URL: the in-process bus reached
through the admin API, against a real m0serve (build/m0serve, or the binary
M0SERVE names) that the tests start on free loopback ports with --realtime,
an admin listener and a key file, and stop by its PID."""
import os
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import unittest
from pathlib import Path
from unittest import mock
from urllib.parse import quote

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import m0  # noqa: E402
from m0 import admin_publish  # noqa: E402
from tests.test_m0_redis import free_port  # noqa: E402

ROOT = Path(__file__).resolve().parents[3]
HOLD_HEAD = b": mojo hold\n\n"


def free_ports(n):
    """n distinct free loopback ports."""
    ports = set()
    for _ in range(100 * n):
        ports.add(free_port())
        if len(ports) == n:
            return sorted(ports)
    raise RuntimeError("no %d distinct free ports" % n)


def read_until(sock, want, timeout=5.0):
    """Bytes from sock until `want` is among them (or the time is up)."""
    got = b""
    deadline = time.monotonic() + timeout
    while want not in got and time.monotonic() < deadline:
        sock.settimeout(max(0.01, deadline - time.monotonic()))
        try:
            chunk = sock.recv(65536)
        except socket.timeout:
            break
        if not chunk:
            break
        got += chunk
    return got


class AdminPublishTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        binary = os.environ.get("M0SERVE", str(ROOT / "build" / "m0serve"))
        if not os.access(binary, os.X_OK):
            raise RuntimeError(f"{binary} is not built (make build, or M0SERVE=path)")
        cls.dir = tempfile.mkdtemp(prefix="m0-admin-py-")
        cls.key_file = os.path.join(cls.dir, "admin.key")
        with open(cls.key_file, "w") as f:
            f.write(secrets.token_urlsafe(24) + "\n")
        port, admin = free_ports(2)
        cls.addr = ("127.0.0.1", port)
        cls.url = "http://127.0.0.1:%d" % admin
        cls.log = open(os.path.join(cls.dir, "m0serve.log"), "wb")
        cls.proc = subprocess.Popen(
            [binary, "--listen", "127.0.0.1:%d" % port, "--admin-listen", "127.0.0.1:%d" % admin,
             "--admin-key-file", cls.key_file, "--realtime", "--max-event-size", "1000",
             "--publish-batch-max", "5",
             "--mount", "/=mojo"],
            stdin=subprocess.DEVNULL, stdout=cls.log, stderr=subprocess.STDOUT)
        for target in (port, admin):
            for _ in range(400):
                if cls.proc.poll() is not None:
                    cls.tearDownClass()
                    raise RuntimeError("m0serve exited during start-up")
                try:
                    socket.create_connection(("127.0.0.1", target), 0.2).close()
                    break
                except OSError:
                    time.sleep(0.025)

    @classmethod
    def tearDownClass(cls):
        if cls.proc.poll() is None:
            cls.proc.terminate()
            cls.proc.wait(15)
        cls.log.close()
        shutil.rmtree(cls.dir, ignore_errors=True)

    def setUp(self):
        # Outside m0serve (no _m0), on the in-process bus: no M0_BUS.
        env = {k: v for k, v in os.environ.items() if k != "M0_BUS"}
        env.update(M0_ADMIN_URL=self.url, M0_ADMIN_KEY_FILE=self.key_file)
        patches = [mock.patch.dict(os.environ, env, clear=True),
                   mock.patch.dict(sys.modules, {"_m0": None})]
        for p in patches:
            p.start()
            self.addCleanup(p.stop)

    def hold(self, channel):
        sock = socket.create_connection(self.addr, 5)
        self.addCleanup(sock.close)
        sock.sendall(b"GET /hold?channel=%s HTTP/1.1\r\nHost: t\r\n\r\n" % quote(channel).encode())
        got = read_until(sock, b"\r\n\r\n" + HOLD_HEAD)
        self.assertIn(HOLD_HEAD, got, "no hold: %r" % got)
        return sock

    def test_a_publish_reaches_a_hold_with_the_next_id(self):
        sock = self.hold("news")
        first = m0.publish("news", "one\r\ntwo", event="update")
        second = m0.publish("news", b"three")
        self.assertEqual(second, first + 1)
        want = (b"id: %d\nevent: update\ndata: one\ndata: two\n\n" % first +
                b"id: %d\ndata: three\n\n" % second)
        self.assertEqual(read_until(sock, want), want)

    def test_publish_many_is_one_post_whose_ids_reach_a_hold_in_order(self):
        sock = self.hold("many")
        ids = m0.publish_many([("many", "a"), ("other", "b"), ("many", "c\r\nd", "up")])
        self.assertEqual(ids, [ids[0], ids[0] + 1, ids[0] + 2])
        want = b"id: %d\ndata: a\n\nid: %d\nevent: up\ndata: c\ndata: d\n\n" % (ids[0], ids[2])
        self.assertEqual(read_until(sock, want), want)

    def test_publish_many_past_the_servers_batch_limit_is_a_value_error(self):
        with self.assertRaisesRegex(ValueError, "over --publish-batch-max 5"):
            m0.publish_many([("many", str(n)) for n in range(6)])
        with self.assertRaisesRegex(ValueError, "^m0.publish: event 1: event is"):
            m0.publish_many([("many", "ok"), ("many", "x" * 1000)])

    def test_a_url_with_a_trailing_slash_and_utf8_names_and_data(self):
        with mock.patch.dict(os.environ, {"M0_ADMIN_URL": self.url + "/"}):
            sock = self.hold("caf\u00e9")
            n = m0.publish("caf\u00e9", "cr\u00e8me")
        want = "id: %d\ndata: cr\u00e8me\n\n" % n
        self.assertEqual(read_until(sock, want.encode()), want.encode())

    def test_bad_names_and_data_are_value_errors_before_anything_is_sent(self):
        # A port nothing listens on: a ValueError here was raised before sending.
        closed = "http://127.0.0.1:%d" % free_ports(1)[0]
        with mock.patch.dict(os.environ, {"M0_ADMIN_URL": closed}):
            for channel in ("m0.slot.1", "", "a\nb", " edge"):
                with self.subTest(channel=channel), self.assertRaises(ValueError):
                    m0.publish(channel, "x")
            with self.assertRaises(ValueError):
                m0.publish("news", b"\xff")
            with self.assertRaises(ValueError):
                m0.publish("news", "lone \ud800 surrogate")
            with self.assertRaises(TypeError):
                m0.publish("news", 42)

    def test_an_event_over_the_servers_limit_is_a_value_error_naming_it(self):
        with self.assertRaisesRegex(ValueError, "--max-event-size 1000"):
            m0.publish("news", "x" * 2000)

    def test_a_refusal_is_a_runtime_error_with_the_servers_reason(self):
        other = os.path.join(self.dir, "other.key")
        with open(other, "w") as f:
            f.write("not-the-key-of-this-server\n")
        with mock.patch.dict(os.environ, {"M0_ADMIN_KEY_FILE": other}):
            with self.assertRaisesRegex(RuntimeError, r"refused \(401\): bad or missing bearer key"):
                m0.publish("news", "x")
        del os.environ["M0_ADMIN_KEY_FILE"]
        with self.assertRaisesRegex(RuntimeError, r"refused \(401\)"):
            m0.publish("news", "x")

    def test_a_server_out_of_reach_or_a_bad_setting_is_a_runtime_error(self):
        closed = "http://127.0.0.1:%d" % free_ports(1)[0]
        with mock.patch.dict(os.environ, {"M0_ADMIN_URL": closed}):
            with self.assertRaisesRegex(RuntimeError, "cannot be reached: .*refused"):
                m0.publish("news", "x")
        for url in ("https://127.0.0.1:1", "127.0.0.1:8001", "http://h", "http://h:1/x",
                    "http://h:port"):
            with self.subTest(url=url), self.assertRaisesRegex(RuntimeError, "M0_ADMIN_URL"):
                admin_publish.endpoint(url)
        missing = os.path.join(self.dir, "missing.key")
        with mock.patch.dict(os.environ, {"M0_ADMIN_KEY_FILE": missing}):
            with self.assertRaisesRegex(RuntimeError, "M0_ADMIN_KEY_FILE .*missing.key"):
                m0.publish("news", "x")

    def test_m0_bus_comes_first_when_both_are_set(self):
        with mock.patch.dict(os.environ, {"M0_BUS": "redis://127.0.0.1:1/0"}), \
                mock.patch("m0.redis_bus.publish", return_value=7) as redis_publish:
            self.assertEqual(m0.publish("news", "x"), 7)
        redis_publish.assert_called_once_with("redis://127.0.0.1:1/0", "news", "x", None)


if __name__ == "__main__":
    unittest.main()
