#include "cascade/trace/watchdog.hpp"

#include <cmath>
#include <cstdlib>
#include <string>

#include "cascade/core/errors.hpp"

namespace cascade::trace {

double watchdog_limit_from_env() {
    static const double limit = [] {
        const char* v = std::getenv("CASCADE_WATCHDOG");
        if (!v || !*v) return kDefaultWatchdogSeconds;
        char* end = nullptr;
        const double s = std::strtod(v, &end);
        if (*end != '\0' || !std::isfinite(s) || s < 0)
            throw UsageError(std::string("CASCADE_WATCHDOG='") + v +
                             "': expected a number of seconds (0: off)");
        return s;
    }();
    return limit;
}

}  // namespace cascade::trace
