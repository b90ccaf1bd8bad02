// Returning free heap pages to the system after a join() (see detail/trim.hpp).
#include "cascade/core/detail/trim.hpp"

#include <atomic>
#include <chrono>
#include <cstdint>
#include <ctime>

#include "cascade/core/settings.hpp"

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace cascade::detail {

namespace {
// Unset CASCADE_TRIM: a trim may come once 100 times its own last duration has passed, so
// returning memory takes at most about 1 % of the time (a trim of a 50 MB heap: 0.5-1 ms).
constexpr double kAdaptive = -1;
constexpr std::int64_t kShare = 100;

std::int64_t thread_cpu_ns() noexcept {
    timespec ts{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return std::int64_t(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}
}  // namespace

bool trim_free_memory() noexcept {
#if defined(__GLIBC__)
    using clock = std::chrono::steady_clock;
    static const double period = [] {
        try {
            if (!settings::raw("CASCADE_TRIM")) return kAdaptive;
            return settings::seconds("CASCADE_TRIM", 0, settings::kMaxSeconds);
        } catch (...) {
            return kAdaptive;  // reported by settings::validate() when the first pool starts
        }
    }();
    if (period == 0) return false;
    static std::atomic<std::int64_t> next{0};  // steady-clock ns from which a trim may run
    auto ns = [] {
        return std::chrono::duration_cast<std::chrono::nanoseconds>(clock::now().time_since_epoch())
            .count();
    };
    const std::int64_t now = ns();
    std::int64_t due = next.load(std::memory_order_relaxed);
    if (now < due) return false;
    // Claim this trim (another pool's join() may be here too); the real next time follows.
    const std::int64_t fixed = period > 0 ? static_cast<std::int64_t>(period * 1e9) : 0;
    if (!next.compare_exchange_strong(due, now + (fixed > 0 ? fixed : INT64_C(1) << 40),
                                      std::memory_order_relaxed))
        return false;
    const std::int64_t cpu0 = thread_cpu_ns();
    malloc_trim(0);
    if (fixed == 0)  // its CPU time: a trim descheduled on a busy node does not count its wait
        next.store(ns() + kShare * (thread_cpu_ns() - cpu0), std::memory_order_relaxed);
    return true;
#else
    return false;
#endif
}

}  // namespace cascade::detail
