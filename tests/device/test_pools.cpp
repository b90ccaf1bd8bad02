// The device runtime's pools on their own: host copies kept by size, events and task states
// reused, the runtime thread's doorbell.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <thread>
#include <vector>

#include "doorbell.hpp"
#include "event_pool.hpp"
#include "host_pool.hpp"
#include "task_pool.hpp"

using cascade::Event;
using cascade::device::detail::EventPool;
using cascade::device::detail::HostPool;
using cascade::device::detail::TaskState;
using cascade::device::detail::TaskStatePool;

TEST(DevicePools, HostCopiesAreKeptBySizeAndReused) {
    HostPool pool(true);
    void* a = pool.allocate(100, false);
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(a) % 64, 0u);
    std::memset(a, 0xff, 100);
    pool.deallocate(a, 100);
    EXPECT_EQ(pool.kept(), 128u);
    void* b = pool.allocate(120, true);  // the same rounded size: the kept one, zeroed
    EXPECT_EQ(b, a);
    EXPECT_EQ(pool.kept(), 0u);
    for (int i = 0; i < 120; ++i)
        ASSERT_EQ(static_cast<unsigned char*>(b)[i], 0);
    void* c = pool.allocate(1000, false);  // another size: a new one
    EXPECT_NE(c, b);
    pool.deallocate(b, 120);
    pool.deallocate(c, 1000);
    EXPECT_EQ(pool.kept(), 128u + 1024u);
}

TEST(DevicePools, HostPoolOffOrFullFreesAtOnce) {
    HostPool off(false);
    off.deallocate(off.allocate(64, false), 64);
    EXPECT_EQ(off.kept(), 0u);
    HostPool on(true);
    const std::size_t big = HostPool::kMaxBytes / 2 + 64;
    void* x = on.allocate(big, false);
    void* y = on.allocate(big, false);
    on.deallocate(x, big);
    on.deallocate(y, big);  // beyond kMaxBytes kept: freed
    EXPECT_EQ(on.kept(), big);
}

TEST(DevicePools, EventsAreReusedAfterTheirLastReference) {
    EventPool pool;
    int calls = 0;
    auto note = [](void* p, bool) { ++*static_cast<int*>(p); };
    Event* e = pool.take(note, &calls);
    EXPECT_FALSE(e->finished());
    ++e->refs;
    e->finish();
    EXPECT_EQ(calls, 2);  // before and after the state changes
    pool.unref(e);
    Event* other = pool.take(note, &calls);  // e still referenced: a new one
    EXPECT_NE(other, e);
    pool.unref(e);
    Event* again = pool.take(nullptr, nullptr);
    EXPECT_EQ(again, e);
    EXPECT_FALSE(again->finished());
    EXPECT_EQ(again->refs, 1);
    EXPECT_EQ(pool.made(), 2u);
}

TEST(DevicePools, TaskStatesComeBackFromAnyThread) {
    TaskStatePool pool(~std::uint64_t(0) - 1, nullptr);
    std::vector<TaskState*> s;
    for (int i = 0; i < 8; ++i)
        s.push_back(pool.take());
    EXPECT_EQ(pool.made(), 8u);
    std::thread t([&] {
        for (TaskState* x : s)
            pool.give(x);
    });
    t.join();
    for (int i = 0; i < 8; ++i) {
        TaskState* x = pool.take();
        EXPECT_EQ(x->refs.load(), 1);
    }
    EXPECT_EQ(pool.made(), 8u);  // all reused
}

TEST(DevicePools, ADoorbellRungBeforeTheSleepOrDuringItWakesTheSleeper) {
    cascade::device::detail::Doorbell bell;
    const auto t0 = std::chrono::steady_clock::now();
    const std::uint32_t w = bell.word();
    bell.ring();                              // between word() and sleep(): no sleep at all
    bell.sleep(w, 10L * 1000 * 1000 * 1000);  // 10 s if the ring were lost
    std::thread ringer([&] {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
        bell.ring();
    });
    bell.sleep(bell.word(), 10L * 1000 * 1000 * 1000);
    ringer.join();
    EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(5));
}
