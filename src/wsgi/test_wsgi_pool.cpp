// The WSGI pool's unit forms: the same hold rules as the mojo pool (frame on
// the loop's channel before the completion, headers consumed, the cursor read
// before the app runs), PEP 3333 details (environ, start_response, write(),
// close() always called, streamed bodies), and failures (500, raised).
#include <fcntl.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cstdio>
#include <functional>
#include <thread>

#include "bus/channel.hpp"
#include "wsgi/interpreter.hpp"
#include "wsgi/wsgi_pool.hpp"

using namespace m0;

namespace {

const char* kApps = R"PY(
import json
closed = []

def hold_app(environ, start_response):
    # Consumes the request: the cursor must have been read before.
    environ.pop('HTTP_LAST_EVENT_ID', None)
    start_response('200 OK', [('M0-Hold', 'stream'), ('M0-Channel', 'a,b'),
                              ('Content-Length', '13'), ('Content-Type', 'text/plain')])
    return [b': wsgi head\n\n']

def grip_app(environ, start_response):
    # As django-grip's set_hold_stream() answers.
    start_response('200 OK', [('Grip-Hold', 'stream'), ('Grip-Channel', 'a; prev-id=1, b'),
                              ('Grip-Keep-Alive', ':ka\\n\\n; format=cstring; timeout=20'),
                              ('Content-Length', '13'), ('Content-Type', 'text/plain')])
    return [b': grip head\n\n']

def env_app(environ, start_response):
    body = environ['wsgi.input'].read()
    keys = {k: (v if isinstance(v, str) else repr(type(v).__name__))
            for k, v in environ.items()}
    keys['body'] = body.decode('latin-1')
    keys['readline'] = hasattr(environ['wsgi.input'], 'readline')
    start_response('200 OK', [('Content-Type', 'application/json')])
    return [json.dumps(keys).encode()]

def gen_app(environ, start_response):
    start_response('200 OK', [('Content-Type', 'text/plain')])
    for i in range(3):
        yield b'chunk %d\n' % i

def sized_app(environ, start_response):
    start_response('200 OK', [('Content-Length', '5')])
    return iter([b'hello'])

def write_app(environ, start_response):
    write = start_response('200 OK', [])
    write(b'written;')
    return [b'returned']

class Closing:
    def __init__(self, fail):
        self.fail = fail
    def __iter__(self):
        if self.fail:
            raise RuntimeError('body failed')
        yield b'x'
    def close(self):
        closed.append(self.fail)

def closing_app(environ, start_response):
    start_response('200 OK', [('Content-Length', '1')])
    return Closing(environ.get('QUERY_STRING') == 'fail')

def boom_app(environ, start_response):
    raise RuntimeError('boom')

def bad_hold_app(environ, start_response):
    start_response('200 OK', [('M0-Hold', 'sometimes'), ('M0-Channel', 'a')])
    return [b'']

kept = {}

def keeping_app(environ, start_response):
    # ?keep: keeps start_response and write in this module; any other request
    # calls the kept ones, then answers with what they raised.
    if environ['QUERY_STRING'] == 'keep':
        kept['start_response'] = start_response
        kept['write'] = start_response('200 OK', [('Content-Type', 'text/plain')])
        return [b'kept']
    said = []
    for name, args in (('start_response', ('500 Stolen', [('X-Stolen', 'yes')])),
                       ('write', (b'stolen',))):
        try:
            kept[name](*args)
            said.append(name + ' did not raise')
        except RuntimeError as e:
            said.append(str(e))
    start_response('200 OK', [('Content-Type', 'text/plain')])
    return ['\n'.join(said).encode()]

def non_iterable_app(environ, start_response):
    start_response('200 OK', [])
    return 42

def twice_app(environ, start_response):
    start_response('200 OK', [])
    start_response('404 Not Found', [])
    return [b'never']

def str_body_app(environ, start_response):
    start_response('200 OK', [])
    return ['not bytes']

def silent_app(environ, start_response):
    return [b'no start_response']

def broken_stream_app(environ, start_response):
    start_response('200 OK', [])
    def body():
        yield b'first part'
        raise ValueError('midway')
    return body()

import threading
per_thread = threading.local()

def local_app(environ, start_response):
    # Counts this thread's requests in a threading.local, as Django keeps its
    # database connections.
    per_thread.n = getattr(per_thread, 'n', 0) + 1
    start_response('200 OK', [('Content-Length', str(len(str(per_thread.n))))])
    return [str(per_thread.n).encode()]

def interval_app(environ, start_response):
    import sys
    body = repr(sys.getswitchinterval()).encode()
    start_response('200 OK', [('Content-Length', str(len(body)))])
    return [body]

def header_split_app(environ, start_response):
    start_response('200 OK', [('X-Split', 'a\r\nSet-Cookie: evil=1')])
    return [b'x']

# PEP 3333, "Handling the Content-Length Header": the declared length is a cap
# and a promise, whatever the body's shape. `asked` counts the items the server
# took from an iterator, so a test sees where the server stopped.
asked = []

def counted(*chunks):
    for c in chunks:
        asked.append(c)
        yield c

def over_iter_app(environ, start_response):
    start_response('200 OK', [('Content-Length', '15')])
    return counted(b'0123456789', b'ABCDEFGHIJ', b'never asked')

def over_first_app(environ, start_response):
    start_response('200 OK', [('Content-Length', '5')])
    return counted(b'0123456789', b'never asked')

def over_list_app(environ, start_response):
    start_response('200 OK', [('Content-Length', '5')])
    return [b'12345', b'overflow-bytes']

def short_list_app(environ, start_response):
    start_response('200 OK', [('Content-Length', '100')])
    return [b'0123456789']

def short_iter_app(environ, start_response):
    start_response('200 OK', [('Content-Length', '100')])
    return counted(b'01234', b'56789')

def over_write_app(environ, start_response):
    write = start_response('200 OK', [('Content-Length', '4')])
    write(b'abcdef')
    write(b'more')
    return [b'and more']

def zero_app(environ, start_response):
    start_response('200 OK', [('Content-Length', '0')])
    return counted(b'x')

def not_modified_app(environ, start_response):
    start_response('304 Not Modified', [('Content-Length', '1234')])
    return []

def bad_length_app(environ, start_response):
    start_response('200 OK', [('Content-Length', environ['QUERY_STRING'])])
    return [b'x']

def two_lengths_app(environ, start_response):
    start_response('200 OK', [('Content-Length', '1'), ('Content-Length', '2')])
    return [b'x']

# wsgi.file_wrapper: QUERY_STRING is "PATH", "PATH,OFFSET,LENGTH" (LENGTH -1:
# no Content-Length), or "bytes" (an io.BytesIO, not a real file).
wrapper_closed = []

class Closer:
    def __init__(self, f):
        self.f = f
    def __getattr__(self, name):
        return getattr(self.f, name)
    def close(self):
        wrapper_closed.append(True)
        self.f.close()

def file_app(environ, start_response):
    import io
    q = environ['QUERY_STRING'].split(',')
    if q[0] == 'bytes':
        f, length = io.BytesIO(b'not a real file'), 15
    else:
        f = open(q[0], 'rb')
        f.seek(int(q[1]) if len(q) > 1 else 0)
        length = int(q[2]) if len(q) > 2 else None
    headers = [] if length is None or length < 0 else [('Content-Length', str(length))]
    start_response('200 OK', headers)
    return environ['wsgi.file_wrapper'](Closer(f) if q[0] != 'bytes' else f, 4)

def ident_app(environ, start_response):
    # The thread that ran it; ?nap: sleeps first, the GIL released; else
    # computes for 0.1 ms, the GIL held (a thread woken meanwhile is surely
    # waiting for it by the time a few have run).
    import time
    if environ['QUERY_STRING'] == 'nap':
        time.sleep(0.3)
    else:
        t = time.perf_counter()
        while time.perf_counter() - t < 0.0001:
            pass
    body = str(threading.get_ident()).encode()
    start_response('200 OK', [('Content-Length', str(len(body)))])
    return [body]

def raw_uri_app(environ, start_response):
    body = (environ.get('RAW_URI', '-') + ' ' + environ.get('REQUEST_URI', '-')).encode()
    start_response('200 OK', [('Content-Length', str(len(body)))])
    return [body]
)PY";

struct Python {
    Python() {
        std::string err;
        wsgi::PythonOptions o;
        o.package_dir = M0_SOURCE_DIR "/src/wsgi";
        o.switch_interval = 0.03;
        REQUIRE(wsgi::start(o, nullptr, err));
        PyObject* mod = PyImport_AddModule("m0_test_apps");  // borrowed
        PyObject* dict = PyModule_GetDict(mod);
        PyObject* r = PyRun_String(kApps, Py_file_input, dict, dict);
        REQUIRE(r);
        Py_DECREF(r);
        wsgi::release_main_gil();
    }
};

PyObject* app(const char* name) {
    static Python python;  // one interpreter for the whole test binary
    PyGILState_STATE g = PyGILState_Ensure();
    std::string err;
    PyObject* a = wsgi::load_app(std::string("m0_test_apps:") + name, err);
    PyGILState_Release(g);
    REQUIRE(a);
    return a;
}

struct Rig {
    CompletionRing ring;
    bus::BusChannel bus;
    Metrics metrics;
    Pool pool{"wsgi", 0};
    hold::Handoff h;
    std::vector<size_t> frames_at_push;

    explicit Rig(bool realtime = true) {
        h.ring = &ring;
        h.bus = realtime ? &bus : nullptr;
        h.metrics = &metrics;
        ring.observer = [this](const Completion&, size_t) {
            frames_at_push.push_back(bus.queued());
        };
    }
    std::deque<Completion> run(const char* name, http::Request r = {}, SlotRef slot = {2, 4}) {
        PyObject* a = app(name);
        if (r.method.empty()) r.method = "GET";
        if (r.path_info.empty()) r.path_info = "/";
        r.server_name = "127.0.0.1";
        r.server_port = 8000;
        wsgi::serve_job(h, pool, a, slot, r, 1);
        std::deque<Completion> out;
        ring.drain(out);
        return out;
    }
};

// A WsgiPool of `threads` real threads serves GET / to slots {1,1} .. {n,1}
// with app `name`; the completions, once all n are done (up to 10 s).
// With `while_busy`, the requests are queued while the test's thread holds
// the GIL (after the pool's threads have started and made their thread
// states), and `while_busy` runs 200 ms later, the GIL still held.
// sys.setswitchinterval(seconds); the interval it had.
double switch_interval(double seconds) {
    PyGILState_STATE g = PyGILState_Ensure();
    PyObject* sys = PyImport_ImportModule("sys");
    REQUIRE(sys);
    PyObject* old = PyObject_CallMethod(sys, "getswitchinterval", nullptr);
    const double before = old ? PyFloat_AsDouble(old) : 0;
    PyObject* r = PyObject_CallMethod(sys, "setswitchinterval", "d", seconds);
    const bool ok = old && r;
    Py_XDECREF(r);
    Py_XDECREF(old);
    Py_DECREF(sys);
    PyGILState_Release(g);
    REQUIRE(ok);
    return before;
}

std::deque<Completion> run_threaded(Rig& rig, const char* name, size_t threads, uint32_t n,
                                    const std::function<void(wsgi::WsgiPool&)>& while_busy = {}) {
    PyObject* a = app(name);
    {
        wsgi::WsgiPool wp(threads, rig.h);
        PyGILState_STATE g{};
        if (while_busy) {
            std::this_thread::sleep_for(std::chrono::milliseconds(200));
            g = PyGILState_Ensure();
        }
        for (uint32_t i = 1; i <= n; ++i) {
            http::Request r;
            r.method = "GET";
            r.path_info = "/";
            REQUIRE(wp.submit(a, {i, 1}, std::move(r)) == Admission::queued);
        }
        if (while_busy) {
            std::this_thread::sleep_for(std::chrono::milliseconds(200));
            while_busy(wp);
            PyGILState_Release(g);
        }
        for (int i = 0; i < 1000 && wp.pool().completed.load() < n; ++i)
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
        REQUIRE(wp.pool().completed.load() == n);
    }
    std::deque<Completion> out;
    rig.ring.drain(out);
    return out;
}

}  // namespace

TEST_CASE(
    "wsgi pool: a hold consumes its headers, becomes the head, and its h frame is on the "
    "loop's channel by the time the completion is",
    "[wsgi][pool][hold]") {
    Rig rig;
    http::Request r;
    r.headers.add("Last-Event-ID", "17");
    auto out = rig.run("hold_app", r, {6, 2});
    REQUIRE(out.size() == 1);
    REQUIRE(rig.frames_at_push == std::vector<size_t>{1});
    const Completion& c = out.front();
    CHECK(c.kind == Completion::Kind::hold);
    CHECK(c.response.status == 200);
    CHECK(c.response.body == ": wsgi head\n\n");
    CHECK_FALSE(c.response.headers.has("M0-Hold"));
    CHECK_FALSE(c.response.headers.has("Content-Length"));
    CHECK(c.response.headers.get("Content-Type") ==
          std::optional<std::string_view>("text/event-stream"));
    CHECK(c.response.headers.get("x-worker") == std::optional<std::string_view>("wsgi-1"));
    auto frames = rig.bus.peek();
    REQUIRE(frames.size() == 1);
    const auto& f = std::get<bus::HoldFrame>(frames.front());
    CHECK(f.stream_url == bus::reserved_stream_url({6, 2}));
    CHECK(f.cursor == 17);  // read before the app popped it
    CHECK(f.channels == std::vector<std::string>{"a", "b"});
}

TEST_CASE("wsgi pool: a Grip-Hold answer is a hold, its keep-alive in the h frame",
          "[wsgi][pool][hold][grip]") {
    Rig rig;
    auto out = rig.run("grip_app");
    REQUIRE(out.size() == 1);
    const Completion& c = out.front();
    CHECK(c.kind == Completion::Kind::hold);
    CHECK(c.response.body == ": grip head\n\n");
    CHECK_FALSE(c.response.headers.has("Grip-Hold"));
    CHECK_FALSE(c.response.headers.has("Grip-Keep-Alive"));
    CHECK_FALSE(c.response.headers.has("Content-Length"));
    auto frames = rig.bus.peek();
    REQUIRE(frames.size() == 1);
    const auto& f = std::get<bus::HoldFrame>(frames.front());
    CHECK(f.channels == std::vector<std::string>{"a", "b"});
    CHECK(f.keepalive.bytes == ":ka\n\n");
    CHECK(f.keepalive.every == 20);
}

TEST_CASE("wsgi pool: a refused frame gives 503", "[wsgi][pool][hold]") {
    Rig rig;
    rig.bus.close();
    auto out = rig.run("hold_app");
    REQUIRE(out.size() == 1);
    CHECK(out.front().kind == Completion::Kind::response);
    CHECK(out.front().response.status == 503);
}

TEST_CASE("wsgi pool: without --realtime a hold degrades to an ordinary response",
          "[wsgi][pool][hold]") {
    Rig rig(false);
    auto out = rig.run("hold_app");
    REQUIRE(out.size() == 1);
    CHECK(out.front().kind == Completion::Kind::response);
    CHECK(out.front().response.body == ": wsgi head\n\n");
    CHECK_FALSE(out.front().response.headers.has("M0-Hold"));
    CHECK_FALSE(out.front().response.headers.has("M0-Channel"));
}

TEST_CASE("wsgi pool: an unknown M0-Hold value is a 502", "[wsgi][pool][hold]") {
    Rig rig;
    auto out = rig.run("bad_hold_app");
    REQUIRE(out.size() == 1);
    CHECK(out.front().response.status == 502);
    CHECK(rig.bus.queued() == 0);
}

TEST_CASE("wsgi pool: the environ follows PEP 3333", "[wsgi][pool]") {
    Rig rig;
    http::Request r;
    r.method = "POST";
    r.script_name = "/app";
    r.path_info = "/x y";
    r.query = "q=1";
    r.body = "payload";
    r.remote_addr = "127.0.0.1";
    r.headers.add("Content-Type", "text/plain");
    r.headers.add("X-Multi", "one");
    r.headers.add("X-Multi", "two");
    r.headers.add("X_Forged", "no");
    r.headers.add("Cookie", "a=1");
    r.headers.add("Cookie", "b=2");
    auto out = rig.run("env_app", r);
    REQUIRE(out.size() == 1);
    const std::string& b = out.front().response.body;
    CHECK(b.find("\"REQUEST_METHOD\": \"POST\"") != std::string::npos);
    CHECK(b.find("\"SCRIPT_NAME\": \"/app\"") != std::string::npos);
    CHECK(b.find("\"PATH_INFO\": \"/x y\"") != std::string::npos);
    CHECK(b.find("\"QUERY_STRING\": \"q=1\"") != std::string::npos);
    CHECK(b.find("\"CONTENT_TYPE\": \"text/plain\"") != std::string::npos);
    CHECK(b.find("\"CONTENT_LENGTH\": \"7\"") != std::string::npos);
    CHECK(b.find("\"SERVER_PORT\": \"8000\"") != std::string::npos);
    CHECK(b.find("\"HTTP_X_MULTI\": \"one, two\"") != std::string::npos);
    CHECK(b.find("X_FORGED") == std::string::npos);
    CHECK(b.find("\"HTTP_COOKIE\": \"a=1; b=2\"") != std::string::npos);
    CHECK(b.find("\"wsgi.url_scheme\": \"http\"") != std::string::npos);
    CHECK(b.find("\"body\": \"payload\"") != std::string::npos);
    CHECK(b.find("\"readline\": true") != std::string::npos);
}

TEST_CASE("wsgi pool: a generator body streams as head, chunks, end", "[wsgi][pool]") {
    Rig rig;
    auto out = rig.run("gen_app");
    REQUIRE(out.size() == 5);
    CHECK(out[0].kind == Completion::Kind::head);
    CHECK(out[1].kind == Completion::Kind::chunk);
    CHECK(out[1].data == "chunk 0\n");
    CHECK(out[3].data == "chunk 2\n");
    CHECK(out[4].kind == Completion::Kind::end);
    CHECK_FALSE(out[4].aborted);
}

TEST_CASE("wsgi pool: a body that completes its Content-Length is one response", "[wsgi][pool]") {
    Rig rig;
    auto out = rig.run("sized_app");
    REQUIRE(out.size() == 1);
    CHECK(out.front().kind == Completion::Kind::response);
    CHECK(out.front().response.body == "hello");
}

TEST_CASE("wsgi pool: write() sends before the returned body", "[wsgi][pool]") {
    Rig rig;
    auto out = rig.run("write_app");
    std::string all;
    for (auto& c : out) all += c.data;
    CHECK(all == "written;returned");
    CHECK(out.back().kind == Completion::Kind::end);
}

TEST_CASE("wsgi pool: close() is called whether the body succeeds or fails", "[wsgi][pool]") {
    Rig rig;
    http::Request fail;
    fail.query = "fail";
    auto ok = rig.run("closing_app");
    auto bad = rig.run("closing_app", fail);
    CHECK(ok.front().response.status == 200);
    CHECK(bad.front().response.status == 500);
    PyGILState_STATE g = PyGILState_Ensure();
    PyObject* mod = PyImport_ImportModule("m0_test_apps");
    PyObject* closed = PyObject_GetAttrString(mod, "closed");
    CHECK(PyList_Size(closed) == 2);
    Py_XDECREF(closed);
    Py_XDECREF(mod);
    PyGILState_Release(g);
}

TEST_CASE("wsgi pool: an exception in the app is a 500 and the job is counted raised",
          "[wsgi][pool]") {
    Rig rig;
    auto out = rig.run("boom_app");
    REQUIRE(out.size() == 1);
    CHECK(out.front().response.status == 500);
    CHECK(rig.pool.raised.load() == 1);
}

TEST_CASE("wsgi pool: a start_response kept from an earlier request raises and changes nothing",
          "[wsgi][pool]") {
    Rig rig;
    http::Request keep;
    keep.query = "keep";
    auto first = rig.run("keeping_app", keep, {1, 1});
    REQUIRE(first.size() == 1);
    CHECK(first.front().response.body == "kept");
    // The later request (another slot) calls the kept callables: each raises
    // RuntimeError and its own answer is untouched.
    auto later = rig.run("keeping_app", {}, {2, 1});
    REQUIRE(later.size() == 1);
    const Completion& c = later.front();
    CHECK(c.kind == Completion::Kind::response);
    CHECK(c.slot == SlotRef{2, 1});
    CHECK(c.response.status == 200);
    CHECK_FALSE(c.response.headers.has("X-Stolen"));
    CHECK(c.response.body ==
          "start_response called after its request ended\n"
          "write() called after its request ended");
    CHECK(rig.pool.raised.load() == 0);
}

TEST_CASE("wsgi pool: a request whose client left before a thread took it is not run",
          "[wsgi][pool]") {
    Rig rig;
    wsgi::WsgiPool wp(0, rig.h);  // manual: the test runs each job
    PyObject* a = app("sized_app");
    auto request = [] {
        http::Request r;
        r.method = "GET";
        r.path_info = "/";
        return r;
    };
    REQUIRE(wp.submit(a, {1, 1}, request()) == Admission::queued);
    REQUIRE(wp.submit(a, {2, 1}, request()) == Admission::queued);
    rig.ring.cancels.cancel({1, 1});  // what the loop does when slot 1's client leaves
    REQUIRE(wp.pool().run_next());
    CHECK_FALSE(wp.pool().run_next());
    std::deque<Completion> out;
    rig.ring.drain(out);
    REQUIRE(out.size() == 1);
    CHECK(out.front().slot == SlotRef{2, 1});
    CHECK(out.front().response.body == "hello");
    CHECK(wp.pool().skipped.load() == 1);
}

TEST_CASE(
    "wsgi pool: a pool thread keeps its Python thread state, so threading.local data lasts "
    "from one request to the next",
    "[wsgi][pool]") {
    Rig rig;
    auto out = run_threaded(rig, "local_app", 1, 3);  // one real thread runs the three in turn
    REQUIRE(out.size() == 3);
    for (uint32_t i = 1; i <= 3; ++i) {
        CHECK(out[i - 1].slot == SlotRef{i, 1});
        CHECK(out[i - 1].response.body == std::to_string(i));
    }
}

TEST_CASE(
    "wsgi pool: a thread takes the GIL before it takes a job, so a queued request waits in "
    "the FIFO queue rather than on a thread that cannot run Python",
    "[wsgi][pool]") {
    Rig rig;
    auto out = run_threaded(rig, "sized_app", 2, 2, [](wsgi::WsgiPool& wp) {
        CHECK(wp.pool().waits.load() == 0);  // both still queued, neither taken
        CHECK(wp.pool().queued() == 2);
    });
    REQUIRE(out.size() == 2);
    for (auto& c : out) CHECK(c.response.body == "hello");
}

TEST_CASE("wsgi pool: the app runs with the switch interval the interpreter was started with",
          "[wsgi][pool]") {
    Rig rig;
    auto out = rig.run("interval_app");
    REQUIRE(out.size() == 1);
    CHECK(out.front().response.body == "0.03");  // Python's own is 0.005
}

TEST_CASE("wsgi pool: an app that breaks PEP 3333 gets a 500, never a malformed answer",
          "[wsgi][pool][faults]") {
    for (const char* name :
         {"non_iterable_app", "twice_app", "str_body_app", "silent_app", "header_split_app"}) {
        DYNAMIC_SECTION(name) {
            Rig rig;
            auto out = rig.run(name);
            REQUIRE(out.size() == 1);
            CHECK(out.front().kind == Completion::Kind::response);
            CHECK(out.front().response.status == 500);
            for (const auto& [k, v] : out.front().response.headers.items) {
                CHECK(k.find_first_of("\r\n") == std::string::npos);
                CHECK(v.find_first_of("\r\n") == std::string::npos);
            }
            CHECK(rig.pool.raised.load() == 1);
        }
    }
}

TEST_CASE("wsgi pool: a body that fails after its head ends aborted, so the client sees a cut",
          "[wsgi][pool][faults]") {
    Rig rig;
    auto out = rig.run("broken_stream_app");
    REQUIRE(out.size() >= 3);
    CHECK(out.front().kind == Completion::Kind::head);
    CHECK(out.back().kind == Completion::Kind::end);
    CHECK(out.back().aborted);
    CHECK(rig.pool.raised.load() == 1);
}

namespace {

// The items of list `name` in the test apps' module, as str(), and clears it.
std::vector<std::string> take_list(const char* name) {
    app("over_iter_app");  // the interpreter is up
    PyGILState_STATE g = PyGILState_Ensure();
    PyObject* mod = PyImport_ImportModule("m0_test_apps");
    PyObject* list = mod ? PyObject_GetAttrString(mod, name) : nullptr;
    std::vector<std::string> out;
    for (Py_ssize_t i = 0; list && i < PyList_Size(list); ++i) {
        PyObject* item = PyList_GetItem(list, i);
        PyObject* text = PyBytes_Check(item) ? PyUnicode_FromEncodedObject(item, "latin-1", nullptr)
                                             : PyObject_Str(item);
        out.emplace_back(text ? PyUnicode_AsUTF8(text) : "?");
        Py_XDECREF(text);
    }
    if (list) PyList_SetSlice(list, 0, PyList_Size(list), nullptr);
    Py_XDECREF(list);
    Py_XDECREF(mod);
    PyGILState_Release(g);
    return out;
}

// The items the server took from the apps' `counted` iterators, and clears them.
std::vector<std::string> asked() { return take_list("asked"); }

// Every byte the completions put on the way to the client: a whole answer's
// body, or a stream's chunks.
std::string body_of(const std::deque<Completion>& out) {
    std::string all;
    for (const auto& c : out)
        all += c.kind == Completion::Kind::response ? c.response.body : c.data;
    return all;
}

}  // namespace

TEST_CASE(
    "wsgi pool: an iterator longer than its Content-Length is cut at it, and the server stops "
    "asking for more",
    "[wsgi][pool][length]") {
    Rig rig;
    asked();
    auto out = rig.run("over_iter_app");
    CHECK(body_of(out) == "0123456789ABCDE");
    REQUIRE(out.size() >= 2);
    CHECK(out.front().kind == Completion::Kind::head);
    CHECK(out.back().kind == Completion::Kind::end);
    CHECK_FALSE(out.back().aborted);  // the answer is whole: the connection stays usable
    CHECK(asked() == std::vector<std::string>{"0123456789", "ABCDEFGHIJ"});
}

TEST_CASE("wsgi pool: a first chunk past its Content-Length is one whole answer of that length",
          "[wsgi][pool][length]") {
    Rig rig;
    asked();
    auto out = rig.run("over_first_app");
    REQUIRE(out.size() == 1);
    CHECK(out.front().kind == Completion::Kind::response);
    CHECK(out.front().response.body == "01234");
    CHECK(out.front().response.headers.get("Content-Length") ==
          std::optional<std::string_view>("5"));
    CHECK(asked() == std::vector<std::string>{"0123456789"});
}

TEST_CASE("wsgi pool: a list follows the same rule as an iterator: cut at its Content-Length",
          "[wsgi][pool][length]") {
    Rig rig;
    auto out = rig.run("over_list_app");
    REQUIRE(out.size() == 1);
    CHECK(out.front().kind == Completion::Kind::response);
    CHECK(out.front().response.body == "12345");
    CHECK(out.front().response.headers.get("Content-Length") ==
          std::optional<std::string_view>("5"));
}

TEST_CASE("wsgi pool: write() past the Content-Length sends no more than it declared",
          "[wsgi][pool][length]") {
    Rig rig;
    auto out = rig.run("over_write_app");
    CHECK(body_of(out) == "abcd");
    CHECK(rig.pool.raised.load() == 0);
    for (const auto& c : out) CHECK_FALSE(c.aborted);
}

TEST_CASE(
    "wsgi pool: a body shorter than its Content-Length goes out with that length and ends "
    "aborted, so the connection closes",
    "[wsgi][pool][length]") {
    for (const char* name : {"short_list_app", "short_iter_app"}) {
        DYNAMIC_SECTION(name) {
            Rig rig;
            auto out = rig.run(name);
            REQUIRE(out.size() >= 3);
            CHECK(out.front().kind == Completion::Kind::head);
            CHECK(out.front().response.headers.get("Content-Length") ==
                  std::optional<std::string_view>("100"));
            CHECK(body_of(out) == "0123456789");
            CHECK(out.back().kind == Completion::Kind::end);
            CHECK(out.back().aborted);
        }
    }
    asked();
}

TEST_CASE("wsgi pool: a declared zero sends nothing and takes nothing from the iterator",
          "[wsgi][pool][length]") {
    Rig rig;
    asked();
    auto out = rig.run("zero_app");
    REQUIRE(out.size() == 1);
    CHECK(out.front().kind == Completion::Kind::response);
    CHECK(out.front().response.body.empty());
    CHECK(asked().empty());
}

TEST_CASE("wsgi pool: a HEAD or a 304 is never short of its Content-Length",
          "[wsgi][pool][length]") {
    Rig rig;
    http::Request head;
    head.method = "HEAD";
    auto h = rig.run("short_list_app", head);
    REQUIRE(h.size() == 1);
    CHECK(h.front().kind == Completion::Kind::response);
    CHECK(h.front().response.headers.get("Content-Length") ==
          std::optional<std::string_view>("100"));
    auto n = rig.run("not_modified_app");
    REQUIRE(n.size() == 1);
    CHECK(n.front().kind == Completion::Kind::response);
    CHECK(n.front().response.status == 304);
}

TEST_CASE("wsgi pool: a Content-Length that is not one number is the app's error, a 500",
          "[wsgi][pool][length]") {
    for (const char* value : {"abc", "-1", "1 ", "1,1", ""}) {
        DYNAMIC_SECTION("'" << value << "'") {
            Rig rig;
            http::Request r;
            r.query = value;
            auto out = rig.run("bad_length_app", r);
            REQUIRE(out.size() == 1);
            CHECK(out.front().response.status == 500);
            CHECK(rig.pool.raised.load() == 1);
        }
    }
    Rig rig;
    auto two = rig.run("two_lengths_app");
    REQUIRE(two.size() == 1);
    CHECK(two.front().response.status == 500);
}

TEST_CASE("wsgi pool: RAW_URI and REQUEST_URI are the request target as it came", "[wsgi][pool]") {
    Rig rig;
    http::Request r;
    r.target = "/a%2Fb?q=%20x";
    r.path_info = "/a/b";
    r.query = "q=%20x";
    auto out = rig.run("raw_uri_app", r);
    REQUIRE(out.size() == 1);
    CHECK(out.front().response.body == "/a%2Fb?q=%20x /a%2Fb?q=%20x");
}

namespace {

// A file of `n` bytes "0123456789..." in a temporary folder; removed with it.
struct TempFile {
    std::string path;
    explicit TempFile(size_t n) {
        char dir[] = "/tmp/m0-wsgi-file-XXXXXX";
        REQUIRE(mkdtemp(dir));
        path = std::string(dir) + "/f";
        std::string body;
        for (size_t i = 0; i < n; ++i) body += static_cast<char>('0' + i % 10);
        FILE* f = fopen(path.c_str(), "wb");
        REQUIRE(f);
        fwrite(body.data(), 1, body.size(), f);
        fclose(f);
    }
    ~TempFile() {
        std::remove(path.c_str());
        std::remove(path.substr(0, path.size() - 2).c_str());
    }
};

size_t wrapper_closes() { return take_list("wrapper_closed").size(); }

std::deque<Completion> run_file(Rig& rig, const std::string& query, const char* method = "GET") {
    http::Request r;
    r.method = method;
    r.query = query;
    return rig.run("file_app", r);
}

}  // namespace

TEST_CASE(
    "wsgi pool: a real file in wsgi.file_wrapper goes to the loop as a descriptor and a range, "
    "and close() is called before the job ends",
    "[wsgi][pool][file]") {
    TempFile f(100);
    Rig rig;
    wrapper_closes();
    SECTION("from its position, to its end, the length added when the app gave none") {
        auto out = run_file(rig, f.path + ",10,-1");
        REQUIRE(out.size() == 1);
        const Completion& c = out.front();
        CHECK(c.kind == Completion::Kind::response);
        REQUIRE(c.file);
        CHECK(c.file->fd >= 0);
        CHECK(c.file->offset == 10);
        CHECK(c.file->length == 90);
        CHECK_FALSE(c.file->cut);
        CHECK(c.response.body.empty());
        CHECK(c.response.headers.get("Content-Length") == std::optional<std::string_view>("90"));
        // The descriptor is the pool's own: the app's close() did not close it.
        char buf[4] = {};
        CHECK(pread(c.file->fd, buf, 4, 10) == 4);
        CHECK(std::string(buf, 4) == "0123");
        CHECK(wrapper_closes() == 1);
    }
    SECTION("no further than its Content-Length (a file that grew)") {
        auto out = run_file(rig, f.path + ",0,30");
        REQUIRE(out.size() == 1);
        REQUIRE(out.front().file);
        CHECK(out.front().file->length == 30);
        CHECK_FALSE(out.front().file->cut);
        CHECK(wrapper_closes() == 1);
    }
    SECTION("a file shorter than its Content-Length goes as it is, marked cut") {
        auto out = run_file(rig, f.path + ",50,80");
        REQUIRE(out.size() == 1);
        REQUIRE(out.front().file);
        CHECK(out.front().file->length == 50);
        CHECK(out.front().file->cut);
        CHECK(out.front().response.headers.get("Content-Length") ==
              std::optional<std::string_view>("80"));
        CHECK(wrapper_closes() == 1);
    }
    SECTION("HEAD: never cut") {
        auto out = run_file(rig, f.path + ",50,80", "HEAD");
        REQUIRE(out.size() == 1);
        REQUIRE(out.front().file);
        CHECK_FALSE(out.front().file->cut);
    }
}

TEST_CASE("wsgi pool: a file-like object that is not a real file is read through the wrapper",
          "[wsgi][pool][file]") {
    Rig rig;
    auto out = run_file(rig, "bytes");
    CHECK(body_of(out) == "not a real file");
    for (const auto& c : out) CHECK_FALSE(c.file);
    CHECK(rig.pool.raised.load() == 0);
}

TEST_CASE("wsgi pool: a dropped file completion closes its descriptor", "[wsgi][pool][file]") {
    TempFile f(10);
    int fd = open(f.path.c_str(), O_RDONLY);
    REQUIRE(fd >= 0);
    { FileBody body(fd, 0, 10, false); }
    CHECK(fcntl(fd, F_GETFD) == -1);
}

TEST_CASE(
    "wsgi pool: requests that never block run on the thread that holds the GIL, one after the "
    "other, with no hand-off between threads",
    "[wsgi][pool]") {
    Rig rig;
    // Queued while the test holds the GIL: all four threads are up and one
    // waits for it when it is let go; 40 of 0.1 ms each. The pool keeps the
    // GIL from a waiter for half the switch interval (read when the pool
    // starts): 1 s here, not the 15 ms of the rig's 0.03, so that the run
    // fits in it also under a sanitizer on a busy machine.
    const double interval = switch_interval(2.0);
    auto out = run_threaded(rig, "ident_app", 4, 40, [](wsgi::WsgiPool&) {});
    switch_interval(interval);
    REQUIRE(out.size() == 40);
    for (auto& c : out) CHECK(c.response.body == out.front().response.body);
}

TEST_CASE(
    "wsgi pool: a view that blocks lets the GIL go, and the requests behind it are served by "
    "another thread meanwhile",
    "[wsgi][pool]") {
    Rig rig;
    PyObject* a = app("ident_app");
    std::deque<Completion> out;
    {
        wsgi::WsgiPool wp(2, rig.h);
        for (uint32_t i = 1; i <= 6; ++i) {
            http::Request r;
            r.method = "GET";
            r.path_info = "/";
            r.query = i == 1 ? "nap" : "";
            REQUIRE(wp.submit(a, {i, 1}, std::move(r)) == Admission::queued);
        }
        for (int i = 0; i < 1000 && wp.pool().completed.load() < 6; ++i)
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
        REQUIRE(wp.pool().completed.load() == 6);
    }
    rig.ring.drain(out);
    REQUIRE(out.size() == 6);
    CHECK(out.back().slot == SlotRef{1, 1});  // the nap ended last
    CHECK(out.front().response.body != out.back().response.body);
}
