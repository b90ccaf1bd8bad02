// Time spent inside BLAS calls, per worker thread (each worker writes only its own cache
// line, so timing adds no shared atomics to the hot path). Read after join().
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <vector>

namespace cascade::apps::gemm {

class BlasClock {
  public:
    // Slot `threads` collects calls made outside the pool (there should be none).
    explicit BlasClock(int threads) : slots_(static_cast<std::size_t>(threads) + 1) {}

    template <class F>
    void time(int thread, F&& f) {
        const auto t0 = std::chrono::steady_clock::now();
        f();
        const auto t1 = std::chrono::steady_clock::now();
        Slot& s = slots_[thread >= 0 && static_cast<std::size_t>(thread) + 1 < slots_.size()
                             ? static_cast<std::size_t>(thread)
                             : slots_.size() - 1];
        s.seconds += std::chrono::duration<double>(t1 - t0).count();
        if (s.calls++ == 0) s.first = t0;
    }

    void reset() {
        for (Slot& s : slots_)
            s = Slot{};
    }
    double seconds() const {
        double t = 0;
        for (const Slot& s : slots_)
            t += s.seconds;
        return t;
    }
    // When the first BLAS call of any thread started (since the last reset), if any.
    std::optional<std::chrono::steady_clock::time_point> first_call() const {
        std::optional<std::chrono::steady_clock::time_point> t;
        for (const Slot& s : slots_)
            if (s.calls > 0 && (!t || s.first < *t)) t = s.first;
        return t;
    }
    std::uint64_t calls() const {
        std::uint64_t c = 0;
        for (const Slot& s : slots_)
            c += s.calls;
        return c;
    }

  private:
    struct alignas(64) Slot {
        double seconds = 0;
        std::uint64_t calls = 0;
        std::chrono::steady_clock::time_point first{};
    };
    std::vector<Slot> slots_;
};

}  // namespace cascade::apps::gemm
