// Doorbell: how the device runtime thread sleeps and is woken. Any thread rings; the runtime
// thread reads word(), looks for work, and sleeps on that word unless a ring came in between
// (a futex: no lost wake-up; a ring costs a system call only while the thread sleeps).
#pragma once

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <ctime>

namespace cascade::device::detail {

class Doorbell {
  public:
    /// The word to pass to sleep(): read it before looking for work.
    std::uint32_t word() const noexcept { return word_.load(std::memory_order_seq_cst); }
    /// Wakes the sleeper, or makes its next sleep(word) return at once.
    void ring() noexcept {
        word_.fetch_add(1, std::memory_order_seq_cst);
        if (sleeping_.load(std::memory_order_seq_cst))
            syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(&word_), FUTEX_WAKE_PRIVATE, 1,
                    nullptr, nullptr, 0);
    }
    /// Sleeps up to `ns` nanoseconds unless rung since word() returned `word`.
    void sleep(std::uint32_t word, long ns) noexcept {
        sleeping_.store(true, std::memory_order_seq_cst);
        if (word_.load(std::memory_order_seq_cst) == word) {
            timespec ts{ns / 1000000000L, ns % 1000000000L};
            syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(&word_), FUTEX_WAIT_PRIVATE, word,
                    &ts, nullptr, 0);
        }
        sleeping_.store(false, std::memory_order_relaxed);
    }

  private:
    std::atomic<std::uint32_t> word_{0};
    std::atomic<bool> sleeping_{false};
};

}  // namespace cascade::device::detail
