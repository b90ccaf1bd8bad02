#include "cascade/core/detail/watchdog.hpp"

#include <cmath>
#include <cstdlib>
#include <string>

#include "cascade/core/errors.hpp"

namespace cascade::detail {

double watchdog_limit_from_env() {
    static const double limit = [] {
        const char* v = std::getenv("CASCADE_WATCHDOG");
        if (!v || !*v) return 0.0;
        char* end = nullptr;
        const double s = std::strtod(v, &end);
        if (*end != '\0' || !std::isfinite(s) || s < 0)
            throw UsageError(std::string("CASCADE_WATCHDOG='") + v +
                             "': expected a number of seconds (0: off)");
        return s;
    }();
    return limit;
}

}  // namespace cascade::detail
