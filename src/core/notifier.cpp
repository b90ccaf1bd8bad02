#include "cascade/core/notifier.hpp"
#include "cascade/core/settings.hpp"

#include <climits>
#include <cstdlib>
#include <cstring>
#include <ctime>

#if defined(__linux__)
#include <linux/futex.h>
#include <linux/membarrier.h>
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

namespace {

// Registers this process for private expedited membarrier once; false where the kernel (or
// a seccomp filter) does not offer it.
bool membarrier_available() noexcept {
#if defined(__linux__) && defined(SYS_membarrier)
    static const bool ok = [] {
        bool wanted = true;
        try {
            wanted = settings::flag("CASCADE_MEMBARRIER", true);
        } catch (...) {  // a bad value: settings::validate() reports it when a pool starts
        }
        if (!wanted) return false;
        const long cmds = syscall(SYS_membarrier, MEMBARRIER_CMD_QUERY, 0, 0);
        if (cmds < 0 || !(cmds & MEMBARRIER_CMD_PRIVATE_EXPEDITED) ||
            !(cmds & MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED))
            return false;
        if (syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0) != 0)
            return false;
        // The first call can fail in odd sandboxes: try one now.
        return syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0) == 0;
    }();
    return ok;
#else
    return false;
#endif
}

// A full barrier on every running thread of this process.
void heavy_barrier() noexcept {
#if defined(__linux__) && defined(SYS_membarrier)
    if (syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0) == 0) return;
#endif
    std::abort();  // registered and tried at start: cannot fail later
}

}  // namespace

std::atomic<bool> Notifier::asymmetric_anywhere_{false};

Notifier::Notifier(int n)
    : n_(n), asymmetric_(membarrier_available()), slots_(new Slot[n > 0 ? n : 1]) {
    if (asymmetric_) asymmetric_anywhere_.store(true, std::memory_order_relaxed);
}

void Notifier::sleeper_barrier() noexcept {
    // membarrier_available() is true for good once a notifier found it: signallers that
    // still read asymmetric_anywhere_ false use a fence, which pairs with either barrier.
    if (membarrier_available())
        heavy_barrier();
    else
        std::atomic_thread_fence(std::memory_order_seq_cst);
}

std::uint32_t Notifier::prepare_wait(int w) noexcept {
    std::uint32_t e = slots_[w].epoch.load(std::memory_order_seq_cst);
    slots_[w].sleeping.store(true, std::memory_order_seq_cst);
    n_sleeping_.fetch_add(1, std::memory_order_seq_cst);
    if (asymmetric_) heavy_barrier();
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
