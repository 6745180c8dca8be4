#include "wsgi/django_check.hpp"

#include "loop/log.hpp"
#include "wsgi/interpreter.hpp"

namespace m0::wsgi {

namespace {

// Returns (status, text, traceback, warnings): status "not_django", "ok",
// "urlconf" (text: ROOT_URLCONF and the exception), "errors" (text: each
// serious message on one line, joined by "; ") or "raised" (the checks
// themselves raised).
constexpr const char* kCheck = R"PY(
def _m0_check_django():
    import sys, traceback
    if "django" not in sys.modules:
        return ("not_django", "", "", [])
    from django.conf import settings
    if not settings.configured:
        return ("not_django", "", "", [])
    def one_line(m):
        return " ".join(str(m).split())
    urlconf = getattr(settings, "ROOT_URLCONF", None)
    if urlconf:
        import importlib
        try:
            importlib.import_module(urlconf)
        except BaseException as e:
            return ("urlconf", "ROOT_URLCONF %r does not import: %s: %s"
                    % (urlconf, type(e).__name__, one_line(e)), traceback.format_exc(), [])
    from django.core import checks
    try:
        found = [m for m in checks.run_checks() if not m.is_silenced()]
    except BaseException as e:
        return ("raised", "%s: %s" % (type(e).__name__, one_line(e)), traceback.format_exc(), [])
    errors = [one_line(m) for m in found if m.is_serious()]
    warnings = [one_line(m) for m in found if not m.is_serious()]
    if errors:
        return ("errors", "%d error%s: %s" % (len(errors), "" if len(errors) == 1 else "s",
                                              "; ".join(errors)), "", warnings)
    return ("ok", "", "", warnings)
)PY";

std::string text_of(PyObject* item) {
    const char* p = item && PyUnicode_Check(item) ? PyUnicode_AsUTF8(item) : nullptr;
    return p ? p : "";
}

}  // namespace

DjangoCheck check_django(std::string& err) {
    PyObject* globals = PyDict_New();
    PyObject* builtins = PyEval_GetBuiltins();
    PyObject* ran = nullptr;
    PyObject* result = nullptr;
    if (globals && PyDict_SetItemString(globals, "__builtins__", builtins) == 0)
        ran = PyRun_String(kCheck, Py_file_input, globals, globals);
    PyObject* fn = ran ? PyDict_GetItemString(globals, "_m0_check_django") : nullptr;  // borrowed
    if (fn) result = PyObject_CallNoArgs(fn);
    DjangoCheck verdict = DjangoCheck::failed;
    if (!result || !PyTuple_Check(result) || PyTuple_Size(result) != 4) {
        err = "--check: Django's checks could not run: " + exception_summary();
        PyErr_Clear();
    } else {
        std::string status = text_of(PyTuple_GetItem(result, 0));
        std::string text = text_of(PyTuple_GetItem(result, 1));
        std::string trace = text_of(PyTuple_GetItem(result, 2));
        PyObject* warnings = PyTuple_GetItem(result, 3);
        for (Py_ssize_t i = 0; warnings && PyList_Check(warnings) && i < PyList_Size(warnings); ++i)
            M0_LOG(warn, "--check: Django: ", text_of(PyList_GetItem(warnings, i)));
        const bool traced = !trace.empty() && log::enabled(log::Level::debug);
        if (traced) M0_LOG(debug, trace);
        const std::string hint =
            trace.empty() || traced ? "" : " (--log-level debug shows the traceback)";
        if (status == "not_django") {
            verdict = DjangoCheck::not_django;
        } else if (status == "ok") {
            verdict = DjangoCheck::ok;
        } else if (status == "urlconf") {
            err = "--check: " + text + hint;
        } else if (status == "errors") {
            err = "--check: Django's system checks found " + text;
        } else {
            err = "--check: Django's system checks raised " + text + hint;
        }
    }
    Py_XDECREF(result);
    Py_XDECREF(ran);
    Py_XDECREF(globals);
    return verdict;
}

}  // namespace m0::wsgi
