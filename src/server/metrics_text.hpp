// The admin listener's GET /metrics: the counters in the Prometheus text
// exposition format 0.0.4. Loop thread (it reads atomics any thread bumps).
#pragma once
#include <string>
#include <vector>

#include "bus/channel.hpp"
#include "pool/metrics.hpp"
#include "pool/pool.hpp"

namespace m0::server {

std::string render_metrics(const Metrics& m, const std::vector<const Pool*>& pools,
                           const bus::Bus* bus);

}  // namespace m0::server
