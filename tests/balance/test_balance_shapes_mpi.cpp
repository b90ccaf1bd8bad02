// Balancing every shape of work (run at 1-8 ranks, oversubscribed): a chain, where each
// handler invokes its own object for the next step (at most one request queued per object),
// and a fan-out, where each handler invokes another object, both placed on rank 0, are spread
// over every rank by diffusion and by master-worker (measured busy times); a chain is balanced
// by CASCADE_BALANCE alone, with no Balancer in the program; and the objects layer keeps its
// guarantees (exactly once, per-sender order, exclusive handlers alone, shared handlers never
// beside an exclusive one, contents intact) under every shipped policy; a ring of objects whose
// queues differ while every rank stays busy is left alone.
#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <atomic>
#include <cascade/cascade.hpp>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "common.hpp"

using namespace cascade;
using namespace balance_test;

namespace {

struct Spread {
    std::vector<double> busy;  // per rank: seconds of handlers run there
    long done = 0, migrations = 0;
    double seconds = 0;
};

enum class Shape { chain, fanout };

constexpr int kObjectsPerRank = 4;
constexpr double kStepS = 0.001;  // one handler: 1 ms of sleep (each rank stands for a core)

// Rank 0 creates kObjectsPerRank objects per rank; each runs `steps` handlers of 1 ms. Chain:
// object i's handler invokes object i for its next step. Fan-out: it invokes object i + 1
// (mod the count) instead: the work flows from object to object, each still runs `steps`.
// `policy` null: CASCADE_BALANCE decides (no Balancer in the program).
Spread run_shape(Shape shape, const char* policy, int steps) {
    Communicator comm;
    Threadpool tp(1, &comm);
    Objects objs(tp, comm);
    std::unique_ptr<Balancer> bal;
    if (policy) bal = std::make_unique<Balancer>(objs, make_policy(policy));
    const int me = comm.rank(), n = comm.ranks();
    const int count = kObjectsPerRank * n;
    std::vector<mobile_ptr<Work>> all;
    for (int i = 1; i <= count; ++i)
        all.push_back(mobile_ptr<Work>(ObjectKey{0, 0, std::uint64_t(i)}));
    std::atomic<double> busy{0};
    Handler<Work, void, int, int>* step = nullptr;
    step = objs.make_handler<Work>(
        [&](Work& w, int& index, int& left) {
            sleep_counted(w, std::chrono::duration<double>(kStepS), busy);
            if (left <= 1) return;
            const int next = shape == Shape::chain ? index : (index + 1) % count;
            step->invoke(all[std::size_t(next)], next, left - 1);
        },
        {.name = "step"});
    if (me == 0)
        for (int i = 0; i < count; ++i)
            objs.create<Work>();
    MPI_Barrier(MPI_COMM_WORLD);
    const auto t0 = std::chrono::steady_clock::now();
    if (me == 0)
        tp.insert([&] {
            for (int i = 0; i < count; ++i)
                step->invoke(all[std::size_t(i)], i, steps);
        });
    tp.join();
    Spread s;
    s.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    s.busy = allgather(busy.load());
    long done = 0;
    for (auto& p : all)
        if (Work* w = objs.local(p)) done += w->done;
    s.done = allreduce_sum(done);
    s.migrations = allreduce_sum(long(objs.stats().migrations_out));
    return s;
}

// Within a loose bound of the even spread (static placement: rank 0 does everything, max/mean
// = ranks, min = 0); a loaded machine slows ranks down for real, so a run that misses is tried
// again (up to three in all, the same decision on every rank).
void expect_spread(Shape shape, const char* policy, int steps) {
    const int n = world_size();
    Spread s;
    BusySpread b;
    for (int attempt = 1; attempt <= 3; ++attempt) {
        s = run_shape(shape, policy, steps);
        EXPECT_EQ(s.done, long(kObjectsPerRank) * n * steps) << policy;  // exactly once
        if (n < 2) return;
        b = busy_spread(s.busy);
        if (world_rank() == 0)
            std::printf(
                "%s %s, %d ranks: %.3f s, busy max/mean %.2f, min/mean %.2f, %ld "
                "migrations (attempt %d)\n",
                shape == Shape::chain ? "chain" : "fanout", policy ? policy : "(env)", n, s.seconds,
                b.hi / b.mean, b.lo / b.mean, s.migrations, attempt);
        if (b.hi / b.mean < 1.75 && b.lo / b.mean > 0.25) break;
    }
    EXPECT_LT(b.hi / b.mean, 1.75) << "max busy " << b.hi << " s, mean " << b.mean << " s";
    EXPECT_GT(b.lo / b.mean, 0.25) << "min busy " << b.lo << " s, mean " << b.mean << " s";
    EXPECT_GT(s.migrations, 0);
}

// A ring of objects already balanced: every rank creates kRingObjects objects, and object j
// of rank r invokes object j of rank r + 1 (mod the ranks) for the next step, so every rank
// runs as many handlers as it passes on and none runs dry before the end. Rank 0 starts
// kRankZeroTokens requests on each of its objects, the others kOtherTokens: rank 0's queues
// hold over twice the requests the others' hold for the whole run, though every rank keeps
// its worker busy at the same rate (queues of a fan-out, filled at the pace of the ranks
// around). Each request runs `steps` handlers of 1 ms. Returns the migrations and how much
// longer than asked the handlers' sleeps took on the slowest rank (a loaded machine delays
// their wake-ups, and a rank held up that way runs dry and asks for work, rightly).
constexpr int kRingObjects = 16, kRankZeroTokens = 3, kOtherTokens = 1;

struct RingRun {
    long migrations = 0;
    double overshoot = 1;  // the slowest rank's sleeps, against the time they asked for
};

RingRun run_ring(const char* policy, int steps) {
    Communicator comm;
    Threadpool tp(1, &comm);
    Objects objs(tp, comm);
    Balancer bal(objs, make_policy(policy));
    const int me = comm.rank(), n = comm.ranks();
    std::atomic<double> busy{0};
    std::atomic<long> ran{0};
    Handler<Work, void, int, int>* step = nullptr;
    step = objs.make_handler<Work>(
        [&](Work& w, int& j, int& left) {
            sleep_counted(w, std::chrono::duration<double>(kStepS), busy);
            ++ran;
            if (left <= 1) return;
            const mobile_ptr<Work> next(ObjectKey{(comm.rank() + 1) % n, 0, std::uint64_t(j + 1)});
            step->invoke(next, j, left - 1);
        },
        {.name = "ring step"});
    for (int j = 0; j < kRingObjects; ++j)
        objs.create<Work>();
    MPI_Barrier(MPI_COMM_WORLD);
    tp.insert([&] {
        const int tokens = me == 0 ? kRankZeroTokens : kOtherTokens;
        for (int t = 0; t < tokens; ++t)
            for (int j = 0; j < kRingObjects; ++j)
                step->invoke(mobile_ptr<Work>(ObjectKey{me, 0, std::uint64_t(j + 1)}), j, steps);
    });
    tp.join();
    long done = 0;
    for (int r = 0; r < n; ++r)
        for (int j = 1; j <= kRingObjects; ++j)
            if (Work* w = objs.local(mobile_ptr<Work>(ObjectKey{r, 0, std::uint64_t(j)})))
                done += w->done;
    EXPECT_EQ(allreduce_sum(done),
              long(kRingObjects) * (kRankZeroTokens + long(n - 1) * kOtherTokens) * steps)
        << policy;  // exactly once
    double overshoot = ran.load() > 0 ? busy.load() / (double(ran.load()) * kStepS) : 1.0;
    MPI_Allreduce(MPI_IN_PLACE, &overshoot, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    return {allreduce_sum(long(bal.migrations())), overshoot};
}

}  // namespace

// Queues that differ without an imbalance: a ring of objects (see run_ring) where rank 0's
// queues stay over twice the others' while every rank is busy. Moving its objects gains
// nothing (the ring's requests still pass through every rank) and costs the moves. It used
// to: master_worker's early gifts, which give a rank its share before it runs dry, compared
// the most loaded rank's queues with the least loaded one's and moved objects from rank 0
// every time; they now compare standing loads (Balancer::loads: work passing through a
// fan-out's objects left out); diffusion's announcements, which a rank with much more than
// another's recent peak load sends so that it asks before it runs dry, likewise. A rank that
// runs dry still asks: on a loaded machine a rank can, and the end of the work may move an
// object or a few; a loose bound (4), and a run over it is tried again (up to four in all). A run
// whose sleeps overshot by over half (the machine held ranks up: they ran dry and asked) does
// not count; with none that counts, the test is skipped.
TEST(BalanceShapes, ARingWithUnevenQueuesIsLeftAlone) {
    const int n = world_size();
    if (n < 2) GTEST_SKIP() << "needs 2 ranks";
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
    // Sanitized code runs the balancer's and the objects' work several times slower than the
    // handlers' sleeps: ranks fall behind for real, run dry and ask (4-73 moves at 4 ranks).
    GTEST_SKIP() << "timing-bound: not under a sanitizer";
#endif
    // With more than two ranks per core, ranks slowed down for real run dry and ask, and then
    // moving work is right (5-16 moves at 8 ranks on 2 busy cores): checked at 2-4 ranks.
    const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
    if (static_cast<unsigned>(n) > 2 * cores)
        GTEST_SKIP() << n << " ranks on " << cores << " cores: checked at 2-4 ranks";
    for (const char* policy : {"master_worker", "diffusion"}) {
        long moved = -1;  // the fewest migrations of a run that counts
        double worst = 1;
        for (int attempt = 1; attempt <= 4; ++attempt) {
            const RingRun r = run_ring(policy, 12);
            if (world_rank() == 0)
                std::printf("ring, %s, %d ranks: %ld migrations, sleeps %.2fx (attempt %d)\n",
                            policy, n, r.migrations, r.overshoot, attempt);
            worst = std::max(worst, r.overshoot);
            if (r.overshoot > 1.5) continue;  // the same on every rank (reduced)
            if (moved < 0 || r.migrations < moved) moved = r.migrations;
            if (moved <= 4) break;
        }
        if (moved < 0)
            GTEST_SKIP() << "machine too loaded: the handlers' sleeps took up to " << worst
                         << "x their time in every run";
        EXPECT_LE(moved, 4) << policy;  // the old early gifts: 10-94 in every run
    }
}

TEST(BalanceShapes, DiffusionBalancesAChain) {
    expect_spread(Shape::chain, "diffusion", 40);
}

TEST(BalanceShapes, MasterWorkerBalancesAChain) {
    expect_spread(Shape::chain, "master_worker", 40);
}

TEST(BalanceShapes, DiffusionBalancesAFanout) {
    expect_spread(Shape::fanout, "diffusion", 40);
}

TEST(BalanceShapes, MasterWorkerBalancesAFanout) {
    expect_spread(Shape::fanout, "master_worker", 40);
}

// No Balancer in the program: the one CASCADE_BALANCE makes with every Objects.
TEST(BalanceShapes, TheEnvironmentAloneBalancesAChain) {
    setenv("CASCADE_BALANCE", "diffusion", 1);
    expect_spread(Shape::chain, nullptr, 40);
    unsetenv("CASCADE_BALANCE");
}

// Objects created on rank 0 (the placement every policy wants to change), ordered requests
// from every rank, handlers long enough to be measured, a chain beside them, shared readers:
// whatever each policy moves, every request runs exactly once, in its sender's order, an
// exclusive handler alone and no shared one beside it, and every object arrives intact.
TEST(BalanceShapes, TheObjectsLayerKeepsItsGuaranteesUnderEveryPolicy) {
    const int n = world_size();
    const int me = world_rank();
    const long per_rank = 40;
    const int count = 2 * n;
    for (const char* policy : {"none", "rotate", "diffusion", "master_worker"}) {
        Communicator comm;
        Threadpool tp(2, &comm);
        Objects objs(tp, comm);
        Balancer bal(objs, make_policy(policy), {.period_s = 0.002});
        std::atomic<long> bad_shared{0}, chain_steps{0};
        std::vector<mobile_ptr<Tally>> all;
        for (int i = 1; i <= count; ++i)
            all.push_back(mobile_ptr<Tally>(ObjectKey{0, 0, std::uint64_t(i)}));
        auto bump = objs.make_handler<Tally>(
            [](Tally& t, int& sender, std::int64_t& seq) {
                if (++t.running != 1) ++t.overlaps;
                if (seq != t.last[std::size_t(sender)] + 1) ++t.disorder;
                t.last[std::size_t(sender)] = seq;
                ++t.count;
                std::this_thread::sleep_for(std::chrono::microseconds(200));
                --t.running;
            },
            {.name = "bump"});
        auto look = objs.make_handler<Tally>(
            [&](const Tally& t) {
                if (t.running != 0) ++bad_shared;
            },
            {.access = Access::shared, .name = "look"});
        Handler<Tally, void, int>* walk = nullptr;
        walk = objs.make_handler<Tally>(
            [&](Tally& t, int& left) {
                if (++t.running != 1) ++t.overlaps;
                std::this_thread::sleep_for(std::chrono::microseconds(200));
                --t.running;
                ++chain_steps;
                if (left > 1) walk->invoke(all[std::size_t(count - 1)], left - 1);
            },
            {.name = "walk"});
        if (me == 0)
            for (int i = 0; i < count; ++i) {
                Tally t;
                t.last.assign(std::size_t(n), -1);
                t.name = "tally " + std::to_string(i + 1);
                objs.create<Tally>(std::move(t));
            }
        MPI_Barrier(MPI_COMM_WORLD);
        tp.insert([&] {
            std::vector<std::int64_t> seq(all.size(), 0);
            if (me == 0) walk->invoke(all[std::size_t(count - 1)], int(per_rank));
            for (long k = 0; k < per_rank; ++k)
                for (std::size_t o = 0; o < all.size(); ++o) {
                    bump->invoke(all[o], me, seq[o]++);
                    if (k % 8 == 0) look->invoke(all[o]);
                }
        });
        tp.join();
        long local = 0, total = 0, disorder = 0, overlaps = 0, names = 0;
        for (std::size_t i = 0; i < all.size(); ++i)
            if (Tally* t = objs.local(all[i])) {
                ++local;
                total += t->count;
                disorder += t->disorder;
                overlaps += t->overlaps;
                names += t->name == "tally " + std::to_string(i + 1);
            }
        EXPECT_EQ(allreduce_sum(local), count)
            << policy;  // every object lives in exactly one place
        EXPECT_EQ(allreduce_sum(total), long(count) * n * per_rank) << policy;  // exactly once
        EXPECT_EQ(allreduce_sum(disorder), 0) << policy;                        // per-sender order
        EXPECT_EQ(allreduce_sum(overlaps), 0) << policy;                        // exclusive alone
        EXPECT_EQ(allreduce_sum(bad_shared.load()), 0) << policy;  // no shared beside an exclusive
        EXPECT_EQ(allreduce_sum(names), count) << policy;          // contents intact
        EXPECT_EQ(allreduce_sum(chain_steps.load()), per_rank) << policy;
        const long moved = allreduce_sum(long(objs.stats().migrations_out));
        if (me == 0) std::printf("%s: %ld migrations at %d ranks\n", policy, moved, n);
        if (std::string(policy) == "none") {
            EXPECT_EQ(moved, 0);
        }
        if (std::string(policy) == "rotate" && n > 1) {
            EXPECT_GT(moved, 0);
        }
    }
}
