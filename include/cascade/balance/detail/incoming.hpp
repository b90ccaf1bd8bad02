// Work a donor has sent to this rank and that has not arrived yet. A rank that asked and was
// given work asks again only once it came (the objects were seen here, or its load rose) or a
// while passed: otherwise it asks the next donor before the first one's objects land and
// collects the surplus of several.
#pragma once

#include <cstdint>

#include "cascade/trace/event.hpp"

namespace cascade::detail {

/// Work on its way to this rank (see the top of this file). Not thread-safe: the policy's
/// lock guards it.
class Incoming {
  public:
    /// A donor gave `amount` seconds of work in `objects` objects while this rank's load was
    /// `base` and Balancer::arrivals() was `arrived`.
    void expect(double amount, int objects, double base, std::uint64_t arrived) {
        amount_ = amount;
        base_ = base;
        until_ = arrived + std::uint64_t(objects > 0 ? objects : 0);
        since_ns_ = trace::now_ns();
    }
    /// Whether it is still on its way, now that this rank's load is `load` and
    /// Balancer::arrivals() is `arrived`: until the objects were seen here, the load rose by
    /// half of it, or `timeout_s` passed.
    bool pending(double load, std::uint64_t arrived, double timeout_s) {
        if (amount_ > 0 && (arrived >= until_ || load >= base_ + amount_ / 2 ||
                            double(trace::now_ns() - since_ns_) * 1e-9 > timeout_s))
            amount_ = 0;
        return amount_ > 0;
    }

  private:
    double amount_ = 0, base_ = 0;
    std::uint64_t until_ = 0;
    std::int64_t since_ns_ = 0;
};

}  // namespace cascade::detail
