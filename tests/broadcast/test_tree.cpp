// The broadcast tree builder: Figure 1 of the dynamic broadcasts paper, every recipient
// reached exactly once at the step the model says, priorities and rotation.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <map>
#include <numeric>
#include <vector>

#include "cascade/broadcast/tree.hpp"

using namespace cascade::broadcast;

namespace {

struct Hop {
    int from, to;
    std::vector<int> sub;
    std::size_t step;
};

// Unrolls a broadcast the way the nodes do: each splits the sub-list it received.
void unroll(Shape shape, int node, std::vector<Recipient> list, std::size_t step0,
            std::vector<Hop>& hops) {
    std::vector<Child> ch;
    children(shape, list.size(), ch);
    std::size_t step = step0;
    for (const Child& c : ch) {
        ++step;
        std::vector<Recipient> sub(list.begin() + static_cast<long>(c.at) + 1,
                                   list.begin() + static_cast<long>(c.at + 1 + c.count));
        std::vector<int> ranks;
        for (auto& r : sub)
            ranks.push_back(r.rank);
        hops.push_back(Hop{node, list[c.at].rank, ranks, step});
        unroll(shape, list[c.at].rank, sub, step, hops);
    }
}

std::vector<Recipient> plain(std::vector<int> ranks) {
    std::vector<Recipient> out;
    arrange(Shape::binomial, ranks, {}, 0, out);
    return out;
}

}  // namespace

TEST(BroadcastTree, Figure1) {
    std::vector<Recipient> list = plain({1, 2, 3, 4, 5, 6});
    std::vector<Hop> hops;
    unroll(Shape::binomial, 0, list, 0, hops);
    std::vector<Hop> from0;
    for (auto& h : hops)
        if (h.from == 0) from0.push_back(h);
    ASSERT_EQ(from0.size(), 3u);
    EXPECT_EQ(from0[0].to, 4);
    EXPECT_EQ(from0[0].sub, (std::vector<int>{5, 6}));
    EXPECT_EQ(from0[1].to, 2);
    EXPECT_EQ(from0[1].sub, (std::vector<int>{3}));
    EXPECT_EQ(from0[2].to, 1);
    EXPECT_EQ(from0[2].sub, (std::vector<int>{}));
    // Figure 1's levels: 4 at step 1; 2 and 6 at step 2; 1, 3 and 5 at step 3.
    std::map<int, std::size_t> step;
    for (auto& h : hops)
        step[h.to] = h.step;
    EXPECT_EQ(step, (std::map<int, std::size_t>{{4, 1}, {2, 2}, {6, 2}, {1, 3}, {3, 3}, {5, 3}}));
    std::vector<std::size_t> steps;
    arrival_steps(Shape::binomial, 6, steps);
    for (int p = 1; p <= 6; ++p)
        EXPECT_EQ(steps[static_cast<std::size_t>(p)], step[p]);
}

TEST(BroadcastTree, EveryRecipientOnceAtItsStep) {
    for (Shape shape : {Shape::binomial, Shape::pipelined}) {
        for (int m = 0; m <= 130; ++m) {
            std::vector<int> ranks(static_cast<std::size_t>(m));
            std::iota(ranks.begin(), ranks.end(), 1);
            for (std::size_t rot : {0, 1, 5}) {
                std::vector<Recipient> list;
                arrange(shape, ranks, {}, rot, list);
                std::vector<Hop> hops;
                unroll(shape, 0, list, 0, hops);
                std::vector<int> got;
                for (auto& h : hops)
                    got.push_back(h.to);
                std::sort(got.begin(), got.end());
                ASSERT_EQ(got, ranks) << "m=" << m;
                std::size_t root_msgs = 0, depth = 0;
                std::vector<std::size_t> steps;
                arrival_steps(shape, list.size(), steps);
                for (auto& h : hops) {
                    root_msgs += h.from == 0;
                    depth = std::max(depth, h.step);
                    std::size_t pos = 0;
                    while (list[pos].rank != h.to)
                        ++pos;
                    ASSERT_EQ(steps[pos + 1], h.step);
                }
                if (m > 0 && shape == Shape::binomial) {
                    const auto log2 = static_cast<std::size_t>(std::bit_width(unsigned(m)));
                    EXPECT_EQ(root_msgs, log2) << "m=" << m;  // ceil(log2 P), P = m + 1
                    EXPECT_EQ(depth, log2);
                }
                if (m > 0 && shape == Shape::pipelined) {
                    EXPECT_EQ(root_msgs, 1u);
                    EXPECT_EQ(depth, static_cast<std::size_t>(m));
                }
            }
        }
    }
}

TEST(BroadcastTree, PrioritiesGetEarliestSlots) {
    for (Shape shape : {Shape::binomial, Shape::pipelined}) {
        std::vector<int> ranks{1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
        std::vector<double> prio{0, 0, 0, 0, 0, 0, 0, 0, 0, 5};  // rank 10 first
        std::vector<Recipient> list;
        arrange(shape, ranks, prio, 0, list);
        std::vector<Hop> hops;
        unroll(shape, 0, list, 0, hops);
        EXPECT_EQ(hops.front().to, 10);
        EXPECT_EQ(hops.front().step, 1u);
        // Arrival steps never decrease as priority decreases.
        prio = {3, 9, 1, 7, 5, 2, 8, 4, 6, 0};
        arrange(shape, ranks, prio, 0, list);
        hops.clear();
        unroll(shape, 0, list, 0, hops);
        std::map<double, std::size_t> step_of_prio;
        for (auto& h : hops)
            step_of_prio[prio[static_cast<std::size_t>(h.to - 1)]] = h.step;
        std::size_t last = ~std::size_t(0);
        for (auto it = step_of_prio.begin(); it != step_of_prio.end(); ++it) {  // low to high
            EXPECT_LE(it->second, last);
            last = it->second;
        }
        for (auto& r : list)  // priorities travel with the list
            EXPECT_EQ(r.priority, static_cast<float>(prio[static_cast<std::size_t>(r.rank - 1)]));
    }
    // Equal priorities reduce to Figure 1.
    std::vector<int> ranks{1, 2, 3, 4, 5, 6};
    std::vector<double> same(6, 2.5);
    std::vector<Recipient> list;
    arrange(Shape::binomial, ranks, same, 0, list);
    for (std::size_t i = 0; i < 6; ++i)
        EXPECT_EQ(list[i].rank, ranks[i]);
}

TEST(BroadcastTree, RotationSpreadsInnerNodes) {
    const int m = 15;
    std::vector<int> ranks(m);
    std::iota(ranks.begin(), ranks.end(), 1);
    std::map<int, int> forwards;  // messages each recipient forwarded over m broadcasts
    for (std::size_t rot = 0; rot < static_cast<std::size_t>(m); ++rot) {
        std::vector<Recipient> list;
        arrange(Shape::binomial, ranks, {}, rot, list);
        std::vector<Hop> hops;
        unroll(Shape::binomial, 0, list, 0, hops);
        for (auto& h : hops)
            if (h.from != 0) ++forwards[h.from];
    }
    // Each broadcast: 15 messages, 4 from the root, 11 forwarded. Rotating through every
    // position, each rank forwards exactly the 11 once (a fixed list: 8 forwards 3 every time).
    for (int r = 1; r <= m; ++r)
        EXPECT_EQ(forwards[r], m - 4) << "rank " << r;
}
