// The project's virtualenv: pyvenv.cfg read and checked, and the embedded
// interpreter started in a venv made here by hand the way `python3 -m venv`
// lays one out (pyvenv.cfg, bin/python3 a link to /usr/bin/python3,
// lib/python3.X/site-packages), so the test needs no python3-venv.
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <fstream>
#include <string>

#include "wsgi/interpreter.hpp"
#include "wsgi/virtualenv.hpp"

namespace wsgi = m0::wsgi;

namespace {

// A temporary folder, removed with what is in it.
struct TempDir {
    std::string path;
    TempDir() {
        char tmpl[] = "/tmp/m0-venv-test-XXXXXX";
        REQUIRE(::mkdtemp(tmpl));
        path = tmpl;
    }
    ~TempDir() { (void)std::system(("rm -rf '" + path + "'").c_str()); }
    void write(const std::string& name, const std::string& text) const {
        std::ofstream(path + "/" + name) << text;
    }
};

// "3.11" of the embedded version.
std::string embedded_xy() {
    std::string v = wsgi::embedded_version();
    return v.substr(0, v.find('.', v.find('.') + 1));
}

// The venv's site-packages: lib/python3.X/site-packages.
std::string make_venv(const TempDir& d, const std::string& cfg) {
    std::string site = d.path + "/lib/python" + embedded_xy() + "/site-packages";
    REQUIRE(std::system(("mkdir -p '" + d.path + "/bin' '" + site + "/pthmod'").c_str()) == 0);
    REQUIRE(::symlink("/usr/bin/python3", (d.path + "/bin/python3").c_str()) == 0);
    d.write("pyvenv.cfg", cfg);
    return site;
}

std::string py_str(const char* expr) {
    PyObject* main = PyImport_AddModule("__main__");  // borrowed
    PyObject* dict = PyModule_GetDict(main);
    PyObject* r = PyRun_String(expr, Py_eval_input, dict, dict);
    if (!r) {
        PyErr_Clear();
        return "(raised)";
    }
    PyObject* s = PyObject_Str(r);
    std::string out = s ? PyUnicode_AsUTF8(s) : "(no str)";
    Py_XDECREF(s);
    Py_DECREF(r);
    return out;
}

}  // namespace

TEST_CASE("virtualenv: pyvenv.cfg says the version and whether the system's packages stay",
          "[wsgi][virtualenv]") {
    TempDir d;
    d.write("pyvenv.cfg", "home = /usr/bin\nInclude-System-Site-Packages = True\n" +
                              ("version = " + embedded_xy() + ".0\n"));
    std::string err;
    auto v = wsgi::read_virtualenv(d.path + "//", embedded_xy() + ".9", err);
    REQUIRE(v);
    CHECK(v->dir == d.path);
    CHECK(v->python == d.path + "/bin/python3");
    CHECK(v->system_site);
    CHECK(v->version == embedded_xy() + ".0");  // another patch level is the same Python

    d.write("pyvenv.cfg", "include-system-site-packages = false\n");
    v = wsgi::read_virtualenv(d.path, "3.11.2", err);
    REQUIRE(v);
    CHECK_FALSE(v->system_site);
    CHECK(v->version.empty());
}

TEST_CASE("virtualenv: a folder without pyvenv.cfg is refused, naming the file",
          "[wsgi][virtualenv]") {
    TempDir d;
    std::string err;
    CHECK_FALSE(wsgi::read_virtualenv(d.path, "3.11.2", err));
    CHECK(err == "is not a virtualenv: there is no " + d.path +
                     "/pyvenv.cfg (make one with python3 -m venv)");
    CHECK_FALSE(wsgi::read_virtualenv(d.path + "/nowhere", "3.11.2", err));
}

TEST_CASE("virtualenv: a venv made for another Python is refused, naming both versions",
          "[wsgi][virtualenv]") {
    TempDir d;
    std::string err;
    d.write("pyvenv.cfg", "home = /usr/bin\nversion = 3.12.1\n");
    CHECK_FALSE(wsgi::read_virtualenv(d.path, "3.11.2", err));
    CHECK(err == "was made for Python 3.12.1 (" + d.path +
                     "/pyvenv.cfg), m0serve embeds Python 3.11.2: make the virtualenv with "
                     "/usr/bin/python3 -m venv");
    // virtualenv and uv write version_info; 3.1 is not 3.11.
    d.write("pyvenv.cfg", "version_info = 3.1.5.final.0\n");
    CHECK_FALSE(wsgi::read_virtualenv(d.path, "3.11.2", err));
    CHECK(err.find("3.1.5.final.0") != std::string::npos);
}

TEST_CASE("virtualenv: --virtualenv wins over VIRTUAL_ENV, which serves without it",
          "[wsgi][virtualenv]") {
    auto c = wsgi::choose_virtualenv("/srv/venv", "/home/me/venv");
    CHECK(c.dir == "/srv/venv");
    CHECK(c.from == "--virtualenv");
    CHECK(c.unused == "/home/me/venv");
    c = wsgi::choose_virtualenv("", "/home/me/venv");
    CHECK(c.dir == "/home/me/venv");
    CHECK(c.from == "VIRTUAL_ENV");
    c = wsgi::choose_virtualenv("", nullptr);
    CHECK(c.dir.empty());
    CHECK(wsgi::choose_virtualenv("", "").dir.empty());
    CHECK(wsgi::choose_virtualenv("/srv/venv", "/srv/venv").unused.empty());
}

TEST_CASE(
    "virtualenv: the interpreter starts as the venv's python3: sys.prefix is the venv, its "
    ".pth files run, the system's packages are left out as pyvenv.cfg says",
    "[wsgi][virtualenv][python]") {
    TempDir d;
    const std::string cfg = "home = /usr/bin\ninclude-system-site-packages = false\nversion = " +
                            wsgi::embedded_version() + "\n";
    std::string site = make_venv(d, cfg);
    // As an editable install does: a path line and an import line.
    d.write("lib/python" + embedded_xy() + "/site-packages/m0_test.pth",
            "pthmod\nimport sys; sys.m0_pth_ran = True\n");
    d.write("lib/python" + embedded_xy() + "/site-packages/pthmod/m0_venv_probe.py",
            "WHERE = 'venv'\n");
    std::string err;
    auto venv = wsgi::read_virtualenv(d.path, wsgi::embedded_version(), err);
    REQUIRE(venv);
    wsgi::PythonOptions o;
    o.package_dir = M0_SOURCE_DIR "/src/wsgi";
    o.virtualenv_python = venv->python;
    REQUIRE(wsgi::start(o, nullptr, err));
    CHECK(py_str("__import__('sys').prefix") == d.path);
    CHECK(py_str("__import__('sys').base_prefix") == "/usr");
    CHECK(py_str("__import__('sys').executable") == d.path + "/bin/python3");
    CHECK(py_str("getattr(__import__('sys'), 'm0_pth_ran', False)") == "True");
    CHECK(py_str("__import__('m0_venv_probe').WHERE") == "venv");
    const std::string count_site = "__import__('sys').path.count('" + site + "')";
    CHECK(py_str(count_site.c_str()) == "1");
    CHECK(py_str("[p for p in __import__('sys').path if 'dist-packages' in p]") == "[]");
    CHECK(py_str("__import__('django')") == "(raised)");  // a system package, not the venv's
    CHECK(py_str("__import__('m0').__name__") == "m0");   // the package dir is still first
    wsgi::release_main_gil();
    wsgi::stop();
}
