"""m0.publish outside m0serve on a Redis that wants a password: M0_BUS with
USER:PASSWORD@ (percent-encoded) or M0_BUS_PASSWORD_FILE, against a real
redis-server with requirepass or an ACL user (a free port, a temporary
directory, stopped by its PID); and the URL forms, parsed as m0serve parses
--bus."""
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import unittest
from pathlib import Path
from unittest import mock

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import m0  # noqa: E402
from m0 import redis_bus  # noqa: E402


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class ParseUrlTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="m0-redis-url-")
        self.addCleanup(shutil.rmtree, self.dir, True)

    def test_user_and_percent_encoded_password(self):
        self.assertEqual(redis_bus.parse_url("redis://app:p%40ss%3Aw%2Frd%25@h:6380/3"),
                         {"host": "h", "port": 6380, "db": 3, "username": "app",
                          "password": "p@ss:w/rd%"})
        self.assertEqual(redis_bus.parse_url("redis://:secret@h"),
                         {"host": "h", "port": 6379, "db": 0, "password": "secret"})
        self.assertEqual(redis_bus.parse_url("redis+unix://m0:pw@/run/r.sock?db=2"),
                         {"unix_socket_path": "/run/r.sock", "db": 2, "username": "m0",
                          "password": "pw"})
        self.assertEqual(redis_bus.masked("redis://app:p%40ss@h:6380/3"),
                         "redis://app:***@h:6380/3")

    def test_sentinel_lists(self):
        self.assertEqual(
            redis_bus.parse_url("redis+sentinel://m0:s%3Dc@10.0.0.1:26380,10.0.0.2/mymaster/4"),
            {"sentinels": [("10.0.0.1", 26380), ("10.0.0.2", 26379)], "service": "mymaster",
             "db": 4, "username": "m0", "password": "s=c"})

    def test_password_file(self):
        path = os.path.join(self.dir, "pw")
        with open(path, "w") as f:
            f.write("s3cret:with spaces\r\nignored\n")
        self.assertEqual(redis_bus.parse_url("redis://m0@h/1", path),
                         {"host": "h", "port": 6379, "db": 1, "username": "m0",
                          "password": "s3cret:with spaces"})
        with self.assertRaisesRegex(ValueError, "give it once"):
            redis_bus.parse_url("redis://:inurl@h", path)
        with self.assertRaisesRegex(ValueError, "cannot read"):
            redis_bus.parse_url("redis://h", path + ".missing")
        with open(path, "w") as f:
            f.write("\n")
        with self.assertRaisesRegex(ValueError, "empty"):
            redis_bus.parse_url("redis://h", path)

    def test_bad_urls_never_show_the_password(self):
        for bad in ("redis://:@h", "redis://:pw%zz@h", "redis://u:pw@h/x",
                    "redis+sentinel://u:pw@h:1", "redis+sentinel://u:pw@h:1/m/x",
                    "redis+sentinel://u:pw@h:x/m", "http://u:pw@h"):
            with self.subTest(url=bad):
                with self.assertRaises(ValueError) as caught:
                    redis_bus.parse_url(bad)
                self.assertNotIn("pw", str(caught.exception))


class RedisProcessCase(unittest.TestCase):
    """A real redis-server of the test's own; m0.publish as outside m0serve."""

    def start_redis(self, *extra):
        self.dir = tempfile.mkdtemp(prefix="m0-redis-auth-py-")
        self.port = free_port()
        self.proc = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1",
             "--dir", self.dir, "--save", "", "--appendonly", "no", *extra],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.addCleanup(self.stop_redis)
        for _ in range(500):
            try:
                socket.create_connection(("127.0.0.1", self.port), 0.1).close()
                break
            except OSError:
                time.sleep(0.01)

    def stop_redis(self):
        self.proc.terminate()
        self.proc.wait(10)
        shutil.rmtree(self.dir, ignore_errors=True)
        redis_bus._clients.clear()

    def setUp(self):
        native = mock.patch.dict(sys.modules, {"_m0": None})
        native.start()
        self.addCleanup(native.stop)

    def publish_with(self, env):
        with mock.patch.dict(os.environ, env):
            redis_bus._clients.clear()
            return m0.publish("news", "hello")


class RedisAuthPublishTest(RedisProcessCase):
    PASSWORD = "p@ss:w/rd %"

    def test_requirepass_from_the_url_and_from_the_file(self):
        self.start_redis("--requirepass", self.PASSWORD)
        base = "127.0.0.1:%d/0" % self.port
        first = self.publish_with({"M0_BUS": "redis://:p%40ss%3Aw%2Frd%20%25@" + base})
        path = os.path.join(self.dir, "pw")
        with open(path, "w") as f:
            f.write(self.PASSWORD + "\n")
        second = self.publish_with({"M0_BUS": "redis://" + base, "M0_BUS_PASSWORD_FILE": path})
        self.assertGreater(second, first)
        with self.assertRaises(RuntimeError) as caught:
            self.publish_with({"M0_BUS": "redis://:wrong-secret@" + base})
        self.assertIn("redis://:***@", str(caught.exception))
        self.assertNotIn("wrong-secret", str(caught.exception))
        with self.assertRaises(RuntimeError):
            self.publish_with({"M0_BUS": "redis://" + base})

    def test_acl_user(self):
        self.start_redis("--user", "m0", "on", ">s3cret", "~m0:*", "&m0:*", "+@connection",
                         "+@transaction", "+@read", "+@write", "+@pubsub", "+@scripting",
                         "+time", "+role", "--user", "default", "off")
        base = "127.0.0.1:%d/0" % self.port
        self.assertGreater(self.publish_with({"M0_BUS": "redis://m0:s3cret@" + base}), 0)
        with self.assertRaisesRegex(RuntimeError, "redis://m0:\\*\\*\\*@"):
            self.publish_with({"M0_BUS": "redis://m0:nope@" + base})


class SentinelPublishTest(RedisProcessCase):
    """M0_BUS=redis+sentinel://...: the master a real redis-sentinel names
    (the first sentinel in the list down), with the master's password."""

    def start_sentinel(self, master_port):
        port = free_port()
        conf = os.path.join(self.dir, "sentinel.conf")
        with open(conf, "w") as f:
            f.write("port %d\nbind 127.0.0.1\ndir %s\n"
                    "sentinel monitor m0m 127.0.0.1 %d 1\n"
                    "sentinel auth-pass m0m %s\n" % (port, self.dir, master_port, "pw71"))
        proc = subprocess.Popen(["redis-sentinel", conf], stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)

        def stop():
            proc.kill()
            proc.wait(10)
        self.addCleanup(stop)
        for _ in range(500):
            try:
                socket.create_connection(("127.0.0.1", port), 0.1).close()
                break
            except OSError:
                time.sleep(0.01)
        return port

    def test_publish_goes_to_the_master_the_sentinels_name(self):
        self.start_redis("--requirepass", "pw71")
        sentinel = self.start_sentinel(self.port)
        url = "redis+sentinel://:pw71@127.0.0.1:%d,127.0.0.1:%d/m0m/0" % (free_port(), sentinel)
        first = self.publish_with({"M0_BUS": url})
        import redis

        direct = redis.Redis(port=self.port, password="pw71")
        self.assertEqual(int(direct.get("m0:id")), first)
        with self.assertRaises(RuntimeError) as caught:
            self.publish_with({"M0_BUS": url.replace("/m0m/", "/unknown/")})
        self.assertNotIn("pw71", str(caught.exception))


if __name__ == "__main__":
    unittest.main()
