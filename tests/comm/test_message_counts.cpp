// MessageCounts (cascade/comm/detail/message_counts.hpp): queued from any thread, run and
// sent counted on one.
#include <gtest/gtest.h>

#include <thread>
#include <vector>

#include "cascade/comm/detail/message_counts.hpp"

using cascade::detail::MessageCounts;

TEST(MessageCounts, CountsAndMoved) {
    MessageCounts c;
    EXPECT_EQ(c.queued(), 0u);
    c.queued_one();
    c.add_queued(3);
    EXPECT_EQ(c.queued(), 4u);
    const auto before = c.moved();
    c.processed_one();
    EXPECT_EQ(c.processed(), 1u);
    EXPECT_EQ(c.moved(), before + 1);
    c.sent_one();
    c.sent_one();
    EXPECT_EQ(c.mpi_sends(), 2u);
    EXPECT_EQ(c.moved(), before + 3);
}

TEST(MessageCounts, QueuedFromManyThreads) {
    MessageCounts c;
    std::vector<std::thread> ts;
    for (int t = 0; t < 4; ++t)
        ts.emplace_back([&] {
            for (int i = 0; i < 1000; ++i)
                c.queued_one();
        });
    for (auto& t : ts)
        t.join();
    EXPECT_EQ(c.queued(), 4000u);
}
