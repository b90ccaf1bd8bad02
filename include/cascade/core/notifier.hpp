// Notifier: lets idle workers sleep in the kernel and be woken one at a time.
//
// Protocol (no lost wake-ups): a worker calls prepare_wait(), re-checks every queue it may
// take work from, then commit_wait() or cancel_wait(). A producer pushes its task, calls
// publish_barrier(), then reads sleeping() and calls notify(). The barrier pair makes either
// the worker see the task on its re-check or the producer see the worker asleep. Where
// Linux offers it (membarrier, private expedited), the pair is asymmetric: the worker about
// to sleep, which is rare, issues a process-wide barrier, and the producer, on every push,
// needs only a compiler barrier. Elsewhere both sides use sequentially consistent fences.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>

namespace cascade {

/// Sleep and wake-up of idle workers without lost wake-ups (see the top of this file). Each
/// worker w uses its own slot; every member is thread-safe.
class Notifier {
  public:
    /// A notifier for workers 0 .. n-1.
    explicit Notifier(int n);

    /// Worker w is about to sleep: marks it sleeping and returns the epoch to pass to
    /// commit_wait. The worker must then re-check its queues.
    std::uint32_t prepare_wait(int w) noexcept;
    /// Worker w found work on its re-check: leaves the sleeping state without sleeping.
    void cancel_wait(int w) noexcept;
    /// Sleeps until notified (since prepare_wait returned `epoch`) or `timeout_us`
    /// microseconds elapsed (< 0: no limit); always leaves the sleeping state.
    void commit_wait(int w, std::uint32_t epoch, long timeout_us) noexcept;

    /// Wakes worker w if it is asleep; returns whether it was.
    bool notify(int w) noexcept;
    /// Wakes one sleeping worker other than `except` (-1: any); returns whether one was found.
    bool notify_one(int except = -1) noexcept;
    /// Wakes every worker (those asleep, and those between prepare_wait and commit_wait).
    void notify_all() noexcept;

    /// The producer's barrier between publishing work and reading sleeping() (see the top of
    /// this file).
    void publish_barrier() const noexcept {
        if (asymmetric_)
            std::atomic_signal_fence(std::memory_order_seq_cst);
        else
            std::atomic_thread_fence(std::memory_order_seq_cst);
    }
    /// Workers between prepare_wait and the end of commit_wait / cancel_wait (read after
    /// publish_barrier()).
    int sleeping() const noexcept { return n_sleeping_.load(std::memory_order_seq_cst); }
    /// sleeping() without ordering: a hint (e.g. to skip wake-ups nobody needs).
    int sleeping_relaxed() const noexcept { return n_sleeping_.load(std::memory_order_relaxed); }

    /// The same barrier pair for other sleepers (e.g. a thread waiting for workers to take
    /// its tasks): the sleeper announces itself, calls sleeper_barrier(), re-checks the
    /// condition and sleeps; the threads that change the condition, often, change it, call
    /// signaller_barrier() and read the announcement. With membarrier the sleeper's side is
    /// the process-wide barrier and the signallers' a compiler barrier.
    static void sleeper_barrier() noexcept;
    /// The signallers' side of sleeper_barrier() (a compiler barrier with membarrier).
    static void signaller_barrier() noexcept {
        if (asymmetric_anywhere_.load(std::memory_order_relaxed))
            std::atomic_signal_fence(std::memory_order_seq_cst);
        else
            std::atomic_thread_fence(std::memory_order_seq_cst);
    }

    /// Futex wait, also used by the Threadpool for its joiner: sleeps while `word` holds
    /// `expected`, until wake_all(word) or `timeout_us` microseconds (< 0: no limit). May
    /// return spuriously. Elsewhere than Linux: a short sleep.
    static void wait_on(std::atomic<std::uint32_t>& word, std::uint32_t expected,
                        long timeout_us) noexcept;
    /// Changes `word` and wakes every thread in wait_on(word, ...).
    static void wake_all(std::atomic<std::uint32_t>& word) noexcept;

  private:
    // Set by the first notifier that found membarrier (sleeper_barrier then uses it).
    static std::atomic<bool> asymmetric_anywhere_;
    struct alignas(64) Slot {
        std::atomic<std::uint32_t> epoch{0};
        std::atomic<bool> sleeping{false};
    };
    int n_;
    bool asymmetric_;
    std::unique_ptr<Slot[]> slots_;
    alignas(64) std::atomic<int> n_sleeping_{0};
};

}  // namespace cascade
