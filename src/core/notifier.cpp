#include "cascade/core/notifier.hpp"

#include <climits>
#include <ctime>

#if defined(__linux__)
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>
#else
#include <thread>
#endif

namespace cascade {

static_assert(sizeof(std::atomic<std::uint32_t>) == sizeof(std::uint32_t));

void Notifier::wait_on(std::atomic<std::uint32_t>& word, std::uint32_t expected,
                       long timeout_us) noexcept {
#if defined(__linux__)
    timespec ts{timeout_us / 1000000, (timeout_us % 1000000) * 1000};
    syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(&word), FUTEX_WAIT_PRIVATE, expected,
            timeout_us >= 0 ? &ts : nullptr, nullptr, 0);
#else
    if (word.load() == expected) std::this_thread::sleep_for(std::chrono::microseconds(50));
#endif
}

void Notifier::wake_all(std::atomic<std::uint32_t>& word) noexcept {
    word.fetch_add(1, std::memory_order_seq_cst);
#if defined(__linux__)
    syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(&word), FUTEX_WAKE_PRIVATE, INT_MAX,
            nullptr, nullptr, 0);
#endif
}

Notifier::Notifier(int n) : n_(n), slots_(new Slot[n > 0 ? n : 1]) {}

std::uint32_t Notifier::prepare_wait(int w) noexcept {
    std::uint32_t e = slots_[w].epoch.load(std::memory_order_seq_cst);
    slots_[w].sleeping.store(true, std::memory_order_seq_cst);
    n_sleeping_.fetch_add(1, std::memory_order_seq_cst);
    return e;
}

void Notifier::cancel_wait(int w) noexcept {
    slots_[w].sleeping.store(false, std::memory_order_seq_cst);
    n_sleeping_.fetch_sub(1, std::memory_order_seq_cst);
}

void Notifier::commit_wait(int w, std::uint32_t epoch, long timeout_us) noexcept {
    wait_on(slots_[w].epoch, epoch, timeout_us);
    cancel_wait(w);
}

bool Notifier::notify(int w) noexcept {
    if (!slots_[w].sleeping.load(std::memory_order_seq_cst)) return false;
    wake_all(slots_[w].epoch);
    return true;
}

bool Notifier::notify_one(int except) noexcept {
    for (int w = 0; w < n_; ++w)
        if (w != except && notify(w)) return true;
    return false;
}

void Notifier::notify_all() noexcept {
    for (int w = 0; w < n_; ++w)
        wake_all(slots_[w].epoch);
}

}  // namespace cascade
