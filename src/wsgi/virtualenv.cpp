#include "wsgi/virtualenv.hpp"

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <fstream>

namespace m0::wsgi {

namespace {

std::string trim(std::string_view s) {
    size_t b = s.find_first_not_of(" \t\r");
    if (b == std::string_view::npos) return "";
    size_t e = s.find_last_not_of(" \t\r");
    return std::string(s.substr(b, e - b + 1));
}

std::string lower(std::string s) {
    for (auto& c : s) c = static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
    return s;
}

// "3.11" of "3.11.2", "3.11.2.final.0" or "3.11".
std::string major_minor(std::string_view v) {
    size_t dot = v.find('.');
    if (dot == std::string_view::npos) return std::string(v);
    size_t second = v.find('.', dot + 1);
    return std::string(v.substr(0, second));
}

}  // namespace

std::optional<Virtualenv> read_virtualenv(const std::string& dir, std::string_view embedded,
                                          std::string& err) {
    Virtualenv v;
    v.dir = dir;
    while (v.dir.size() > 1 && v.dir.back() == '/') v.dir.pop_back();
    const std::string cfg = v.dir + "/pyvenv.cfg";
    std::ifstream f(cfg);
    if (!f) {
        err = "is not a virtualenv: there is no " + cfg + " (make one with python3 -m venv)";
        return std::nullopt;
    }
    // PEP 405: "key = value" lines; site.py reads them the same way, keys in
    // any case, and only "true" keeps the system's site-packages.
    std::string line;
    while (std::getline(f, line)) {
        size_t eq = line.find('=');
        if (eq == std::string::npos) continue;
        std::string key = lower(trim(std::string_view(line).substr(0, eq)));
        std::string value = trim(std::string_view(line).substr(eq + 1));
        if (key == "include-system-site-packages")
            v.system_site = lower(value) == "true";
        else if (key == "version" || (key == "version_info" && v.version.empty()))
            v.version = value;  // venv writes version; virtualenv and uv version_info
    }
    if (!v.version.empty() && major_minor(v.version) != major_minor(embedded)) {
        err = "was made for Python " + v.version + " (" + cfg + "), m0serve embeds Python " +
              std::string(embedded) + ": make the virtualenv with /usr/bin/python3 -m venv";
        return std::nullopt;
    }
    v.python = v.dir + "/bin/python3";
    return v;
}

std::string embedded_version() {
    std::string v = Py_GetVersion();  // "3.11.2 (main, ...) [GCC ...]"
    return v.substr(0, v.find(' '));
}

VirtualenvChoice choose_virtualenv(const std::string& flag, const char* env) {
    VirtualenvChoice c;
    std::string from_env = env ? env : "";
    if (!flag.empty()) {
        c.dir = flag;
        c.from = "--virtualenv";
        if (!from_env.empty() && from_env != flag) c.unused = from_env;
    } else if (!from_env.empty()) {
        c.dir = from_env;
        c.from = "VIRTUAL_ENV";
    }
    return c;
}

}  // namespace m0::wsgi
