// Returning free heap pages to the system after a join() (see detail/trim.hpp).
#include "cascade/core/detail/trim.hpp"

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <ctime>

#include "cascade/core/settings.hpp"

#if defined(__GLIBC__)
#include <fcntl.h>
#include <malloc.h>
#include <sys/mman.h>
#include <unistd.h>
#endif

namespace cascade::detail {

namespace {
// Unset CASCADE_TRIM: a trim may come once 50 times its last cost has passed, so returning
// memory takes at most about 2 % of the time. Its cost is its own CPU time (0.1-1 ms for a
// 50 MB heap) and the page faults of touching the pages it gave back again (1.3 us each on the
// development machine): a program that frees and reuses the same 20 MB at every step pays
// those at every step after a trim, 8 ms where the trim itself took 1 ms.
constexpr double kAdaptive = -1;
constexpr std::int64_t kShare = 50;

std::int64_t thread_cpu_ns() noexcept {
    timespec ts{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return std::int64_t(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

#if defined(__GLIBC__)
// Resident pages of the process (the second field of /proc/self/statm), -1 if unknown.
long resident_pages() noexcept {
    const int fd = ::open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    char buf[128];
    const ssize_t n = ::read(fd, buf, sizeof buf - 1);
    ::close(fd);
    if (n <= 0) return -1;
    buf[n] = '\0';
    char* end = nullptr;
    std::strtol(buf, &end, 10);  // size
    return end && *end == ' ' ? std::strtol(end, nullptr, 10) : -1;
}

// CPU time of one page fault on fresh memory (the kernel zeroes the page), measured once on
// 64 pages.
std::int64_t fault_ns() noexcept {
    static const std::int64_t ns = [] {
        constexpr std::int64_t kFallback = 500;
        const long page = ::sysconf(_SC_PAGESIZE);
        if (page <= 0) return kFallback;
        constexpr int kPages = 64;
        const std::size_t bytes = static_cast<std::size_t>(page) * kPages;
        void* m =
            ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (m == MAP_FAILED) return kFallback;
        const std::int64_t t0 = thread_cpu_ns();
        for (int i = 0; i < kPages; ++i)
            static_cast<volatile char*>(m)[static_cast<std::size_t>(i) * page] = 1;
        const std::int64_t per = (thread_cpu_ns() - t0) / kPages;
        ::munmap(m, bytes);
        return per > 0 ? per : kFallback;
    }();
    return ns;
}
#endif
}  // namespace

bool trim_free_memory() noexcept {
#if defined(__GLIBC__)
    using clock = std::chrono::steady_clock;
    static const double period = [] {
        try {
            if (!settings::raw("CASCADE_TRIM")) return kAdaptive;
            return settings::seconds("CASCADE_TRIM", 0, settings::kMaxSeconds);
        } catch (...) {
            return kAdaptive;  // reported by settings::validate() when the first pool starts
        }
    }();
    if (period == 0) return false;
    static std::atomic<std::int64_t> next{0};  // steady-clock ns from which a trim may run
    auto ns = [] {
        return std::chrono::duration_cast<std::chrono::nanoseconds>(clock::now().time_since_epoch())
            .count();
    };
    const std::int64_t now = ns();
    std::int64_t due = next.load(std::memory_order_relaxed);
    if (now < due) return false;
    // Claim this trim (another pool's join() may be here too); the real next time follows.
    const std::int64_t fixed = period > 0 ? static_cast<std::int64_t>(period * 1e9) : 0;
    if (!next.compare_exchange_strong(due, now + (fixed > 0 ? fixed : INT64_C(1) << 40),
                                      std::memory_order_relaxed))
        return false;
    if (fixed > 0) {
        malloc_trim(0);
        return true;
    }
    // Its cost: its CPU time (a trim descheduled on a busy node does not count its wait) and
    // the faults that touching the pages it returned will take.
    const long before = resident_pages();
    const std::int64_t cpu0 = thread_cpu_ns();
    malloc_trim(0);
    const std::int64_t cpu = thread_cpu_ns() - cpu0;
    const long after = resident_pages();
    const long returned = before > after && after >= 0 ? before - after : 0;
    next.store(ns() + kShare * (cpu + returned * fault_ns()), std::memory_order_relaxed);
    return true;
#else
    return false;
#endif
}

}  // namespace cascade::detail
