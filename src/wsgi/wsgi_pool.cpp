#include "wsgi/wsgi_pool.hpp"

#include <fcntl.h>
#include <sys/stat.h>

#include <cerrno>
#include <charconv>
#include <cstring>
#include <memory>
#include <unordered_map>

#include "http/body_length.hpp"
#include "loop/log.hpp"
#include "wsgi/interpreter.hpp"

namespace m0::wsgi {

namespace {

// Per-job state shared with start_response and write (through a capsule).
struct Job {
    const hold::Handoff* h = nullptr;
    Pool* pool = nullptr;
    SlotRef slot;
    std::string worker;
    bool started = false;    // start_response called
    bool head_sent = false;  // the head left for the loop
    bool hold = false;       // start_response named M0-Hold or Grip-Hold
    bool head_request = false;
    http::Response resp;  // status + headers; body collected while not streaming
    // The body against its Content-Length (PEP 3333): set by start_response.
    http::BodyLength length{std::nullopt, true};
    std::shared_ptr<StreamState> stream;
    bool client_gone = false;
};

// What start_response and write reach their job through. The capsule behind
// both owns the link and may outlive the job: an app can keep start_response
// (or write) and call it during a later request, on any pool thread. The job
// clears `job` when its request ends; every call and the clearing happen under
// the GIL, so a late call sees null and raises instead of reaching another
// request's answer (or the dead job's stack).
struct JobLink {
    Job* job = nullptr;  // guarded by the GIL; null once the request ended
};

constexpr const char* kLinkName = "m0.wsgi.job";

void free_link(PyObject* capsule) {
    delete static_cast<JobLink*>(PyCapsule_GetPointer(capsule, kLinkName));
}

// The live job behind a capsule, or null with RuntimeError set once its
// request ended (`what` names the callable in the message).
Job* job_of(PyObject* capsule, const char* what) {
    auto* link = static_cast<JobLink*>(PyCapsule_GetPointer(capsule, kLinkName));
    if (!link) return nullptr;
    if (!link->job) {
        PyErr_Format(PyExc_RuntimeError, "%s called after its request ended", what);
        return nullptr;
    }
    return link->job;
}

// PEP 3333, "Optional Platform-Specific File Handling": environ's
// wsgi.file_wrapper. An app returns FileWrapper(filelike, blksize); serve_job
// recognises the type and, for a real file, hands the loop a descriptor to
// send with sendfile(2). Iterating it (any other file-like object) reads
// block by block, as PEP 3333's example does.
const char* const kFileWrapperSource = R"PY(
class FileWrapper:
    """m0serve's wsgi.file_wrapper: a regular file is sent by sendfile(2) from
    the event loop, with no pool thread kept; any other file-like object is
    read blksize bytes at a time."""

    def __init__(self, filelike, blksize=8192):
        self.filelike = filelike
        self.blksize = blksize
        if hasattr(filelike, "close"):
            self.close = filelike.close

    def __iter__(self):
        read = self.filelike.read
        blksize = self.blksize
        while True:
            data = read(blksize)
            if not data:
                return
            yield data
)PY";

PyObject* str_latin1(std::string_view s) {
    return PyUnicode_DecodeLatin1(s.data(), static_cast<Py_ssize_t>(s.size()), nullptr);
}

// Encodes a native string (PEP 3333: str holding Latin-1 code points) to bytes.
bool latin1(PyObject* o, std::string& out, const char* what) {
    if (!PyUnicode_Check(o)) {
        PyErr_Format(PyExc_TypeError, "%s must be str", what);
        return false;
    }
    PyObject* b = PyUnicode_AsLatin1String(o);
    if (!b) return false;
    out.assign(PyBytes_AS_STRING(b), static_cast<size_t>(PyBytes_GET_SIZE(b)));
    Py_DECREF(b);
    return true;
}

// Posts the head (once) and a chunk, waiting with the GIL released while the
// connection's output is over the high-water mark. GIL held on entry and exit.
bool send_chunk(Job& j, std::string data) {
    if (j.client_gone) return false;
    if (!j.head_sent) {
        j.head_sent = true;
        j.stream = std::make_shared<StreamState>(j.h->stream_high_water);
        Completion c;
        c.kind = Completion::Kind::head;
        c.slot = j.slot;
        c.response.status = j.resp.status;
        c.response.headers = j.resp.headers;
        c.stream = j.stream;
        j.h->ring->push(std::move(c));
    }
    if (data.empty()) return true;
    PyThreadState* save = PyEval_SaveThread();  // the GIL is released while it waits
    const bool ok = j.stream->reserve(data.size());
    PyEval_RestoreThread(save);
    if (!ok) {
        j.client_gone = true;
        return false;
    }
    Completion c;
    c.kind = Completion::Kind::chunk;
    c.slot = j.slot;
    c.data = std::move(data);
    c.stream = j.stream;
    j.h->ring->push(std::move(c));
    return true;
}

// One piece of the body, from the iterable or write(): admitted against the
// declared length (PEP 3333: "the server should not transmit more bytes than
// the Content-Length allows"), then kept for a whole answer or streamed.
// `collect`: keep it while the head is not out (a list or tuple is the whole
// body already). A hold's body is its stream's head: kept whole, unmeasured.
// False when the client left (client_gone). GIL held.
bool emit(Job& j, std::string chunk, bool collect) {
    if (j.hold) {
        j.resp.body += chunk;
        return true;
    }
    chunk.resize(j.length.admit(chunk.size()));
    if (!j.head_sent && (collect || j.length.complete())) {
        // A first piece that completes the length is one whole answer.
        j.resp.body += chunk;
    } else if (!chunk.empty() && !send_chunk(j, std::move(chunk))) {
        return false;
    }
    return true;
}

// PEP 3333: write(data), the callable start_response returns.
PyObject* py_write(PyObject* self, PyObject* data) {
    Job* jp = job_of(self, "write()");
    if (!jp) return nullptr;
    Job& j = *jp;
    if (!j.started) {
        PyErr_SetString(PyExc_AssertionError, "write() before start_response()");
        return nullptr;
    }
    if (!PyBytes_Check(data)) {
        PyErr_SetString(PyExc_TypeError, "write() takes bytes");
        return nullptr;
    }
    std::string s(PyBytes_AS_STRING(data), static_cast<size_t>(PyBytes_GET_SIZE(data)));
    // Past a complete Content-Length the bytes are dropped (counted, and
    // logged once the request ends), as the iterable's are.
    if (!emit(j, std::move(s), false)) {
        PyErr_SetString(PyExc_OSError, "client disconnected");
        return nullptr;
    }
    Py_RETURN_NONE;
}

PyMethodDef write_def = {"write", py_write, METH_O, "PEP 3333 write(data)"};

// PEP 3333: start_response(status, response_headers, exc_info=None) -> write
PyObject* py_start_response(PyObject* self, PyObject* args) {
    Job* jp = job_of(self, "start_response");
    if (!jp) return nullptr;
    Job& j = *jp;
    PyObject *status, *headers, *exc_info = Py_None;
    if (!PyArg_ParseTuple(args, "OO|O:start_response", &status, &headers, &exc_info))
        return nullptr;
    if (exc_info != Py_None) {
        // PEP 3333: with exc_info after the headers were sent, re-raise it.
        if (j.head_sent) {
            PyObject *t, *v, *tb;
            if (!PyArg_ParseTuple(exc_info, "OOO", &t, &v, &tb)) return nullptr;
            Py_INCREF(t);
            Py_INCREF(v);
            Py_INCREF(tb);
            PyErr_Restore(t, v, tb == Py_None ? nullptr : tb);
            if (tb == Py_None) Py_DECREF(tb);
            return nullptr;
        }
    } else if (j.started) {
        PyErr_SetString(PyExc_AssertionError, "start_response called twice without exc_info");
        return nullptr;
    }
    std::string status_s;
    if (!latin1(status, status_s, "status")) return nullptr;
    int code = 0;
    auto [p, ec] = std::from_chars(status_s.data(), status_s.data() + status_s.size(), code);
    if (ec != std::errc() || p != status_s.data() + 3 || status_s.size() < 4 ||
        status_s[3] != ' ' || code < 100 || code > 999) {
        PyErr_Format(PyExc_ValueError, "bad status line %R", status);
        return nullptr;
    }
    if (!PyList_Check(headers)) {
        PyErr_SetString(PyExc_TypeError, "response_headers must be a list");
        return nullptr;
    }
    http::Headers hs;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(headers); ++i) {
        PyObject* item = PyList_GET_ITEM(headers, i);
        if (!PyTuple_Check(item) || PyTuple_GET_SIZE(item) != 2) {
            PyErr_SetString(PyExc_TypeError, "each header must be a (name, value) tuple");
            return nullptr;
        }
        std::string k, v;
        if (!latin1(PyTuple_GET_ITEM(item, 0), k, "header name") ||
            !latin1(PyTuple_GET_ITEM(item, 1), v, "header value"))
            return nullptr;
        if (k.find_first_of("\r\n:") != std::string::npos ||
            v.find_first_of("\r\n") != std::string::npos) {
            PyErr_Format(PyExc_ValueError, "header %R contains CR, LF or ':'", item);
            return nullptr;
        }
        hs.add(std::move(k), std::move(v));
    }
    // RFC 9110 §8.6: Content-Length = 1*DIGIT, and one value: an answer framed
    // by a length the server cannot read, or by two, is the app's error (a
    // 500 while nothing is sent), never a guess.
    std::optional<uint64_t> declared;
    for (const auto& [k, v] : hs.items) {
        if (!http::iequals(k, "Content-Length")) continue;
        auto n = http::parse_content_length(v);
        if (!n) {
            PyErr_SetString(PyExc_ValueError,
                            ("Content-Length '" + v + "' is not a decimal number").c_str());
            return nullptr;
        }
        if (declared && *declared != *n) {
            PyErr_SetString(PyExc_ValueError, "two different Content-Length headers");
            return nullptr;
        }
        declared = n;
    }
    j.started = true;
    j.resp.status = code;
    j.resp.headers = std::move(hs);
    j.resp.body.clear();
    j.hold = hold::asks_hold(j.resp.headers);
    j.length = http::BodyLength(declared, !j.head_request && !http::bodiless_status(code));
    // The write callable shares the capsule, so it ends with the request too.
    return PyCFunction_New(&write_def, self);
}

PyMethodDef start_response_def = {"start_response", py_start_response, METH_VARARGS,
                                  "PEP 3333 start_response(status, headers, exc_info=None)"};

int set_item(PyObject* d, PyObject* k, PyObject* v) {
    if (!v) return -1;
    int rc = PyDict_SetItem(d, k, v);
    Py_DECREF(v);
    return rc;
}

// The environ's keys, and its items that are the same for every request,
// made once (the GIL held): a request copies the template and sets its own
// items under keys whose hashes are computed already.
struct EnvironTemplate {
    enum Key {
        method,
        script_name,
        path_info,
        query,
        server_name,
        server_port,
        protocol,
        remote_addr,
        remote_port,
        url_scheme,
        errors,
        input,
        content_type,
        content_length,
        raw_uri,
        request_uri,
        count
    };
    PyObject* keys[count] = {};
    PyObject* fixed = nullptr;         // SERVER_SOFTWARE, wsgi.version, the wsgi.* flags
    PyObject* file_wrapper = nullptr;  // the FileWrapper type (also in `fixed`)
    // Header name as received -> its interned HTTP_* key; bounded, so a
    // client's invented names cannot grow it.
    std::unordered_map<std::string, PyObject*> header_keys;
    static constexpr size_t kMaxHeaderKeys = 256;

    EnvironTemplate() {
        static const char* const names[count] = {
            "REQUEST_METHOD", "SCRIPT_NAME",     "PATH_INFO",       "QUERY_STRING",
            "SERVER_NAME",    "SERVER_PORT",     "SERVER_PROTOCOL", "REMOTE_ADDR",
            "REMOTE_PORT",    "wsgi.url_scheme", "wsgi.errors",     "wsgi.input",
            "CONTENT_TYPE",   "CONTENT_LENGTH",  "RAW_URI",         "REQUEST_URI"};
        for (int i = 0; i < count; ++i) keys[i] = PyUnicode_InternFromString(names[i]);
        fixed = PyDict_New();
        if (!fixed) return;
        PyObject* software = PyUnicode_FromString("m0serve/" M0_VERSION);
        PyObject* version = Py_BuildValue("(ii)", 1, 0);
        if (!software || !version ||
            PyDict_SetItemString(fixed, "SERVER_SOFTWARE", software) != 0 ||
            PyDict_SetItemString(fixed, "wsgi.version", version) != 0 ||
            PyDict_SetItemString(fixed, "wsgi.multithread", Py_True) != 0 ||
            PyDict_SetItemString(fixed, "wsgi.multiprocess", Py_False) != 0 ||
            PyDict_SetItemString(fixed, "wsgi.run_once", Py_False) != 0 ||
            PyDict_SetItemString(fixed, "wsgi.input_terminated", Py_True) != 0)
            Py_CLEAR(fixed);
        Py_XDECREF(software);
        Py_XDECREF(version);
        PyObject* ns = PyDict_New();
        PyObject* name = PyUnicode_FromString("m0serve");
        if (ns && name && PyDict_SetItemString(ns, "__builtins__", PyEval_GetBuiltins()) == 0 &&
            PyDict_SetItemString(ns, "__name__", name) == 0) {
            PyObject* r = PyRun_String(kFileWrapperSource, Py_file_input, ns, ns);
            Py_XDECREF(r);
            file_wrapper = r ? PyDict_GetItemString(ns, "FileWrapper") : nullptr;
            Py_XINCREF(file_wrapper);
        }
        Py_XDECREF(name);
        Py_XDECREF(ns);
        if (!file_wrapper || !fixed ||
            PyDict_SetItemString(fixed, "wsgi.file_wrapper", file_wrapper) != 0)
            Py_CLEAR(fixed);
    }
    bool ok() const {
        for (PyObject* k : keys)
            if (!k) return false;
        return fixed != nullptr;
    }
    // The HTTP_* key of header `name` (new reference), or null with an
    // exception set.
    PyObject* header_key(const std::string& name) {
        if (auto it = header_keys.find(name); it != header_keys.end()) {
            Py_INCREF(it->second);
            return it->second;
        }
        std::string key = "HTTP_";
        for (char c : name)
            key += c == '-' ? '_' : static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
        PyObject* k = str_latin1(key);
        if (k && header_keys.size() < kMaxHeaderKeys) {
            PyUnicode_InternInPlace(&k);
            Py_INCREF(k);  // the table's reference, kept for the interpreter's life
            header_keys.emplace(name, k);
        }
        return k;
    }
};

// The GIL held. Made on first use, never freed.
EnvironTemplate& environ_template() {
    static EnvironTemplate* t = new EnvironTemplate;
    return *t;
}

// PEP 3333 environ. New reference, or null with an exception set.
PyObject* build_environ(const http::Request& r, PyObject* errors) {
    EnvironTemplate* t = &environ_template();
    if (!t->ok()) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_RuntimeError, "the WSGI environ template failed");
        return nullptr;
    }
    using K = EnvironTemplate;
    PyObject* env = PyDict_Copy(t->fixed);
    if (!env) return nullptr;
    bool ok =
        set_item(env, t->keys[K::method], str_latin1(r.method)) == 0 &&
        set_item(env, t->keys[K::script_name], str_latin1(r.script_name)) == 0 &&
        set_item(env, t->keys[K::path_info], str_latin1(r.path_info)) == 0 &&
        set_item(env, t->keys[K::query], str_latin1(r.query)) == 0 &&
        set_item(env, t->keys[K::server_name], str_latin1(r.server_name)) == 0 &&
        set_item(env, t->keys[K::server_port], str_latin1(std::to_string(r.server_port))) == 0 &&
        set_item(env, t->keys[K::protocol], str_latin1(r.protocol())) == 0 &&
        set_item(env, t->keys[K::remote_addr], str_latin1(r.remote_addr)) == 0 &&
        set_item(env, t->keys[K::remote_port], str_latin1(std::to_string(r.remote_port))) == 0 &&
        set_item(env, t->keys[K::url_scheme], str_latin1(r.scheme)) == 0 &&
        PyDict_SetItem(env, t->keys[K::errors], errors) == 0;
    if (ok) {
        // The request target as it came, before any decoding: gunicorn's
        // RAW_URI and uWSGI's REQUEST_URI, which some apps read.
        PyObject* target = str_latin1(r.target);
        ok = target && PyDict_SetItem(env, t->keys[K::raw_uri], target) == 0 &&
             PyDict_SetItem(env, t->keys[K::request_uri], target) == 0;
        Py_XDECREF(target);
    }
    // Over TLS, HTTPS=on as well, as gunicorn and uWSGI set it (CGI's convention).
    if (ok && r.scheme == "https") {
        PyObject* on = PyUnicode_FromString("on");
        ok = on && PyDict_SetItemString(env, "HTTPS", on) == 0;
        Py_XDECREF(on);
    }
    if (ok) {
        // wsgi.input: a real file-like object over the whole body.
        // io.BytesIO, looked up once (under the GIL) and kept for the
        // interpreter's life rather than imported per request.
        static PyObject* bytes_io = [] {
            PyObject* io = PyImport_ImportModule("io");
            PyObject* cls = io ? PyObject_GetAttrString(io, "BytesIO") : nullptr;
            Py_XDECREF(io);
            return cls;
        }();
        PyObject* body =
            PyBytes_FromStringAndSize(r.body.data(), static_cast<Py_ssize_t>(r.body.size()));
        PyObject* input =
            bytes_io && body ? PyObject_CallFunctionObjArgs(bytes_io, body, nullptr) : nullptr;
        if (!bytes_io && !PyErr_Occurred())
            PyErr_SetString(PyExc_RuntimeError, "io.BytesIO is unavailable");
        Py_XDECREF(body);
        ok = set_item(env, t->keys[K::input], input) == 0;
    }
    if (ok && r.headers.has("Content-Type"))
        ok = set_item(env, t->keys[K::content_type], str_latin1(*r.headers.get("Content-Type"))) ==
             0;
    // The body is de-chunked: CONTENT_LENGTH tells the app how much to read.
    if (ok && (!r.body.empty() || r.headers.has("Content-Length")))
        ok = set_item(env, t->keys[K::content_length], str_latin1(std::to_string(r.body.size()))) ==
             0;
    for (size_t i = 0; ok && i < r.headers.items.size(); ++i) {
        const auto& name = r.headers.items[i].first;
        if (http::iequals(name, "Content-Type") || http::iequals(name, "Content-Length")) continue;
        // A name with '_' would collide with one with '-' (HTTP_X_USER could be
        // forged as X_User): such headers are not passed.
        if (name.find('_') != std::string::npos) continue;
        PyObject* key = t->header_key(name);
        if (!key) {
            ok = false;
            break;
        }
        if (PyDict_GetItem(env, key)) {  // already joined
            Py_DECREF(key);
            continue;
        }
        // RFC 9110 §5.3: repeated fields are joined with commas.
        // RFC 6265 §5.4: several Cookie fields are one list joined with "; ".
        std::string value = *r.headers.get_joined(name);
        if (http::iequals(name, "Cookie")) {
            value.clear();
            for (const auto& [k, v] : r.headers.items)
                if (http::iequals(k, "Cookie")) value += (value.empty() ? "" : "; ") + v;
        }
        ok = set_item(env, key, str_latin1(value)) == 0;
        Py_DECREF(key);
    }
    if (!ok) {
        Py_DECREF(env);
        return nullptr;
    }
    return env;
}

// PEP 3333, "Optional Platform-Specific File Handling": when the app returned
// the environ's own wsgi.file_wrapper around a regular file, the file range
// its answer sends (from the file's position, as far as the Content-Length
// allows, or to the file's end when it declared none: that length is then
// added), as a descriptor of the pool's own for the loop to sendfile(2).
// Null, with no exception set, for anything else: the wrapper is then
// iterated, reading the file-like object block by block. GIL held.
std::shared_ptr<FileBody> take_file(Job& j, PyObject* result, const std::string& what) {
    EnvironTemplate& t = environ_template();
    if (!j.started || j.hold || !t.file_wrapper ||
        Py_TYPE(result) != reinterpret_cast<PyTypeObject*>(t.file_wrapper))
        return nullptr;
    PyObject* filelike = PyObject_GetAttrString(result, "filelike");
    int fd = filelike ? PyObject_AsFileDescriptor(filelike) : -1;  // its fileno()
    PyObject* pos = fd >= 0 ? PyObject_CallMethod(filelike, "tell", nullptr) : nullptr;
    long long offset = pos ? PyLong_AsLongLong(pos) : -1;
    Py_XDECREF(pos);
    Py_XDECREF(filelike);
    struct stat st;
    if (offset < 0 || fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        PyErr_Clear();  // not a real file (io.BytesIO has no fileno()): read it
        return nullptr;
    }
    int own = fcntl(fd, F_DUPFD_CLOEXEC, 0);  // the app's close() closes its own
    if (own < 0) {
        M0_LOG(warn, j.worker, ": ", what, ": wsgi.file_wrapper: dup: ", std::strerror(errno),
               "; the file is read instead");
        return nullptr;
    }
    const uint64_t size = static_cast<uint64_t>(st.st_size);
    const uint64_t at = static_cast<uint64_t>(offset);
    const uint64_t there = size > at ? size - at : 0;
    if (!j.length.declared()) {
        j.resp.headers.set("Content-Length", std::to_string(there));
        j.length = http::BodyLength(there, j.length.carries_body());
    }
    // More in the file than declared is a range of it (or a file that grew):
    // the declared length goes. Less: what there is, then the close.
    const uint64_t length = j.length.admit(there);
    return std::make_shared<FileBody>(own, at, length, j.length.short_of_declared());
}

}  // namespace

WsgiPool::WsgiPool(size_t threads, hold::Handoff handoff, size_t max_queued)
    : handoff_(std::move(handoff)),
      pool_("wsgi", threads, max_queued,
            {.init = attach_thread,
             .exit = detach_thread,
             .enter = take_gil,
             .leave = drop_gil,
             .keep_for = gil_keep_for(),
             .linger = kGilLinger}) {}

Admission WsgiPool::submit(PyObject* app, SlotRef slot, http::Request req,
                           const hold::Handoff* via) {
    const hold::Handoff* h = via ? via : &handoff_;
    auto shared = std::make_shared<http::Request>(std::move(req));
    auto cancel = h->ring ? h->ring->cancels.arm(slot) : nullptr;
    return pool_.submit([this, h, app, slot, shared](
                            size_t thread) { serve_job(*h, pool_, app, slot, *shared, thread); },
                        std::move(cancel));
}

void serve_job(const hold::Handoff& h, Pool& pool, PyObject* app, SlotRef slot, http::Request& req,
               size_t thread_index) {
    // Read before the app may consume the request.
    const hold::Start start = hold::read_start(h, req);
    Job j;
    j.h = &h;
    j.pool = &pool;
    j.slot = slot;
    j.worker = "wsgi-" + std::to_string(thread_index);
    j.head_request = req.method == "HEAD";
    h.at(hold::Point::handler_start, slot);

    enum class Outcome {
        whole,
        file,
        streamed,
        hold,
        failed_before_head,
        failed_streaming,
        cut
    } outcome;
    PyGILState_STATE gil = PyGILState_Ensure();
    auto* link = new JobLink{&j};
    PyObject* capsule = PyCapsule_New(link, kLinkName, free_link);
    if (!capsule) delete link;  // the capsule owns the link only once it exists
    PyObject* start_response = capsule ? PyCFunction_New(&start_response_def, capsule) : nullptr;
    PyObject* errors = PySys_GetObject("stderr");  // borrowed
    PyObject* environ = start_response ? build_environ(req, errors ? errors : Py_None) : nullptr;
    PyObject* result =
        environ ? PyObject_CallFunctionObjArgs(app, environ, start_response, nullptr) : nullptr;
    std::shared_ptr<FileBody> file =
        result ? take_file(j, result, req.method + " " + req.target) : nullptr;
    PyObject* iter = result && !file ? PyObject_GetIter(result) : nullptr;
    bool failed = !file && iter == nullptr;
    // A list or tuple is the whole body already: one response with its length.
    const bool sized = result && (PyList_Check(result) || PyTuple_Check(result));
    // PEP 3333: "stop iterating over the response when enough data has been
    // sent" (write() may have sent it before the iterable is asked at all).
    while (iter && !failed && !j.length.complete() && !j.client_gone) {
        PyObject* item = PyIter_Next(iter);
        if (!item) {
            failed = PyErr_Occurred() != nullptr;
            break;
        }
        if (!PyBytes_Check(item)) {
            Py_DECREF(item);
            PyErr_SetString(PyExc_TypeError, "the WSGI iterable must yield bytes");
            failed = true;
            break;
        }
        if (!j.started) {
            Py_DECREF(item);
            PyErr_SetString(PyExc_AssertionError, "body yielded before start_response()");
            failed = true;
            break;
        }
        std::string chunk(PyBytes_AS_STRING(item), static_cast<size_t>(PyBytes_GET_SIZE(item)));
        Py_DECREF(item);
        if (!emit(j, std::move(chunk), sized)) break;  // the client left
    }
    if (failed) {
        log_exception(std::string(j.worker) + ": WSGI app raised on " + req.method + " " +
                      req.target);
        pool.raised.fetch_add(1);
    }
    // PEP 3333: "If the iterable returned by the application has a close()
    // method, the server or gateway must call that method upon completion of
    // the current request", whether it completed normally or not.
    if (result && has_close(result)) {
        PyObject* r = PyObject_CallMethod(result, "close", nullptr);
        if (!r) {
            log_exception(j.worker + ": close() raised");
            if (!j.head_sent) failed = true;
        }
        Py_XDECREF(r);
    }
    // The request ends here for start_response and write, wherever the app
    // kept them: later calls raise (still under the GIL, before the job dies).
    if (capsule) link->job = nullptr;
    Py_XDECREF(iter);
    Py_XDECREF(result);
    Py_XDECREF(environ);
    Py_XDECREF(start_response);
    Py_XDECREF(capsule);
    if (!j.started && !failed) {
        failed = true;
        M0_LOG(error, j.worker, ": the WSGI app returned without calling start_response()");
    }
    if (!failed && j.started && !j.hold && !j.client_gone) {
        // PEP 3333: bytes past the Content-Length were not sent; a body
        // short of it closes the connection, "and log or otherwise report
        // the error". The access log shows the bytes that went.
        if (j.length.over() > 0)
            M0_LOG(warn, j.worker, ": ", req.method, " ", req.target, ": the body went past its ",
                   "Content-Length ", std::to_string(*j.length.declared()), ": ",
                   std::to_string(j.length.over()), " bytes dropped, the rest not read");
        if (j.length.short_of_declared())
            M0_LOG(error, j.worker, ": ", req.method, " ", req.target, ": the body ended at ",
                   std::to_string(j.length.taken()), " of its Content-Length ",
                   std::to_string(*j.length.declared()), " bytes: the connection is closed");
    }
    if (failed)
        outcome = j.head_sent ? Outcome::failed_streaming : Outcome::failed_before_head;
    else if (file)
        outcome = Outcome::file;
    else if (!j.hold && !j.client_gone && j.length.short_of_declared())
        outcome = Outcome::cut;
    else if (j.hold)
        outcome = Outcome::hold;
    else if (j.head_sent)
        outcome = Outcome::streamed;
    else
        outcome = Outcome::whole;
    if (outcome == Outcome::cut && !j.head_sent) {
        // The head goes as the app framed it, then what there is of the body.
        std::string body = std::move(j.resp.body);
        j.resp.body.clear();
        send_chunk(j, std::move(body));
    }
    PyGILState_Release(gil);  // the pool's enter hook took the GIL; its leave lets go

    switch (outcome) {
        case Outcome::failed_before_head:
            hold::post_response(h, slot, http::error_response(500, "internal server error"));
            break;
        case Outcome::failed_streaming:
        case Outcome::cut:
        case Outcome::streamed: {
            Completion c;
            c.kind = Completion::Kind::end;
            c.slot = slot;
            c.aborted = outcome != Outcome::streamed || j.client_gone;
            c.stream = j.stream;
            h.ring->push(std::move(c));
            break;
        }
        case Outcome::hold: {
            auto d = hold::take_stream_hold(j.resp, j.worker, h.bus != nullptr);
            if (d.kind == hold::HoldKind::bad) {
                M0_LOG(error, j.worker, " on ", req.target, ": ", d.error);
                hold::post_response(h, slot, http::error_response(502, d.error));
            } else {
                hold::finish_hold(h, slot, start, std::move(j.resp), std::move(d));
            }
            break;
        }
        case Outcome::whole:
            hold::post_response(h, slot, std::move(j.resp));
            break;
        case Outcome::file: {
            Completion c;
            c.kind = Completion::Kind::response;
            c.slot = slot;
            c.response = std::move(j.resp);
            c.file = std::move(file);
            h.ring->push(std::move(c));
            h.at(hold::Point::completion_posted, slot);
            break;
        }
    }
}

}  // namespace m0::wsgi
