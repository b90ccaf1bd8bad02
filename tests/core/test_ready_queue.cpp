#include <gtest/gtest.h>

#include <algorithm>
#include <random>
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
