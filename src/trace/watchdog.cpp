#include "cascade/trace/watchdog.hpp"

#include "cascade/core/settings.hpp"

namespace cascade::trace {

double watchdog_limit_from_env() {
    static const double limit = settings::seconds("CASCADE_WATCHDOG", 0.0, settings::kMaxSeconds);
    return limit;
}

}  // namespace cascade::trace
