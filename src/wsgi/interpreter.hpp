// The embedded interpreter (Debian's libpython3, the one /usr/bin/python3 runs).
//
// DESIGN
// start() runs on the main thread before the loop starts: it initializes
// CPython without its signal handlers (the loop owns SIGTERM/SIGINT), as the
// program /usr/bin/python3 or a virtualenv's bin/python3 (virtualenv.hpp), puts the
// project's `m0` package and the --pythonpath/--chdir folders on sys.path,
// registers the built-in module `_m0` (publish, realtime), imports the apps,
// and releases the GIL. Each pool thread makes one Python thread state when it
// starts (attach_thread) and keeps it until it ends, so what the app keeps per
// thread (threading.local: Django's database connections, caches) lasts from
// one request to the next; per request the thread takes the GIL
// (PyGILState_Ensure, which finds that state) and releases it before it hands
// the result back.
// stop() retakes the GIL on the main thread and finalizes.
// Switch interval (--python-switch-interval, 0.02 s by default, set before the
// apps import): how long a thread keeps the GIL while another waits for it.
// At Python's own 0.005 s a request the kernel set aside for a few
// milliseconds (two cores shared with the clients) loses the GIL midway to a
// thread that starts the next one, and two requests in the app at once meet
// on its locks: Django 3.2's asgiref Local takes one RLock on every access,
// and a lock handed to a thread that has no GIL makes every later access a
// task switch. Once begun this goes on while the queue is full, at five to
// twelve times the task switches per request and under half the requests/s;
// at 0.02 s it was not seen (docs/BENCHMARK.md, "The switch interval";
// the bench's `switches_per_req` row shows the state). A request still gives
// the GIL up whenever it blocks, and one that computes longer than the
// interval still shares it.
#pragma once
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <chrono>
#include <string>
#include <vector>

#include "bus/channel.hpp"

namespace m0::wsgi {

struct PythonOptions {
    std::vector<std::string> pythonpath;  // prepended to sys.path, in order
    std::string chdir;                    // also prepended to sys.path
    std::string package_dir;              // folder holding the `m0` package
    double switch_interval = 0;           // sys.setswitchinterval; 0: Python's own
    // A venv's bin/python3 (read_virtualenv checked it): the interpreter
    // starts as that program, so Python's getpath and site take the venv as
    // they would for it. Empty: Debian's /usr/bin/python3.
    std::string virtualenv_python;
};

// Initializes the interpreter; false with `err` set. `bus` (null without
// --realtime) is what _m0.publish sends on; it must outlive the interpreter.
bool start(const PythonOptions& opts, bus::Bus* bus, std::string& err);
// Imports "module.path:callable" (the callable may be a dotted attribute path)
// with the GIL taken; returns a new reference, or null with `err` set (the
// traceback is logged at --log-level debug; without it `err` says so).
// `named`: the app as the user wrote it ("APP config.wsgi"), for `err`;
// empty: the --mount spec. Call between start() and the first job.
PyObject* load_app(const std::string& spec, std::string& err, const std::string& named = "");
// Releases the GIL held since start(); pool threads may run from now on.
void release_main_gil();
// A pool thread's first and last act (WsgiPool's thread_init / thread_exit):
// make this thread's Python thread state, kept until detach_thread, and leave
// the GIL released. No-ops without an interpreter.
void attach_thread();
void detach_thread();
// Pool threads (WsgiPool's enter / leave hooks): take the GIL with this
// thread's state; release it if this thread holds it (else nothing).
void take_gil();
void drop_gil();
// How long a pool thread keeps the GIL across jobs while another waits for it
// (Pool::Hooks::keep_for): half the switch interval (sys.getswitchinterval()),
// so it lets go where a job ends before CPython would take the GIL midway
// through one; zero without an interpreter. Takes the GIL itself.
std::chrono::nanoseconds gil_keep_for();
// How long a pool thread that found no job waits for the next one, the GIL
// still held (Pool::Hooks::linger): about the time a loop takes to parse the
// next request under load; an app's own threads wait for the GIL that long.
constexpr std::chrono::microseconds kGilLinger{200};
// Whether `o` has a close() method (PEP 3333's iterable), without asking a
// list or a tuple, which have none (asking makes and formats an
// AttributeError, on every request that returns a list). GIL held.
bool has_close(PyObject* o);
// Retakes the GIL and finalizes. Call after the pools are joined.
void stop();

// "Type: message" of the current Python exception, which stays set. GIL held.
std::string exception_summary();

// Logs the current Python exception (one line plus the traceback) and clears
// it. GIL held.
void log_exception(const std::string& context);

}  // namespace m0::wsgi
