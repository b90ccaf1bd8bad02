// Busy work for the apps and the benchmarks: no clock call inside the loop.
#pragma once

#include <algorithm>
#include <cstdint>

#include "stats.hpp"

namespace cascade_bench {

// Each iteration is one step of a dependent multiply-add chain hidden from the optimizer by
// an empty asm, so its speed is set by the multiply latency rather than by issue width
// (steadier when a hyperthread sibling is busy). The chain continues from the previous call
// on this thread, so back-to-back short spins cannot overlap in the out-of-order core and
// their times add up. Not inlined, so every caller (calibration, tasks) runs the very same
// machine code.
inline thread_local std::uint64_t spin_chain = 1;
[[gnu::noinline]] inline void spin(std::uint64_t iters) {
    std::uint64_t x = spin_chain;
    for (std::uint64_t i = 0; i < iters; ++i) {
        x = x * 0x9E3779B97F4A7C15ULL + i;
        asm volatile("" : "+r"(x)::"memory");
    }
    spin_chain = x;
}

// Spin iterations per second on this core: the fastest of five runs of 2,000,000, timed on
// the steady clock.
inline double spin_iters_per_second() {
    double best = 0;
    for (int i = 0; i < 5; ++i) {
        const std::uint64_t iters = 2000000;
        const double t0 = now_seconds();
        spin(iters);
        best = std::max(best, double(iters) / (now_seconds() - t0));
    }
    return best;
}

}  // namespace cascade_bench
