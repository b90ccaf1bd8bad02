// Default worker counts and worker pinning.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <mutex>
#include <set>
#include <vector>

#include "cascade/core/errors.hpp"
#include "cascade/core/join_hook.hpp"
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
        o.pin_workers = true;
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

TEST(Workers, UnboundRanksOfOneNodeStartPinningAtTheirOwnShare) {
    // Bound (a mask narrower than the node): every rank starts at its mask's first CPU.
    EXPECT_EQ(cascade::pin_offset(2, 8, 3, 2), 0);
    // Unbound: rank r of the node starts after the workers of ranks 0..r-1, modulo the mask.
    EXPECT_EQ(cascade::pin_offset(8, 8, 0, 2), 0);
    EXPECT_EQ(cascade::pin_offset(8, 8, 1, 2), 2);
    EXPECT_EQ(cascade::pin_offset(8, 8, 3, 2), 6);
    EXPECT_EQ(cascade::pin_offset(8, 8, 5, 2), 2);  // more workers than CPUs: wraps
    EXPECT_EQ(cascade::pin_offset(2, 2, 1, 1), 1);
    // Nonsense gives the unshifted start, never a negative or out-of-range one.
    EXPECT_EQ(cascade::pin_offset(0, 8, 1, 2), 0);
    EXPECT_EQ(cascade::pin_offset(8, 8, -1, 2), 0);
    EXPECT_EQ(cascade::pin_offset(8, 8, 1, 0), 0);
    EXPECT_EQ(cascade::pin_offset(4096, 4096, 1 << 30, 4096), 0);
}

// A pool whose hook says it is rank 1 of its node: unbound, its worker 0 is pinned one CPU
// further than rank 0's would be (with every rank starting at the first CPU, the workers of
// two unbound ranks shared it and a 2-rank run on 2 cores ran at half speed).
TEST(Workers, PinningStartsAtTheNodeRanksShare) {
#if defined(__linux__)
    struct SecondRankOfTheNode : cascade::JoinHook {
        void attach(cascade::Threadpool&) override {}
        cascade::PollResult poll(cascade::Threadpool& tp) override {
            return tp.idle() ? cascade::PollResult::done : cascade::PollResult::active;
        }
        bool wants_progress() const override { return false; }
        void detach(cascade::Threadpool&) noexcept override {}
        int node_rank() const noexcept override { return 1; }
    } hook;
    const std::vector<int> cpus = cascade::allowed_cpus();
    ::setenv("CASCADE_PIN_WORKERS", "1", 1);
    int cpu = -1;
    {
        cascade::Threadpool tp(1, &hook, 0, "second", false);
        tp.insert([&] { cpu = sched_getcpu(); }, 0, 0.0, true);
        tp.join();
    }
    ::unsetenv("CASCADE_PIN_WORKERS");
    const bool unbound = static_cast<int>(cpus.size()) == cascade::node_cpus();
    EXPECT_EQ(cpu, cpus[unbound ? 1 % cpus.size() : 0]);
#else
    GTEST_SKIP() << "pinning is Linux only";
#endif
}

// A joining worker 0 with work waiting for its hook after a task (wants_progress) lets the
// hook hand it on (hand_on_queued) and runs its next task without a poll; a hook that does
// not (the default) gets a poll after every such task.
namespace {
struct QueueingHook : cascade::JoinHook {
    explicit QueueingHook(bool hands_on) : hands_on(hands_on) {}
    void attach(cascade::Threadpool&) override {}
    cascade::PollResult poll(cascade::Threadpool& tp) override {
        ++polls;
        queued = false;  // a poll takes what was queued
        return tp.idle() ? cascade::PollResult::done : cascade::PollResult::active;
    }
    bool wants_progress() const override { return queued; }
    bool hand_on_queued() override {
        ++handed_on;
        if (!hands_on) return false;
        queued = false;
        return true;
    }
    void detach(cascade::Threadpool&) noexcept override {}
    const bool hands_on;
    bool queued = false;  // only the joining thread runs tasks and polls here
    int polls = 0, handed_on = 0;
};

// The polls each of `n` tasks saw when it ran; each task queues work for the hook.
std::vector<int> polls_seen_by_tasks(QueueingHook& hook, int n) {
    std::vector<int> seen;
    cascade::Threadpool tp(1, &hook, cascade::ThreadpoolOptions{.joiner_works = true});
    for (int i = 0; i < n; ++i)
        tp.insert(
            [&] {
                seen.push_back(hook.polls);
                hook.queued = true;
            },
            0);
    tp.join();
    return seen;
}
}  // namespace

TEST(JoinerWorks, HandsOnQueuedWorkBetweenTasksWithoutAPoll) {
    QueueingHook hook(true);
    const std::vector<int> seen = polls_seen_by_tasks(hook, 8);
    ASSERT_EQ(seen.size(), 8u);
    EXPECT_EQ(seen.front(), seen.back()) << "a poll between tasks of one batch";
    EXPECT_EQ(hook.handed_on, 8);
}

TEST(JoinerWorks, PollsAfterATaskWhenTheHookDoesNotHandOn) {
    QueueingHook hook(false);
    const std::vector<int> seen = polls_seen_by_tasks(hook, 8);
    ASSERT_EQ(seen.size(), 8u);
    for (std::size_t i = 1; i < seen.size(); ++i)
        EXPECT_GT(seen[i], seen[i - 1]) << "task " << i << " ran without a poll before it";
}
