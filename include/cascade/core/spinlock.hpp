// A test-and-test-and-set spinlock for short critical sections (queue push/pop, promise
// counters). Contention is spread over many locks, so the uncontended path is what matters.
#pragma once

#include <atomic>
#include <thread>

namespace cascade {

/// A hint to the CPU that the caller is spinning (pause on x86, yield on AArch64).
inline void cpu_relax() noexcept {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    asm volatile("yield" ::: "memory");
#endif
}

/// A test-and-test-and-set spinlock (see the top of this file); meets the Lockable
/// requirements (std::lock_guard works).
class Spinlock {
  public:
    /// Acquires the lock, spinning (and yielding after a while) until it is free.
    void lock() noexcept {
        for (int spins = 0;; ++spins) {
            if (!locked_.exchange(true, std::memory_order_acquire)) return;
            while (locked_.load(std::memory_order_relaxed)) {
                // With more threads than cores the holder may be descheduled: yield soon.
                if (++spins > 64)
                    std::this_thread::yield();
                else
                    cpu_relax();
            }
        }
    }
    /// Acquires the lock if it is free; returns whether it did. Never waits.
    bool try_lock() noexcept {
        return !locked_.load(std::memory_order_relaxed) &&
               !locked_.exchange(true, std::memory_order_acquire);
    }
    /// Releases the lock (held by the caller).
    void unlock() noexcept { locked_.store(false, std::memory_order_release); }

  private:
    std::atomic<bool> locked_{false};
};

}  // namespace cascade
