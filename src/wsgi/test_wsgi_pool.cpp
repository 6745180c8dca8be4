// The WSGI pool's unit forms: the same hold rules as the mojo pool (frame on
// the loop's channel before the completion, headers consumed, the cursor read
// before the app runs), PEP 3333 details (environ, start_response, write(),
// close() always called, streamed bodies), and failures (500, raised).
#include <catch2/catch.hpp>
#include <chrono>
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
