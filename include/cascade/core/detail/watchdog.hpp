// detail::Watchdog: used by Threadpool::join(), on by default (CASCADE_WATCHDOG=<seconds>,
// default kDefaultWatchdogSeconds; 0 turns it off). It fires when, for that long, no task of
// the pool ran and no message moved: with every worker idle, join() then prints what the rank
// waits for (tasks missing promises, messages in flight, completion state) and ends the job
// non-zero; while a worker is busy (a task that runs longer than the limit) it prints a
// warning and waits another limit. The communicator's other waits (a blocking send, a get()
// on its thread, the last sends, the destructor) use the same limit.
#pragma once

#include <chrono>
#include <cstdint>

namespace cascade::detail {

inline constexpr double kDefaultWatchdogSeconds = 600;
// The limit from CASCADE_WATCHDOG in seconds (read once; unset or empty: the default; 0:
// off). Throws UsageError on a value that is not a non-negative number.
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

    // Starts a new quiet period now (after a warning).
    void restart() noexcept { last_ = Clock::now(); }

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

// After a task failed on a rank with a communicator, join() ends once this rank is idle, which
// it never is when the failed task held work outside the workers that only it would have
// released (Threadpool::hold_external_work: a device request it was to release). Nothing but
// the watchdog would end such a join(). HeldAfterFailure says when the holds stayed the same
// for kAbandonedSeconds (or the watchdog's limit when shorter) while every worker was idle
// and no task queued: join() then reports and ends the job with the task's error.
inline constexpr double kAbandonedSeconds = 10;

class HeldAfterFailure {
  public:
    using Clock = std::chrono::steady_clock;

    explicit HeldAfterFailure(double watchdog_seconds)
        : limit_s_(watchdog_seconds > 0 && watchdog_seconds < kAbandonedSeconds
                       ? watchdog_seconds
                       : kAbandonedSeconds) {}

    // Called on every poll of join() once a task failed: `held` the holds now, `stuck`
    // whether no message moved, every worker is idle and no task is queued. True once the
    // holds stayed the same and stuck for the limit.
    bool check(long held, bool stuck) {
        if (silent_) return false;
        const auto now = Clock::now();
        if (held == 0 || !stuck || held != held_) {
            held_ = held;
            since_ = now;
            return false;
        }
        return now - since_ >= std::chrono::duration<double>(limit_s_);
    }

    double limit_seconds() const noexcept { return limit_s_; }
    double quiet_seconds() const noexcept {
        return std::chrono::duration<double>(Clock::now() - since_).count();
    }
    // Reported once, not again (the watchdog is off: join() waits on).
    void silence() noexcept { silent_ = true; }

  private:
    bool silent_ = false;
    double limit_s_;
    long held_ = 0;
    Clock::time_point since_{};
};

}  // namespace cascade::detail
