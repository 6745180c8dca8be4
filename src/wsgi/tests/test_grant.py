"""Unit tests for m0.grant (src/wsgi/m0/grant.py).

    /usr/bin/python3 -m unittest discover -s src/wsgi/tests -p 'test_grant.py'

The shared vectors in src/grant/vectors.txt are checked here and by
src/grant/test_grant.cpp: both verifiers give every vector the same verdict,
and both signers reproduce every valid token byte for byte. That is the
cross-check between the two sides.

m0/grant.py is loaded from its file path, not as m0.grant: the package's
__init__ may need the server's built-in _m0 module, and grant.py does not.
"""

import hashlib
import hmac
import importlib.util
import os
import tempfile
import unittest
import urllib.parse

HERE = os.path.dirname(os.path.abspath(__file__))
WSGI = os.path.dirname(HERE)
ROOT = os.path.dirname(os.path.dirname(WSGI))
VECTORS = os.path.join(ROOT, "src", "grant", "vectors.txt")


def _load(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


grant = _load("m0_grant_under_test", os.path.join(WSGI, "m0", "grant.py"))
make_vectors = _load("m0_make_vectors", os.path.join(ROOT, "src", "grant", "make_vectors.py"))


def read_vectors():
    """(key ring, [vector dict]) from vectors.txt; format in make_vectors.py."""
    keys, vectors = [], []
    with open(VECTORS, encoding="utf-8") as f:
        for line in f:
            line = line.rstrip("\n")
            if not line or line.startswith("#"):
                continue
            words = line.split(" ")
            if words[0] == "key":
                keys.append((words[1], bytes.fromhex(words[2])))
                continue
            assert words[0] == "vector", line
            v = {"name": words[1]}
            for word in words[2:]:
                name, _, value = word.partition("=")
                v[name] = value
            v["now"] = int(v["now"])
            v["token"] = urllib.parse.unquote_to_bytes(v["token"])
            if "channels" in v:
                v["channels"] = [urllib.parse.unquote(c, errors="surrogateescape")
                                 for c in v["channels"].split(",")]
            vectors.append(v)
    return keys, vectors


def verdict_of(token, keys, now):
    try:
        grant.verify_grant(token, keys=keys, now=now)
    except grant.GrantError as e:
        return e.verdict
    return "ok"


KEY_A = ("main", b"\xaa" * 32)
KEY_B = ("next", b"\xbb" * 32)


class SharedVectors(unittest.TestCase):
    def test_vectors_file_is_what_make_vectors_generates(self):
        with open(VECTORS, encoding="utf-8") as f:
            self.assertEqual(f.read(), make_vectors.generate(),
                             "run /usr/bin/python3 src/grant/make_vectors.py --write")

    def test_every_vector_gets_its_expected_verdict(self):
        keys, vectors = read_vectors()
        self.assertEqual([k for k, _ in keys], ["k2026", "k2025"])
        self.assertGreaterEqual(len(vectors), 50)
        self.assertEqual(len({v["name"] for v in vectors}), len(vectors))
        self.assertEqual({v["expect"] for v in vectors},
                         {"ok", "malformed", "unknown_key", "bad_signature", "expired"})
        for v in vectors:
            with self.subTest(vector=v["name"]):
                self.assertEqual(verdict_of(v["token"], keys, v["now"]), v["expect"])
                if v["expect"] == "ok":
                    self.assertEqual(grant.verify_grant(v["token"], keys=keys, now=v["now"]),
                                     v["channels"])
                    # A str token gives the same answer as bytes.
                    self.assertEqual(
                        grant.verify_grant(v["token"].decode("ascii"), keys=keys, now=v["now"]),
                        v["channels"])

    def test_sign_grant_reproduces_every_ok_vector_byte_for_byte(self):
        keys, vectors = read_vectors()
        checked = 0
        for v in vectors:
            if v["expect"] != "ok":
                continue
            with self.subTest(vector=v["name"]):
                payload = grant._b64decode(v["token"].split(b".")[0])
                kid, expires, _ = grant._parse_payload(payload)
                key = [k for k in keys if k[0] == kid]
                # now=0, ttl=expires: the grant expires exactly at `expires`.
                token = grant.sign_grant(v["channels"], expires, keys=key, now=0)
                self.assertEqual(token.encode("ascii"), v["token"])
                checked += 1
        self.assertGreaterEqual(checked, 5)


class Rfc4231(unittest.TestCase):
    """The hmac module's HMAC-SHA256 against RFC 4231 (sanity: grant.py uses it)."""

    CASES = [
        (b"\x0b" * 20, b"Hi There",
         "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7"),
        (b"Jefe", b"what do ya want for nothing?",
         "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"),
        (b"\xaa" * 20, b"\xdd" * 50,
         "773ea91e36800e46854db8ebd09181a72959098b3ef8c122d9635514ced565fe"),
        (bytes(range(1, 26)), b"\xcd" * 50,
         "82558a389a443c0ea4cc819899f2083a85f0faa3e578f8077a2e3ff46729665b"),
        (b"\x0c" * 20, b"Test With Truncation", "a3b6167473100ee06e0c796c2955552b"),
        (b"\xaa" * 131, b"Test Using Larger Than Block-Size Key - Hash Key First",
         "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54"),
        (b"\xaa" * 131,
         b"This is a test using a larger than block-size key and a larger than block-size data."
         b" The key needs to be hashed before being used by the HMAC algorithm.",
         "9b09ffa71b942fcb27635fbcd5b0e944bfdc63644f0713938a7f51535c3a35e2"),
    ]

    def test_hmac_sha256_matches_rfc_4231_cases_1_to_7(self):
        for number, (key, data, expected) in enumerate(self.CASES, 1):
            with self.subTest(case=number):
                mac = grant._mac(key, data).hex()
                self.assertEqual(mac[:len(expected)], expected)  # case 5: 128-bit prefix
                self.assertEqual(mac, hmac.new(key, data, hashlib.sha256).hexdigest())


class SignVerify(unittest.TestCase):
    def test_round_trip_until_expiry(self):
        token = grant.sign_grant(["notifications_user_7", "salle 12", "é"], 60,
                                 keys=[KEY_A], now=1000.7)
        self.assertLessEqual(len(token), 4096)
        self.assertRegex(token, r"\A[A-Za-z0-9_-]+\.[A-Za-z0-9_-]{43}\Z")
        channels = grant.verify_grant(token, keys=[KEY_A], now=1059)
        self.assertEqual(channels, ["notifications_user_7", "salle 12", "é"])
        for now in (1060, 1061):  # expires = floor(1000.7) + 60
            with self.assertRaises(grant.GrantError) as ctx:
                grant.verify_grant(token, keys=[KEY_A], now=now)
            self.assertEqual(ctx.exception.verdict, "expired")
            self.assertEqual(str(ctx.exception), "grant expired")
            self.assertIsInstance(ctx.exception, ValueError)

    def test_a_str_of_names_joined_by_commas_is_several_channels(self):
        token = grant.sign_grant("a,b", 10, keys=[KEY_A], now=0)
        self.assertEqual(grant.verify_grant(token, keys=[KEY_A], now=0), ["a", "b"])
        self.assertEqual(token, grant.sign_grant(["a", "b"], 10, keys=[KEY_A], now=0))

    def test_any_edit_or_truncation_is_refused(self):
        token = grant.sign_grant("news", 60, keys=[KEY_A], now=0)
        for i in range(len(token)):
            edited = token[:i] + ("B" if token[i] == "A" else "A") + token[i + 1:]
            self.assertNotEqual(verdict_of(edited, [KEY_A], 0), "ok", i)
        for n in range(len(token)):
            self.assertNotEqual(verdict_of(token[:n], [KEY_A], 0), "ok", n)

    def test_another_secret_under_the_same_kid_is_a_bad_signature(self):
        token = grant.sign_grant("news", 60, keys=[KEY_A], now=0)
        self.assertEqual(verdict_of(token, [("main", b"\x01" * 32)], 0), "bad_signature")

    def test_sign_refuses_bad_channels_ttls_and_sizes(self):
        bad = ["", [], [""], "a,,b", "a,", ["a,b"], ["x" * 257], ["é" * 129], ["a\rb"], ["a\nb"],
               ["a\0b"], ["m0.slot.3"], ["news", "news"], ["\ud800"],
               [" admin"], ["admin "], ["\tadmin"], ["news", " "], "news, admin",
               ["%d%s" % (i, "x" * 250) for i in range(13)]]
        for channels in bad:
            with self.subTest(channels=channels):
                with self.assertRaises(ValueError):
                    grant.sign_grant(channels, 60, keys=[KEY_A], now=0)
        grant.sign_grant(["x" * 256], 60, keys=[KEY_A], now=0)
        for ttl in (0, -1, float("nan"), float("inf")):
            with self.assertRaises(ValueError):
                grant.sign_grant("news", ttl, keys=[KEY_A], now=0)
        with self.assertRaises(TypeError):
            grant.sign_grant([b"news"], 60, keys=[KEY_A], now=0)
        with self.assertRaises(ValueError):
            grant.sign_grant("news", 2**63, keys=[KEY_A], now=0)
        with self.assertRaises(ValueError):
            grant.sign_grant("news", 60, keys=[("bad.kid", KEY_A[1])], now=0)
        with self.assertRaises(ValueError):
            grant.sign_grant("news", 60, keys=[("main", b"short")], now=0)
        with self.assertRaises(ValueError):
            grant.sign_grant("news", 60, keys=[], now=0)

    def test_oversized_and_non_ascii_tokens_are_malformed(self):
        self.assertEqual(verdict_of("A" * 4097, [KEY_A], 0), "malformed")
        self.assertEqual(verdict_of("é.é", [KEY_A], 0), "malformed")
        self.assertEqual(verdict_of(b"", [KEY_A], 0), "malformed")

    def test_stream_url_carries_the_grant_as_a_query_parameter(self):
        url = grant.stream_url("/native/live", "news", 60, keys=[KEY_A], now=0)
        path, _, query = url.partition("?grant=")
        self.assertEqual(path, "/native/live")
        self.assertEqual(grant.verify_grant(query, keys=[KEY_A], now=0), ["news"])
        self.assertEqual(urllib.parse.parse_qs(urllib.parse.urlsplit(url).query)["grant"], [query])
        url = grant.stream_url("/native/live?x=1", "news", 60, keys=[KEY_A], now=0)
        self.assertIn("?x=1&grant=", url)


class Rotation(unittest.TestCase):
    def test_a_grant_from_a_rotated_out_key_verifies_while_the_key_is_in_the_ring(self):
        old_token = grant.sign_grant("news", 60, keys=[KEY_A], now=0)
        during = [KEY_B, KEY_A]
        self.assertEqual(grant.verify_grant(old_token, keys=during, now=0), ["news"])
        new_token = grant.sign_grant("news", 60, keys=during, now=0)
        self.assertNotEqual(new_token, old_token)
        self.assertEqual(verdict_of(new_token, [KEY_A], 0), "unknown_key")
        self.assertEqual(verdict_of(old_token, [KEY_B], 0), "unknown_key")
        self.assertEqual(grant.verify_grant(new_token, keys=[KEY_B], now=0), ["news"])


class KeyFiles(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.addCleanup(self.dir.cleanup)
        self.n = 0

    def write(self, text):
        self.n += 1
        path = os.path.join(self.dir.name, "keys%d" % self.n)
        with open(path, "w", encoding="utf-8", newline="") as f:
            f.write(text)
        return path

    def error(self, text):
        path = self.write(text)
        with self.assertRaises(ValueError) as ctx:
            grant.load_keys(path)
        message = str(ctx.exception)
        self.assertTrue(message.startswith(path + ": "), message)
        self.assertNotIn("\n", message)
        return message

    def test_a_key_file_loads_with_comments_blank_lines_tabs_and_crlf(self):
        path = self.write("# newest first\n\n  k2026\t" + "aa" * 32 + "  \r\n   # old\n"
                          "k2025 " + "bb" * 32 + "\nK_3-x " + "CC" * 40)
        keys = grant.load_keys(path)
        self.assertEqual(keys, [("k2026", b"\xaa" * 32), ("k2025", b"\xbb" * 32),
                                ("K_3-x", b"\xcc" * 40)])

    def test_the_path_defaults_to_the_environment_variable(self):
        path = self.write("env " + "aa" * 32 + "\n")
        old = os.environ.get("M0_GRANT_KEY_FILE")
        self.addCleanup(lambda: os.environ.pop("M0_GRANT_KEY_FILE", None) if old is None
                        else os.environ.__setitem__("M0_GRANT_KEY_FILE", old))
        os.environ["M0_GRANT_KEY_FILE"] = path
        self.assertEqual(grant.load_keys(), [("env", b"\xaa" * 32)])
        token = grant.sign_grant("news", 60, now=0)  # keys=None: the file
        self.assertEqual(grant.verify_grant(token, now=0), ["news"])
        del os.environ["M0_GRANT_KEY_FILE"]
        with self.assertRaises(ValueError):
            grant.load_keys()

    def test_a_changed_file_is_read_again(self):
        path = self.write("one " + "aa" * 32 + "\n")
        self.assertEqual(grant.load_keys(path)[0][0], "one")
        with open(path, "w") as f:
            f.write("two " + "bb" * 32 + "\none " + "aa" * 32 + "\n")
        self.assertEqual([k for k, _ in grant.load_keys(path)], ["two", "one"])

    def test_each_problem_is_one_line_naming_the_file(self):
        with self.assertRaises(ValueError) as ctx:
            grant.load_keys(os.path.join(self.dir.name, "missing"))
        self.assertIn("cannot open: No such file or directory", str(ctx.exception))
        self.assertIn("line 2: secret is 31 bytes, need at least 32",
                      self.error("# keys\nk1 " + "a" * 62 + "\n"))
        self.assertIn("line 1: secret is not hex", self.error("k1 " + "a" * 63 + "g\n"))
        self.assertIn("line 1: secret is not hex", self.error("k1 " + "a" * 65 + "\n"))
        self.assertIn("line 3: duplicate key id k1",
                      self.error("k1 " + "aa" * 32 + "\nk2 " + "bb" * 32 + "\nk1 " + "cc" * 32))
        self.assertTrue(self.error("").endswith(": no keys"))
        self.assertTrue(self.error("# nothing yet\n\n  \n").endswith(": no keys"))
        self.assertIn("line 1: expected `KID SECRET_HEX`", self.error("k1\n"))
        self.assertIn("line 1: expected", self.error("k1 " + "aa" * 32 + " extra\n"))
        self.assertIn("line 1: bad key id", self.error("k.1 " + "aa" * 32 + "\n"))
        self.assertIn("line 1: bad key id", self.error("k" * 33 + " " + "aa" * 32 + "\n"))


if __name__ == "__main__":
    unittest.main()
