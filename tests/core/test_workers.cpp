// Default worker counts and worker pinning.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <mutex>
#include <set>
#include <vector>

#include "cascade/core/errors.hpp"
#include "cascade/core/threadpool.hpp"
#include "cascade/core/workers.hpp"

#if defined(__linux__)
#include <sched.h>
#endif

TEST(Workers, DefaultIsTheShareOfTheAffinityMask) {
    ::unsetenv("CASCADE_WORKERS");
    const int mask = static_cast<int>(cascade::allowed_cpus().size());
    ASSERT_GE(mask, 1);
    EXPECT_LE(mask, cascade::node_cpus());
    EXPECT_EQ(cascade::default_workers(1), mask);
    // Never below one, however many ranks share the node.
    EXPECT_EQ(cascade::default_workers(1000), mask < cascade::node_cpus() ? mask : 1);
    if (mask == cascade::node_cpus()) {
        EXPECT_EQ(cascade::default_workers(2), std::max(1, mask / 2));
    }
}

TEST(Workers, EnvironmentOverridesAndIsChecked) {
    ::setenv("CASCADE_WORKERS", "7", 1);
    EXPECT_EQ(cascade::default_workers(4), 7);
    ::setenv("CASCADE_WORKERS", "0", 1);
    EXPECT_THROW(cascade::default_workers(1), cascade::UsageError);
    ::setenv("CASCADE_WORKERS", "1e300", 1);
    EXPECT_THROW(cascade::default_workers(1), cascade::UsageError);
    ::unsetenv("CASCADE_WORKERS");
}

TEST(Workers, PinnedWorkersRunOnOneCpuEach) {
#if defined(__linux__)
    const std::vector<int> cpus = cascade::allowed_cpus();
    const int n = 3;  // more workers than CPUs is fine: they wrap around
    std::mutex m;
    std::vector<std::set<int>> seen(n);
    {
        cascade::ThreadpoolOptions o;
        o.pin_workers = 1;
        cascade::Threadpool tp(n, o);
        for (int i = 0; i < 30; ++i)
            tp.insert(
                [&, i] {
                    cpu_set_t set;
                    CPU_ZERO(&set);
                    ASSERT_EQ(sched_getaffinity(0, sizeof set, &set), 0);
                    std::set<int> mine;
                    for (int c = 0; c < CPU_SETSIZE; ++c)
                        if (CPU_ISSET(c, &set)) mine.insert(c);
                    std::lock_guard<std::mutex> g(m);
                    seen[static_cast<std::size_t>(tp.current_thread())] = mine;
                    (void)i;
                },
                i % n, 0.0, true);
        tp.join();
    }
    for (int w = 0; w < n; ++w) {
        ASSERT_EQ(seen[static_cast<std::size_t>(w)].size(), 1u) << "worker " << w;
        EXPECT_EQ(*seen[static_cast<std::size_t>(w)].begin(),
                  cpus[static_cast<std::size_t>(w) % cpus.size()]);
    }
#else
    GTEST_SKIP() << "pinning is Linux only";
#endif
}
