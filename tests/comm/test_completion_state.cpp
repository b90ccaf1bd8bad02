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

// n ranks; each has its counts (queued, processed) and whether it is idle. With channels,
// also its counts per channel (to[d]: queued for rank d, from[s]: processed from rank s),
// which its COUNTs carry when they add up to q and p (as the Communicator's do).
struct Job {
    struct Rank {
        Job* job = nullptr;
        int rank = 0;
        std::unique_ptr<Completion> c;
        std::uint64_t q = 0, p = 0;
        bool idle = true;
        std::vector<std::uint64_t> to, from;
    };
    std::vector<Rank> ranks;
    std::deque<Sent> wire;
    int sent[8] = {};  // control messages sent so far, by type
    Completion::Clock::time_point now{};

    explicit Job(int n, bool channels = false) : ranks(static_cast<std::size_t>(n)) {
        for (int r = 0; r < n; ++r) {
            Rank& x = ranks[static_cast<std::size_t>(r)];
            x.job = this;
            x.rank = r;
            x.to.assign(static_cast<std::size_t>(n), 0);
            x.from.assign(static_cast<std::size_t>(n), 0);
            Completion::ChannelsFn fn = nullptr;
            if (channels)
                fn = [](void* ctx, std::uint64_t* to, std::uint64_t* from) {
                    auto* self = static_cast<Rank*>(ctx);
                    std::uint64_t sq = 0, sp = 0;
                    for (std::size_t i = 0; i < self->to.size(); ++i) {
                        sq += to[i] = self->to[i];
                        sp += from[i] = self->from[i];
                    }
                    return sq == self->q && sp == self->p;
                };
            x.c = std::make_unique<Completion>(
                r, n,
                [](void* ctx, int dest, const CtrlMsg& m) {
                    auto* from = static_cast<Rank*>(ctx);
                    from->job->wire.push_back(Sent{from->rank, dest, m});
                    ++from->job->sent[m.type & 7];
                    if (m.type == CtrlMsg::COUNT && (m.c & CtrlMsg::kChannels))
                        ++from->job->counts_with_channels;
                },
                &x, fn);
        }
    }
    int counts_with_channels = 0;
    // Rank `from` queued a message for rank `to`; rank `to` ran one from rank `from`.
    void queue(int from, int to) {
        ++rank(from).q;
        ++rank(from).to[static_cast<std::size_t>(to)];
    }
    void run(int from, int to) {
        ++rank(to).p;
        ++rank(to).from[static_cast<std::size_t>(from)];
    }
    // A message rank r queued for itself and ran, counted in its totals but missed by its
    // channel counts (so its COUNTs carry none).
    void uncounted_self_message(int r) {
        ++rank(r).q;
        ++rank(r).p;
    }
    void next_epoch() {
        for (auto& x : ranks)
            ASSERT_FALSE(x.c->next_epoch(x.q, x.p).has_value());
        std::fill(std::begin(sent), std::end(sent), 0);
        counts_with_channels = 0;
    }
    Completion& at(int r) { return *ranks[static_cast<std::size_t>(r)].c; }
    Rank& rank(int r) { return ranks[static_cast<std::size_t>(r)]; }
    // Control messages delivered to a rank that had left the epoch already: on MPI they
    // would stay unreceived (at the end of a job, pending on a freed communicator).
    int late = 0;
    ~Job() { EXPECT_EQ(late, 0) << "control messages reached ranks that had left the epoch"; }
    // Delivers every message in flight (and those they cause), oldest first.
    void deliver_all() {
        while (!wire.empty()) {
            const Sent s = wire.front();
            wire.pop_front();
            if (at(s.dest).shut_down()) ++late;
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
    const CtrlMsg request{CtrlMsg::REQUEST, 1, 0, 0, 99, {}};
    EXPECT_EQ(c.on_ctrl(0, request), Completion::Received::later_epoch);
    EXPECT_FALSE(c.next_epoch(0, 0).has_value());
    EXPECT_EQ(c.epoch(), 1u);
    EXPECT_NE(c.describe().find("REQUEST 99 not yet confirmable"), std::string::npos)
        << c.describe();
    EXPECT_EQ(c.on_ctrl(0, CtrlMsg{CtrlMsg::SHUTDOWN, 0, 0, 0, 0, {}}),
              Completion::Received::stale);
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
    const CtrlMsg odd{77, 0, 0, 0, 0, {}};
    EXPECT_EQ(job.at(1).on_ctrl(0, odd), Completion::Received::unknown);
    // One of the next epoch is kept, and reported when that epoch starts.
    const CtrlMsg later{77, 1, 0, 0, 0, {}};
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

// ---- counts per channel ---------------------------------------------------------------------

// An epoch with messages whose channels all balance in the latest COUNTs ends in one round
// like an empty one: COUNT, then SHUTDOWN, no REQUEST and no CONFIRM. A halo exchange on a
// ring, messages to self, and an empty epoch between them.
TEST(CompletionState, BalancedChannelsEndInOneRound) {
    Job job(4, true);
    for (int e = 0; e < 6; ++e) {
        if (e % 3 != 2)
            for (int r = 0; r < 4; ++r)
                for (int d : {(r + 1) % 4, (r + 3) % 4, e % 3 == 1 ? r : (r + 1) % 4}) {
                    job.queue(r, d);
                    job.run(r, d);
                }
        // Epochs 2 and 5 have no messages after two epochs with 3 per rank: each rank waits
        // for the 3 it expects until kExpectWait ran out (a round of this test is longer),
        // then reports.
        ASSERT_EQ(job.rounds_until_done(10), e % 3 == 2 ? 3 : 2) << "epoch " << e;
        EXPECT_EQ(job.sent[CtrlMsg::COUNT], 4) << "epoch " << e;
        EXPECT_EQ(job.counts_with_channels, 4) << "epoch " << e;
        EXPECT_EQ(job.sent[CtrlMsg::REQUEST], 0) << "epoch " << e;
        EXPECT_EQ(job.sent[CtrlMsg::CONFIRM], 0) << "epoch " << e;
        EXPECT_EQ(job.sent[CtrlMsg::SHUTDOWN], 3) << "epoch " << e;
        job.next_epoch();
    }
}

// The counter-example to counting totals alone: rank 1 reported while idle, then ran rank 0's
// message and sent one to rank 2, which ran it and reported; rank 1 is still busy. The totals
// of the three COUNTs balance (one queued by rank 0, one run by rank 2), but the message on
// channel 0 -> 1 is not in rank 1's COUNT, nor rank 1's on channel 1 -> 2: the epoch goes on.
TEST(CompletionState, BalancedTotalsOverUnbalancedChannelsDoNotEnd) {
    Job job(3, true);
    job.queue(0, 1);  // in flight to rank 1
    job.at(0).step(true, job.rank(0).q, job.rank(0).p, job.now);
    job.at(1).step(true, job.rank(1).q, job.rank(1).p, job.now);  // idle, nothing yet
    job.deliver_all();
    job.run(0, 1);  // rank 1 runs it and sends on: busy from now on
    job.queue(1, 2);
    job.rank(1).idle = false;
    job.run(1, 2);
    job.at(2).step(true, job.rank(2).q, job.rank(2).p, job.now);
    job.deliver_all();
    EXPECT_EQ(job.counts_with_channels, 3);
    job.at(0).step(true, job.rank(0).q, job.rank(0).p, job.now);
    job.deliver_all();
    EXPECT_FALSE(job.at(0).shut_down()) << "balanced totals ended the epoch";
    EXPECT_EQ(job.rounds_until_done(20), -1);
    for (int r = 0; r < 3; ++r)
        EXPECT_FALSE(job.at(r).shut_down());
    job.rank(1).idle = true;  // its COUNT now has both channels balanced
    EXPECT_GT(job.rounds_until_done(10), 0);
}

// Every rank idle and the totals balanced, but one channel is not (a message from rank 0 to
// rank 1 not run, and one run by rank 1 from rank 2 that rank 2's COUNT does not count): the
// epoch does not end, and no REQUEST goes out while every COUNT carries its channels.
TEST(CompletionState, UnbalancedChannelNeverEnds) {
    Job job(3, true);
    job.queue(0, 1);
    job.rank(1).p = 1;
    job.rank(1).from[2] = 1;
    EXPECT_EQ(job.rounds_until_done(20), -1);
    EXPECT_EQ(job.counts_with_channels, 3);
    EXPECT_EQ(job.sent[CtrlMsg::REQUEST], 0);
    job.run(0, 1);  // rank 1 runs the message from rank 0; rank 2's report catches up
    job.queue(2, 1);
    EXPECT_GT(job.rounds_until_done(10), 0);
    EXPECT_EQ(job.sent[CtrlMsg::REQUEST], 0);
}

// One message in flight on one channel (rank 2 -> 3), every other channel balanced (rank 3's
// message to itself included): the epoch waits for it, and ends in one round once its
// receiver ran it and reported.
TEST(CompletionState, MessageInFlightHoldsTheEpoch) {
    Job job(4, true);
    for (int r = 0; r < 4; ++r) {
        job.queue(r, (r + 1) % 4);
        if (r != 2) job.run(r, (r + 1) % 4);
    }
    job.queue(3, 3);
    job.run(3, 3);
    EXPECT_EQ(job.rounds_until_done(3), -1);
    EXPECT_EQ(job.sent[CtrlMsg::REQUEST], 0);
    job.run(2, 3);
    std::fill(std::begin(job.sent), std::end(job.sent), 0);
    EXPECT_EQ(job.rounds_until_done(10), 2);
    EXPECT_EQ(job.sent[CtrlMsg::COUNT], 1);
    EXPECT_EQ(job.sent[CtrlMsg::REQUEST], 0);
    EXPECT_EQ(job.sent[CtrlMsg::CONFIRM], 0);
}

// A message a rank queued for itself and did not run yet holds the epoch too (its channel
// from itself to itself), with every other channel balanced.
TEST(CompletionState, MessageToSelfInFlightHoldsTheEpoch) {
    Job job(3, true);
    job.queue(0, 2);
    job.run(0, 2);
    job.queue(1, 1);
    EXPECT_EQ(job.rounds_until_done(5), -1);
    job.run(1, 1);
    EXPECT_GT(job.rounds_until_done(5), 0);
    EXPECT_EQ(job.sent[CtrlMsg::REQUEST], 0);
}

// Rank 0 goes by each rank's latest COUNT: one that carries no channel counts (they did not
// add up to the totals) leaves the epoch to REQUEST and CONFIRM, even after an earlier COUNT
// of the same rank whose channels balanced.
TEST(CompletionState, ACountWithoutChannelsFallsBack) {
    Job job(3, true);
    job.rank(2).idle = false;
    job.queue(1, 0);
    job.run(1, 0);
    job.round();  // ranks 0 and 1 report, with channels that balance
    EXPECT_EQ(job.counts_with_channels, 2);
    job.uncounted_self_message(1);
    job.now += 1ms;
    job.round();
    EXPECT_EQ(job.sent[CtrlMsg::COUNT], 3);
    EXPECT_EQ(job.counts_with_channels, 2);
    job.rank(2).idle = true;
    EXPECT_GT(job.rounds_until_done(10), 0);
    EXPECT_EQ(job.counts_with_channels, 3);
    EXPECT_EQ(job.sent[CtrlMsg::REQUEST], 3);
    EXPECT_EQ(job.sent[CtrlMsg::CONFIRM], 3);
}

// A REQUEST went out (rank 2's COUNT carried no channels); then rank 2 reports again, with
// channels that balance, and its counts changed since the REQUEST. The epoch ends through a
// new REQUEST and its CONFIRMs, not in one round: a CONFIRM of the first REQUEST could still
// be on its way to rank 0 (none reaches a rank that left the epoch).
TEST(CompletionState, AfterARequestOnlyConfirmationsEnd) {
    Job job(3, true);
    job.queue(1, 0);
    job.run(1, 0);
    job.uncounted_self_message(2);
    job.round();
    job.now += 1ms;
    job.round();  // rank 0: totals balance, not every COUNT has channels: REQUEST
    ASSERT_EQ(job.sent[CtrlMsg::REQUEST], 3);
    job.rank(2).to[2] = job.rank(2).from[2] = 2;  // two messages to itself, both counted now
    job.uncounted_self_message(2);
    EXPECT_GT(job.rounds_until_done(10), 0);
    EXPECT_EQ(job.counts_with_channels, 3);
    EXPECT_EQ(job.sent[CtrlMsg::REQUEST], 6);
    EXPECT_EQ(job.late, 0);
}

// Up to kChannelRanks ranks the COUNTs carry the channels; with more, the totals alone and
// the epoch takes its two rounds.
TEST(CompletionState, ChannelsUpToKChannelRanks) {
    constexpr int k = cascade::detail::comm::kChannelRanks;
    for (const int n : {k, k + 1}) {
        Job job(n, true);
        for (int r = 0; r < n; ++r) {
            job.queue(r, (r + 1) % n);
            job.run(r, (r + 1) % n);
        }
        EXPECT_EQ(job.rounds_until_done(10), n <= k ? 2 : 4) << n << " ranks";
        EXPECT_EQ(job.counts_with_channels, n <= k ? n : 0) << n << " ranks";
    }
    CtrlMsg m{CtrlMsg::COUNT, 0, 1, 1, CtrlMsg::kChannels, {}};
    EXPECT_EQ(cascade::detail::ctrl_bytes(m, 4), 32u + 8 * 8);
    EXPECT_EQ(cascade::detail::ctrl_bytes(m, k + 1), 32u);
    m.c = 0;
    EXPECT_EQ(cascade::detail::ctrl_bytes(m, 4), 32u);
}

// A rank that ran messages in each of the last two epochs holds its first COUNT of the next
// one back until it ran as many (the fewer of the two): a halo exchange whose neighbours'
// messages arrive after the rank's own task ended then takes one COUNT per rank and epoch,
// not an early one and a second. The wait ends kExpectWait after the rank was first idle
// in the epoch; after such a miss the rank expects nothing in the next epoch.
TEST(CompletionState, ExpectedMessagesHoldTheFirstCount) {
    Job job(2, true);
    auto exchange = [&] {  // each rank sends one message to the other
        job.queue(0, 1);
        job.queue(1, 0);
    };
    auto arrive = [&] {
        job.run(0, 1);
        job.run(1, 0);
    };
    for (int e = 0; e < 2; ++e) {  // nothing expected yet: the first COUNTs go at once
        EXPECT_EQ(job.at(0).expected(), 0u) << "epoch " << e;
        exchange();
        job.round();  // early COUNTs, before the messages ran
        EXPECT_EQ(job.sent[CtrlMsg::COUNT], 2) << "epoch " << e;
        arrive();
        ASSERT_GT(job.rounds_until_done(10), 0) << "epoch " << e;
        EXPECT_EQ(job.sent[CtrlMsg::COUNT], 4) << "epoch " << e;
        job.next_epoch();
    }
    for (int e = 2; e < 5; ++e) {
        EXPECT_EQ(job.at(0).expected(), 1u) << "epoch " << e;
        EXPECT_EQ(job.at(1).expected(), 1u) << "epoch " << e;
        exchange();
        job.round();
        job.now += Completion::kExpectWait - 1ns;
        job.round();
        EXPECT_EQ(job.sent[CtrlMsg::COUNT], 0) << "epoch " << e << ": a COUNT before the "
                                               << "expected message ran";
        arrive();
        EXPECT_EQ(job.round(), 0) << "epoch " << e;  // one COUNT per rank, balanced
        EXPECT_EQ(job.round(), 2) << "epoch " << e;  // rank 0 sees them: SHUTDOWN
        EXPECT_EQ(job.sent[CtrlMsg::COUNT], 2) << "epoch " << e;
        EXPECT_EQ(job.sent[CtrlMsg::SHUTDOWN], 1) << "epoch " << e;
        EXPECT_TRUE(job.at(0).shut_down() && job.at(1).shut_down()) << "epoch " << e;
        job.next_epoch();
    }
    // The expected messages do not come: the COUNT goes once kExpectWait ran out.
    job.round();
    job.now += Completion::kExpectWait - 1ns;
    job.round();
    EXPECT_EQ(job.sent[CtrlMsg::COUNT], 0);
    job.now += 1ns;
    ASSERT_EQ(job.round(), 0);
    ASSERT_EQ(job.round(), 2);
    EXPECT_EQ(job.sent[CtrlMsg::COUNT], 2);
    job.next_epoch();
    // After that miss, the next epoch expects nothing: its COUNTs go at once.
    EXPECT_EQ(job.at(0).expected(), 0u);
    EXPECT_EQ(job.at(1).expected(), 0u);
    ASSERT_EQ(job.round(), 0);
    EXPECT_EQ(job.sent[CtrlMsg::COUNT], 2);
    ASSERT_EQ(job.round(), 2);
}

// An expected message held back by a busy neighbour: the rank may wait for it, but never
// past kExpectWait, and an unbalanced epoch never ends (the wait changes only when COUNTs go).
TEST(CompletionState, ExpectingNeverEndsAnUnbalancedEpoch) {
    Job job(2, true);
    for (int e = 0; e < 2; ++e) {
        job.queue(0, 1);
        job.run(0, 1);
        ASSERT_GT(job.rounds_until_done(10), 0);
        job.next_epoch();
    }
    EXPECT_EQ(job.at(1).expected(), 1u);
    job.queue(0, 1);  // in flight: rank 1 has not run it
    EXPECT_EQ(job.rounds_until_done(20), -1);
    EXPECT_EQ(job.sent[CtrlMsg::SHUTDOWN], 0);
    EXPECT_GE(job.sent[CtrlMsg::COUNT], 2);  // rank 1 reported once its wait ran out
    job.run(0, 1);
    EXPECT_GT(job.rounds_until_done(10), 0);
}

// Expected messages that come, but later than the wait: the rank reports early, then again
// once they ran, and waits twice as long in the next epoch (up to kMaxExpectWait); waiting
// for messages that come costs nothing, the epoch cannot end before they ran.
TEST(CompletionState, LateExpectedMessagesLengthenTheWait) {
    Job job(2, true);
    for (int e = 0; e < 2; ++e) {
        job.queue(0, 1);
        job.queue(1, 0);
        job.run(0, 1);
        job.run(1, 0);
        ASSERT_GT(job.rounds_until_done(10), 0);
        job.next_epoch();
    }
    Completion::Clock::duration wait = Completion::kExpectWait;
    for (int e = 2; e < 10; ++e) {
        ASSERT_EQ(job.at(1).expected(), 1u) << "epoch " << e;
        ASSERT_EQ(job.at(1).expect_wait(), wait) << "epoch " << e;
        job.queue(0, 1);
        job.queue(1, 0);
        job.round();
        job.now += wait - 1ns;
        job.round();
        EXPECT_EQ(job.sent[CtrlMsg::COUNT], 0) << "epoch " << e;
        job.now += 1ns;
        job.round();  // the wait ran out: early COUNTs
        EXPECT_EQ(job.sent[CtrlMsg::COUNT], 2) << "epoch " << e;
        job.run(0, 1);
        job.run(1, 0);
        ASSERT_GT(job.rounds_until_done(10), 0) << "epoch " << e;
        EXPECT_EQ(job.sent[CtrlMsg::COUNT], 4) << "epoch " << e;
        job.next_epoch();
        wait = std::min<Completion::Clock::duration>(2 * wait, Completion::kMaxExpectWait);
    }
    EXPECT_EQ(job.at(1).expect_wait(), Completion::kMaxExpectWait);
    // An epoch with fewer messages than expected: the wait is the shortest again.
    ASSERT_GT(job.rounds_until_done(10), 0);
    job.next_epoch();
    EXPECT_EQ(job.at(1).expected(), 0u);
    EXPECT_EQ(job.at(1).expect_wait(), Completion::kExpectWait);
}
