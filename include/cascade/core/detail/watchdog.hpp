// detail::Watchdog: used by Threadpool::join() when CASCADE_WATCHDOG=<seconds> is set. It
// fires when, for that long, no task of the pool ran and no message moved; join() then prints
// what the rank waits for (tasks missing promises, workers busy, messages in flight,
// completion state) and ends the job non-zero. A task that legitimately runs longer than the
// limit also fires it, so the limit must be generous (the tests use 60 s).
#pragma once

#include <chrono>
#include <cstdint>

namespace cascade::detail {

// The limit from CASCADE_WATCHDOG in seconds (read once; 0: off). Throws UsageError on a
// value that is not a non-negative number.
double watchdog_limit_from_env();

class Watchdog {
  public:
    using Clock = std::chrono::steady_clock;

    explicit Watchdog(std::uint64_t tasks_run, double limit_seconds = watchdog_limit_from_env())
        : limit_s_(limit_seconds),
          limit_(std::chrono::duration_cast<Clock::duration>(
              std::chrono::duration<double>(limit_seconds))),
          runs_(tasks_run),
          last_(Clock::now()) {}

    bool enabled() const noexcept { return limit_s_ > 0; }

    // Called on every poll of join(): `active` when a message moved; `runs()` reads the
    // pool's task count (only every few milliseconds). True when the limit is exceeded.
    template <class Runs>
    bool check(bool active, Runs&& runs) {
        const auto now = Clock::now();
        if (active) {
            last_ = now;
            return false;
        }
        if (now < next_check_) return false;
        next_check_ = now + std::chrono::milliseconds(20);
        const std::uint64_t r = runs();
        if (r != runs_) {
            runs_ = r;
            last_ = now;
            return false;
        }
        return now - last_ >= limit_;
    }

    double quiet_seconds() const noexcept {
        return std::chrono::duration<double>(Clock::now() - last_).count();
    }
    double limit_seconds() const noexcept { return limit_s_; }

  private:
    double limit_s_;
    Clock::duration limit_;
    std::uint64_t runs_;
    Clock::time_point last_;
    Clock::time_point next_check_{};
};

}  // namespace cascade::detail
