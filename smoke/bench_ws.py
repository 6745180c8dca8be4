#!/usr/bin/python3
"""bench_ws: WebSocket subscribers beside nchan's (bench.py's part `ws`:
`make bench BENCH_PARTS=ws`, or
`/usr/bin/python3 smoke/bench.py --parts ws --ws-holds 1000 --runs 3`).

The hold rows as the holds part runs them (build/sse_load: steady,
--ws-holds N holds on 10 channels at 20 events/s; burst, 1000 holds on one
channel, 1000 events back to back), and a paced burst (1000 holds on one
channel, --ws-paced-events events at --ws-paced-rate a second: 50,000
deliveries a second by default, which every row but Pushpin's sustains),
with each hold a WebSocket: the driver's
ws:// --url (smoke/load/sse_ws.cpp: the RFC 6455 handshake, frames through
libwslay, no permessage-deflate offered, each text message one event).

    m0-ws     m0serve's mojo /native/ws?channel=CH (the default loops):
              each event a JSON message {"id", "event", "data"}
    nchan-ws  nchan's `nchan_subscriber websocket` on nginx (two workers):
              each event its data alone
    m0-sse    m0serve's mojo /native/hold, the SSE hold, in the same run
    pushpin-ws
              Pushpin (message_rate and message_hwm off, its zurl) relaying
              each WebSocket to a backend as WebSocket-over-HTTP (the
              route's over_http; smoke/bench_pushpin.py): the backend
              accepts the OPEN with a subscribe control message, and each
              event is published as a ws-message item, its data alone
    nchan-sse nchan's eventsource subscriber, in the same run

All publish over HTTP/1.1 as in the holds part (m0serve's admin API,
nchan's publisher location, Pushpin's control port). The table gives
m0-ws / nchan-ws against the SSE rows' targets, m0-ws / pushpin-ws, and a
WebSocket subscriber's RSS and CPU against an SSE hold's on the same server
(m0serve's target: at most 1.2 times).

The steady rows give RSS per hold twice: the growth of VmRSS over the
holds, and of the part the servers own (`owned_rss_per_hold_bytes`:
RssAnon and RssShmem, without the file-backed pages). The first WebSocket
runs code no SSE hold does (the handshake, libwslay, the frame writer),
whose pages of the binary and its libraries then count in VmRSS, about
200 KB more than a first SSE hold maps: at 1000 holds that is 0.2 KB a
hold that no hold owns (and that every m0serve process shares with the
others of its binary).

Why the paced rows: in the burst each event is published once the one
before it is answered, so the pace is whatever the server, the driver's
reading and its publisher on the same two cores settle at, and a server's
CPU a delivery falls the faster events come (more of them leave in each
write). That pace is bistable here: the same m0serve's SSE burst ran at
337,000 to 754,000 deliveries/s in four runs, its WebSocket one at 247,000
to 438,000, either above the other. At a fixed pace every server writes
the same events at the same times, so a WebSocket subscriber's CPU against
an SSE hold's is read from the paced rows. Pushpin is not paced: its
burst is about 23,000 deliveries/s.

"""

import copy
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import emit  # noqa: E402
from bench_util import fmt, median  # noqa: E402

# row -> (the server bench.py starts, WebSocket or not)
ROWS = {"nchan-ws": ("nchan", True), "m0-ws": ("m0-mojo", True), "pushpin-ws": ("pushpin-unlimited", True),
        "nchan-sse": ("nchan", False), "m0-sse": ("m0-mojo", False)}
WS_OVER_SSE_TARGET = 1.2  # a WebSocket subscriber's RSS over an SSE hold's, m0serve


def plan(args):
    return ([("steady", int(h), 10) for h in args.ws_holds.split(",")] + [("burst", 1000, 1)] +
            ([("paced", 1000, 1)] if args.ws_paced_rate > 0 else []))


def mode_args(args, mode):
    """The driver's settings for a mode: a paced row is the steady driver on
    one channel at --ws-paced-rate, for --ws-paced-events events."""
    if mode != "paced":
        return args
    paced = copy.copy(args)
    paced.rate, paced.seconds = args.ws_paced_rate, args.ws_paced_events / args.ws_paced_rate
    return paced


PACED_ROWS = ("nchan-ws", "m0-ws", "nchan-sse", "m0-sse")  # Pushpin's burst is below the pace


def run(args, run_no, out, results, record, drive, make_server):
    rows = [r for r in args.ws_rows.split(",") if r] if args.ws_rows else list(ROWS)
    unknown = [r for r in rows if r not in ROWS]
    if unknown:
        raise SystemExit("bench: --ws-rows: unknown row(s) %s (rows: %s)" % (", ".join(unknown), ", ".join(ROWS)))
    for mode, holds, channels in plan(args):
        for row, (kind, ws) in ((r, ROWS[r]) for r in rows if mode != "paced" or r in PACED_ROWS):
            with tempfile.TemporaryDirectory(prefix="m0bench-ws-") as tmp:
                srv = make_server(kind, args.binary, holds, tmp, ws=ws)
                srv.kind = row  # the driver's label (stop() still tells m0 from nginx by it)
                try:
                    fig = drive(mode_args(args, mode), srv, holds, channels, "steady" if mode == "paced" else mode)
                finally:
                    srv.stop()
            fig["delivered_pct"] = 100.0 * fig["delivered"] / fig["expected"] if fig["expected"] else None
            record(out, results, ("ws", mode, holds, row), fig, run=run_no, part="ws", mode=mode,
                   server=row)
            print("bench: run %d ws %s %d holds %-9s rss/hold %.0f (owned %.0f), p99 %.1f ms, %.0f deliveries/s, "
                  "%.2f CPU s/1M, %d/%d delivered, %s" % (
                      run_no + 1, mode, holds, row, fig["rss_per_hold_bytes"],
                      fig.get("owned_rss_per_hold_bytes", 0), fig["p99_ms"],
                      fig["deliveries_per_s"], fig["cpu_s_per_1m"], fig["delivered"], fig["expected"],
                      "clean" if fig["clean"] else "NOT CLEAN"), flush=True)


def ratio(a, b):
    return a / b if a is not None and b else None


def table(args, results, targets, target_text):
    print("\nws: WebSocket subscribers beside nchan's, and SSE holds in the same run; medians of %d runs"
          % args.runs)
    cols = list(ROWS) + ["m0/nchan ws", "target", "m0/pushpin ws", "m0 ws/sse", "nchan ws/sse"]
    print(("%-7s %6s  %-19s" + " %11s" * len(cols)) % tuple(["mode", "holds", "measure"] + cols))
    for mode, holds, _ in plan(args):
        keys = {"burst": ["deliveries_per_s", "cpu_s_per_1m", "delivered_pct"],
                "paced": ["deliveries_per_s", "p50_ms", "p99_ms", "cpu_s_per_1m", "delivered_pct"]}.get(
                    mode, ["rss_per_hold_bytes", "owned_rss_per_hold_bytes", "p50_ms", "p99_ms", "cpu_s_per_1m",
                           "delivered_pct"])
        for key in keys:
            med = {row: median(results.get(("ws", mode, holds, row), []), key) for row in ROWS}
            vs_nchan = ratio(med["m0-ws"], med["nchan-ws"])
            tkey = key if mode != "burst" or "burst_" + key not in targets else "burst_" + key
            m0_ws_sse, nchan_ws_sse = ratio(med["m0-ws"], med["m0-sse"]), ratio(med["nchan-ws"], med["nchan-sse"])
            # A paced row's deliveries/s is its pace: no target on it.
            targeted = key in targets and not (mode == "paced" and key == "deliveries_per_s")
            print(("%-7s %6d  %-19s" + " %11s" * len(cols)) % tuple(
                [mode, holds, key] + [fmt(med[row]) for row in ROWS] +
                [fmt(vs_nchan), target_text(tkey) if targeted else "-",
                 fmt(ratio(med["m0-ws"], med["pushpin-ws"])), fmt(m0_ws_sse), fmt(nchan_ws_sse)]))
            slug = "%s-%d-%s" % (mode, holds, key.replace("_", "-"))
            if vs_nchan is not None and targeted:
                emit.emit("bench-ws-%s-ratio" % slug, round(vs_nchan, 4), "ratio", out=open(os.devnull, "w"))
            if m0_ws_sse is not None and key in ("rss_per_hold_bytes", "owned_rss_per_hold_bytes", "cpu_s_per_1m"):
                emit.emit("bench-ws-%s-ws-over-sse" % slug, round(m0_ws_sse, 4), "ratio",
                          out=open(os.devnull, "w"))
    print("m0serve's WebSocket subscriber's RSS (steady) and CPU (steady and paced) over its SSE hold's: "
          "target <=%g" % WS_OVER_SSE_TARGET)
    print("owned_rss_per_hold_bytes: RssAnon and RssShmem, the RSS without file-backed pages (the code a first "
          "WebSocket runs maps about 200 KB more of the binary and its libraries than a first SSE hold)")
