// A test-and-test-and-set spinlock for short critical sections (queue push/pop, promise
// counters). Contention is spread over many locks, so the uncontended path is what matters.
#pragma once

#include <atomic>
#include <thread>

namespace cascade {

inline void cpu_relax() noexcept {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    asm volatile("yield" ::: "memory");
#endif
}

class Spinlock {
  public:
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
    bool try_lock() noexcept {
        return !locked_.load(std::memory_order_relaxed) &&
               !locked_.exchange(true, std::memory_order_acquire);
    }
    void unlock() noexcept { locked_.store(false, std::memory_order_release); }

  private:
    std::atomic<bool> locked_{false};
};

}  // namespace cascade
