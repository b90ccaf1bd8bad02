#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <random>
#include <thread>
#include <vector>

#include "cascade/core/ready_queue.hpp"

using cascade::ReadyQueue;
using cascade::Task;
using cascade::TaskHeap;

namespace {
Task make(double prio, int id) {
    Task t;
    t.priority = prio;
    t.emplace<int>(id);
    return t;
}
}  // namespace

TEST(TaskHeap, PopsInPriorityOrder) {
    std::mt19937 rng(1);
    TaskHeap h;
    std::vector<double> prios;
    for (int i = 0; i < 5000; ++i) {
        double p = static_cast<double>(rng() % 100);
        prios.push_back(p);
        h.push(make(p, i));
    }
    std::sort(prios.rbegin(), prios.rend());
    for (double expected : prios) {
        ASSERT_FALSE(h.empty());
        Task t;
        h.pop(t);
        ASSERT_EQ(t.priority, expected);
    }
    EXPECT_TRUE(h.empty());
}

TEST(TaskHeap, InterleavedPushPopKeepsOrder) {
    std::mt19937 rng(2);
    TaskHeap h;
    std::multiset<double> ref;
    for (int i = 0; i < 20000; ++i) {
        if (ref.empty() || rng() % 3 != 0) {
            double p = static_cast<double>(rng() % 17) - 8;
            h.push(make(p, i));
            ref.insert(p);
        } else {
            Task t;
            h.pop(t);
            ASSERT_EQ(t.priority, *ref.rbegin());
            ref.erase(std::prev(ref.end()));
        }
    }
    EXPECT_EQ(h.size(), ref.size());
}

TEST(ReadyQueue, ThievesSeeOnlyStealableTasks) {
    ReadyQueue q;
    q.push(make(5, 1), /*bound=*/true);
    Task t;
    EXPECT_FALSE(q.steal(t));
    q.push(make(1, 2), /*bound=*/false);
    ASSERT_TRUE(q.steal(t));
    EXPECT_EQ(t.as<int>(), 2);
    ASSERT_TRUE(q.pop(t));
    EXPECT_EQ(t.as<int>(), 1);
    EXPECT_FALSE(q.pop(t));
}

TEST(ReadyQueue, OwnerTakesHigherPriorityOfBoundAndFree) {
    ReadyQueue q;
    q.push(make(1, 1), true);
    q.push(make(3, 2), false);
    q.push(make(2, 3), true);
    Task t;
    std::vector<int> order;
    while (q.pop(t))
        order.push_back(t.as<int>());
    EXPECT_EQ(order, (std::vector<int>{2, 3, 1}));
    EXPECT_EQ(q.size(), 0u);
}

TEST(ReadyQueue, EqualPrioritiesRunInReadyOrder) {
    ReadyQueue q;
    for (int i = 0; i < 1000; ++i)
        q.push(make(0, i), false);  // FIFO ring grows past 256
    q.push(make(2, -1), false);
    q.push(make(-1, -2), false);
    Task t;
    ASSERT_TRUE(q.pop(t));
    EXPECT_EQ(t.as<int>(), -1);  // higher priority first
    for (int i = 0; i < 1000; ++i) {
        ASSERT_TRUE(i % 2 ? q.pop(t) : q.steal(t));
        ASSERT_EQ(t.as<int>(), i);
    }
    ASSERT_TRUE(q.pop(t));
    EXPECT_EQ(t.as<int>(), -2);  // negative priority last
    EXPECT_FALSE(q.pop(t));
}

namespace {
int id_of(const Task& t) {
    return t.as<int>();
}
}  // namespace

TEST(ReadyQueue, InboxTasksComeOutInOrderAcrossSegments) {
    ReadyQueue q;
    const int n = 3 * static_cast<int>(cascade::detail::Inbox::kSegment) + 7;
    for (int i = 0; i < n; ++i)
        q.push_foreign(0, make(0, i));
    EXPECT_EQ(q.stealable(), static_cast<std::size_t>(n));
    for (int i = 0; i < n; ++i) {
        Task t;
        ASSERT_TRUE(q.pop(t));
        ASSERT_EQ(id_of(t), i);
    }
    Task t;
    EXPECT_FALSE(q.pop(t));
    EXPECT_EQ(q.size(), 0u);
}

TEST(ReadyQueue, InboxSegmentsAreReusedWithinAndAcrossQueues) {
    // Emptied segments go back to the lane, and a destroyed queue's to the process-wide
    // cache: waves of pushes through reused segments still come out whole and in order.
    const int n = 3 * static_cast<int>(cascade::detail::Inbox::kSegment) + 7;
    for (int queue = 0; queue < 3; ++queue) {
        ReadyQueue q;
        for (int wave = 0; wave < 4; ++wave) {
            for (int i = 0; i < n; ++i)
                q.push_foreign(0, make(0, wave * n + i));
            for (int i = 0; i < n; ++i) {
                Task t;
                ASSERT_TRUE(q.pop(t));
                ASSERT_EQ(id_of(t), wave * n + i) << "queue " << queue << ", wave " << wave;
            }
            Task t;
            EXPECT_FALSE(q.pop(t));
        }
    }
}

TEST(ReadyQueue, InboxTasksAreStolenAndOrderedByPriority) {
    ReadyQueue q;
    q.push(make(0, 100), false);  // something queued: inbox tasks are moved, then ordered
    q.push_foreign(1, make(1, 1));
    q.push_foreign(1, make(5, 5));
    q.push_foreign(2, make(3, 3));
    Task t;
    ASSERT_TRUE(q.pop(t));
    EXPECT_EQ(id_of(t), 5);
    ASSERT_TRUE(q.steal(t));
    EXPECT_EQ(id_of(t), 3);
    ASSERT_TRUE(q.pop(t));
    EXPECT_EQ(id_of(t), 1);
    ASSERT_TRUE(q.pop(t));
    EXPECT_EQ(id_of(t), 100);
    EXPECT_FALSE(q.steal(t));
}

TEST(ReadyQueue, InboxProducersAndConsumersConcurrently) {
    ReadyQueue q;
    constexpr int kPerProducer = 20000;
    std::atomic<bool> done{false};
    std::vector<std::thread> producers;
    for (int lane = 0; lane < 2; ++lane)
        producers.emplace_back([&q, lane] {
            for (int i = 0; i < kPerProducer; ++i)
                q.push_foreign(lane, make(0, lane * kPerProducer + i));
        });
    std::vector<int> last(2, -1);
    std::vector<char> seen(2 * kPerProducer, 0);
    std::atomic<int> stolen{0};
    std::thread thief([&] {
        Task t;
        while (!done.load())
            if (q.steal(t)) {
                seen[static_cast<std::size_t>(id_of(t))] += 1;
                stolen.fetch_add(1);
            }
    });
    int popped = 0;
    Task t;
    while (popped + stolen.load() < 2 * kPerProducer) {
        if (!q.pop(t)) continue;
        const int id = id_of(t);
        const int lane = id / kPerProducer;
        ASSERT_GT(id, last[static_cast<std::size_t>(lane)]);  // per lane, in order
        last[static_cast<std::size_t>(lane)] = id;
        seen[static_cast<std::size_t>(id)] += 1;
        ++popped;
    }
    done.store(true);
    thief.join();
    for (auto& p : producers)
        p.join();
    for (char c : seen)
        ASSERT_EQ(c, 1);
}
