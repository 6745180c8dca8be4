// The flag table (flags.hpp says what is made from it). One row a flag, in
// --help's order; a new flag is one row here, plus the code that uses its
// field. After editing a row, `make readme-flags` writes the README's table
// again (test_options fails while the two differ).
//
// Threads: the main thread only, before anything else starts; the table is
// built once, at its first use, and never changes.
#include "app/flags.hpp"

#include <algorithm>
#include <iterator>

#include "bus/channel.hpp"

namespace m0::app {

// The field of Options a row sets: AT(server.grace).
// clang-format off
#define AT(field) +[](Options& o) -> auto& { return o.field; }
// clang-format on

const std::vector<Flag>& flags() {
    static const std::vector<Flag> table =
        with_request_rows(with_h2_rows(with_ws_rows(with_tls_rows({
            {
                .name = "APP",
                .kind = Flag::positional,
                .shown = "none",
                .help = "a WSGI application at /, as gunicorn takes it:\n"
                        "module.path (its `application`) or module:callable;\n"
                        "the same as --mount /=module.path:application",
                .doc =
                    "a WSGI application served at `/`, as gunicorn takes it: `config.wsgi` means "
                    "`--mount /=config.wsgi:application`, `config.wsgi:app` names another "
                    "callable; so `m0serve config.wsgi --realtime --blocking-threads 8` works as "
                    "written. One APP; an APP beside `--mount /=...` is an error",
                .to = custom(set::app),
            },
            {
                .name = "listen",
                .kind = Flag::list,
                .metavar = "HOST:PORT|unix:PATH",
                .shown = "`127.0.0.1:8000`",
                .help = "where to serve; repeatable (default {default})",
                .doc =
                    "where to accept HTTP connections (HOST: an address, a name such as "
                    "`localhost`, or `[::1]`; `:PORT` alone is every IPv4 interface, "
                    "`0.0.0.0:PORT`, "
                    "as gunicorn's `--bind :PORT` is); repeatable: every one serves. `unix:PATH` "
                    "is "
                    "a unix "
                    "stream socket: a stale socket file (nobody accepting) is replaced, a live one "
                    "or another kind of file is a start-up error, and the file is removed at exit. "
                    "A peer on a unix socket is trusted as a proxy (its X-Forwarded-For / -Proto "
                    "are believed, as gunicorn does: only local processes the file's mode admits "
                    "can connect); its SERVER_NAME is `localhost`, SERVER_PORT 80. Not with "
                    "`--workers` (a unix socket is bound once; use TCP, or systemd's sockets)",
                .to = custom(set::listen),
            },
            {
                .name = "unix-mode",
                .kind = Flag::value,
                .metavar = "OCTAL",
                .shown = "`0660`",
                .help = "a unix: listener's file mode (default {default})",
                .doc = "the mode of every `unix:` socket file (connecting needs write permission), "
                       "set before it listens",
                .to = custom(set::unix_mode),
            },
            {
                .name = "unix-owner",
                .kind = Flag::value,
                .metavar = "USER[:GROUP]",
                .shown = "the process's",
                .help = "a unix: listener's file owner (default: {default})",
                .doc =
                    "owner of every `unix:` socket file (names or numbers; USER alone: with USER's "
                    "group); changing it needs root",
                .to = custom(set::unix_owner),
            },
            {
                .name = "mount",
                .kind = Flag::list,
                .metavar = "PREFIX=SPEC",
                .shown = "none",
                .help = "repeatable; SPEC is module.path:callable (WSGI)\n"
                        "or a compiled-in mojo mount name (mojo)",
                .doc =
                    "repeatable. SPEC is `module.path:callable` (a WSGI app, imported by the "
                    "embedded interpreter) or the name of a compiled-in mojo mount (`mojo`). "
                    "Routing is by longest prefix; SCRIPT_NAME is the prefix, PATH_INFO the rest",
                .to = custom(set::mount),
            },
            {
                .name = "blocking-threads",
                .kind = Flag::value,
                .metavar = "N",
                .help = "WSGI pool threads (default {default})",
                .doc = "threads of the WSGI pool",
                .to = number(AT(blocking_threads), 1, 1024),
            },
            {
                .name = "mojo-threads",
                .kind = Flag::value,
                .metavar = "N",
                .help = "mojo pool threads (default {default})",
                .doc = "threads of the mojo pool",
                .to = number(AT(mojo_threads), 1, 1024),
            },
            {
                .name = "mojo-in-loop",
                .kind = Flag::toggle,
                .help = "the loop thread that read a request runs it in\n"
                        "place when its mojo mount declares itself quick\n"
                        "(no hand-off to the mojo pool and back)",
                .doc =
                    "the loop thread that read a request runs it in place, with no hand-off to the "
                    "mojo pool and back, when its mount declares itself quick (`static constexpr "
                    "bool quick = true`: a `serve` that never blocks; the built-in `mojo` mount "
                    "does); the hold's frame still goes before its completion, and `x-worker` "
                    "reads `mojo-loop-N`",
                .to = on(AT(mojo_in_loop)),
            },
            {
                .name = "max-queued",
                .kind = Flag::value,
                .metavar = "N",
                .help = "jobs waiting per pool; past it, 503 (default {default})",
                .doc =
                    "per pool, requests waiting for a thread; past it: 503 `too many queued "
                    "requests` with `Retry-After: 1`. The default equals `--max-connections` (a "
                    "connection has one request in a pool at a time), so at the defaults only a "
                    "raised connection limit meets it; to bound the wait instead, set it near "
                    "threads x acceptable wait / view time. Queued requests whose client left are "
                    "not run and hold no place",
                .to = number(AT(max_queued), 1, 10000000),
            },
            {
                .name = "chdir",
                .kind = Flag::value,
                .metavar = "DIR",
                .shown = "the current directory",
                .help = "change directory first; DIR goes on sys.path\n"
                        "(default: {default})",
                .doc = "change directory before importing apps; DIR (or, without the flag, the "
                       "directory m0serve runs in, as with gunicorn) goes on `sys.path`",
                .to = text(AT(chdir)),
            },
            {
                .name = "pythonpath",
                .kind = Flag::list,
                .metavar = "DIR",
                .help = "repeatable; prepended to sys.path",
                .doc = "repeatable; prepended to `sys.path`",
                .to = append(AT(pythonpath)),
            },
            {
                .name = "virtualenv",
                .kind = Flag::value,
                .metavar = "DIR",
                .help = "the project's virtualenv (python3 -m venv): Python\n"
                        "runs as its bin/python3 (default: VIRTUAL_ENV)",
                .doc = "the project's virtualenv (uWSGI's `--home`, NGINX Unit's `home`): the "
                       "embedded "
                       "interpreter starts as `DIR/bin/python3`, so the venv's packages import as "
                       "they do for that program (see Your virtualenv). A folder with no "
                       "`pyvenv.cfg`, or a venv made for another Python than the embedded one, is "
                       "exit 2 with one line",
                .to = custom(set::virtualenv, "`VIRTUAL_ENV`"),
            },
            {
                .name = "python-switch-interval",
                .kind = Flag::value,
                .metavar = "SECONDS",
                .help = "how long a Python thread runs before one waiting\n"
                        "for the GIL may take it (sys.setswitchinterval),\n"
                        "0 to 1; 0: Python's own 0.005 (default {default})",
                .doc =
                    "0 to 1: `sys.setswitchinterval` before the apps load, how long a Python "
                    "thread keeps the GIL while another waits for it; 0 leaves Python's own 0.005. "
                    "Longer than Python's own so that pool threads hand the GIL over between "
                    "requests rather than midway through one, where two requests meet on the app's "
                    "locks (docs/BENCHMARK.md, the switch interval); a request that blocks still "
                    "lets go at once, and one "
                    "that computes longer still shares. The app may set its own",
                .to = short_seconds(AT(python_switch_interval), 1, "1"),
            },
            {
                .name = "log-level",
                .kind = Flag::value,
                .metavar = "LEVEL",
                .shown = "`info`",
                .help = "debug, info, warn, error (default {default})",
                .doc = "`debug`, `info`, `warn` or `error`; the log goes to stderr",
                .to = custom(set::log_level),
            },
            {
                .name = "access-log",
                .kind = Flag::value,
                .metavar = "PATH",
                .shown = "off",
                .help = "one line per request, combined log format plus\n"
                        "request time (and a hold's duration and events);\n"
                        "- for standard output; reopened on SIGUSR1 (and\n"
                        "SIGHUP without --workers) (default {default})",
                .doc =
                    "one line per request as it ends, in the combined log format plus `rt=` "
                    "(seconds to the answer's end, or to a hold's head) and, for a hold, `hold=` "
                    "(seconds it lasted) and `events=` (events delivered); bytes count the head "
                    "too (nginx's `$bytes_sent`); a request that never parsed is `\"-\"`, one "
                    "whose "
                    "client left before any answer is 499; the values of query parameters `grant`, "
                    "`token`, `access_token`, `jwt`, `key`, `signature`, `sig`, `password`, "
                    "`secret` are written `[redacted]`; `-` is standard output; reopened on "
                    "SIGHUP. Example: `127.0.0.1 - - [01/Dec/2026:05:36:19 +0000] \"GET "
                    "/hold?channel=c1 HTTP/1.1\" 200 342 \"-\" \"curl/7.88.1\" rt=0.001 hold=1.012 "
                    "events=1`",
                .to = custom(set::access_log),
            },
            {
                .name = "forwarded-allow-ips",
                .kind = Flag::value,
                .metavar = "LIST",
                .shown = "`127.0.0.1,::1`",
                .help = "peers whose X-Forwarded-For / X-Forwarded-Proto set\n"
                        "REMOTE_ADDR and wsgi.url_scheme: addresses, CIDR\n"
                        "blocks, or * (default {default}; '' for none)",
                .doc =
                    "as gunicorn's: peers whose `X-Forwarded-For` and `X-Forwarded-Proto` are "
                    "believed. Addresses, CIDR blocks (`10.0.0.0/8`, `fd00::/8`) or `*`; `''` "
                    "trusts no TCP peer (a peer on a `unix:` listener stays trusted: see "
                    "`--listen`). From such a peer, REMOTE_ADDR is the rightmost `X-Forwarded-For` "
                    "entry that is not itself a trusted proxy, and `wsgi.url_scheme` the last "
                    "`X-Forwarded-Proto` value when it is `http` or `https`; from any other peer "
                    "both headers are ignored (they reach the app as `HTTP_X_FORWARDED_*` only). A "
                    "bad item exits 2",
                .to = custom(set::forwarded),
            },
            {
                .name = "keepalive-timeout",
                .kind = Flag::value,
                .metavar = "SECONDS",
                .help = "idle keep-alive connections are closed (default {default})",
                .doc = "a keep-alive connection idle this long (counted from when its last answer "
                       "drained) is closed",
                .to = seconds(AT(server.keepalive_timeout)),
            },
            {
                .name = "write-timeout",
                .kind = Flag::value,
                .metavar = "SECONDS",
                .help = "output that does not drain is cut (default {default})",
                .doc = "a connection whose output makes no progress this long is cut",
                .to = seconds(AT(server.write_timeout)),
            },
            {
                .name = "request-timeout",
                .kind = Flag::value,
                .metavar = "SECONDS",
                .help = "an application that has not answered is 504 (default {default})",
                .doc =
                    "an application that has not answered (or decided a hold) this long after the "
                    "request was handed to its pool: 504, the connection closed, a job not yet "
                    "taken is not run, and the late answer is dropped "
                    "(`m0_requests_timed_out_total`)",
                .to = seconds(AT(server.request_timeout)),
            },
            {
                .name = "max-connections",
                .kind = Flag::value,
                .metavar = "N",
                .shown = "what the fd limit allows",
                .help = "past it, 503 and close (default: what the file\n"
                        "descriptor limit allows, at least --max-holds\n"
                        "with --realtime)",
                .doc =
                    "past it, a new connection is answered 503 and closed. At start the soft "
                    "`RLIMIT_NOFILE` is raised to the hard limit; the default is that limit minus "
                    "a reserve (64, plus 4 per pool thread), and with `--realtime` never below "
                    "`--max-holds` (a warning when the limit cannot give that many). A value above "
                    "what the limit allows is warned about once at start",
                .to = custom(set::max_connections),
            },
            {
                .name = "grace",
                .kind = Flag::value,
                .metavar = "SECONDS",
                .help = "SIGTERM: time for in-flight requests (default {default})",
                .doc = "on SIGTERM/SIGINT, how long in-flight requests may take to finish",
                .to = seconds(AT(server.grace)),
            },
            {
                .name = "workers",
                .kind = Flag::value,
                .metavar = "N",
                .help = "worker processes sharing the listeners under a\n"
                        "supervising parent (default {default}: no parent); SIGHUP\n"
                        "rolls them; with --realtime, needs --bus redis://...",
                .doc =
                    "worker processes (1 to 64) under a small supervising parent, which binds the "
                    "listeners (one SO_REUSEPORT socket per worker, kept across its "
                    "replacements), starts a worker "
                    "that dies again (at most once a second), stops them all on SIGTERM/SIGINT "
                    "(exit 0 when each exits 0), and exits 2 when a worker cannot start. SIGHUP "
                    "rolls the workers: for each in turn a new one starts (importing the code as "
                    "it is now) and, once it serves, the old one drains as on SIGTERM; a new one "
                    "that does not start ends the roll, the old ones serve on. SIGUSR1 is sent on "
                    "to every worker (keys read again, access log reopened). The admin listener "
                    "is worker 0's (its `/metrics` is that worker's). With `--realtime` it needs "
                    "`--bus redis://`; the port must be fixed",
                .to = number(AT(workers), 1, 64),
            },
            {
                .name = "max-requests",
                .kind = Flag::value,
                .metavar = "N",
                .shown = "0 (never)",
                .help = "with --workers: a worker that has served N requests is\n"
                        "replaced by a roll (default: never)",
                .doc = "with `--workers`, as gunicorn's: a worker that has served N requests (0 to "
                       "10^12, as `m0_requests_total` counts them, admin ones included; looked at "
                       "ten times a second) asks its parent for a replacement, which is the roll "
                       "SIGHUP makes for one worker: the new one starts, then the old one drains. "
                       "Without `--workers` it is a start-up error (exit 2): one process has no "
                       "parent to replace it",
                .to = number(AT(max_requests), 0, 1000000000000),
            },
            {
                .name = "max-requests-jitter",
                .kind = Flag::value,
                .metavar = "N",
                .help = "up to N more requests, drawn per worker (default {default})",
                .doc = "adds a number from 0 to N (at most 10^12), drawn once per worker, to "
                       "`--max-requests`, so that workers started together are not replaced "
                       "together. Needs `--max-requests`",
                .to = number(AT(max_requests_jitter), 0, 1000000000000),
            },
            {
                .name = "loops",
                .kind = Flag::value,
                .metavar = "N",
                .shown =
                    "the cores this process may run on (its CPU affinity) divided by `--workers`, "
                    "at least 1; 1 with `--bus redis://`",
                .help = "event loop threads per process (default: the cores\n"
                        "this process may run on, divided by --workers; 1\n"
                        "with --bus redis://, which spreads with --workers)",
                .doc =
                    "event loop threads per process (1 to 256). Each loop owns its own "
                    "connections, holds and subscriptions; the WSGI and mojo pools are shared. "
                    "Every TCP listener is bound once per loop with SO_REUSEPORT (the kernel "
                    "spreads connections), a unix or systemd socket is shared; `--max-connections` "
                    "counts across the loops. An event is numbered once and reaches the holds of "
                    "every loop in the same id order; `/metrics` and the admin API's `/close` "
                    "cover every loop. With `--bus redis://` more than 1 exits 2 (a process is one "
                    "Redis subscriber: use `--workers`)",
                .to = number(AT(loops), 1, 256),
            },
            {
                .name = "realtime",
                .kind = Flag::toggle,
                .help = "wire the bus channel: holds and publish",
                .doc = "wire the bus channel: holds, publish",
                .to = on(AT(realtime)),
            },
            {
                .name = "bus",
                .kind = Flag::value,
                .metavar = "URL",
                .shown = "`in-process`",
                .help = "with --realtime: the bus. in-process (default), or\n"
                        "redis://[USER:PASSWORD@]HOST[:PORT][/DB],\n"
                        "redis+unix://[USER:PASSWORD@]/PATH[?db=N] or\n"
                        "redis+sentinel://[USER:PASSWORD@]HOST:PORT[,...]/MASTER[/DB],\n"
                        "shared by every m0serve on that Redis",
                .doc =
                    "with `--realtime`: the bus. `redis://[USER:PASSWORD@]HOST[:PORT][/DB]` (port "
                    "6379, database 0 by default), `redis+unix://[USER:PASSWORD@]/PATH[?db=N]` or "
                    "`redis+sentinel://[USER:PASSWORD@]HOST[:PORT][,HOST[:PORT]...]/MASTER[/DB]` "
                    "(sentinels' port 26379; the master found, and followed, through them) shares "
                    "ids, history and events with every m0serve on that Redis (see The Redis "
                    "bus). USER and PASSWORD are percent-encoded; the password is shown as `***` "
                    "in every log line and message. A bad URL, or `--bus` without `--realtime`: "
                    "one line, exit code 2; so is a Redis that refuses the password at start "
                    "(one that cannot be reached is waited for, as ever)",
                .to = custom(set::bus),
            },
            {
                .name = "bus-password-file",
                .kind = Flag::value,
                .metavar = "PATH",
                .shown = "none",
                .help = "the Redis bus's password: the file's first line\n"
                        "(kept off the command line; not with one in --bus)",
                .doc = "the Redis bus's password (AUTH; with a USER in the `--bus` URL, that ACL "
                       "user's): the file's first line, read at start (before `--chdir`), so it is "
                       "not on the command line for `ps` to show. Not with a password in the URL; "
                       "an unreadable or empty file is exit 2. `m0.publish` outside m0serve reads "
                       "`M0_BUS_PASSWORD_FILE` the same way",
                .to = text(AT(bus_password_file)),
            },
            {
                .name = "heartbeat",
                .kind = Flag::value,
                .metavar = "SECONDS",
                .help = "comment heartbeat on idle holds (default {default})",
                .doc = "comment heartbeat on idle holds",
                .to = seconds(AT(server.heartbeat)),
            },
            {
                .name = "hold-buffer-limit",
                .kind = Flag::value,
                .metavar = "BYTES",
                .help = "a hold's unsent output limit (default {default})",
                .doc = "a hold's unsent output bound: a hold that stays over it for "
                       "`--hold-drain-timeout`, or passes twice it, is closed (slow reader)",
                .to = number(AT(server.hold_buffer_limit), 1024, size_t(1) << 32),
            },
            {
                .name = "hold-drain-timeout",
                .kind = Flag::value,
                .metavar = "SECONDS",
                .help = "a hold over that limit this long is closed (default {default})",
                .doc = "how long a hold's unsent output may stay over `--hold-buffer-limit`",
                .to = seconds(AT(server.hold_drain_timeout)),
            },
            {
                .name = "hold-coalesce",
                .kind = Flag::value,
                .metavar = "SECONDS",
                .help = "a hold flush this soon after the last one waits\n"
                        "for the rest of it, so events close together\n"
                        "leave in one send (default {default}; 0: never)",
                .doc = "0 to 0.1. Events for holds that are staged within this long after the last "
                       "flush of holds' output wait for the rest of it, then leave together: one "
                       "`sendmsg` per connection for all of them (a publisher sending events one "
                       "after the other otherwise costs every subscriber a send per event, and the "
                       "kernel's send is most of a delivery's cost). An event after a quiet spell "
                       "goes at once; the added delay is at most this long. 0: every loop turn "
                       "flushes",
                .to = short_seconds(AT(server.hold_coalesce), 0.1, "0.1"),
            },
            {
                .name = "output-high-water",
                .kind = Flag::value,
                .metavar = "BYTES",
                .help = "unsent output past which a connection gets no more:\n"
                        "streams wait, pipelined requests wait (default {default})",
                .doc = "a connection's unsent output past which it gets no more: a streamed body's "
                       "pool thread waits, and the next pipelined request is not read until the "
                       "output drains to half of it",
                .to = number(AT(server.stream_high_water), 4096, size_t(1) << 32),
            },
            {
                .name = "max-event-size",
                .kind = Flag::value,
                .metavar = "BYTES",
                .shown = shown_number(bus::kDefaultMaxEventSize),
                .help = "larger events are refused at publish (default\n"
                        "{default}, or a quarter of --hold-buffer-limit if\n"
                        "smaller); must be below --hold-buffer-limit",
                .doc =
                    "an event larger than this is refused at publish: 413 from the admin API, "
                    "ValueError from `m0.publish`; by default a quarter of `--hold-buffer-limit` "
                    "when that is smaller. Its size is the most bytes one subscriber is written "
                    "for "
                    "it: its SSE event (`id:`, `event:`, `data:` lines) or its WebSocket message "
                    "(the JSON envelope, each control byte six), whichever is longer. Must be "
                    "below "
                    "`--hold-buffer-limit` (else exit 2), so no single event can fill a reader's "
                    "buffer",
                .to = number(AT(max_event_size), 1, size_t(1) << 32),
            },
            {
                .name = "publish-batch-max",
                .kind = Flag::value,
                .metavar = "N",
                .help = "events one admin POST /publish array may carry;\n"
                        "more: 413 (default {default})",
                .doc = "the events one admin `POST /publish` JSON array may carry: a longer "
                       "array is refused whole with 413 naming the limit (`--max-body-size` "
                       "applies to its body too)",
                .to = number(AT(server.publish_batch_max), 1, 1000000),
            },
            {
                .name = "max-holds",
                .kind = Flag::value,
                .metavar = "N",
                .help = "past it, a hold answer is 503 (default {default})",
                .doc =
                    "past it, a hold answer becomes 503 with `Retry-After` (a stream, a long-poll, "
                    "a WebSocket; a WebSocket-over-HTTP view's accept too, before its 101); "
                    "`m0_holds_open` counts them, `m0_holds_refused_total` the refusals",
                .to = number(AT(max_holds), 0, 10000000),
            },
            {
                .name = "max-hold-channels",
                .kind = Flag::value,
                .metavar = "N",
                .help = "a hold naming more channels is 502 (default {default})",
                .doc =
                    "a hold answer whose `M0-Channel` names more channels is a 502 with the count "
                    "in its reason, logged (each name is a subscription kept for the hold's life)",
                .to = number(AT(max_hold_channels), 1, 100000),
            },
            {
                .name = "cors-origin",
                .kind = Flag::list,
                .metavar = "ORIGIN",
                .shown = "none",
                .help = "repeatable; a hold's head lets a page from ORIGIN\n"
                        "(scheme://host[:port]) read the stream, or any with *",
                .doc =
                    "repeatable; with `--realtime`: a page from ORIGIN (`scheme://host[:port]`, no "
                    "path) may read holds cross-origin (an `EventSource` on another origin, e.g. "
                    "the mojo `/live` URL with its grant and no cookie). A hold head (M0-Hold or "
                    "Grip-Hold, either pool) whose request's `Origin` is one of them (scheme and "
                    "host compared without case, a default port ignored) gets "
                    "`Access-Control-Allow-Origin: <that Origin>`; with named origins every hold "
                    "head gets `Vary: Origin`; any other Origin, or none, gets no "
                    "`Access-Control-*` field, so the browser refuses the stream. `*`: every hold "
                    "head says `Access-Control-Allow-Origin: *`. With the flag, m0serve owns these "
                    "fields on hold heads (a handler's own are replaced). A page that reads a "
                    "stream with `fetch()` and headers of its own (`Last-Event-ID`, "
                    "`Authorization`) is preflighted: a mojo mount's preflight of a GET is "
                    "answered on the loop, 204 with the origin, `GET, HEAD`, the asked headers and "
                    "`Access-Control-Max-Age: 600`, or 403 naming why; so is one a WSGI view "
                    "answers with a hold head. **Holds only**: ordinary answers, and a WSGI app's "
                    "other preflights, are the application's (django-cors-headers, say), so the "
                    "two never write the field twice. A malformed value, or the flag without "
                    "`--realtime`, exits 2",
                .to = custom(set::cors_origin),
            },
            {
                .name = "cors-credentials",
                .kind = Flag::toggle,
                .help = "holds' heads add Access-Control-Allow-Credentials: true",
                .doc =
                    "hold heads that allow an origin also say `Access-Control-Allow-Credentials: "
                    "true` (an `EventSource` with `withCredentials`, cookies across origins). With "
                    "`*`, or without `--cors-origin`: exit 2 (the Fetch standard refuses `*` on a "
                    "credentialed request)",
                .to = custom(set::cors_credentials, "off"),
            },
            {
                .name = "history",
                .kind = Flag::value,
                .metavar = "N",
                .help = "events kept per channel for replay (default {default}; 0: none)",
                .doc = "events kept per channel for replay; 0 keeps none",
                .to = number(AT(history.per_channel), 0, 1000000),
            },
            {
                .name = "history-seconds",
                .kind = Flag::value,
                .metavar = "SECONDS",
                .help = "none kept longer (default {default})",
                .doc = "no event is kept longer",
                .to = seconds(AT(history.max_age)),
            },
            {
                .name = "history-bytes",
                .kind = Flag::value,
                .metavar = "BYTES",
                .help = "kept across all channels, oldest first out (default {default})",
                .doc =
                    "bytes kept across all channels (each event as its holds are written it, which "
                    "the live fan-out and every replay share, plus its channel's name and a "
                    "160-byte entry); past it the oldest events anywhere go first",
                .to = number(AT(history.max_bytes), 0, size_t(1) << 40),
            },
            {
                .name = "admin-listen",
                .kind = Flag::value,
                .metavar = "HOST:PORT|unix:PATH",
                .shown = "off",
                .help = "admin listener: POST /publish, POST /close, GET /metrics, GET /ready",
                .doc =
                    "admin listener: `POST /publish`, `POST /close`, `GET /metrics`, `GET /ready` "
                    "(200 serving, 503 draining)",
                .to = custom(set::admin_listen),
            },
            {
                .name = "admin-key-file",
                .kind = Flag::value,
                .metavar = "PATH",
                .help = "bearer key for admin POST /publish (or a JWT signed with it)",
                .doc =
                    "bearer key for the admin `POST /publish`, `/publish/` and `/close`; a GRIP "
                    "publisher's JWT signed HS256 with it (`Authorization: Bearer JWT`, any `iss`, "
                    "`exp` honoured when present) is taken too",
                .to = text(AT(admin_key_file)),
            },
            {
                .name = "admin-open",
                .kind = Flag::toggle,
                .help = "admin POSTs need no key; only with a loopback --admin-listen",
                .doc =
                    "admin POSTs need no key at all (a local Pushpin-style control port). It "
                    "needs an `--admin-listen` that is a `unix:` socket or resolves to loopback "
                    "only (127.0.0.0/8, ::1), and excludes `--admin-key-file` (open or keyed, not "
                    "both): otherwise a start-up error",
                .to = on(AT(server.admin_open)),
            },
            {
                .name = "grant-key-file",
                .kind = Flag::value,
                .metavar = "PATH",
                .help = "keys that verify grants (KID HEX per line)",
                .doc = "keys that verify grants (see Grants)",
                .to = text(AT(grant_key_file)),
            },
            {
                .name = "check",
                .kind = Flag::toggle,
                .help = "load everything (apps, keys, bus), bind the\n"
                        "listeners, print the configuration, exit 0 (or 2\n"
                        "with the reason) without serving",
                .doc =
                    "loads everything (imports the apps, reads the key files, starts the bus), "
                    "binds the listeners, logs the configuration block, prints `m0serve: "
                    "configuration ok` and exits 0 without serving; any failure exits 2 with its "
                    "one line. For a Django app it also imports `ROOT_URLCONF` (Django itself "
                    "waits for the first request) and runs Django's system checks as `manage.py "
                    "check` does (no database checks): an error fails, a warning is logged",
                .to = on(AT(check)),
                .cli_only = true,
            },
            {
                .name = "config",
                .kind = Flag::value,
                .metavar = "FILE",
                .shown = "none",
                .help = "a TOML file whose keys are these flags' names\n"
                        "(flags given here win); see README",
                .doc =
                    "a TOML file with the same keys as the flags (see Config file); flags given on "
                    "the command line win",
                .to = custom(set::nothing),
                .cli_only = true,
            },
            {
                .name = "help",
                .kind = Flag::toggle,
                .help = "this text",
                .doc = "prints the usage and exits 0",
                .to = custom(set::help),
                .cli_only = true,
            },
            {
                .name = "help-markdown",
                .kind = Flag::toggle,
                .help = "the README's table of these flags (Markdown)",
                .doc = "prints this table, made from the flag table in `src/app/flags.cpp`, and "
                       "exits 0 "
                       "(`make readme-flags` puts it in the README)",
                .to = custom(set::help_markdown),
                .cli_only = true,
            },
            {
                .name = "version",
                .kind = Flag::toggle,
                .help = "m0serve and its version",
                .doc = "prints `m0serve VERSION` and exits 0",
                .to = custom(set::version),
                .cli_only = true,
            },
        }))));
    return table;
}

#undef AT

std::vector<Flag> insert_after(std::vector<Flag> rows, std::string_view after,
                               std::vector<Flag> more) {
    auto at =
        std::find_if(rows.begin(), rows.end(), [&](const Flag& f) { return f.name == after; });
    if (at != rows.end()) ++at;
    rows.insert(at, std::make_move_iterator(more.begin()), std::make_move_iterator(more.end()));
    return rows;
}

const Flag* find_flag(std::string_view name) {
    for (const auto& f : flags())
        if (f.kind != Flag::positional && f.name == name) return &f;
    return nullptr;
}

}  // namespace m0::app
