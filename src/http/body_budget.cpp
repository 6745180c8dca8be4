#include "http/body_budget.hpp"

namespace m0::http {

BodyCharge::~BodyCharge() {
    if (budget_) budget_->give(bytes_);
}

bool BodyCharge::reach(uint64_t n) {
    if (n <= bytes_) return true;
    if (!budget_->take(n - bytes_)) return false;
    bytes_ = n;
    return true;
}

}  // namespace m0::http
