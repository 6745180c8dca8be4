"""m0.publish outside m0serve with M0_BUS: the Redis bus from plain Python,
against a real redis-server (a free port, a temporary directory, stopped by
its PID)."""
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


class RedisPublishTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="m0-redis-py-")
        self.port = free_port()
        self.proc = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1",
             "--dir", self.dir, "--save", "", "--appendonly", "no"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for _ in range(500):
            try:
                socket.create_connection(("127.0.0.1", self.port), 0.1).close()
                break
            except OSError:
                time.sleep(0.01)
        self.url = "redis://127.0.0.1:%d/0" % self.port
        env = mock.patch.dict(os.environ, {"M0_BUS": self.url})
        env.start()
        self.addCleanup(env.stop)
        native = mock.patch.dict(sys.modules, {"_m0": None})
        native.start()
        self.addCleanup(native.stop)

    def tearDown(self):
        self.proc.terminate()
        self.proc.wait(10)
        shutil.rmtree(self.dir, ignore_errors=True)
        redis_bus._clients.clear()

    def redis(self):
        import redis

        return redis.Redis(port=self.port)

    def test_publish_numbers_streams_and_publishes_like_the_server(self):
        sub = self.redis().pubsub()
        sub.subscribe("m0:0:e:news")
        sub.get_message(timeout=1)  # the subscribe confirmation
        before = int(time.time() * 1000) * 1000
        first = m0.publish("news", "one\r\ntwo", event="update")
        second = m0.publish("news", b"three")
        self.assertGreater(first, before)
        self.assertGreater(second, first)
        msg = sub.get_message(timeout=2)
        # ID, event name, raw flag ("" here: m0.publish's events are SSE-encoded), data.
        self.assertEqual(msg["data"], b"%d\nupdate\n\none\ntwo" % first)
        entries = self.redis().xrange("m0:s:news")
        self.assertEqual([e[0] for e in entries], [b"%d-0" % first, b"%d-0" % second])
        self.assertEqual(entries[1][1], {b"e": b"", b"d": b"three", b"r": b""})
        self.assertEqual(int(self.redis().get("m0:id")), second)

    def test_publish_many_is_one_round_trip_with_ids_in_order(self):
        sub = self.redis().pubsub()
        sub.subscribe("m0:0:e:a", "m0:0:e:b")
        for _ in range(2):
            sub.get_message(timeout=1)  # the subscribe confirmations
        before = m0.publish("a", "before")
        ids = m0.publish_many([("a", "1"), {"channel": "b", "data": b"2", "event": "up"},
                               ("a", "3\r\n")])
        # Increasing (Redis's clock seeds the counter: not always consecutive).
        self.assertEqual(ids, sorted(set(ids)))
        self.assertGreater(ids[0], before)
        self.assertEqual(len(ids), 3)
        self.assertEqual(int(self.redis().get("m0:id")), ids[-1])
        self.assertEqual([e[0] for e in self.redis().xrange("m0:s:a")],
                         [b"%d-0" % i for i in (before, ids[0], ids[2])])
        got = [sub.get_message(timeout=2)["data"] for _ in range(4)]
        self.assertEqual(got, [b"%d\n\n\nbefore" % before, b"%d\n\n\n1" % ids[0],
                               b"%d\nup\n\n2" % ids[1], b"%d\n\n\n3\n" % ids[2]])
        self.assertEqual(m0.publish_many([]), [])

    def test_publish_many_sends_a_run_as_one_batched_message_to_readers_of_it(self):
        # A reader of batched messages subscribes the readers' name beside
        # the channel, as m0serve does (src/bus/redis_message.hpp).
        sub = self.redis().pubsub()
        sub.subscribe("m0:0:e:a", "m0:0:r:a", "m0:0:e:b", "m0:0:r:b")
        for _ in range(4):
            sub.get_message(timeout=1)  # the subscribe confirmations
        ids = m0.publish_many([("a", "1"), ("a", "two\nlines", "up"), ("b", "3"), ("a", "4")])
        got = [sub.get_message(timeout=2)["data"] for _ in range(3)]
        # A run of two: "*1\n", then ID ELEN DLEN RAW and the bytes, each event.
        self.assertEqual(got[0], b"*1\n%d 0 1 0\n1%d 2 9 0\nuptwo\nlines" % (ids[0], ids[1]))
        # A run of one: the single form, as before batched messages.
        self.assertEqual(got[1:], [b"%d\n\n\n3" % ids[2], b"%d\n\n\n4" % ids[3]])
        self.assertIsNone(sub.get_message(timeout=0.2))

    def test_publish_many_refuses_a_bad_event_before_redis_is_asked(self):
        with self.assertRaisesRegex(ValueError, "^event 1: "):
            m0.publish_many([("a", "1"), ("m0.slot.3", "x")])
        with self.assertRaisesRegex(TypeError, "^event 0: "):
            m0.publish_many([("a",)])
        with mock.patch.dict(os.environ, {"M0_MAX_EVENT_SIZE": "100"}):
            with self.assertRaisesRegex(ValueError, "^event 2: .*over --max-event-size 100"):
                m0.publish_many([("a", "1"), ("a", "2"), ("a", "x" * 100)])
        self.assertIsNone(self.redis().get("m0:id"))

    def test_publish_many_on_a_redis_that_is_down_is_a_runtime_error(self):
        self.proc.terminate()
        self.proc.wait(10)
        with self.assertRaisesRegex(RuntimeError, "redis bus redis://127.0.0.1"):
            m0.publish_many([("a", "1"), ("a", "2")])

    def test_the_stream_keeps_the_history_the_servers_set(self):
        self.redis().set("m0:history", "2")
        ids = [m0.publish("h", str(n)) for n in range(5)]
        self.assertEqual([e[0] for e in self.redis().xrange("m0:s:h")],
                         [b"%d-0" % i for i in ids[3:]])
        self.assertEqual(int(self.redis().get("m0:m:h")), ids[2])

    def test_a_redis_that_is_down_is_a_runtime_error(self):
        self.proc.terminate()
        self.proc.wait(10)
        with self.assertRaisesRegex(RuntimeError, "redis bus redis://127.0.0.1"):
            m0.publish("news", "lost?")

    def test_refusals_before_redis_is_asked(self):
        with self.assertRaises(ValueError):
            m0.publish("m0.slot.3", "x")
        with mock.patch.dict(os.environ, {"M0_MAX_EVENT_SIZE": "100"}):
            with self.assertRaisesRegex(ValueError, "over --max-event-size 100"):
                m0.publish("news", "x" * 100)
        for bad in ("http://x", "redis://", "redis://h/x", "redis+unix://rel"):
            with self.subTest(url=bad), self.assertRaises(ValueError):
                redis_bus.parse_url(bad)
        self.assertEqual(redis_bus.parse_url("redis+unix:///run/r.sock?db=2"),
                         {"unix_socket_path": "/run/r.sock", "db": 2})

    def test_encoded_size_agrees_with_the_server(self):
        # Its SSE event when that is longer (many lines): "id: " 20 "\n",
        # "event: ev\n", five "data: X\n", "\n" (the message is 67 bytes).
        self.assertEqual(redis_bus.encoded_size("ev", "a\nb\nc\nd\ne"), 25 + 10 + 5 * 8 + 1)
        # Its WebSocket message when that is longer: a frame's 2 bytes and
        # {"id":"<20 digits>","data":"\u0001..."}, each control byte 6.
        self.assertEqual(redis_bus.encoded_size("", "\x01" * 10), 2 + 2 + 28 + 7 + 62)


if __name__ == "__main__":
    unittest.main()
