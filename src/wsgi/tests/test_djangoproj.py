"""The fixture project (fixtures/djangoproj) under Django's test Client.

The project's settings are selected when this module is imported; its
database is a migrated in-memory test database (Django's test runner
machinery without the runner), so fixtures/djangoproj/db.sqlite3 is never
touched.
"""
import hashlib
import io
import json
import logging
import os
import re
import sys
import tempfile
import types
import unittest
from pathlib import Path
from unittest import mock
from wsgiref.util import setup_testing_defaults

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "src" / "wsgi"))
sys.path.insert(0, str(ROOT / "fixtures" / "djangoproj"))
os.environ["DJANGO_SETTINGS_MODULE"] = "djangoproj.settings"

import django  # noqa: E402
from django.conf import settings  # noqa: E402
from django.test import Client, SimpleTestCase, TestCase  # noqa: E402
from django.test.utils import (  # noqa: E402
    setup_databases, setup_test_environment, teardown_databases,
    teardown_test_environment)

_old_databases = None


def setUpModule():
    global _old_databases
    if (settings.configured
            and settings.SETTINGS_MODULE != "djangoproj.settings"):
        raise RuntimeError("Django was configured before djangoproj's tests "
                           "ran; run test_djangoproj in its own process")
    django.setup()
    setup_test_environment()
    _old_databases = setup_databases(verbosity=0, interactive=False)
    # Expected 4xx answers log warnings; errors still show (or are asserted).
    logging.disable(logging.WARNING)


def tearDownModule():
    logging.disable(logging.NOTSET)
    teardown_databases(_old_databases, verbosity=0)
    teardown_test_environment()


class FakeNative(types.ModuleType):
    def __init__(self):
        super().__init__("_m0")
        self.calls = []

    def publish(self, channel, data, event):
        self.calls.append((channel, data, event))
        return 41 + len(self.calls)

    def realtime(self):
        return True


class PagesTest(SimpleTestCase):
    def test_index(self):
        response = self.client.get("/")
        self.assertContains(response, "<title>m0serve demo</title>")
        self.assertContains(response, 'new EventSource("/hold?channel=demo")')
        self.assertContains(response, 'action="/publish"')

    def test_hello_is_plain_text(self):
        response = self.client.get("/hello")
        self.assertEqual(response.status_code, 200)
        self.assertEqual(response["Content-Type"], "text/plain")
        self.assertEqual(response.content, b"hello\n")
        self.assertEqual(self.client.post("/hello").status_code, 405)

    def test_slow_sleeps_and_clamps(self):
        for query, slept in (("s=0.01", 0.01), ("s=-3", 0.0)):
            with self.subTest(query=query):
                response = self.client.get("/slow?" + query)
                self.assertEqual(response.json(), {"slept": slept})
        for query in ("s=abc", "s=nan"):
            with self.subTest(query=query):
                self.assertEqual(self.client.get("/slow?" + query).status_code,
                                 400)

    def test_stream_generator_streams_five_chunks(self):
        response = self.client.get("/stream-generator")
        self.assertTrue(response.streaming)
        self.assertEqual(b"".join(response.streaming_content),
                         b"".join(b"chunk %d\n" % n for n in range(1, 6)))

    def test_boom_raises(self):
        with self.assertLogs("django.request", "ERROR"):
            with self.assertRaisesRegex(RuntimeError, "boom"):
                self.client.get("/boom")
        with self.assertLogs("django.request", "ERROR"):
            response = Client(raise_request_exception=False).get("/boom")
        self.assertEqual(response.status_code, 500)


class EchoTest(SimpleTestCase):
    def test_post_body_and_environ(self):
        body = bytes(range(256))
        response = self.client.post("/echo?x=1&y=%20", data=body,
                                    content_type="application/octet-stream",
                                    HTTP_X_TEST="yes")
        data = response.json()
        self.assertEqual(data["method"], "POST")
        self.assertEqual(data["path"], "/echo")
        self.assertEqual(data["query"], "x=1&y=%20")
        self.assertEqual(data["body"].encode("latin-1"), body)
        self.assertEqual(data["body_sha256"], hashlib.sha256(body).hexdigest())
        self.assertEqual(data["body_length"], 256)
        environ = data["environ"]
        self.assertEqual(environ["HTTP_X_TEST"], "yes")
        self.assertEqual(environ["CONTENT_TYPE"], "application/octet-stream")
        self.assertEqual(environ["CONTENT_LENGTH"], "256")
        self.assertEqual(environ["REQUEST_METHOD"], "POST")
        self.assertEqual(environ["PATH_INFO"], "/echo")
        self.assertEqual(environ["wsgi.version"], [1, 0])
        self.assertEqual(environ["wsgi.url_scheme"], "http")
        self.assertIn(environ["wsgi.multithread"], (True, False))
        self.assertNotIn("wsgi.input", environ)

    def test_any_method_without_csrf_token(self):
        client = Client(enforce_csrf_checks=True)
        for method in ("get", "put", "patch", "delete", "options"):
            with self.subTest(method=method):
                response = getattr(client, method)("/echo")
                self.assertEqual(response.json()["method"], method.upper())


class FormTest(TestCase):
    def test_csrf_round_trip_saves_note_in_session(self):
        client = Client(enforce_csrf_checks=True)
        page = client.get("/form")
        self.assertContains(page, "No note saved")
        token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"',
                          page.content.decode())[1]

        response = client.post("/form", {"note": "hello <b>",
                                         "csrfmiddlewaretoken": token})
        self.assertEqual(response.status_code, 303)
        self.assertEqual(response["Location"], "/form")
        self.assertContains(client.get("/form"),
                            '<span id="note">hello &lt;b&gt;</span>')

    def test_post_without_or_with_a_bad_token_is_forbidden(self):
        client = Client(enforce_csrf_checks=True)
        client.get("/form")
        self.assertEqual(client.post("/form", {"note": "x"}).status_code, 403)
        response = client.post("/form", {"note": "x",
                                          "csrfmiddlewaretoken": "x" * 64})
        self.assertEqual(response.status_code, 403)
        self.assertContains(client.get("/form"), "No note saved")


class GripHoldTest(SimpleTestCase):
    def test_headers_as_django_grip_writes_them(self):
        response = self.client.get("/grip-hold?channel=a,b&prev_id=7&ka=:ka%0A%0A&ka_timeout=5")
        self.assertEqual(response["Grip-Hold"], "stream")
        self.assertEqual(response["Grip-Channel"], "a; prev-id=7, b")
        self.assertEqual(response["Grip-Keep-Alive"], ":ka\\n\\n; format=cstring; timeout=5")
        self.assertEqual(response.content, b": grip hold\n\n")

    def test_long_poll_and_missing_channel(self):
        self.assertEqual(self.client.get("/grip-hold?channel=a&mode=response")["Grip-Hold"],
                         "response")
        self.assertEqual(self.client.get("/grip-hold").status_code, 400)


class HoldTest(SimpleTestCase):
    def test_hold_headers_and_head(self):
        response = self.client.get("/hold?channel=demo")
        self.assertEqual(response.status_code, 200)
        self.assertEqual(response["M0-Hold"], "stream")
        self.assertEqual(response["M0-Channel"], "demo")
        self.assertEqual(response["Content-Type"], "text/event-stream")
        self.assertEqual(response.content, b": django hold\n\n")

    def test_several_channels(self):
        for query in ("channel=a,b", "channel=a&channel=b"):
            with self.subTest(query=query):
                response = self.client.get("/hold?" + query)
                self.assertEqual(response["M0-Channel"], "a,b")

    def test_missing_or_refused_channel_is_400(self):
        for query in ("", "channel=", "channel=m0.slot.1", "channel=a%0Ab",
                      "channel=a,", "channel=" + "x" * 257):
            with self.subTest(query=query):
                response = self.client.get("/hold?" + query)
                self.assertEqual(response.status_code, 400)
                self.assertIn("error", response.json())
                self.assertFalse(response.has_header("M0-Hold"))


class PublishTest(SimpleTestCase):
    def test_without_realtime_is_503(self):
        with mock.patch.dict(sys.modules, {"_m0": None}), \
                self.assertLogs("django.request", "ERROR"):
            response = self.client.post("/publish",
                                        {"channel": "demo", "data": "x"})
        self.assertEqual(response.status_code, 503)
        self.assertIn("--realtime", response.json()["error"])

    def test_publishes_through_the_native_module(self):
        native = FakeNative()
        with mock.patch.dict(sys.modules, {"_m0": native}):
            first = self.client.post("/publish", {"channel": "demo",
                                                  "data": "one", "event": ""})
            second = self.client.post("/publish", {"channel": "demo",
                                                   "data": "two",
                                                   "event": "tick"})
        self.assertEqual(first.json(), {"id": 42})
        self.assertEqual(second.json(), {"id": 43})
        self.assertEqual(native.calls, [("demo", "one", None),
                                        ("demo", "two", "tick")])

    def test_refused_name_is_400(self):
        with mock.patch.dict(sys.modules, {"_m0": FakeNative()}):
            for fields in ({"channel": "m0.slot.3", "data": "x"},
                           {"data": "x"},
                           {"channel": "demo", "data": "x", "event": "a\nb"}):
                with self.subTest(fields=fields):
                    response = self.client.post("/publish", fields)
                    self.assertEqual(response.status_code, 400)
                    self.assertIn("error", response.json())

    def test_get_is_refused(self):
        self.assertEqual(self.client.get("/publish").status_code, 405)

    def test_hold_publish_publishes_then_holds_and_names_the_id(self):
        native = FakeNative()
        with mock.patch.dict(sys.modules, {"_m0": native}):
            response = self.client.get("/hold-publish", {"channel": "demo",
                                                         "data": "inside"})
        self.assertEqual(native.calls, [("demo", "inside", None)])
        self.assertEqual(response["M0-Hold"], "stream")
        self.assertEqual(response["M0-Channel"], "demo")
        self.assertEqual(response.content, b": django hold published 42\n\n")

    def test_hold_publish_refuses_a_bad_channel(self):
        with mock.patch.dict(sys.modules, {"_m0": FakeNative()}):
            response = self.client.get("/hold-publish", {"channel": "m0.slot.1"})
        self.assertEqual(response.status_code, 400)


class FilesTest(SimpleTestCase):
    """/files/NAME: a file of $M0_BENCH_FILES, nothing outside it."""

    def setUp(self):
        tmp = tempfile.TemporaryDirectory()
        self.addCleanup(tmp.cleanup)
        self.folder = os.path.join(tmp.name, "files")
        os.mkdir(self.folder)
        self.data = os.urandom(10000)
        with open(os.path.join(self.folder, "f.bin"), "wb") as f:
            f.write(self.data)
        with open(os.path.join(tmp.name, "secret"), "wb") as f:
            f.write(b"outside")
        os.symlink(os.path.join(tmp.name, "secret"),
                   os.path.join(self.folder, "out"))
        os.mkdir(os.path.join(self.folder, "sub"))
        env = mock.patch.dict(os.environ, {"M0_BENCH_FILES": self.folder})
        env.start()
        self.addCleanup(env.stop)

    def test_serves_the_file_and_says_which_environ(self):
        response = self.client.get("/files/f.bin")
        self.assertEqual(response.status_code, 200)
        self.assertTrue(response.streaming)
        self.assertEqual(response["Content-Length"], "10000")
        self.assertEqual(response["X-File-Wrapper"], "no")
        self.assertEqual(b"".join(response.streaming_content), self.data)
        response = self.client.get("/files/f.bin",
                                   **{"wsgi.file_wrapper": object()})
        self.assertEqual(response["X-File-Wrapper"], "yes")
        response.close()
        response = self.client.head("/files/f.bin")
        self.assertEqual(response.status_code, 200)
        response.close()
        self.assertEqual(self.client.post("/files/f.bin").status_code, 405)

    def test_nothing_outside_the_folder(self):
        for name in ("..", ".", "..%2Fsecret", "%2E%2E", "out", "sub",
                     "missing", "f.bin%00", "f.bin/", "sub/..%2Ff.bin"):
            with self.subTest(name=name):
                self.assertEqual(
                    self.client.get("/files/" + name).status_code, 404)

    def test_without_the_folder_is_404(self):
        del os.environ["M0_BENCH_FILES"]
        self.assertEqual(self.client.get("/files/f.bin").status_code, 404)


class ValidatedApplicationTest(SimpleTestCase):
    """djangoproj.wsgi.validated_application, called as a WSGI server would."""

    def call(self, method, path, body=b""):
        from djangoproj.wsgi import validated_application

        # wsgiref's validator needs SCRIPT_NAME and PATH_INFO present, even
        # when empty (it formats its messages eagerly); so does m0serve.
        environ = {"REQUEST_METHOD": method, "SCRIPT_NAME": "",
                   "PATH_INFO": path, "QUERY_STRING": "",
                   "CONTENT_LENGTH": str(len(body)),
                   "wsgi.input": io.BytesIO(body)}
        setup_testing_defaults(environ)
        started = []
        result = validated_application(
            environ, lambda status, headers, exc_info=None:
            started.append((status, headers)) or (lambda data: None))
        try:
            content = b"".join(result)
        finally:
            result.close()
        return started[0][0], dict(started[0][1]), content

    def test_echo_post(self):
        status, headers, content = self.call("POST", "/echo", b"abc")
        self.assertEqual(status, "200 OK")
        self.assertEqual(json.loads(content)["body"], "abc")

    def test_streamed_body(self):
        status, headers, content = self.call("GET", "/stream-generator")
        self.assertEqual(status, "200 OK")
        self.assertNotIn("Content-Length", headers)
        self.assertEqual(content.count(b"chunk"), 5)


if __name__ == "__main__":
    unittest.main()
