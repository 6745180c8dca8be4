// The /metrics text: the Prometheus exposition of the counters.
#include <catch2/catch.hpp>
#include <string>

#include "server/metrics_text.hpp"

using namespace m0;

TEST_CASE("metrics: each pool's queue, refusals, skipped jobs and queue wait are rendered",
          "[pool][metrics]") {
    Pool pool("wsgi", 0, 1);
    CancelBoard board;
    REQUIRE(pool.submit([](size_t) {}, board.arm({1, 1})) == Admission::queued);
    CHECK(pool.submit([](size_t) {}) == Admission::full);
    board.cancel({1, 1});
    CHECK_FALSE(pool.run_next());
    REQUIRE(pool.submit([](size_t) {}) == Admission::queued);
    REQUIRE(pool.run_next());
    Metrics m;
    const std::string text = server::render_metrics(m, {&pool}, nullptr);
    CHECK(text.find("\nm0_pool_queued_jobs{pool=\"wsgi\"} 0\n") != std::string::npos);
    CHECK(text.find("\nm0_pool_rejected_total{pool=\"wsgi\"} 1\n") != std::string::npos);
    CHECK(text.find("\nm0_pool_skipped_total{pool=\"wsgi\"} 1\n") != std::string::npos);
    CHECK(text.find("# TYPE m0_pool_queue_wait_seconds summary\n") != std::string::npos);
    CHECK(text.find("\nm0_pool_queue_wait_seconds_sum{pool=\"wsgi\"} ") != std::string::npos);
    CHECK(text.find("\nm0_pool_queue_wait_seconds_count{pool=\"wsgi\"} 1\n") != std::string::npos);
}
