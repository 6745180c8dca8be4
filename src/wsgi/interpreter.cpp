#include "wsgi/interpreter.hpp"

#include "bus/names.hpp"
#include "loop/log.hpp"

namespace m0::wsgi {

namespace {
bus::Bus* g_bus = nullptr;  // written once in start(), before any pool thread
PyThreadState* g_main_state = nullptr;

// The bytes of a str (UTF-8) or bytes `o`; false with a TypeError set.
bool text_of(PyObject* o, std::string& out, const char* what) {
    Py_ssize_t n = 0;
    const char* p = nullptr;
    if (PyBytes_Check(o)) {
        p = PyBytes_AS_STRING(o);
        n = PyBytes_GET_SIZE(o);
    } else if (PyUnicode_Check(o)) {
        p = PyUnicode_AsUTF8AndSize(o, &n);
        if (!p) return false;
    } else {
        PyErr_Format(PyExc_TypeError, "%s must be str or bytes", what);
        return false;
    }
    out.assign(p, static_cast<size_t>(n));
    return true;
}

// _m0.publish(channel, data, event=None) -> int
PyObject* py_publish(PyObject*, PyObject* args, PyObject* kwargs) {
    static const char* kw[] = {"channel", "data", "event", nullptr};
    const char* channel = nullptr;
    Py_ssize_t channel_len = 0;
    PyObject* data = nullptr;
    PyObject* event = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "s#O|O", const_cast<char**>(kw), &channel,
                                     &channel_len, &data, &event))
        return nullptr;
    std::string data_s;
    if (!text_of(data, data_s, "data")) return nullptr;
    std::string event_s;
    if (event != Py_None) {
        if (!PyUnicode_Check(event)) {
            PyErr_SetString(PyExc_TypeError, "event must be str or None");
            return nullptr;
        }
        Py_ssize_t n = 0;
        const char* p = PyUnicode_AsUTF8AndSize(event, &n);
        if (!p) return nullptr;
        event_s.assign(p, static_cast<size_t>(n));
    }
    std::string channel_s(channel, static_cast<size_t>(channel_len));
    auto e = bus::check_channel(channel_s);
    if (e == bus::NameError::ok) e = bus::check_event(event_s);
    if (e != bus::NameError::ok) {
        PyErr_SetString(PyExc_ValueError, bus::reason(e));
        return nullptr;
    }
    if (!g_bus) {
        PyErr_SetString(PyExc_RuntimeError, "publish needs m0serve --realtime");
        return nullptr;
    }
    bus::PublishResult res;
    // A shared bus answers after a round trip: other Python threads run meanwhile.
    Py_BEGIN_ALLOW_THREADS;
    res = g_bus->publish(std::move(channel_s), std::move(data_s), std::move(event_s));
    Py_END_ALLOW_THREADS;
    switch (res.error) {
        case bus::PublishError::ok:
            break;
        case bus::PublishError::bad_name:
        case bus::PublishError::too_large:
            // The caller's mistake, like a bad name: ValueError, naming the limit.
            PyErr_SetString(PyExc_ValueError, bus::reason(res).c_str());
            return nullptr;
        case bus::PublishError::refused:
        case bus::PublishError::unavailable:
            PyErr_SetString(PyExc_RuntimeError, bus::reason(res).c_str());
            return nullptr;
    }
    return PyLong_FromUnsignedLongLong(res.id);
}

// _m0.publish_many(events) -> [id, ...]: `events` a list of (channel, data,
// event or None), checked and normalised by m0.publish_many; one bus batch
// (Bus::publish_batch: in process one lock and one wake-up of each loop).
PyObject* py_publish_many(PyObject*, PyObject* arg) {
    if (!PyList_Check(arg)) {
        PyErr_SetString(PyExc_TypeError, "events must be a list of (channel, data, event)");
        return nullptr;
    }
    std::vector<bus::PublishEvent> events;
    const Py_ssize_t n = PyList_GET_SIZE(arg);
    events.reserve(static_cast<size_t>(n));
    for (Py_ssize_t i = 0; i < n; ++i) {
        PyObject* t = PyList_GET_ITEM(arg, i);  // borrowed
        if (!PyTuple_Check(t) || PyTuple_GET_SIZE(t) != 3) {
            PyErr_Format(PyExc_TypeError, "event %zd: not a (channel, data, event) tuple", i);
            return nullptr;
        }
        bus::PublishEvent e;
        PyObject* event = PyTuple_GET_ITEM(t, 2);
        if (!text_of(PyTuple_GET_ITEM(t, 0), e.channel, "channel") ||
            !text_of(PyTuple_GET_ITEM(t, 1), e.data, "data") ||
            (event != Py_None && !text_of(event, e.event, "event")))
            return nullptr;
        events.push_back(std::move(e));
    }
    if (!g_bus) {
        PyErr_SetString(PyExc_RuntimeError, "publish needs m0serve --realtime");
        return nullptr;
    }
    bus::BatchResult b;
    Py_BEGIN_ALLOW_THREADS;
    b = g_bus->publish_batch(std::move(events));
    Py_END_ALLOW_THREADS;
    if (!b.ok()) {
        std::string why = "event " + std::to_string(b.failed) + ": " + bus::reason(b.error);
        if (!b.ids.empty())
            why += " (the " + std::to_string(b.ids.size()) + " events before it were taken)";
        const bool mistake = b.error.error == bus::PublishError::bad_name ||
                             b.error.error == bus::PublishError::too_large;
        PyErr_SetString(mistake ? PyExc_ValueError : PyExc_RuntimeError, why.c_str());
        return nullptr;
    }
    PyObject* ids = PyList_New(static_cast<Py_ssize_t>(b.ids.size()));
    if (!ids) return nullptr;
    for (size_t i = 0; i < b.ids.size(); ++i) {
        PyObject* id = PyLong_FromUnsignedLongLong(b.ids[i]);
        if (!id) {
            Py_DECREF(ids);
            return nullptr;
        }
        PyList_SET_ITEM(ids, static_cast<Py_ssize_t>(i), id);
    }
    return ids;
}

PyObject* py_realtime(PyObject*, PyObject*) { return PyBool_FromLong(g_bus != nullptr); }

PyMethodDef m0_methods[] = {
    {"publish", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(py_publish)),
     METH_VARARGS | METH_KEYWORDS,
     "publish(channel, data, event=None) -> id: queue an event on the server's bus."},
    {"publish_many", py_publish_many, METH_O,
     "publish_many([(channel, data, event), ...]) -> [id, ...]: one batch on the server's bus."},
    {"realtime", py_realtime, METH_NOARGS, "realtime() -> bool: whether --realtime is on."},
    {nullptr, nullptr, 0, nullptr}};

PyModuleDef m0_module = {PyModuleDef_HEAD_INIT,
                         "_m0",
                         "m0serve's native side of the m0 package.",
                         -1,
                         m0_methods,
                         nullptr,
                         nullptr,
                         nullptr,
                         nullptr};

PyObject* init_m0() { return PyModule_Create(&m0_module); }

bool prepend_path(const std::string& dir) {
    PyObject* sys_path = PySys_GetObject("path");  // borrowed
    PyObject* s = PyUnicode_DecodeFSDefault(dir.c_str());
    if (!sys_path || !s) {
        Py_XDECREF(s);
        return false;
    }
    int rc = PyList_Insert(sys_path, 0, s);
    Py_DECREF(s);
    return rc == 0;
}
}  // namespace

std::string exception_summary() {
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    PyErr_NormalizeException(&type, &value, &tb);
    std::string out = "unknown error";
    if (type) {
        const char* name = reinterpret_cast<PyTypeObject*>(type)->tp_name;
        out = name ? name : "Exception";
        PyObject* s = value ? PyObject_Str(value) : nullptr;
        const char* text = s ? PyUnicode_AsUTF8(s) : nullptr;
        if (text && *text) out.append(": ").append(text);
        Py_XDECREF(s);
    }
    PyErr_Restore(type, value, tb);  // still set: the caller may log the traceback
    return out;
}

void log_exception(const std::string& context) {
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    PyErr_NormalizeException(&type, &value, &tb);
    std::string text = context;
    PyObject* mod = PyImport_ImportModule("traceback");
    PyObject* lines =
        mod ? PyObject_CallMethod(mod, "format_exception", "OOO", type ? type : Py_None,
                                  value ? value : Py_None, tb ? tb : Py_None)
            : nullptr;
    if (lines) {
        PyObject* sep = PyUnicode_FromString("");
        PyObject* joined = sep ? PyUnicode_Join(sep, lines) : nullptr;
        if (joined) {
            const char* p = PyUnicode_AsUTF8(joined);
            if (p) text.append("\n").append(p);
            Py_DECREF(joined);
        }
        Py_XDECREF(sep);
        Py_DECREF(lines);
    }
    PyErr_Clear();
    Py_XDECREF(mod);
    Py_XDECREF(type);
    Py_XDECREF(value);
    Py_XDECREF(tb);
    while (!text.empty() && text.back() == '\n') text.pop_back();
    M0_LOG(error, text);
}

bool start(const PythonOptions& opts, bus::Bus* bus, std::string& err) {
    g_bus = bus;
    if (PyImport_AppendInittab("_m0", init_m0) == -1) {
        err = "cannot register the _m0 module";
        return false;
    }
    PyConfig config;
    PyConfig_InitPythonConfig(&config);
    config.install_signal_handlers = 0;  // the loop owns SIGINT/SIGTERM
    config.parse_argv = 0;
    // Path computation from Debian's interpreter, whatever python3 is on PATH;
    // or from the venv's bin/python3: getpath reads the pyvenv.cfg beside it
    // (sys.prefix: the venv) and site adds its site-packages, .pth files run.
    PyStatus st = opts.virtualenv_python.empty()
                      ? PyConfig_SetString(&config, &config.program_name, L"/usr/bin/python3")
                      : PyConfig_SetBytesString(&config, &config.program_name,
                                                opts.virtualenv_python.c_str());
    if (!PyStatus_Exception(st)) st = Py_InitializeFromConfig(&config);
    PyConfig_Clear(&config);
    if (PyStatus_Exception(st)) {
        err = std::string("cannot start Python: ") + (st.err_msg ? st.err_msg : "unknown error");
        return false;
    }
    bool ok = prepend_path(opts.package_dir);
    for (auto it = opts.pythonpath.rbegin(); ok && it != opts.pythonpath.rend(); ++it)
        ok = prepend_path(*it);
    if (ok && !opts.chdir.empty()) ok = prepend_path(opts.chdir);
    if (!ok) {
        PyErr_Clear();
        err = "cannot set sys.path";
        return false;
    }
    if (opts.switch_interval > 0) {
        PyObject* sys = PyImport_ImportModule("sys");
        PyObject* r = sys ? PyObject_CallMethod(sys, "setswitchinterval", "d", opts.switch_interval)
                          : nullptr;
        Py_XDECREF(r);
        Py_XDECREF(sys);
        if (!r) {
            err = "cannot set the switch interval: " + exception_summary();
            PyErr_Clear();
            return false;
        }
    }
    return true;
}

PyObject* load_app(const std::string& spec, std::string& err, const std::string& named) {
    // What the user wrote, for the messages: "APP config.wsgi", "--mount /=...".
    const std::string as = named.empty() ? "--mount spec '" + spec + "'" : named;
    size_t colon = spec.find(':');
    std::string module = spec.substr(0, colon);
    std::string attr = colon == std::string::npos ? "application" : spec.substr(colon + 1);
    if (module.empty() || attr.empty()) {
        err = "bad WSGI spec '" + spec + "' (want module.path:callable)";
        return nullptr;
    }
    PyObject* obj = PyImport_ImportModule(module.c_str());
    if (!obj) {
        // One line for the user; the traceback with --log-level debug.
        std::string summary = exception_summary();
        bool traced = log::enabled(log::Level::debug);
        if (traced)
            log_exception("cannot import " + module);
        else
            PyErr_Clear();
        err = "cannot import '" + module + "' for " + as + ": " + summary +
              (traced ? "" : " (--log-level debug shows the traceback)");
        return nullptr;
    }
    size_t start = 0;
    while (start <= attr.size()) {
        size_t dot = attr.find('.', start);
        std::string part =
            attr.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
        PyObject* next = PyObject_GetAttrString(obj, part.c_str());
        Py_DECREF(obj);
        if (!next) {
            PyErr_Clear();
            err = as + ": module '" + module + "' has no attribute '" + attr + "'";
            return nullptr;
        }
        obj = next;
        if (dot == std::string::npos) break;
        start = dot + 1;
    }
    if (!PyCallable_Check(obj)) {
        Py_DECREF(obj);
        err = as + ": '" + spec + "' is not callable";
        return nullptr;
    }
    return obj;
}

void release_main_gil() { g_main_state = PyEval_SaveThread(); }

namespace {
// Pool thread: its own, set by attach_thread and cleared by detach_thread.
thread_local PyThreadState* t_state = nullptr;
thread_local PyGILState_STATE t_gil;
}  // namespace

void attach_thread() {
    if (!Py_IsInitialized() || t_state) return;
    // The GIL-state counter stays at one until detach_thread, so the
    // per-request PyGILState_Ensure / Release pairs reuse this thread state
    // instead of making and deleting one per request (which would also drop
    // the thread's threading.local data each time).
    t_gil = PyGILState_Ensure();
    t_state = PyEval_SaveThread();
}

void take_gil() {
    if (t_state) PyEval_RestoreThread(t_state);
}

void drop_gil() {
    if (t_state && PyGILState_Check()) PyEval_SaveThread();
}

std::chrono::nanoseconds gil_keep_for() {
    if (!Py_IsInitialized()) return {};
    PyGILState_STATE g = PyGILState_Ensure();
    double s = 0;
    PyObject* sys = PyImport_ImportModule("sys");
    PyObject* r = sys ? PyObject_CallMethod(sys, "getswitchinterval", nullptr) : nullptr;
    if (r) s = PyFloat_AsDouble(r);
    if (!r || PyErr_Occurred()) {
        PyErr_Clear();
        s = 0;
    }
    Py_XDECREF(r);
    Py_XDECREF(sys);
    PyGILState_Release(g);
    return std::chrono::nanoseconds(static_cast<int64_t>(s * 1e9 / 2));
}

bool has_close(PyObject* o) {
    return !PyList_CheckExact(o) && !PyTuple_CheckExact(o) && PyObject_HasAttrString(o, "close");
}

void detach_thread() {
    if (!t_state) return;
    PyEval_RestoreThread(t_state);
    t_state = nullptr;
    PyGILState_Release(t_gil);
}

void stop() {
    if (g_main_state) PyEval_RestoreThread(g_main_state);
    g_main_state = nullptr;
    Py_FinalizeEx();
}

}  // namespace m0::wsgi
