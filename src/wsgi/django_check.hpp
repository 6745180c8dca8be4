// --check for a Django project: what importing the WSGI module leaves for
// later. Django imports the URLconf at the first request and runs its
// system checks only under manage.py, so a project whose urls.py does not
// import would pass a --check that imports the app alone; check_django()
// imports settings.ROOT_URLCONF and runs Django's own system checks
// (django.core.checks.run_checks, as `manage.py check` does: no database
// checks) in the embedded interpreter.
//
// Threads: the main thread, with the GIL held, after the apps are loaded
// (load_app) and before release_main_gil().
#pragma once
#include <string>

namespace m0::wsgi {

enum class DjangoCheck {
    not_django,  // no configured Django in the interpreter: nothing to check
    ok,          // the URLconf imports, no check of level ERROR or above
    failed,      // `err` says why, in one line
};

// Runs the checks; each warning Django reports (not silenced) is logged as
// a warning. `err`: one line when it returns failed.
DjangoCheck check_django(std::string& err);

}  // namespace m0::wsgi
