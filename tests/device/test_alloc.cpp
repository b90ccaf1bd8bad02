// Submitting and running device tasks allocates nothing per task once warm: task states,
// events, argument vectors and device memory come from pools. Counts every operator new of
// the process while tasks run.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <new>

#include "cascade/device/devices.hpp"

namespace {
std::atomic<long> g_news{0};
}

void* operator new(std::size_t n) {
    g_news.fetch_add(1, std::memory_order_relaxed);
    if (void* p = std::malloc(n ? n : 1)) return p;
    throw std::bad_alloc();
}
void operator delete(void* p) noexcept {
    std::free(p);
}
void operator delete(void* p, std::size_t) noexcept {
    std::free(p);
}

namespace {
CASCADE_KERNEL(bump, (kernel_global const int* a, kernel_global int* b, int n), {
    int i = kernel_global_id_x;
    if (i < n) b[i] += a[i];
});

long allocations_for(cascade::Devices& devs, int device, int tasks) {
    cascade::Data<int> a(devs, 64), b(devs, 64);
    const cascade::Launch l{.on = device, .threads = {64}};
    auto round = [&] {
        for (int i = 0; i < tasks; ++i)
            devs.submit(bump, cascade::read(a), cascade::readwrite(b), 64, l);
        devs.wait_all();
    };
    // Warm: the pools grow to the most task states alive at once (finished readers of a Data
    // are dropped when its list of readers has doubled).
    for (int r = 0; r < 6; ++r)
        round();
    const long before = g_news.load();
    round();
    return g_news.load() - before;
}
}  // namespace

TEST(DeviceAlloc, TasksAllocateNothingOnceWarm) {
    cascade::Threadpool tp(2);
    cascade::Devices devs(tp, {.sim = 1});
    const int tasks = 2000;
    for (int d = 0; d < devs.size(); ++d) {
        const long n = allocations_for(devs, d, tasks);
        // None per task (it took 4 per task before the pools): 0 on an idle machine; a loaded
        // one can still reach a new peak of tasks alive at once, and the pools grow to it.
        EXPECT_LT(n, tasks / 4) << devs.device(d).name() << ": " << n << " allocations for "
                                << tasks << " tasks";
    }
}
