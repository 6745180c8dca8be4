// A replay paced to a reader, on the loop: what waits behind it, and the
// slow-reader bound it counts against. The hold loop's rig (test_hold_rig.hpp).
#include <sys/socket.h>

#include <catch2/catch.hpp>

#include "server/test_hold_rig.hpp"

using namespace m0;

using Rig = testing::HoldRig;

TEST_CASE(
    "hold pacing: while a replay is paced to a reader that stopped reading, the live events "
    "queued behind it count against twice --hold-buffer-limit, long before the drain timeout",
    "[hold][loop][limits][history]") {
    server::ServerConfig cfg;
    cfg.hold_buffer_limit = 64 * 1024;
    cfg.hold_drain_timeout = 60;  // only the bound on what waits can close it in time
    Rig rig(cfg, bus::BusOptions{.history = {.per_channel = 256}});
    const int small = 4096;
    REQUIRE(::setsockopt(rig.conn->server_fd, SOL_SOCKET, SO_SNDBUF, &small, sizeof small) == 0);
    // A replay of 512 KiB: the reader takes the head and the first of it,
    // then stops; the rest waits, paced, behind the limit.
    const std::string payload(8 * 1024, 'x');
    // A cursor of 0 is none: the hold starts after an event of its own.
    const uint64_t cursor = rig.bus.publish("c", "seen").id;
    for (int i = 0; i < 64; ++i) REQUIRE(rig.bus.publish("c", payload).ok());
    rig.hold("channel=c", std::to_string(cursor));
    std::string got;
    rig.read_until(": mojo hold", got);
    REQUIRE(
        rig.loop.run_until([&] { return rig.server->unsent(rig.slot) > cfg.hold_buffer_limit; }));
    CHECK(rig.server->unsent(rig.slot) <= 2 * cfg.hold_buffer_limit);  // paced, not piled up
    CHECK(rig.metrics.slow_readers_closed.load() == 0);
    // Live events queue behind the replay: past twice the limit of them, the
    // reader is slow, though its backlog stays where the pacing left it.
    for (int i = 0; i < 40 && rig.server->subscribed(rig.slot); ++i) {
        REQUIRE(rig.bus.publish("c", payload).ok());
        rig.server->on_bus_ready();
        rig.loop.run_once();
    }
    CHECK_FALSE(rig.server->subscribed(rig.slot));
    CHECK(rig.metrics.slow_readers_closed.load() == 1);
    // Its output stayed bounded; the retry hint closes it once it drains
    // (within --hold-drain-timeout).
    CHECK(rig.server->unsent(rig.slot) <= 2 * cfg.hold_buffer_limit);
}
