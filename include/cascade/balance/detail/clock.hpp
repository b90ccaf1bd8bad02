// The balancing layer's clock: steady-clock nanoseconds, as the policies store times.
#pragma once

#include <chrono>
#include <cstdint>

namespace cascade::detail {

/// Now, in nanoseconds of std::chrono::steady_clock.
inline std::int64_t now_ns() noexcept {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
}

}  // namespace cascade::detail
