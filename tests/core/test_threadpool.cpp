#include <gtest/gtest.h>
#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "cascade/core.hpp"

using namespace std::chrono_literals;
using cascade::Threadpool;
using cascade::ThreadpoolOptions;

namespace {
void spin_for(std::chrono::microseconds d) {
    auto end = std::chrono::steady_clock::now() + d;
    while (std::chrono::steady_clock::now() < end) {
    }
}
double cpu_seconds() {
    rusage ru{};
    getrusage(RUSAGE_SELF, &ru);
    return static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
           1e-6 * static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec);
}
}  // namespace

TEST(Threadpool, RunsEveryInsertedClosure) {
    for (int n : {1, 2, 4, 8}) {
        Threadpool tp(n);
        std::atomic<int> count{0};
        for (int i = 0; i < 10000; ++i)
            tp.insert([&count] { count.fetch_add(1); });
        tp.join();
        EXPECT_EQ(count.load(), 10000) << n << " threads";
        EXPECT_EQ(tp.stats().tasks_run, 10000u);
    }
}

TEST(Threadpool, LargeClosuresAreBoxedAndFreed) {
    Threadpool tp(2);
    std::atomic<long> sum{0};
    for (int i = 0; i < 1000; ++i) {
        std::vector<long> big(100, i);  // not trivially copyable: goes through the boxed path
        tp.insert([&sum, big] { sum.fetch_add(big[99]); });
    }
    tp.join();
    EXPECT_EQ(sum.load(), 999L * 1000 / 2);
}

TEST(Threadpool, PrioritiesHonouredOnOneThread) {
    Threadpool tp(1, ThreadpoolOptions{.start = false});
    std::vector<int> order;
    for (int i = 0; i < 200; ++i) {
        int p = (i * 37) % 200;
        tp.insert([&order, p] { order.push_back(p); }, 0, static_cast<double>(p));
    }
    tp.start();
    tp.join();
    ASSERT_EQ(order.size(), 200u);
    for (std::size_t i = 0; i < order.size(); ++i)
        EXPECT_EQ(order[i], 199 - static_cast<int>(i));
}

TEST(Threadpool, BoundTasksNeverRunElsewhere) {
    constexpr int n = 4;
    Threadpool tp(n, ThreadpoolOptions{.start = false});
    std::atomic<int> wrong{0}, ran{0};
    // Everything is mapped to thread 0 with long tasks, so idle workers try hard to steal.
    for (int i = 0; i < 400; ++i) {
        tp.insert(
            [&tp, &wrong, &ran] {
                if (tp.current_thread() != 0) wrong.fetch_add(1);
                ran.fetch_add(1);
                spin_for(20us);
            },
            0, 0, /*bound=*/true);
    }
    tp.start();
    tp.join();
    EXPECT_EQ(ran.load(), 400);
    EXPECT_EQ(wrong.load(), 0);
    EXPECT_EQ(tp.stats().tasks_stolen, 0u);
    EXPECT_EQ(tp.stats(0).tasks_run, 400u);
}

TEST(Threadpool, IdleWorkersStealUnboundTasks) {
    constexpr int n = 4;
    Threadpool tp(n, ThreadpoolOptions{.start = false});
    std::vector<std::atomic<int>> per_thread(n);
    for (int i = 0; i < 400; ++i) {
        tp.insert(
            [&] {
                per_thread[tp.current_thread()].fetch_add(1);
                spin_for(100us);
            },
            0);
    }
    tp.start();
    tp.join();
    int others = 0;
    for (int t = 1; t < n; ++t)
        others += per_thread[t].load();
    EXPECT_GT(others, 0) << "no task mapped to thread 0 ran elsewhere";
    EXPECT_GT(tp.stats().tasks_stolen, 0u);
    EXPECT_EQ(per_thread[0].load() + others, 400);
}

TEST(Threadpool, IdlePoolBacksOff) {
    Threadpool tp(4);
    std::this_thread::sleep_for(100ms);  // let the workers reach their sleeping state
    double c0 = cpu_seconds();
    auto t0 = std::chrono::steady_clock::now();
    std::this_thread::sleep_for(1s);
    double cpu = cpu_seconds() - c0;
    double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    tp.join();
    // Spinning workers would use ~2 cores here; a sleeping pool uses almost nothing.
    EXPECT_LT(cpu / wall, 0.05) << "idle pool used " << 100 * cpu / wall << "% of a core";
}

TEST(Threadpool, SleepingWorkersWakePromptly) {
    Threadpool tp(2);
    std::this_thread::sleep_for(200ms);  // workers are asleep in the kernel now
    std::atomic<bool> ran{false};
    auto t0 = std::chrono::steady_clock::now();
    tp.insert([&ran] { ran.store(true); }, 1);
    while (!ran.load() && std::chrono::steady_clock::now() - t0 < 5s)
        std::this_thread::yield();
    auto latency = std::chrono::steady_clock::now() - t0;
    tp.join();
    ASSERT_TRUE(ran.load());
    // The sleep timeout (a safety net) is 1 s: a lost wake-up would show up as ~1 s.
    EXPECT_LT(latency, 250ms);
}

TEST(Threadpool, CanBeRestartedAfterJoin) {
    Threadpool tp(2);
    for (int round = 0; round < 3; ++round) {
        std::atomic<int> c{0};
        for (int i = 0; i < 100; ++i)
            tp.insert([&c] { c.fetch_add(1); });
        tp.join();
        EXPECT_EQ(c.load(), 100);
        tp.start();
    }
    tp.join();
}

// Work held outside the workers (a device task in flight) keeps the pool from being idle:
// join() returns only after the last hold is released, from another thread.
TEST(Threadpool, JoinWaitsForWorkHeldOutsideTheWorkers) {
    Threadpool tp(2);
    std::atomic<bool> released{false};
    tp.hold_external_work();
    tp.hold_external_work();
    EXPECT_FALSE(tp.idle());
    std::thread outside([&] {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        tp.release_external_work();
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
        released = true;
        tp.release_external_work();
    });
    tp.join();
    EXPECT_TRUE(released.load());
    outside.join();
    EXPECT_TRUE(tp.idle());
    tp.join();  // nothing held: returns at once
}

// An ExternalScope holds the pool's epoch open on the thread that runs it and marks that
// thread (only that one, only for that pool) as running the pool's work.
TEST(Threadpool, ExternalScopeHoldsTheEpochAndMarksItsThread) {
    Threadpool tp(2);
    Threadpool other(1);
    EXPECT_FALSE(tp.in_external_scope());
    std::atomic<bool> inside{false};
    std::atomic<bool> done{false};
    std::atomic<bool> marked{false};
    std::atomic<bool> other_marked{true};
    std::thread outside([&] {
        Threadpool::ExternalScope scope(tp);
        inside = true;
        marked = tp.in_external_scope();
        other_marked = other.in_external_scope();
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
        done = true;
    });
    while (!inside.load())
        std::this_thread::yield();
    EXPECT_FALSE(tp.idle());
    EXPECT_FALSE(tp.in_external_scope());  // not this thread
    tp.join();
    EXPECT_TRUE(done.load());
    outside.join();
    EXPECT_TRUE(marked.load());
    EXPECT_FALSE(other_marked.load());
    EXPECT_TRUE(tp.idle());
    other.join();
}

// The idle hook: called once per idle stretch after a task (and once per worker when
// installed), never by a worker that merely woke from its 1 s sleep; a call owed keeps the
// pool busy, so join() returns only after it (a hook that sends a message must do so inside
// the epoch its rank is completing, not after the rank reported itself idle).
TEST(Threadpool, IdleHookCallsOwedAreMadeBeforeJoinReturnsAndNeverSpontaneously) {
    struct Slow : cascade::IdleHook {
        std::atomic<int> calls{0};
        long on_idle(Threadpool&, int) override {
            std::this_thread::sleep_for(30ms);  // a worker slow to wake, or a slow hook
            calls.fetch_add(1);
            return 0;
        }
    } hook;
    Threadpool tp(2);
    tp.join();
    tp.start();
    tp.set_idle_hook(&hook);
    EXPECT_FALSE(tp.idle());  // both workers owe the new hook a call
    tp.join();
    EXPECT_EQ(hook.calls.load(), 2);
    EXPECT_TRUE(tp.idle());
    std::this_thread::sleep_for(1300ms);  // past the workers' sleep timeout
    EXPECT_EQ(hook.calls.load(), 2) << "a worker called the hook without having run a task";
    tp.start();
    tp.insert([] {}, 0);
    tp.join();
    EXPECT_GE(hook.calls.load(), 3);  // the worker that ran it, before join() returned
    tp.set_idle_hook(nullptr);
    tp.join();
}

TEST(Threadpool, TasksInsertTasks) {
    Threadpool tp(3);
    std::atomic<int> count{0};
    std::function<void(int)> spawn = [&](int depth) {
        count.fetch_add(1);
        if (depth < 12) {
            tp.insert([&spawn, depth] { spawn(depth + 1); });
            tp.insert([&spawn, depth] { spawn(depth + 1); });
        }
    };
    tp.insert([&spawn] { spawn(0); });
    tp.join();
    EXPECT_EQ(count.load(), (1 << 13) - 1);
}

TEST(Threadpool, RejectsBadArguments) {
    EXPECT_THROW(Threadpool(0), cascade::UsageError);
    Threadpool tp(2);
    EXPECT_THROW(tp.insert([] {}, 2), cascade::UsageError);
    EXPECT_THROW(tp.insert([] {}, 7, 1.0, true), cascade::UsageError);
    tp.join();
}

TEST(Threadpool, ManyOutsideThreadsInsertConcurrently) {
    // More inserting threads than inbox lanes: the others take the locked path. Some
    // threads end while others start, so lanes change hands.
    Threadpool tp(2);
    std::atomic<int> count{0};
    constexpr int kThreads = 3 * cascade::detail::Inbox::kLanes, kEach = 3000;
    std::vector<std::thread> ts;
    for (int i = 0; i < kThreads; ++i) {
        ts.emplace_back([&tp, &count] {
            for (int k = 0; k < kEach; ++k)
                tp.insert([&count] { count.fetch_add(1, std::memory_order_relaxed); }, k % 2);
        });
        if (i % 3 == 2) ts[static_cast<std::size_t>(i - 2)].join();
    }
    for (int i = 0; i < kThreads; ++i)
        if (ts[static_cast<std::size_t>(i)].joinable()) ts[static_cast<std::size_t>(i)].join();
    tp.join();
    EXPECT_EQ(count.load(), kThreads * kEach);
}

TEST(Threadpool, SleepingWorkersWakeForEachOutsideInsertion) {
    // Each insertion finds the workers asleep again: every one must wake them.
    Threadpool tp(2);
    for (int round = 0; round < 5; ++round) {
        std::this_thread::sleep_for(150ms);
        std::atomic<bool> ran{false};
        const auto t0 = std::chrono::steady_clock::now();
        tp.insert([&ran] { ran.store(true); }, round % 2);
        while (!ran.load() && std::chrono::steady_clock::now() - t0 < 5s)
            std::this_thread::yield();
        ASSERT_TRUE(ran.load());
        EXPECT_LT(std::chrono::steady_clock::now() - t0, 250ms) << "round " << round;
    }
    tp.join();
}

TEST(Threadpool, WorkersStayAcrossJoins) {
    // join() leaves the workers asleep instead of ending them: the same threads run every
    // round, and a task queued after a join runs without another one.
    Threadpool tp(1);
    std::thread::id first;
    tp.insert([&first] { first = std::this_thread::get_id(); });
    tp.join();
    for (int round = 0; round < 3; ++round) {
        std::atomic<bool> same{false}, ran{false};
        tp.insert([&] {
            same.store(std::this_thread::get_id() == first);
            ran.store(true);
        });
        const auto t0 = std::chrono::steady_clock::now();
        while (!ran.load() && std::chrono::steady_clock::now() - t0 < 5s)
            std::this_thread::yield();
        EXPECT_TRUE(ran.load()) << "round " << round;
        EXPECT_TRUE(same.load()) << "round " << round;
        tp.join();
    }
}

TEST(Threadpool, ReportsTheInboxSegmentsItKeeps) {
    // Tasks queued from outside the pool fill inbox segments. Once they ran, each inbox keeps
    // the segments it emptied (all but the one it read last) for the next seeding, and a
    // smaller seeding keeps no fewer; a destroyed pool leaves them to the process-wide cache,
    // which a new pool draws from.
    using cascade::detail::Inbox;
    constexpr std::size_t kSeg = Inbox::segment_bytes();
    constexpr int kSegments = 10;  // per worker, in the first seeding
    std::atomic<int> count{0};
    const auto seed = [&count](Threadpool& tp, int per_worker) {
        std::thread outside([&] {
            for (int i = 0; i < 2 * per_worker; ++i)
                tp.insert([&count] { count.fetch_add(1, std::memory_order_relaxed); }, i % 2);
        });
        outside.join();
    };
    ThreadpoolOptions opts;
    opts.start = false;
    auto tp = std::make_unique<Threadpool>(2, opts);
    EXPECT_EQ(tp->stats().kept_inbox_bytes, 0u);
    seed(*tp, kSegments * static_cast<int>(Inbox::kSegment));
    EXPECT_EQ(tp->stats().kept_inbox_bytes, 0u);  // not started: every segment still holds tasks
    tp->join();
    const std::size_t kept = tp->stats().kept_inbox_bytes;
    EXPECT_EQ(kept, 2 * (kSegments - 1) * kSeg);
    EXPECT_EQ(kept % kSeg, 0u);
    seed(*tp, 2 * static_cast<int>(Inbox::kSegment));  // a smaller backlog, workers running
    tp->join();
    EXPECT_EQ(tp->stats().kept_inbox_bytes, kept);
    EXPECT_EQ(count.load(), 2 * (kSegments + 2) * static_cast<int>(Inbox::kSegment));

    const std::size_t cached_before = Threadpool::cached_inbox_bytes();
    EXPECT_EQ(cached_before % kSeg, 0u);
    tp.reset();  // the kept segments and the one each inbox read last
    const std::size_t cached = Threadpool::cached_inbox_bytes();
    EXPECT_EQ(cached, std::min(cached_before + 2 * kSegments * kSeg, Inbox::kKeep * kSeg));

    Threadpool fresh(1);
    EXPECT_EQ(fresh.stats().kept_inbox_bytes, 0u);
    std::thread([&fresh] { fresh.insert([] {}); }).join();
    fresh.join();
    EXPECT_EQ(fresh.stats().kept_inbox_bytes, 0u);  // its one segment is the one it read last
    EXPECT_EQ(Threadpool::cached_inbox_bytes(), cached - kSeg);
}

TEST(Threadpool, AThreadThatSeedsFasterThanTheWorkersRunWaitsForThem) {
    // The main thread queues 200,000 tasks of about 1 us for one worker, about 30 times faster
    // than the worker runs them. Without waiting, the worker's inbox would hold almost all of
    // them at once and keep ~390 segments afterwards; the seeding thread waits instead, so the
    // inbox never holds much more than Inbox::kHigh tasks. The bound allows the mark to have
    // doubled twice (a worker descheduled for the whole patience on a loaded machine).
    using cascade::detail::Inbox;
    constexpr int kTasks = 200000;
    std::atomic<int> count{0};
    Threadpool tp(1);
    for (int i = 0; i < kTasks; ++i)
        tp.insert(
            [&count] {
                const auto until = std::chrono::steady_clock::now() + 1us;
                while (std::chrono::steady_clock::now() < until) {
                }
                count.fetch_add(1, std::memory_order_relaxed);
            },
            0);
    tp.join();
    EXPECT_EQ(count.load(), kTasks);
    EXPECT_GT(tp.stats().seeding_waits, 0u);
    EXPECT_LE(tp.stats().kept_inbox_bytes,
              (4 * Inbox::kHigh / Inbox::kSegment + 2) * Inbox::segment_bytes());
}

// Queues `tasks` tasks for worker 0 that each need a lock this thread holds until it has
// queued them all (the worker, blocked in the first, finishes none meanwhile), then joins.
static void seed_behind_a_lock(Threadpool& tp, int tasks, std::atomic<int>& count) {
    std::mutex m;
    {
        std::lock_guard<std::mutex> g(m);
        for (int i = 0; i < tasks; ++i)
            tp.insert(
                [&] {
                    std::lock_guard<std::mutex> inner(m);
                    count.fetch_add(1, std::memory_order_relaxed);
                },
                0);
    }
    tp.join();
}

TEST(Threadpool, ASeedingThreadStopsWaitingForWorkersThatWaitForIt) {
    // The tasks need a lock the seeding thread holds until it has queued them all: waiting
    // for the worker to take them would never end. The seeding thread stops waiting once the
    // worker makes no progress (and again at each doubled mark), so this returns.
    using cascade::detail::Inbox;
    constexpr int kTasks = static_cast<int>(3 * Inbox::kHigh);
    std::atomic<int> count{0};
    Threadpool tp(1);
    seed_behind_a_lock(tp, kTasks, count);
    EXPECT_EQ(count.load(), kTasks);
    EXPECT_GE(tp.stats().seeding_waits_abandoned, 1u);
}

TEST(Threadpool, ARunningPoolsInboxKeepsOnlyTheSeedingBacklogsSegments) {
    // A backlog far above the seeding wait's (the workers blocked, the waits abandoned) runs
    // with more segments than the wait allows: a running pool keeps only kKeepRunning of them
    // for later seedings and frees the rest. Queued before start(), the same backlog keeps
    // them all (the next graph seeded before start() is as big).
    using cascade::detail::Inbox;
    constexpr std::size_t kSeg = Inbox::segment_bytes();
    constexpr int kSegments = 3 * static_cast<int>(Inbox::kKeepRunning);
    constexpr int kTasks = kSegments * static_cast<int>(Inbox::kSegment);
    std::atomic<int> count{0};
    {
        Threadpool tp(1);
        seed_behind_a_lock(tp, kTasks, count);
        EXPECT_GE(tp.stats().seeding_waits_abandoned, 1u);
        EXPECT_GT(tp.stats().kept_inbox_bytes, 0u);
        EXPECT_LE(tp.stats().kept_inbox_bytes, Inbox::kKeepRunning * kSeg);
    }
    ThreadpoolOptions opts;
    opts.start = false;
    Threadpool before(1, opts);
    for (int i = 0; i < kTasks; ++i)
        before.insert([&] { count.fetch_add(1, std::memory_order_relaxed); }, 0);
    before.join();
    EXPECT_EQ(before.stats().kept_inbox_bytes,
              (kSegments - 1) * kSeg);  // all but the one read last
    EXPECT_EQ(count.load(), 2 * kTasks);
}

TEST(Threadpool, TasksQueuedBeforeStartNeverMakeTheSeedingThreadWait) {
    // Before start() no worker takes anything: the seeding thread must not wait at all.
    using cascade::detail::Inbox;
    constexpr int kTasks = static_cast<int>(4 * Inbox::kHigh);
    std::atomic<int> count{0};
    ThreadpoolOptions opts;
    opts.start = false;
    Threadpool tp(2, opts);
    for (int i = 0; i < kTasks; ++i)
        tp.insert([&count] { count.fetch_add(1, std::memory_order_relaxed); }, i % 2);
    EXPECT_EQ(tp.stats().seeding_waits, 0u);
    EXPECT_EQ(count.load(), 0);
    tp.join();
    EXPECT_EQ(count.load(), kTasks);
}

#if defined(__GLIBC__) && !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
namespace {
double resident_mb() {
    std::FILE* f = std::fopen("/proc/self/status", "r");
    char line[256];
    double kb = 0;
    while (f && std::fgets(line, sizeof line, f))
        if (std::sscanf(line, "VmRSS: %lf", &kb) == 1) break;
    if (f) std::fclose(f);
    return kb / 1024;
}
}  // namespace

TEST(Threadpool, JoinReturnsFreeHeapPagesToTheSystem) {
    // 96 MB of small blocks freed, except the last one, which keeps the allocator from giving
    // the top of its heap back by itself: the pages stay resident until a join() trims.
    Threadpool tp(1);
    std::vector<char*> blocks(96 * 1024);
    for (auto& b : blocks) {
        b = static_cast<char*>(std::malloc(1000));
        std::memset(b, 1, 1000);
    }
    for (std::size_t i = 0; i + 1 < blocks.size(); ++i)
        std::free(blocks[i]);
    const double before = resident_mb();
    tp.insert([] {});
    tp.join();  // the first join of this process: CASCADE_TRIM unset allows a trim at once
    const double after = resident_mb();
    std::free(blocks.back());
    EXPECT_LT(after, before - 50) << "resident " << before << " MB before join(), " << after
                                  << " MB after";
}
#endif

// ThreadpoolOptions::joiner_works: the thread in join() is worker 0.
TEST(ThreadpoolJoinerWorks, APoolOfOneRunsEveryTaskOnTheJoiningThread) {
    Threadpool tp(1, ThreadpoolOptions{.name = "joiner", .joiner_works = true});
    const auto me = std::this_thread::get_id();
    std::atomic<int> count{0}, elsewhere{0}, not_worker0{0};
    // Tasks that queue more tasks, from the joining thread and from the tasks themselves.
    std::function<void(int)> spawn = [&](int depth) {
        count.fetch_add(1);
        if (std::this_thread::get_id() != me) elsewhere.fetch_add(1);
        if (tp.current_thread() != 0) not_worker0.fetch_add(1);
        if (depth > 0)
            for (int k = 0; k < 2; ++k)
                tp.insert([&spawn, depth] { spawn(depth - 1); });
    };
    for (int i = 0; i < 20000; ++i)  // past the inbox backlog at which a seeder would wait
        tp.insert([&] { spawn(0); });
    tp.insert([&] { spawn(8); });
    std::this_thread::sleep_for(5ms);
    EXPECT_EQ(count.load(), 0) << "worker 0's tasks run only inside join()";
    tp.join();
    EXPECT_EQ(count.load(), 20000 + 511);
    EXPECT_EQ(elsewhere.load(), 0);
    EXPECT_EQ(not_worker0.load(), 0);
    EXPECT_EQ(tp.current_thread(), -1) << "outside its tasks the joining thread is no worker";
    // Later epochs: tasks queued after join() run at the next join().
    tp.insert([&] { count.fetch_add(1); });
    tp.join();
    EXPECT_EQ(count.load(), 20000 + 512);
    EXPECT_EQ(tp.stats().tasks_run, 20000u + 512u);
}

TEST(ThreadpoolJoinerWorks, OtherWorkersStealFromTheJoiner) {
    Threadpool tp(2, ThreadpoolOptions{.name = "joiner2", .joiner_works = true});
    const auto me = std::this_thread::get_id();
    std::atomic<int> on_joiner{0}, on_other{0};
    for (int i = 0; i < 2000; ++i)
        tp.insert(
            [&] {
                spin_for(20us);
                (std::this_thread::get_id() == me ? on_joiner : on_other).fetch_add(1);
            },
            0);  // all on worker 0's queue: the other worker steals
    tp.join();
    EXPECT_EQ(on_joiner.load() + on_other.load(), 2000);
    EXPECT_GT(on_other.load(), 0);
    EXPECT_GT(on_joiner.load(), 0);
}

TEST(ThreadpoolJoinerWorks, ATaskErrorIsRethrownByJoin) {
    Threadpool tp(1, ThreadpoolOptions{.name = "joiner", .joiner_works = true});
    std::atomic<int> ran{0};
    tp.insert([&] { ran.fetch_add(1); });
    tp.insert([] { throw std::runtime_error("bad tile"); });
    try {
        tp.join();
        FAIL() << "join() did not rethrow";
    } catch (const cascade::TaskError& e) {
        EXPECT_NE(std::string(e.what()).find("bad tile"), std::string::npos) << e.what();
    }
    EXPECT_EQ(ran.load(), 1);
    tp.insert([&] { ran.fetch_add(1); });  // the pool is usable afterwards
    tp.join();
    EXPECT_EQ(ran.load(), 2);
}

TEST(ThreadpoolJoinerWorks, TasksQueuedFromAnotherThreadWakeTheJoiner) {
    Threadpool tp(1, ThreadpoolOptions{.name = "joiner", .joiner_works = true});
    std::atomic<int> ran{0};
    tp.hold_external_work();  // the pool is busy until the feeder is done
    std::thread feeder([&] {
        for (int i = 0; i < 50; ++i) {
            std::this_thread::sleep_for(200us);  // the joiner naps in between
            tp.insert([&] { ran.fetch_add(1); });
        }
        tp.release_external_work();
    });
    tp.join();
    feeder.join();
    EXPECT_EQ(ran.load(), 50);
}
