"""m0.wsevents: Pushpin's WebSocket-over-HTTP codec, without m0serve."""
import sys
import unittest
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from m0 import wsevents  # noqa: E402


class WsEventsTest(unittest.TestCase):
    def test_a_batch_decodes_in_order_with_its_contents(self):
        body = b"OPEN\r\nTEXT 5\r\nhello\r\nBINARY 3\r\n\x00\r\n\r\nCLOSE 2\r\n\x03\xe8\r\nDISCONNECT\r\n"
        self.assertEqual(wsevents.decode_events(body), [
            ("OPEN", None), ("TEXT", b"hello"), ("BINARY", b"\x00\r\n"), ("CLOSE", b"\x03\xe8"),
            ("DISCONNECT", None)])

    def test_what_is_encoded_decodes_back(self):
        events = [("OPEN", None), wsevents.message("h\u00e9"), wsevents.control("subscribe", channel="c"),
                  wsevents.close(4000, "bye")]
        self.assertEqual(wsevents.decode_events(wsevents.encode_events(events)), events)
        self.assertEqual(events[1], ("TEXT", "m:h\u00e9".encode()))
        self.assertEqual(events[2], ("TEXT", b'c:{"channel":"c","type":"subscribe"}'))
        self.assertEqual(events[3], ("CLOSE", b"\x0f\xa0bye"))

    def test_a_malformed_body_is_refused(self):
        for body in (b"OPEN", b"TEXT 9\r\nshort\r\n", b"TEXT 5\r\nhelloXX", b"TEXT zz\r\nhi\r\n"):
            with self.subTest(body=body), self.assertRaises(ValueError):
                wsevents.decode_events(body)


if __name__ == "__main__":
    unittest.main()
