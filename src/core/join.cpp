// Threadpool::join(): waiting until the pool (and, with a JoinHook, every rank) is done,
// the watchdog of a join that makes no progress, errors and incomplete graphs reported; and
// the JoinHook services a communicator uses.
#include <algorithm>
#include <chrono>
#include <sstream>
#include <thread>
#include <utility>

#include "cascade/core/detail/trim.hpp"
#include "cascade/core/detail/watchdog.hpp"
#include "cascade/core/errors.hpp"
#include "cascade/core/log.hpp"
#include "cascade/core/threadpool.hpp"

#if defined(__linux__)
#include <sys/prctl.h>
#endif

namespace cascade {

namespace {

// The join() watchdog warns about a busy worker this many times (one limit apart) before it
// takes the task for one that never returns.
constexpr int kBusyWarnings = 3;

// join() with a communicator: after the last activity poll hot for kHotWindow (only while
// this pool is idle), then yielding until kPollWindow (kWaitingPollWindow while this pool has
// no work and waits for other ranks), then nap. A rank that waits for others takes no core
// from its own workers: it yields, and a nap would only add its length to the latency of the
// message it waits for (when ranks outnumber cores, every hop of the completion protocol).
constexpr auto kHotWindow = std::chrono::microseconds(10);
constexpr auto kPollWindow = std::chrono::microseconds(50);
constexpr auto kWaitingPollWindow = std::chrono::microseconds(300);
constexpr long kFirstNapUs = 10;
constexpr long kMaxNapUs = 500;
constexpr long kWaitingNapUs = 20;
// Tasks a joining worker 0 runs between two polls of the hook.
constexpr int kJoinerBatch = 16;

// Sets the calling thread's timer slack to 1 us for its lifetime (Linux), so short naps
// are short.
class TimerSlack {
  public:
    explicit TimerSlack(bool on) {
#if defined(__linux__)
        if (on) {
            old_ = prctl(PR_GET_TIMERSLACK, 0, 0, 0, 0);
            if (old_ > 0) prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0);
        }
#else
        (void)on;
#endif
    }
    ~TimerSlack() {
#if defined(__linux__)
        if (old_ > 0) prctl(PR_SET_TIMERSLACK, static_cast<unsigned long>(old_), 0, 0, 0);
#endif
    }
    TimerSlack(const TimerSlack&) = delete;
    TimerSlack& operator=(const TimerSlack&) = delete;

  private:
    long old_ = -1;
};

}  // namespace

void Threadpool::nap_as_joiner(std::uint32_t word, long timeout_us) {
    // Announce the nap, then re-check: a waker either sees the flag or we see its work.
    joiner_.sleeping.store(true, std::memory_order_seq_cst);
    const bool wake_now = (hook_ ? hook_->wants_progress() : locally_idle()) ||
                          (opts_.joiner_works && has_work_for(0));
    if (!wake_now) Notifier::wait_on(joiner_.word, word, timeout_us);
    joiner_.sleeping.store(false, std::memory_order_relaxed);
}

void Threadpool::join() {
    if (current_thread() >= 0)
        throw UsageError("Threadpool '" + opts_.name + "': join() called from one of its workers");
    if (!running_.load()) start();
    // Without a hook, the last worker to fall asleep wakes us. With one (communication to
    // drive) we poll: continuously while messages move and for a short window after, then
    // with growing naps (so a rank whose workers compute leaves them the core). Naps use a
    // 1 us timer slack: the default 50 us would add to every message's latency.
    TimerSlack slack(hook_ != nullptr);
    long nap_us = kFirstNapUs;
    auto last_activity = std::chrono::steady_clock::now();
    bool moved = false;  // active polls since the clock was last read
    detail::Watchdog watchdog(tasks_run());
    detail::HeldAfterFailure held(watchdog.limit_seconds());
    int busy_warnings = 0;  // consecutive "busy worker" warnings (reset when something moves)
    std::uint64_t runs_seen = 0;
    for (;;) {
        std::uint32_t word = joiner_.word.load(std::memory_order_seq_cst);
        // A joining worker 0 runs a few of its tasks between polls (the hook hands their
        // messages on after each, JoinHook::hand_on_queued).
        const bool worked = work_as_joiner(kJoinerBatch);
        PollResult r =
            hook_ ? hook_->poll(*this) : (locally_idle() ? PollResult::done : PollResult::idle);
        if (worked && r != PollResult::done) r = PollResult::active;
        if (r == PollResult::done) break;
        if (watchdog.enabled()) [[unlikely]] {
            if (watchdog.check(r == PollResult::active, [&] {
                    const std::uint64_t n = tasks_run();
                    if (n != runs_seen) busy_warnings = 0;
                    return runs_seen = n;
                })) {
                // A worker still busy: a long task, not a hang (the warning says so), unless
                // it stays so for kBusyWarnings limits more (a task that never returns).
                const int idle = static_cast<int>(static_cast<std::uint32_t>(idle_state_.load()));
                if (idle < n_ && busy_warnings++ < kBusyWarnings) {
                    char limit[32];
                    std::snprintf(limit, sizeof limit, "%g", watchdog.limit_seconds());
                    log::warn(
                        "watchdog: Threadpool '" + opts_.name + "': " + std::to_string(n_ - idle) +
                        " worker(s) busy with a task for more "
                        "than " +
                        limit + " s while nothing else moved (CASCADE_WATCHDOG=" + limit + ")");
                    watchdog_report(watchdog.quiet_seconds(), watchdog.limit_seconds());
                    watchdog.restart();
                } else {
                    watchdog_fire(watchdog.quiet_seconds(), watchdog.limit_seconds());
                }
            }
        }
        if (hook_ && error_.failed()) [[unlikely]]
            check_held_after_failure(held, watchdog.enabled(), r == PollResult::active);
        if (r == PollResult::active) {
            busy_warnings = 0;
            nap_us = kFirstNapUs;
            moved = true;  // the clock is read at the next quiet poll, not at every busy one
            continue;
        }
        if (hook_) {
            // Soon after activity more is likely (a reply, the next message of a burst): keep
            // polling. Hot only while our workers are idle (a spinning joiner would take half
            // of a busy worker's core); yielding otherwise, which costs a busy worker little.
            const auto now = std::chrono::steady_clock::now();
            if (std::exchange(moved, false)) last_activity = now;
            const auto quiet = now - last_activity;
            if (quiet < kHotWindow && r == PollResult::waiting) continue;
            if (quiet < (r == PollResult::waiting ? kWaitingPollWindow : kPollWindow)) {
                std::this_thread::yield();
                continue;
            }
        }
        nap_as_joiner(word, hook_ ? nap_us : 100000);
        if (hook_)
            nap_us =
                std::min<long>(nap_us * 2, r == PollResult::waiting ? kWaitingNapUs : kMaxNapUs);
    }
    // The workers stay: they back off and sleep until the next task or the destructor, so
    // that an iterative code joining every step does not pay for new threads each time.
    armed_ = false;

    if (std::exception_ptr err = error_.take()) std::rethrow_exception(err);
    detail::trim_free_memory();  // at most once per CASCADE_TRIM seconds

    // Unchecked, the pending count is only reported (verbosity > 0: as a warning; CASCADE_LOG
    // info or debug: as information).
    const log::Level report_level = opts_.verb > 0 ? log::Level::warn : log::Level::info;
    if (!checked_ && !log::enabled(report_level)) return;
    std::vector<std::string> names;
    if (const std::size_t total = taskflows_.pending(names); total > 0) {
        std::ostringstream os;
        os << rank_prefix() << "Threadpool '" << opts_.name << "': join() ended with " << total
           << " task(s) whose promises were never all fulfilled; first: ";
        for (std::size_t i = 0; i < names.size(); ++i)
            os << (i ? ", " : "") << names[i];
        if (checked_) throw IncompleteGraphError(total, os.str());
        log::write(report_level, os.str());
    }
}

void Threadpool::check_held_after_failure(detail::HeldAfterFailure& held, bool may_end,
                                          bool moved) {
    // Stuck: no message moved at this poll, every worker idle and no task queued.
    const long ext = external_.load(std::memory_order_seq_cst);
    bool stuck =
        !moved && static_cast<std::uint32_t>(idle_state_.load()) == static_cast<std::uint32_t>(n_);
    for (int w = 0; stuck && w < n_; ++w)
        stuck = queues_[w].size() == 0;
    if (!held.check(ext, stuck)) return;
    const std::string what = "join(): a task failed while " + std::to_string(ext) +
                             " hold(s) of work outside the workers (device tasks, a Data request "
                             "not released) remained, and none ended for " +
                             std::to_string(static_cast<int>(held.limit_seconds())) +
                             " s: the epoch cannot end (the failed task's error is above)";
    watchdog_report(held.quiet_seconds(), held.limit_seconds(), "work held after a failure");
    if (!may_end) {  // CASCADE_WATCHDOG=0: told once, then join() waits on
        log::warn(rank_prefix() + what + "; CASCADE_WATCHDOG=0: waiting on");
        held.silence();
        return;
    }
    if (hook_) hook_->abort_job(rank_prefix() + what);
    JoinHook::abort_job_default(rank_prefix() + what);
}

void JoinHook::fail(Threadpool& tp, std::exception_ptr e) noexcept {
    tp.fail(std::move(e));
}

void JoinHook::unhook(Threadpool& tp) noexcept {
    tp.hook_ = nullptr;
}

void JoinHook::abort_job(const std::string& what) {
    abort_job_default(what);
}

void JoinHook::abort_job_default(const std::string& what) {
    log::error("fatal: " + what);
    std::_Exit(3);
}

}  // namespace cascade
