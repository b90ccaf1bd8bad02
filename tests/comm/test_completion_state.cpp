// The completion protocol's state machine (cascade/comm/detail/completion.hpp) without MPI:
// several ranks' Completion objects in one process, their control messages carried by a
// queue this test delivers in the order it chooses.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <deque>
#include <memory>
#include <vector>

#include "cascade/comm/detail/completion.hpp"

using cascade::detail::Completion;
using cascade::detail::CtrlMsg;
using namespace std::chrono_literals;

namespace {

struct Sent {
    int source, dest;
    CtrlMsg m;
};

// n ranks; each has its counts (queued, processed) and whether it is idle.
struct Job {
    struct Rank {
        Job* job = nullptr;
        int rank = 0;
        std::unique_ptr<Completion> c;
        std::uint64_t q = 0, p = 0;
        bool idle = true;
    };
    std::vector<Rank> ranks;
    std::deque<Sent> wire;
    int sent[8] = {};  // control messages sent so far, by type
    Completion::Clock::time_point now{};

    explicit Job(int n) : ranks(static_cast<std::size_t>(n)) {
        for (int r = 0; r < n; ++r) {
            Rank& x = ranks[static_cast<std::size_t>(r)];
            x.job = this;
            x.rank = r;
            x.c = std::make_unique<Completion>(
                r, n,
                [](void* ctx, int dest, const CtrlMsg& m) {
                    auto* from = static_cast<Rank*>(ctx);
                    from->job->wire.push_back(Sent{from->rank, dest, m});
                    ++from->job->sent[m.type & 7];
                },
                &x);
        }
    }
    Completion& at(int r) { return *ranks[static_cast<std::size_t>(r)].c; }
    Rank& rank(int r) { return ranks[static_cast<std::size_t>(r)]; }
    // Delivers every message in flight (and those they cause), oldest first.
    void deliver_all() {
        while (!wire.empty()) {
            const Sent s = wire.front();
            wire.pop_front();
            EXPECT_NE(at(s.dest).on_ctrl(s.source, s.m), Completion::Received::unknown);
        }
    }
    // One poll of every rank, then delivery; returns how many ranks are shut down.
    int round() {
        for (auto& x : ranks)
            x.c->step(x.idle, x.q, x.p, now);
        deliver_all();
        int down = 0;
        for (auto& x : ranks)
            down += x.c->shut_down();
        return down;
    }
    int rounds_until_done(int max) {
        for (int i = 1; i <= max; ++i) {
            now += 1ms;  // past any count delay
            if (round() == static_cast<int>(ranks.size())) return i;
        }
        return -1;
    }
    int count(CtrlMsg::Type t) const {
        int n = 0;
        for (const Sent& s : wire)
            n += s.m.type == t;
        return n;
    }
};

}  // namespace

TEST(CompletionState, OneRankIdleFinishes) {
    Job job(1);
    EXPECT_GT(job.rounds_until_done(5), 0);
    EXPECT_TRUE(job.at(0).shut_down());
}

TEST(CompletionState, IdleRanksWithBalancedCountsFinish) {
    Job job(4);
    for (int r = 0; r < 4; ++r) {
        job.rank(r).q = static_cast<std::uint64_t>(r);
        job.rank(r).p = static_cast<std::uint64_t>(3 - r);  // sums 6 and 6
    }
    EXPECT_GT(job.rounds_until_done(10), 0);
}

TEST(CompletionState, UnbalancedCountsNeverFinish) {
    Job job(3);
    job.rank(1).q = 1;  // a message queued by rank 1 and processed nowhere
    EXPECT_EQ(job.rounds_until_done(50), -1);
    for (int r = 0; r < 3; ++r)
        EXPECT_FALSE(job.at(r).shut_down());
    job.rank(2).p = 1;  // now processed by rank 2
    EXPECT_GT(job.rounds_until_done(10), 0);
}

TEST(CompletionState, BusyRankHoldsEveryoneBack) {
    Job job(3);
    job.rank(2).idle = false;
    EXPECT_EQ(job.rounds_until_done(20), -1);
    job.rank(2).idle = true;
    EXPECT_GT(job.rounds_until_done(10), 0);
}

// A rank whose counts changed after rank 0 requested them never confirms that request; its
// next COUNT (once it stayed idle for the count delay) leads to a new request.
TEST(CompletionState, StaleRequestIsNotConfirmed) {
    Job job(2);
    job.now += 1ms;
    job.at(0).step(true, 1, 0, job.now);  // rank 0 queued a message, rank 1 ran it
    job.at(1).step(true, 0, 1, job.now);
    job.deliver_all();
    job.at(0).step(true, 1, 0, job.now);  // rank 0: balanced, REQUEST to both
    ASSERT_EQ(job.count(CtrlMsg::REQUEST), 2);
    job.deliver_all();
    job.rank(0).q = 1;
    job.rank(1).q = 1;  // rank 1 sent a message to itself and ran it
    job.rank(1).p = 2;
    job.at(1).step(true, 1, 2, job.now);  // counts differ from the request: no CONFIRM
    EXPECT_EQ(job.count(CtrlMsg::CONFIRM), 0);
    EXPECT_EQ(job.count(CtrlMsg::COUNT), 0);  // idle for less than the count delay
    job.now += Completion::kFirstCountDelay;
    job.at(1).step(true, 1, 2, job.now);
    EXPECT_EQ(job.count(CtrlMsg::COUNT), 1);
    EXPECT_EQ(job.count(CtrlMsg::CONFIRM), 0);
    job.deliver_all();
    EXPECT_FALSE(job.at(0).shut_down());
    EXPECT_GT(job.rounds_until_done(10), 0);
}

// Each further COUNT of an epoch waits twice as long as the one before, up to
// kMaxCountDelay; a new epoch starts again at kFirstCountDelay.
TEST(CompletionState, CountDelayDoublesAndResets) {
    Job job(2);
    Completion& c = job.at(1);
    auto t = job.now;
    std::uint64_t q = 0;
    c.step(true, q, 0, t);  // the first COUNT goes at once
    EXPECT_EQ(job.count(CtrlMsg::COUNT), 1);
    Completion::Clock::duration delay = Completion::kFirstCountDelay;
    for (int i = 0; i < 12; ++i) {
        job.wire.clear();
        ++q;
        c.step(false, q, 0, t);  // busy, then idle again with new counts
        c.step(true, q, 0, t);
        c.step(true, q, 0, t + delay - 1ns);
        EXPECT_EQ(job.count(CtrlMsg::COUNT), 0) << "COUNT " << i << " before its delay";
        c.step(true, q, 0, t + delay);
        EXPECT_EQ(job.count(CtrlMsg::COUNT), 1) << "COUNT " << i << " after its delay";
        delay = std::min(delay * 2, Completion::kMaxCountDelay);
        t += 1s;
    }
    EXPECT_EQ(delay, Completion::kMaxCountDelay);
    EXPECT_FALSE(c.next_epoch(q, 0).has_value());
    job.wire.clear();
    c.step(true, q, 0, t);  // first COUNT of the new epoch: at once
    ++q;
    c.step(false, q, 0, t);
    c.step(true, q, 0, t);
    c.step(true, q, 0, t + Completion::kFirstCountDelay);
    EXPECT_EQ(job.count(CtrlMsg::COUNT), 2);
}

// Rank 0 finished epoch 0 first and sent a message of epoch 1: the rank still in epoch 0
// keeps it and takes it when it starts epoch 1. One of an earlier epoch is ignored.
TEST(CompletionState, MessagesOfOtherEpochs) {
    Job job(2);
    EXPECT_GT(job.rounds_until_done(10), 0);
    Completion& c = job.at(1);
    EXPECT_FALSE(job.at(0).next_epoch(0, 0).has_value());
    EXPECT_EQ(job.at(0).epoch(), 1u);
    const CtrlMsg request{CtrlMsg::REQUEST, 1, 0, 0, 99};
    EXPECT_EQ(c.on_ctrl(0, request), Completion::Received::later_epoch);
    EXPECT_FALSE(c.next_epoch(0, 0).has_value());
    EXPECT_EQ(c.epoch(), 1u);
    EXPECT_NE(c.describe().find("REQUEST 99 not yet confirmable"), std::string::npos)
        << c.describe();
    EXPECT_EQ(c.on_ctrl(0, CtrlMsg{CtrlMsg::SHUTDOWN, 0, 0, 0, 0}), Completion::Received::stale);
    EXPECT_FALSE(c.shut_down());
}

TEST(CompletionState, EpochsInARow) {
    Job job(3);
    for (int e = 0; e < 20; ++e) {
        job.rank(e % 3).q += 2;
        job.rank((e + 1) % 3).p += 2;
        ASSERT_GT(job.rounds_until_done(10), 0) << "epoch " << e;
        for (auto& x : job.ranks) {
            EXPECT_EQ(x.c->epoch(), static_cast<std::uint32_t>(e));
            EXPECT_FALSE(x.c->next_epoch(x.q, x.p).has_value());
        }
        // SHUTDOWN is delivered: the next epoch starts with nobody shut down.
        for (auto& x : job.ranks)
            EXPECT_FALSE(x.c->shut_down());
    }
}

// An epoch in which no rank queued or ran a message ends in one round: each rank's COUNT
// says its counts are still those it began the epoch with, and rank 0 answers with SHUTDOWN
// alone (no REQUEST, no CONFIRM). Also after epochs with messages (the counts it began with
// are then not zero).
TEST(CompletionState, EmptyEpochEndsInOneRound) {
    Job job(4);
    for (int e = 0; e < 6; ++e) {
        const bool messages = e % 2 == 1;
        if (messages) {
            job.rank(e % 4).q += 3;
            job.rank((e + 1) % 4).p += 3;
        }
        std::fill(std::begin(job.sent), std::end(job.sent), 0);
        // Polls of every rank: COUNT; SHUTDOWN (or REQUEST; CONFIRM; SHUTDOWN).
        ASSERT_EQ(job.rounds_until_done(10), messages ? 4 : 2) << "epoch " << e;
        EXPECT_EQ(job.sent[CtrlMsg::COUNT], 4) << "epoch " << e;
        EXPECT_EQ(job.sent[CtrlMsg::REQUEST], messages ? 4 : 0) << "epoch " << e;
        EXPECT_EQ(job.sent[CtrlMsg::CONFIRM], messages ? 4 : 0) << "epoch " << e;
        EXPECT_EQ(job.sent[CtrlMsg::SHUTDOWN], 3) << "epoch " << e;
        for (auto& x : job.ranks)
            ASSERT_FALSE(x.c->next_epoch(x.q, x.p).has_value());
    }
}

// Rank 0 goes by each rank's latest COUNT: a rank whose first COUNT was quiet and whose
// counts then changed reports again, not quiet, and the epoch takes the two rounds (REQUEST,
// CONFIRM) although every rank sent a quiet COUNT at some point.
TEST(CompletionState, AQuietCountLaterChangedTakesTwoRounds) {
    Job job(3);
    job.rank(2).idle = false;
    job.round();  // ranks 0 and 1: quiet COUNTs
    EXPECT_EQ(job.sent[CtrlMsg::COUNT], 2);
    job.rank(1).q = job.rank(1).p = 1;  // rank 1 ran a message to itself
    job.now += 1ms;
    job.round();  // rank 1: COUNT(1, 1)
    EXPECT_EQ(job.sent[CtrlMsg::COUNT], 3);
    job.rank(2).idle = true;  // rank 2: quiet COUNT
    job.now += 1ms;
    job.round();
    EXPECT_EQ(job.sent[CtrlMsg::COUNT], 4);
    EXPECT_GT(job.rounds_until_done(10), 0);
    EXPECT_EQ(job.sent[CtrlMsg::REQUEST], 3);
    EXPECT_EQ(job.sent[CtrlMsg::CONFIRM], 3);
}

// One rank's counts changed in the epoch (a message to itself, run): not an empty epoch.
TEST(CompletionState, OneRankWithMessagesTakesTwoRounds) {
    Job job(3);
    job.rank(1).q = job.rank(1).p = 1;
    EXPECT_EQ(job.rounds_until_done(10), 4);
    EXPECT_EQ(job.sent[CtrlMsg::REQUEST], 3);
}

TEST(CompletionState, UnknownTypeIsReported) {
    Job job(2);
    const CtrlMsg odd{77, 0, 0, 0, 0};
    EXPECT_EQ(job.at(1).on_ctrl(0, odd), Completion::Received::unknown);
    // One of the next epoch is kept, and reported when that epoch starts.
    const CtrlMsg later{77, 1, 0, 0, 0};
    EXPECT_EQ(job.at(1).on_ctrl(0, later), Completion::Received::later_epoch);
    const auto bad = job.at(1).next_epoch(0, 0);
    ASSERT_TRUE(bad.has_value());
    EXPECT_EQ(bad->first, 0);
    EXPECT_EQ(bad->second.type, 77u);
}

TEST(CompletionState, DescribeNamesMissingRanks) {
    Job job(3);
    job.rank(2).idle = false;
    job.round();
    const std::string d = job.at(0).describe();
    EXPECT_NE(d.find("epoch 0"), std::string::npos) << d;
    EXPECT_NE(d.find("rank 0 has counts from 2 of 3 ranks"), std::string::npos) << d;
    EXPECT_NE(d.find("missing: 2"), std::string::npos) << d;
    EXPECT_NE(job.at(2).describe().find("no COUNT sent yet"), std::string::npos);
}
