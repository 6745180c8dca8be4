// m0.publish in a view on the Redis bus, when Redis does not take the event:
// the view hears RuntimeError, never an id. The interpreter's bus is a
// RedisBus that reaches a real redis-server through the fault proxy
// (test_redis_proxy.hpp); the view runs on this thread (serve_job).
#include <catch2/catch.hpp>
#include <sstream>

#include "bus/redis_bus.hpp"
#include "bus/test_redis_proxy.hpp"
#include "bus/test_redis_server.hpp"
#include "wsgi/interpreter.hpp"
#include "wsgi/wsgi_pool.hpp"

using namespace m0;
using namespace m0::testing;

namespace {

const char* kApp = R"PY(
import m0

def publish_app(environ, start_response):
    # The id, or the class of what m0.publish raised and why.
    q = environ['QUERY_STRING']
    try:
        if q.startswith('many='):  # m0.publish_many: one event an item of the list
            body = 'ids ' + ' '.join(str(i) for i in m0.publish_many(
                [(c, 'x') for c in q[5:].split(',')]))
        else:
            body = 'id %d' % m0.publish('c', q)
    except Exception as e:
        body = '%s: %s' % (type(e).__name__, e)
    start_response('200 OK', [('Content-Type', 'text/plain')])
    return [body.encode()]
)PY";

// Test thread only, but for the proxy's own thread.
struct Rig {
    RedisServer redis;
    RedisFaultProxy proxy{redis.port()};
    Loop loop;
    std::unique_ptr<bus::RedisBus> bus;
    CompletionRing ring;
    Metrics metrics;
    Pool pool{"wsgi", 0};
    hold::Handoff h;
    PyObject* app = nullptr;

    Rig() {
        bus::RedisBusOptions o = bus_options(redis);
        std::string err;
        o.url = *bus::parse_redis_url(proxy.url(), err);
        o.timeout = 0.3;  // the publish link's reply bound
        bus = std::make_unique<bus::RedisBus>(loop, o);
        REQUIRE(bus->start(5));
        wsgi::PythonOptions py;
        py.package_dir = M0_SOURCE_DIR "/src/wsgi";
        REQUIRE(wsgi::start(py, bus.get(), err));
        PyObject* mod = PyImport_AddModule("m0_fault_apps");  // borrowed
        PyObject* dict = PyModule_GetDict(mod);
        PyObject* r = PyRun_String(kApp, Py_file_input, dict, dict);
        REQUIRE(r);
        Py_DECREF(r);
        app = wsgi::load_app("m0_fault_apps:publish_app", err);
        REQUIRE(app);
        wsgi::release_main_gil();
        h.ring = &ring;
        h.bus = bus.get();
        h.metrics = &metrics;
    }
    // What the view answered for a publish of `data`.
    std::string publish(const std::string& data) {
        http::Request r;
        r.method = "GET";
        r.path_info = "/";
        r.query = data;
        r.server_name = "127.0.0.1";
        r.server_port = 8000;
        wsgi::serve_job(h, pool, app, {1, 1}, r, 1);
        std::deque<Completion> out;
        ring.drain(out);
        REQUIRE(out.size() == 1);
        return out.front().response.body;
    }
};

}  // namespace

TEST_CASE(
    "wsgi on the redis bus: m0.publish raises RuntimeError when Redis does not take the event "
    "(no answer in time, a reply cut midway), and returns ids again once it does",
    "[wsgi][redis][faults]") {
    Rig rig;  // one interpreter for the binary: one rig, sections in turn
    const std::string first = rig.publish("before");
    REQUIRE(first.starts_with("id "));

    // Redis's answer to the publish never comes within the link's bound.
    rig.proxy.stall(kPublishing);
    std::string said = rig.publish("stalled");
    CHECK(said.starts_with("RuntimeError: redis bus redis://127.0.0.1:"));
    rig.proxy.release();

    // Half the answer comes, then the connection ends.
    rig.proxy.cut_mid_reply(kPublishing);
    said = rig.publish("cut");
    CHECK(said.starts_with("RuntimeError: "));
    CHECK(rig.proxy.cuts() == 1);

    // The answer comes later than the bound.
    rig.proxy.delay(kPublishing, 1.0);
    said = rig.publish("late");
    CHECK(said.starts_with("RuntimeError: "));
    rig.proxy.release();

    // Redis takes events again: ids, above the first.
    said = rig.publish("after");
    REQUIRE(said.starts_with("id "));
    const uint64_t after = std::stoull(said.substr(3));
    CHECK(after > std::stoull(first.substr(3)));

    // m0.publish_many in the view: one script call, consecutive ids in order.
    said = rig.publish("many=a,b,a");
    REQUIRE(said.starts_with("ids "));
    std::istringstream in(said.substr(4));
    uint64_t a = 0, b = 0, c = 0;
    in >> a >> b >> c;
    CHECK(a > after);
    CHECK(b == a + 1);
    CHECK(c == a + 2);
    // A bad channel refuses the batch, naming it, before Redis is asked.
    said = rig.publish("many=a,m0.slot.1");
    CHECK(said.starts_with("ValueError: event 1: "));
    // Redis does not answer: RuntimeError, no ids.
    rig.proxy.stall(kPublishing);
    said = rig.publish("many=a,b,c");
    CHECK(said.starts_with("RuntimeError: "));
    CHECK(said.find("none of the batch's 3 events answered as taken") != std::string::npos);
    rig.proxy.release();
}
