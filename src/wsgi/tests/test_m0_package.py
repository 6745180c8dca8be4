"""Unit tests of the m0 package, run without m0serve.

The server's built-in ``_m0`` module is absent here; tests that need it put a
fake one in ``sys.modules``, and tests that need it absent put ``None`` there
(which makes ``import _m0`` raise ImportError even inside m0serve).
"""
import os
import subprocess
import sys
import types
import unittest
from pathlib import Path
from unittest import mock

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import m0  # noqa: E402


def setUpModule():
    from django.conf import settings

    # HttpResponse needs settings; another test module may already have
    # chosen the project's (DJANGO_SETTINGS_MODULE), which serves as well.
    if not settings.configured and "DJANGO_SETTINGS_MODULE" not in os.environ:
        settings.configure()


class FakeNative(types.ModuleType):
    """Stands in for the server's ``_m0``: records publishes, counts ids."""

    def __init__(self, realtime=True):
        super().__init__("_m0")
        self.calls = []
        self._realtime = realtime

    def publish(self, channel, data, event):
        if not self._realtime:
            raise RuntimeError("m0serve runs without --realtime")
        self.calls.append((channel, data, event))
        return len(self.calls)

    def publish_many(self, events):
        return [self.publish(*e) for e in events]

    def realtime(self):
        return self._realtime


def without_native():
    return mock.patch.dict(sys.modules, {"_m0": None})


def with_native(native):
    return mock.patch.dict(sys.modules, {"_m0": native})


class ValidateChannelTest(unittest.TestCase):
    def test_accepts_ordinary_names(self):
        for name in ("demo", "notifications_user_42", "a" * 256,
                     "é" * 128, "m0.slots", "m0.Slot.1", "a b", "a\tb"):
            with self.subTest(name=name):
                self.assertEqual(m0.validate_channel(name), name)

    def test_refuses_names_with_the_reason(self):
        cases = {
            "": "empty",
            "a" * 257: "257 bytes",
            "é" * 129: "258 bytes",
            "a\rb": "CR, LF or NUL",
            "a\nb": "CR, LF or NUL",
            "a\0b": "CR, LF or NUL",
            "m0.slot.": "reserved",
            "m0.slot.7:3": "reserved",
            "\ud800": "UTF-8",
            # The server trims OWS around M0-Channel's commas: a name with
            # edge whitespace would be held as another name.
            " sp": "begins or ends with a space or tab",
            "sp ": "begins or ends with a space or tab",
            "\tsp": "begins or ends with a space or tab",
            "sp\t": "begins or ends with a space or tab",
            " ": "begins or ends with a space or tab",
        }
        for name, reason in cases.items():
            with self.subTest(name=name):
                with self.assertRaisesRegex(ValueError, reason):
                    m0.validate_channel(name)

    def test_refuses_non_str(self):
        for name in (b"demo", None, 3, ["demo"]):
            with self.subTest(name=name):
                with self.assertRaises(TypeError):
                    m0.validate_channel(name)


class PublishTest(unittest.TestCase):
    def test_without_native_module_raises_runtime_error(self):
        env = {k: v for k, v in os.environ.items() if k not in ("M0_BUS", "M0_ADMIN_URL")}
        with without_native(), mock.patch.dict(os.environ, env, clear=True):
            with self.assertRaisesRegex(RuntimeError, "needs m0serve.*M0_ADMIN_URL"):
                m0.publish("demo", "hello")

    def test_names_are_checked_before_the_native_module(self):
        with without_native():
            with self.assertRaisesRegex(ValueError, "reserved"):
                m0.publish("m0.slot.1", "x")
            with self.assertRaisesRegex(ValueError, "space or tab"):
                m0.publish(" sp", "x")
            for event in ("a\nb", "a\rb", "a\0b", ""):
                with self.subTest(event=event):
                    with self.assertRaises(ValueError):
                        m0.publish("demo", "x", event)

    def test_calls_native_publish_and_returns_its_id(self):
        native = FakeNative()
        with with_native(native):
            self.assertEqual(m0.publish("demo", "one"), 1)
            self.assertEqual(m0.publish("demo", "two", event="tick"), 2)
        self.assertEqual(native.calls,
                         [("demo", "one", None), ("demo", "two", "tick")])

    def test_bytes_are_decoded_as_utf8(self):
        native = FakeNative()
        with with_native(native):
            m0.publish("demo", "héllo".encode())
            m0.publish("demo", bytearray(b"raw"))
            with self.assertRaises(ValueError):
                m0.publish("demo", b"\xff")
        self.assertEqual([c[1] for c in native.calls], ["héllo", "raw"])

    def test_line_breaks_are_normalised_to_lf(self):
        native = FakeNative()
        with with_native(native):
            m0.publish("demo", "a\r\nb\rc\nd")
        self.assertEqual(native.calls[0][1], "a\nb\nc\nd")

    def test_refuses_data_of_other_types(self):
        with with_native(FakeNative()):
            with self.assertRaises(TypeError):
                m0.publish("demo", 42)

    def test_runtime_error_from_native_propagates(self):
        with with_native(FakeNative(realtime=False)):
            with self.assertRaises(RuntimeError):
                m0.publish("demo", "x")


class RealtimeTest(unittest.TestCase):
    def test_false_without_native_module(self):
        with without_native():
            self.assertIs(m0.realtime(), False)

    def test_asks_the_native_module(self):
        with with_native(FakeNative(realtime=True)):
            self.assertIs(m0.realtime(), True)
        with with_native(FakeNative(realtime=False)):
            self.assertIs(m0.realtime(), False)


class HoldStreamResponseTest(unittest.TestCase):
    def test_one_channel(self):
        response = m0.hold_stream_response("demo", head=": hi\n\n")
        self.assertEqual(response.status_code, 200)
        self.assertEqual(response["M0-Hold"], "stream")
        self.assertEqual(response["M0-Channel"], "demo")
        self.assertEqual(response["Content-Type"], "text/event-stream")
        self.assertEqual(response.content, b": hi\n\n")

    def test_several_channels_are_joined_with_commas(self):
        for channels in (["a", "b"], ("a", "b")):
            with self.subTest(channels=channels):
                response = m0.hold_stream_response(channels)
                self.assertEqual(response["M0-Channel"], "a,b")
                self.assertEqual(response.content, b"")

    def test_non_ascii_names_travel_as_utf8_bytes(self):
        response = m0.hold_stream_response("café")
        # PEP 3333: a header value is a latin-1 str holding the wire bytes.
        self.assertEqual(response["M0-Channel"].encode("latin-1"),
                         "café".encode())

    def test_refused_names(self):
        for channel in ("", "m0.slot.1", "a\nb", "a,b", ["ok", ""], [],
                        ["ok", "m0.slot.2"], "x" * 257, " sp", ["ok", "sp "],
                        ["ok", " "]):
            with self.subTest(channel=channel):
                with self.assertRaises(ValueError):
                    m0.hold_stream_response(channel)

    def test_wrong_types(self):
        for channel in (None, b"demo", {"demo"}, ["demo", 1]):
            with self.subTest(channel=channel):
                with self.assertRaises(TypeError):
                    m0.hold_stream_response(channel)


class ImportTest(unittest.TestCase):
    def test_import_needs_neither_django_nor_native(self):
        code = ("import sys; sys.modules['django'] = None; "
                "sys.modules['_m0'] = None; import m0; "
                "assert m0.realtime() is False")
        subprocess.run([sys.executable, "-c", code], check=True,
                       cwd=Path(m0.__file__).parent.parent)


if __name__ == "__main__":
    unittest.main()


class PublishManyTest(unittest.TestCase):
    def test_in_m0serve_one_call_of_the_native_module_with_checked_events(self):
        native = FakeNative()
        with with_native(native):
            ids = m0.publish_many([("a", b"1"), {"channel": "b", "data": "x\r\ny", "event": "e"},
                                   ["c", "z", None]])
        self.assertEqual(ids, [1, 2, 3])
        self.assertEqual(native.calls, [("a", "1", None), ("b", "x\ny", "e"), ("c", "z", None)])

    def test_a_bad_event_names_its_index_and_nothing_is_published(self):
        native = FakeNative()
        with with_native(native):
            for bad, kind in ((("m0.slot.1", "x"), ValueError), (("a", 1), TypeError),
                              ({"channel": "a"}, ValueError), ({"channel": "a", "data": "",
                                                                 "evnt": "x"}, ValueError),
                              ("ab", TypeError), (("a", "x", "bad\nname"), ValueError)):
                with self.subTest(bad=bad), self.assertRaisesRegex(kind, "^event 1: "):
                    m0.publish_many([("ok", "1"), bad])
        self.assertEqual(native.calls, [])
        with with_native(native):
            self.assertEqual(m0.publish_many([]), [])

    def test_outside_m0serve_without_a_bus_is_a_runtime_error(self):
        env = {k: v for k, v in os.environ.items() if k not in ("M0_BUS", "M0_ADMIN_URL")}
        with without_native(), mock.patch.dict(os.environ, env, clear=True):
            with self.assertRaisesRegex(RuntimeError, "publish_many needs"):
                m0.publish_many([("a", "1")])
