// SIGTERM and SIGINT while the process starts (app/stop_signals.hpp), in a
// real child process forked by the test, with real signals.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include "app/stop_signals.hpp"

namespace {

// Runs `body` in a child; its wait status.
template <typename F>
int in_child(F body) {
    pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        m0::app::catch_stop_while_starting();
        ::_exit(body());
    }
    int status = 0;
    REQUIRE(::waitpid(pid, &status, 0) == pid);
    return status;
}

}  // namespace

TEST_CASE("a SIGTERM while starting is kept for the loop, the process goes on", "[app][signals]") {
    int status = in_child([] {
        if (m0::app::stop_while_starting() != 0) return 3;
        ::raise(SIGTERM);
        return m0::app::stop_while_starting() == SIGTERM ? 7 : 4;
    });
    INFO("status " << status);
    REQUIRE(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 7);
}

TEST_CASE("a second signal while starting ends the process at once: 0 for SIGTERM, 130 for SIGINT",
          "[app][signals]") {
    for (auto [sig, code] : {std::pair{SIGTERM, 0}, std::pair{SIGINT, 130}}) {
        int status = in_child([sig = sig] {
            ::raise(sig);
            ::raise(sig);
            return 7;  // not ended
        });
        INFO("signal " << sig << ", status " << status);
        REQUIRE(WIFEXITED(status));
        CHECK(WEXITSTATUS(status) == code);
    }
}
