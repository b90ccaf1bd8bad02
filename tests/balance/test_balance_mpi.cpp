// Balancing (run at 1-8 ranks): the rotate policy moves every object at every step while
// thousands of requests run, and the objects layer keeps its guarantees (exactly once,
// per-sender order, exclusivity, contents); diffusion and master-worker spread the work of
// objects created on one rank over all ranks (measured busy times) and leave a balanced run
// nearly alone (few migrations); pinned objects never move; balancing off means no migration;
// switching it on while running starts it; an idle diffusion round never holds its rank, a
// rank takes work from an announcing rank with more than twice its own before it runs dry,
// a donor whose queues keep its worker busy at the rate an asker's chains keep its own
// gives nothing, and a donor that gave keeps giving while the imbalance lasts.
#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <atomic>
#include <cascade/balance/balancer.hpp>
#include <cascade/balance/detail/donate.hpp>
#include <cascade/balance/diffusion.hpp>
#include <cascade/balance/master_worker.hpp>
#include <cascade/cascade.hpp>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "common.hpp"

using namespace cascade;
using namespace balance_test;

namespace {

struct Outcome {
    long count = 0, disorder = 0, overlaps = 0, names = 0, local = 0, moved = 0, steps = 0;
};

// Every rank sends `per_rank` ordered requests to each of the objects (4 per rank).
// Rotate without looking at the pinned flag: the objects layer alone must keep pins.
struct IgnoresPins : BalancePolicy {
    const char* name() const override { return "ignores_pins"; }
    void balance(Balancer& b) override {
        if (b.ranks() < 2) return;
        for (const auto& o : b.local_objects())
            b.rebalance(o.key, (b.rank() + 1) % b.ranks());
    }
};

Outcome run(std::unique_ptr<BalancePolicy> policy, bool enabled, bool pin_all, long per_rank,
            double period_s) {
    Communicator comm;
    Threadpool tp(2, &comm);
    Objects objs(tp, comm);
    Balancer bal(objs, std::move(policy), {.period_s = period_s, .enabled = enabled});
    const int me = comm.rank(), n = comm.ranks();
    auto bump = objs.make_handler<Tally>(
        [](Tally& t, int& sender, std::int64_t& seq) {
            if (++t.running != 1) ++t.overlaps;
            if (seq != t.last[sender] + 1) ++t.disorder;
            t.last[sender] = seq;
            ++t.count;
            --t.running;
        },
        {.name = "bump"});
    std::vector<mobile_ptr<Tally>> all;
    for (int i = 0; i < 4; ++i) {
        Tally t;
        t.last.assign(n, -1);
        t.name = "tally " + std::to_string(me) + "." + std::to_string(i);
        auto p = objs.create<Tally>(std::move(t));
        if (pin_all) objs.pin(p);
    }
    for (int r = 0; r < n; ++r)
        for (std::uint64_t i = 1; i <= 4; ++i)
            all.push_back(mobile_ptr<Tally>(ObjectKey{r, 0, i}));
    MPI_Barrier(MPI_COMM_WORLD);
    tp.insert([&] {
        std::vector<std::int64_t> seq(all.size(), 0);
        for (long k = 0; k < per_rank; ++k)
            for (std::size_t o = 0; o < all.size(); ++o)
                bump->invoke(all[o], me, seq[o]++);
    });
    tp.join();
    Outcome r;
    for (auto& p : all) {
        if (Tally* t = objs.local(p)) {
            ++r.local;
            r.count += t->count;
            r.disorder += t->disorder;
            r.overlaps += t->overlaps;
            r.names +=
                t->name == "tally " + std::to_string(p.home()) + "." + std::to_string(p.id() - 1);
            if (p.home() != me) ++r.moved;
        }
    }
    r.steps = long(bal.steps());
    return r;
}

// A small synthetic run: rank 0 creates 6 objects per rank and queues `per_object` requests
// of 1 ms of sleep on each (sleep: each rank stands for a core however oversubscribed).
struct Spread {
    std::vector<double> busy;  // per rank: seconds of handlers run there
    long done = 0, moved = 0, migrations = 0;
};

Spread concentrated(std::unique_ptr<BalancePolicy> policy, bool enabled, bool pin_all,
                    int per_object, int enable_after = -1) {
    Communicator comm;
    Threadpool tp(1, &comm);
    Objects objs(tp, comm);
    Balancer bal(objs, std::move(policy), {.period_s = 0.002, .enabled = enabled});
    const int me = comm.rank(), n = comm.ranks();
    std::atomic<double> busy{0};
    std::atomic<int> handled{0};
    auto work = objs.make_handler<Work>(
        [&](Work& w) {
            sleep_counted(w, std::chrono::milliseconds(1), busy);
            if (++handled == enable_after) bal.enable(true);
        },
        {.name = "work"});
    const int n_objects = 6 * n;
    std::vector<mobile_ptr<Work>> ps;
    if (me == 0)
        for (int i = 0; i < n_objects; ++i) {
            ps.push_back(objs.create<Work>());
            if (pin_all) objs.pin(ps.back());
        }
    MPI_Barrier(MPI_COMM_WORLD);
    if (me == 0)
        tp.insert([&] {
            for (int k = 0; k < per_object; ++k)
                for (auto& p : ps)
                    work->invoke(p);
        });
    tp.join();
    Spread s;
    s.busy = allgather(busy.load());
    long done = 0, moved = 0;
    for (int i = 1; i <= n_objects; ++i) {
        mobile_ptr<Work> p(ObjectKey{0, 0, std::uint64_t(i)});
        if (Work* w = objs.local(p)) {
            done += w->done;
            if (me != 0) ++moved;
        }
    }
    s.done = allreduce_sum(done);
    s.moved = allreduce_sum(moved);
    s.migrations = allreduce_sum(long(bal.migrations()));
    return s;
}

// Already balanced: every rank creates 6 objects and queues `per_object` requests of 1 ms of
// sleep on each of its own. Nothing is worth moving, neither at the start (a rank whose work
// is not queued yet looks idle) nor at the end (every rank drains at once).
Spread balanced(std::unique_ptr<BalancePolicy> policy, int per_object) {
    Communicator comm;
    Threadpool tp(1, &comm);
    Objects objs(tp, comm);
    Balancer bal(objs, std::move(policy), {.period_s = 0.002});
    const int n = comm.ranks();
    std::atomic<double> busy{0};
    auto work = objs.make_handler<Work>(
        [&](Work& w) { sleep_counted(w, std::chrono::milliseconds(1), busy); }, {.name = "work"});
    std::vector<mobile_ptr<Work>> ps;
    for (int i = 0; i < 6; ++i)
        ps.push_back(objs.create<Work>());
    MPI_Barrier(MPI_COMM_WORLD);
    tp.insert([&] {
        for (int k = 0; k < per_object; ++k)
            for (auto& p : ps)
                work->invoke(p);
    });
    tp.join();
    Spread s;
    s.busy = allgather(busy.load());
    long done = 0;
    for (int r = 0; r < n; ++r)
        for (std::uint64_t i = 1; i <= 6; ++i)
            if (Work* w = objs.local(mobile_ptr<Work>(ObjectKey{r, 0, i}))) done += w->done;
    s.done = allreduce_sum(done);
    s.migrations = allreduce_sum(long(bal.migrations()));
    return s;
}

void expect_balanced(const Spread& s, int per_object) {
    const int n = int(s.busy.size());
    EXPECT_EQ(s.done, 6L * n * per_object);  // exactly once
    if (n < 2) return;
    const BusySpread b = busy_spread(s.busy);
    // Static placement leaves every rank but 0 at zero: max/mean = n. Balanced within
    // object granularity on an oversubscribed machine: a loose bound.
    EXPECT_LT(b.hi / b.mean, 2.0) << "max busy " << b.hi << " s, mean " << b.mean << " s";
    EXPECT_GT(b.lo / b.mean, 0.2) << "min busy " << b.lo << " s, mean " << b.mean << " s";
    EXPECT_GT(s.migrations, 0);
}

}  // namespace

TEST(BalanceMpi, RotateKeepsTheGuaranteesOfTheObjectsLayer) {
    const int n = world_size();
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
    const long per_rank = 150;  // every object moves every 5 ms: sanitized migrations are slow
#else
    const long per_rank = 1000;
#endif
    const Outcome r = run(make_policy("rotate"), true, false, per_rank, 0.005);
    EXPECT_EQ(allreduce_sum(r.local), 4L * n);  // every object lives in exactly one place
    EXPECT_EQ(allreduce_sum(r.count), 4L * n * n * per_rank);  // exactly once
    EXPECT_EQ(allreduce_sum(r.disorder), 0);                   // per-sender order
    EXPECT_EQ(allreduce_sum(r.overlaps), 0);                   // exclusive handlers alone
    EXPECT_EQ(allreduce_sum(r.names), 4L * n);                 // contents intact
    const long steps = allreduce_sum(r.steps);
    if (n > 1) {
        EXPECT_GT(steps, 0);
    }
}

TEST(BalanceMpi, PinnedObjectsNeverMove) {
    const int n = world_size();
    const Outcome r = run(make_policy("rotate"), true, true, 300, 0.0005);
    EXPECT_EQ(allreduce_sum(r.moved), 0);
    EXPECT_EQ(allreduce_sum(r.count), 4L * n * n * 300);
    EXPECT_EQ(allreduce_sum(r.disorder), 0);
}

TEST(BalanceMpi, PinsHoldAgainstAPolicyThatIgnoresThem) {
    const int n = world_size();
    const Outcome r = run(std::make_unique<IgnoresPins>(), true, true, 300, 0.0005);
    EXPECT_EQ(allreduce_sum(r.moved), 0);
    EXPECT_EQ(allreduce_sum(r.count), 4L * n * n * 300);
    EXPECT_EQ(allreduce_sum(r.disorder), 0);
}

TEST(BalanceMpi, BalancingOffMeansNoMigration) {
    const int n = world_size();
    const Outcome r = run(make_policy("rotate"), false, false, 300, 0.0005);
    EXPECT_EQ(allreduce_sum(r.moved), 0);
    EXPECT_EQ(allreduce_sum(r.steps), 0);
    EXPECT_EQ(allreduce_sum(r.count), 4L * n * n * 300);
}

TEST(BalanceMpi, DiffusionSpreadsAConcentratedPlacement) {
    expect_balanced(concentrated(std::make_unique<Diffusion>(), true, false, 40), 40);
}

TEST(BalanceMpi, MasterWorkerSpreadsAConcentratedPlacement) {
    expect_balanced(concentrated(std::make_unique<MasterWorker>(), true, false, 40), 40);
}

TEST(BalanceMpi, DiffusionAndMasterWorkerLeaveABalancedRunAlone) {
    const int n = world_size();
    const int me = world_rank();
    // With more than two ranks per core, a suite running beside it slows ranks for real
    // (37-40 migrations at 8 ranks on 2 busy cores, three runs in a row, against 57 and 31
    // undamped): no bound tells damping from real imbalance there. The 1-4 rank runs check it.
    const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
    if (static_cast<unsigned>(n) > 2 * cores)
        GTEST_SKIP() << n << " ranks on " << cores << " cores: checked at 1-4 ranks";
    for (const char* name : {"diffusion", "master_worker"}) {
        // Undamped, these policies moved up to one object per object here (15 and 11 at 4
        // ranks, 57 and 31 at 8: work taken from ranks whose work was queued a little later,
        // moved back and forth in the end game); damped, 0-3 as a rule. A loaded machine can
        // slow a rank down for real, and then moving work is right (up to 6 seen at 2 and 3
        // ranks; 17 and 23 once at 8 ranks on 2 cores busy with a full suite run): a loose
        // bound, under the undamped 57 and 31 at 8 ranks and 15 at 4, and a run over it is
        // tried again, up to three times in all. Damping that does not work misses every time.
        Spread s;
        for (int attempt = 1; attempt <= 3; ++attempt) {
            s = balanced(make_policy(name), 30);
            EXPECT_EQ(s.done, 6L * n * 30) << name;
            if (me == 0)
                std::printf("%s: %ld migrations in a balanced run on %d ranks (attempt %d)\n", name,
                            s.migrations, n, attempt);
            if (s.migrations <= 2 * n + 6) break;  // s.migrations is the same on every rank
        }
        EXPECT_LE(s.migrations, 2 * n + 6) << name;
    }
}

TEST(BalanceMpi, DiffusionAndMasterWorkerLeavePinnedObjects) {
    const int n = world_size();
    for (const char* name : {"diffusion", "master_worker"}) {
        const Spread s = concentrated(make_policy(name), true, true, 10);
        EXPECT_EQ(s.moved, 0) << name;
        EXPECT_EQ(s.migrations, 0) << name;
        EXPECT_EQ(s.done, 6L * n * 10) << name;
    }
}

TEST(BalanceMpi, DiffusionAndMasterWorkerOffMeanNoMigration) {
    const int n = world_size();
    for (const char* name : {"diffusion", "master_worker"}) {
        const Spread s = concentrated(make_policy(name), false, false, 10);
        EXPECT_EQ(s.moved, 0) << name;
        EXPECT_EQ(s.migrations, 0) << name;
        EXPECT_EQ(s.done, 6L * n * 10) << name;
        for (int r = 1; r < n; ++r)
            EXPECT_EQ(s.busy[r], 0.0) << name;
    }
}

TEST(BalanceMpi, SwitchedOnWhileRunning) {
    const int n = world_size();
    // Off at first; rank 0 switches it on after 5 handlers (the others stay on throughout
    // as well: a rank's switch governs its own steps and objects).
    const int me = world_rank();
    const Spread s = concentrated(make_policy("diffusion"), me != 0, false, 30, 5);
    EXPECT_EQ(s.done, 6L * n * 30);
    if (n > 1) {
        EXPECT_GT(s.migrations, 0);
        EXPECT_GT(s.moved, 0);
    }
}

TEST(BalanceMpi, PolicyByName) {
    EXPECT_STREQ(make_policy("none")->name(), "none");
    EXPECT_STREQ(make_policy("rotate")->name(), "rotate");
    EXPECT_STREQ(make_policy("diffusion")->name(), "diffusion");
    EXPECT_STREQ(make_policy("master_worker")->name(), "master_worker");
    EXPECT_THROW(make_policy("bogus"), UsageError);
}

TEST(BalanceMpi, PolicyFromTheEnvironment) {
    Communicator comm;
    Threadpool tp(1, &comm);
    Objects objs(tp, comm);
    setenv("CASCADE_BALANCE", "master_worker", 1);
    Balancer bal(objs);
    unsetenv("CASCADE_BALANCE");
    EXPECT_STREQ(bal.policy().name(), "master_worker");
    tp.join();
}

// The policies' messages name ranks (the master's table, a rank to give work to, a loaded
// rank heard of): a rank outside the job is refused as malformed, never used as an index.
TEST(BalanceMpi, PolicyMessagesNamingRanksOutsideTheJobAreRefused) {
    Communicator comm;
    Threadpool tp(1, &comm);
    Objects objs(tp, comm);
    Balancer mw(objs, std::make_unique<MasterWorker>(MasterWorkerOptions{.master = 0}));
    const int n = comm.ranks();
    // Both policies' messages: a kind (1 byte, padded to 4), a rank, two doubles.
    auto msg = [](std::uint8_t kind, std::int32_t rank, double x, double y) {
        std::vector<char> m(24, 0);
        std::memcpy(m.data(), &kind, 1);
        std::memcpy(m.data() + 4, &rank, 4);
        std::memcpy(m.data() + 8, &x, 8);
        std::memcpy(m.data() + 16, &y, 8);
        return m;
    };
    for (const int bad : {n, n + 1000, -1, -1000}) {
        for (const std::uint8_t kind : {1, 2, 5}) {  // a rank's load, a request: from `bad`
            const auto m = msg(kind, 0, 1.0, 0);
            EXPECT_THROW(mw.policy().on_message(mw, bad, m.data(), m.size()), WireError)
                << "kind " << int(kind) << " from rank " << bad;
        }
        for (const std::uint8_t kind : {3, 5}) {  // give `bad` work; could not give `bad` work
            const auto m = msg(kind, bad, 1.0, 1.0);
            EXPECT_THROW(mw.policy().on_message(mw, 0, m.data(), m.size()), WireError)
                << "kind " << int(kind) << " naming rank " << bad;
        }
    }
    tp.join();
}

TEST(BalanceMpi, DiffusionMessagesNamingRanksOutsideTheJobAreRefused) {
    Communicator comm;
    Threadpool tp(1, &comm);
    Objects objs(tp, comm);
    Balancer df(objs, std::make_unique<Diffusion>());
    const int n = comm.ranks();
    for (const int bad : {n, n + 1000, -2, -1000}) {
        std::vector<char> m(24, 0);
        const std::uint8_t kind = 2;  // a load we asked for, naming a loaded rank
        const std::int32_t rank = bad;
        const double x = 1.0, y = 5.0;
        std::memcpy(m.data(), &kind, 1);
        std::memcpy(m.data() + 4, &rank, 4);
        std::memcpy(m.data() + 8, &x, 8);
        std::memcpy(m.data() + 16, &y, 8);
        EXPECT_THROW(df.policy().on_message(df, 0, m.data(), m.size()), WireError) << bad;
        EXPECT_THROW(df.policy().on_message(df, bad, m.data(), m.size()), WireError) << bad;
    }
    tp.join();
}

// CASCADE_BALANCE alone balances a program with no balancing code: every Objects runs the
// policy it names; a Balancer the program makes takes over (and Objects::balancer names it).
TEST(BalanceMpi, TheEnvironmentAloneBalancesAProgramWithNoBalancer) {
    // One run: 6 objects per rank on rank 0, 40 requests of 1 ms each queued up front.
    auto run = [](const char* policy, long& moved, double& least_busy) {
        setenv("CASCADE_BALANCE", policy, 1);
        Communicator comm;
        Threadpool tp(1, &comm);
        Objects objs(tp, comm);
        unsetenv("CASCADE_BALANCE");
        ASSERT_NE(objs.balancer(), nullptr);
        EXPECT_STREQ(objs.balancer()->policy().name(), policy);
        const int me = comm.rank(), n = comm.ranks();
        std::atomic<double> busy{0};
        auto work = objs.make_handler<Work>(
            [&](Work& w) { sleep_counted(w, std::chrono::milliseconds(1), busy); },
            {.name = "work"});
        std::vector<mobile_ptr<Work>> ps;
        if (me == 0)
            for (int i = 0; i < 6 * n; ++i)
                ps.push_back(objs.create<Work>());
        MPI_Barrier(MPI_COMM_WORLD);
        if (me == 0)
            tp.insert([&] {
                for (int k = 0; k < 40; ++k)
                    for (auto& p : ps)
                        work->invoke(p);
            });
        tp.join();
        moved = allreduce_sum(long(objs.stats().migrations_out));
        const auto all = allgather(busy.load());
        least_busy = *std::min_element(all.begin(), all.end());
    };
    const int n = world_size();
    for (const char* policy : {"diffusion", "master_worker"}) {
        long moved = 0;
        double least = 0;
        // Timing on an oversubscribed machine: up to three runs (the same on every rank).
        for (int attempt = 0; attempt < 3 && (attempt == 0 || moved == 0); ++attempt)
            run(policy, moved, least);
        if (n > 1) {
            EXPECT_GT(moved, 0) << policy;
            EXPECT_GT(least, 0.0) << policy;
        }
    }
    // Made by the program: it takes over.
    setenv("CASCADE_BALANCE", "rotate", 1);
    Communicator comm;
    Threadpool tp(1, &comm);
    Objects objs(tp, comm);
    unsetenv("CASCADE_BALANCE");
    Balancer* implicit = objs.balancer();
    ASSERT_NE(implicit, nullptr);
    {
        Balancer mine(objs, std::make_unique<Diffusion>());
        EXPECT_EQ(objs.balancer(), &mine);
        EXPECT_FALSE(implicit->enabled());
        tp.join();
    }
    EXPECT_EQ(objs.balancer(), nullptr);
    tp.join();
}

// An idle rank's diffusion round goes on by its messages and never holds the rank: idle()
// asks (a handler ran here, so it has credit, and it has no work) and returns false, and
// called again while the answers are on their way it returns false too. A policy that asks to
// be called again keeps the rank counted busy, and at the end of the work, where every rank
// runs dry at once, join() waited a period and more for rounds that find nothing.
TEST(BalanceMpi, DiffusionIdleRoundsNeverHoldTheRank) {
    Communicator comm;
    Threadpool tp(1, &comm);
    Objects objs(tp, comm);
    // Switched off: the workers do not call idle() themselves (this test does), and the
    // policy still hears of handlers and answers its peers.
    Balancer bal(objs, make_policy("diffusion"), {.period_s = 0.002, .enabled = false});
    std::atomic<double> busy{0};
    auto work = objs.make_handler<Work>(
        [&](Work& w) { sleep_counted(w, std::chrono::milliseconds(1), busy); }, {.name = "work"});
    auto p = objs.create<Work>();
    work->invoke(p);
    tp.join();
    // Every rank ran a handler and has nothing left: each asks its neighbours.
    EXPECT_FALSE(bal.policy().idle(bal));
    EXPECT_FALSE(bal.policy().idle(bal));
    tp.join();  // the answers, and the rounds they start, end within the epoch
    EXPECT_EQ(objs.local(p)->done, 1);
}

// A rank with work of its own asks an announcing rank with more than twice as much before it
// runs dry: rank 0 holds 3x the work of each other rank (1 ms handlers queued up front); the
// others run some of rank 0's objects while over a third of their own handlers are still to
// run. A rank that asked only once its own work was nearly done (below limit_s: 10 of its
// 240 handlers) took its share in the last stretch of the work, from a donor several ranks
// asked at once.
TEST(BalanceMpi, DiffusionTakesWorkBeforeRunningDry) {
    const int n = world_size();
    if (n < 2) GTEST_SKIP() << "needs 2 ranks";
    long early = 0;
    for (int attempt = 1; attempt <= 3 && early == 0; ++attempt) {
        Communicator comm;
        Threadpool tp(1, &comm);
        Objects objs(tp, comm);
        Balancer bal(objs, make_policy("diffusion"), {.period_s = 0.002});
        const int me = comm.rank();
        constexpr int kPerObject = 30;
        const int mine = me == 0 ? 24 : 8;  // objects created here
        std::atomic<double> busy{0};
        std::atomic<long> own_left{long(mine) * kPerObject}, foreign_early{0};
        auto work = objs.make_handler<Work>(
            [&](Work& w, int& home) {
                sleep_counted(w, std::chrono::milliseconds(1), busy);
                if (home == me)
                    --own_left;
                else if (own_left.load() * 3 > long(mine) * kPerObject)
                    ++foreign_early;
            },
            {.name = "work"});
        std::vector<mobile_ptr<Work>> ps;
        for (int i = 0; i < mine; ++i)
            ps.push_back(objs.create<Work>());
        MPI_Barrier(MPI_COMM_WORLD);
        tp.insert([&] {
            for (int k = 0; k < kPerObject; ++k)
                for (auto& p : ps)
                    work->invoke(p, me);
        });
        tp.join();
        early = allreduce_sum(long(foreign_early.load()));
        if (world_rank() == 0)
            std::printf(
                "diffusion: %ld handlers of rank 0's objects run early elsewhere on %d "
                "ranks (attempt %d)\n",
                early, n, attempt);
    }
    EXPECT_GT(early, 0);
}

// The damping of the shipped policies' donor: a rank gives work only while its load is more
// than BalanceOptions::balanced_ratio times the asker's recent peak load (a queue that emptied
// for a moment, chains that ended a little earlier there: balanced). Loads from a load
// function, so the decision does not depend on timing: 4 objects of 50 ms on rank 0, asked
// by rank 1 with nothing queued now.
TEST(BalanceMpi, ADonorGivesNothingToARankThatHadAsMuchAMomentAgo) {
    const int n = world_size();
    if (n < 2) GTEST_SKIP() << "needs 2 ranks";
    for (const double ratio : {1.5, 0.0}) {
        Communicator comm;
        Threadpool tp(1, &comm);
        Objects objs(tp, comm);
        Balancer bal(objs, make_policy("none"), {.balanced_ratio = ratio});
        objs.set_load<Work>([](const Work&) { return 0.05; });
        if (comm.rank() == 0) {
            for (int i = 0; i < 4; ++i)
                objs.create<Work>();
            bal.here_for(bal.local_objects());  // seen here from now on
            std::this_thread::sleep_for(std::chrono::duration<double>(2 * bal.options().hold_s));
            // The asker had 0.15 s a moment ago: 0.2 s here is within 1.5 times that.
            const detail::Ask had_as_much{.load = 0, .min_gap = 0.01, .level = 0.15};
            const auto refused = detail::donate(bal, 1, had_as_much);
            if (ratio > 0) {
                EXPECT_EQ(refused.objects, 0);
                EXPECT_EQ(refused.work, 0.0);
                // It had 0.1 s at most: 0.2 s here is more than 1.5 times that.
                const detail::Ask had_less{.load = 0, .min_gap = 0.01, .level = 0.1};
                const auto given = detail::donate(bal, 1, had_less);
                EXPECT_EQ(given.objects, 2);  // half the gap: two of the four
                EXPECT_NEAR(given.work, 0.1, 1e-9);
            } else {  // no damping: the loads of the moment alone
                EXPECT_EQ(refused.objects, 2);
            }
        }
        tp.join();
        std::size_t here = bal.local_objects().size();
        EXPECT_EQ(allreduce_sum(long(here)), 4L);  // every object in one place
    }
}

namespace {

// Calls work_left() over a little more than sustain_s (0.05 s in these tests): the floors
// cover it.
void sample_loads(const Balancer& bal) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(0.06);
    while (std::chrono::steady_clock::now() < until) {
        bal.work_left();
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    bal.work_left();
}

// Queues that stay as they are while a test reads the load model: rank 0 creates `objects`
// objects and runs one handler of 1 ms on each (measured), then queues `queued` requests on
// each from this thread (chained 0) behind a task that holds its one worker, waits until the
// objects have lived there for 2 hold_s, and calls check(bal) (a Balancer with policy none and
// `opts`). The worker is released when check returns, or leaves by a failed ASSERT or an
// exception; then every request runs, and exactly once.
template <class Check>
void with_held_queues(const BalanceOptions& opts, int objects, int queued, Check&& check) {
    Communicator comm;
    // Lets the task that holds rank 0's worker end; declared before the pool so that it
    // outlives the task, and set on every way out of the test (a failed ASSERT too).
    std::atomic<bool> release{false};
    Threadpool tp(1, &comm);
    struct Release {
        std::atomic<bool>& flag;
        ~Release() { flag = true; }
    } release_on_exit{release};
    Objects objs(tp, comm);
    Balancer bal(objs, make_policy("none"), opts);
    std::atomic<double> busy{0};
    auto work = objs.make_handler<Work>(
        [&](Work& w) { sleep_counted(w, std::chrono::milliseconds(1), busy); }, {.name = "work"});
    std::vector<mobile_ptr<Work>> ps;
    if (comm.rank() == 0)
        for (int i = 0; i < objects; ++i) {
            ps.push_back(objs.create<Work>());
            work->invoke(ps.back());  // measured: a handler ran on each
        }
    tp.join();
    if (comm.rank() == 0) {
        bal.here_for(bal.local_objects());  // seen here from now on
        tp.insert([&] {                     // holds the worker: the requests below stay queued
            while (!release.load())
                std::this_thread::sleep_for(std::chrono::milliseconds(1));
        });
        for (int k = 0; k < queued; ++k)
            for (auto& p : ps)
                work->invoke(p);
        std::this_thread::sleep_for(std::chrono::duration<double>(2 * bal.options().hold_s));
        check(bal);
        release = true;
    }
    tp.join();
    long done = 0;
    for (int i = 1; i <= objects; ++i)
        if (Work* w = objs.local(mobile_ptr<Work>(ObjectKey{0, 0, std::uint64_t(i)})))
            done += w->done;
    EXPECT_EQ(allreduce_sum(done), long(objects) * (queued + 1));  // exactly once
}

}  // namespace

// An imbalance found goes on being moved down to BalanceOptions::sustained_ratio: a donor
// with 1.33 times the asker's recent peak load (within balanced_ratio 1.5, above
// sustained_ratio 1.2) gives nothing while it has not given work lately, and gives once it
// gave some (to a rank with less) and its load stayed above 1.2 times the asker's for
// sustain_s; with sustained_ratio 0 it gives nothing. Loads from a load function (8 objects of
// 50 ms on rank 0), so the decisions do not depend on timing; level_s is long enough that the
// gift counts as recent on a loaded machine.
TEST(BalanceMpi, ADonorThatGaveKeepsGivingWhileTheImbalanceLasts) {
    const int n = world_size();
    if (n < 2) GTEST_SKIP() << "needs 2 ranks";
    for (const double sustained : {1.2, 0.0}) {
        Communicator comm;
        Threadpool tp(1, &comm);
        Objects objs(tp, comm);
        Balancer bal(objs, make_policy("none"),
                     {.level_s = 5.0, .sustained_ratio = sustained, .sustain_s = 0.05});
        objs.set_load<Work>([](const Work&) { return 0.05; });
        if (comm.rank() == 0) {
            for (int i = 0; i < 8; ++i)
                objs.create<Work>();
            bal.here_for(bal.local_objects());  // seen here from now on
            std::this_thread::sleep_for(std::chrono::duration<double>(2 * bal.options().hold_s));
            sample_loads(bal);
            // 0.4 s here, 1.33 times the asker's 0.3 s: no gift yet, so no floor.
            const detail::Ask close{.load = 0, .min_gap = 0.01, .level = 0.3, .horizon_level = 0.3};
            EXPECT_EQ(bal.load_floor(), 0.0);
            EXPECT_EQ(detail::donate(bal, 1, close).objects, 0);
            // A rank with 0.1 s, more than 1.5 times less, that wants 0.17 s: 3 objects go.
            const detail::Ask less{
                .load = 0, .want = 0.17, .min_gap = 0.01, .level = 0.1, .horizon_level = 0.1};
            EXPECT_EQ(detail::donate(bal, 1, less).objects, 3);
            sample_loads(bal);  // 0.25 s here since: 1.33 times 0.1875
            double near_floor = 0;
            const double floor = bal.load_floor(&near_floor);
            const detail::Ask lasting{
                .load = 0, .min_gap = 0.01, .level = 0.1875, .horizon_level = 0.1875};
            const auto given = detail::donate(bal, 1, lasting);
            if (sustained > 0) {
                EXPECT_NEAR(floor, 0.25, 1e-9);
                EXPECT_NEAR(near_floor, 0.25, 1e-9);
                EXPECT_EQ(given.objects, 2);  // half the gap, rounded down to whole objects
            } else {
                EXPECT_EQ(given.objects, 0);
            }
        }
        tp.join();
        EXPECT_EQ(allreduce_sum(long(bal.local_objects().size())), 8L);
    }
}

// Only chains count in the floors: a donor whose load is requests queued from elsewhere (a
// fan-out's queues, filled at the other ranks' pace) has no floors, and after giving work it
// still gives nothing within balanced_ratio, whatever sustained_ratio says. Rank 0 holds 8
// objects with 20 requests each queued from this thread (chained 0) behind a task that holds
// its worker; it gives to a rank with far less (so it gave lately), then keeps its floors at
// 0 and refuses an asker within balanced_ratio but above sustained_ratio. With loads from a
// load function (chains' work, as far as the floors go), the same steps give (see
// ADonorThatGaveKeepsGivingWhileTheImbalanceLasts).
TEST(BalanceMpi, AQueueFilledFromElsewhereKeepsNoFloors) {
    const int n = world_size();
    if (n < 2) GTEST_SKIP() << "needs 2 ranks";
    with_held_queues(
        {.level_s = 5.0, .sustained_ratio = 1.1, .sustain_s = 0.05}, 8, 20, [](Balancer& bal) {
            for (const auto& o : bal.local_objects())
                ASSERT_EQ(o.chained, 0.0);  // requests from this thread, not from its handler
            sample_loads(bal);
            double near = 0;
            const double load = bal.work_left(&near);
            ASSERT_GT(load, 0.0);
            // A rank with nothing, that wants 0.3 of this load: some objects go (handler times
            // differ a little between objects on a loaded machine), five at least stay.
            const detail::Ask empty{.load = 0, .want = 0.3 * load, .min_gap = 0.001};
            ASSERT_GT(detail::donate(bal, 1, empty).objects, 0);
            sample_loads(bal);  // the other objects' queues since, for over sustain_s
            double near_floor = -1;
            EXPECT_EQ(bal.load_floor(&near_floor), 0.0);  // no chains here
            EXPECT_EQ(near_floor, 0.0);
            // An asker with loads 1/1.3 of ours: within balanced_ratio, above sustained_ratio.
            const double left = bal.work_left(&near);
            const detail::Ask close{
                .load = 0, .min_gap = 0.001, .level = left / 1.3, .horizon_level = near / 1.3};
            const auto refused = detail::donate(bal, 1, close);
            EXPECT_EQ(refused.objects, 0);
            EXPECT_EQ(refused.work, 0.0);
        });
}

// A diffusion round whose most loaded neighbour has no more than balanced_ratio times the
// asker's recent peak load ends the asking: the work ends about evenly, and more rounds would
// only hold the epoch. Rank 0 holds 0.2 s of work (a load function), rank 1 had 0.15 s a
// moment ago and has none now; its round asks every other rank once, and no second round
// follows (the messages rank 1 queued, counted). Its peak fades over level_s, 5 s here: on a
// loaded machine the answers may take longer than the default 0.1 s allows (0.15 s faded to
// under 0.2 / 1.5 after 12 ms), and the round would no longer find the ranks balanced.
TEST(BalanceMpi, DiffusionStopsAskingWhenTheMostLoadedIsWithinTheRatio) {
    const int n = world_size();
    if (n < 2 || n > 5) GTEST_SKIP() << "2-5 ranks (every other rank a neighbour)";
    Communicator comm;
    Threadpool tp(1, &comm);
    Objects objs(tp, comm);
    Balancer bal(objs, make_policy("diffusion"),
                 {.period_s = 0.002, .enabled = false, .level_s = 5.0});
    std::atomic<double> each{comm.rank() == 0 ? 0.05 : comm.rank() == 1 ? 0.15 : 0.0};
    objs.set_load<Work>([&](const Work&) { return each.load(); });
    auto work = objs.make_handler<Work>([&](Work& w) { w.done++; }, {.name = "work"});
    const int objects = comm.rank() == 0 ? 4 : comm.rank() == 1 ? 1 : 0;
    for (int i = 0; i < objects; ++i)
        work->invoke(objs.create<Work>());  // a handler ran here: an idle moment asks
    tp.join();
    std::uint64_t sent = 0;
    if (comm.rank() == 1) {
        EXPECT_NEAR(bal.work_left(), 0.15, 1e-12);  // its peak
        each = 0;                                   // and now nothing
        EXPECT_EQ(bal.work_left(), 0.0);
        const std::uint64_t before = comm.stats().queued;
        EXPECT_FALSE(bal.policy().idle(bal));
        tp.join();  // the answers, and any round they start
        sent = comm.stats().queued - before;
    } else {
        tp.join();
    }
    if (comm.rank() == 1) {
        EXPECT_EQ(sent, std::uint64_t(n - 1));  // one round, no second
    }
    EXPECT_EQ(bal.migrations(), 0u);
}

// A queue of requests and chains that keep their workers busy at the same rate are balanced:
// rank 0 holds 4 objects with 20 requests queued on each (its one worker held by another
// task, so the queues stay as they are), and is asked by a rank whose chains on objects of
// the same cost made its recent peak load what these objects count over the horizon (1 +
// horizon_handlers requests each: a chain's request and its projected steps). The queue is
// four times that, but only because a queue's length is known and a chain's is not: the
// donor gives nothing. Asked by a rank with half that level it gives. The loads come from the
// objects' measured costs, read back, so the decisions do not depend on timing.
TEST(BalanceMpi, AQueueAndChainsAtTheSameRateAreBalanced) {
    const int n = world_size();
    if (n < 2) GTEST_SKIP() << "needs 2 ranks";
    constexpr int kQueued = 20;
    with_held_queues({}, 4, kQueued, [](Balancer& bal) {
        // The model's inputs, read back: queued work, and the same objects over the horizon.
        const double most = 1 + bal.options().horizon_handlers;
        double queued = 0, horizon = 0;
        for (const auto& o : bal.local_objects()) {
            ASSERT_GT(o.recent_s, 0.0);
            ASSERT_EQ(o.chained, 0.0);  // requests from this thread, not from its handler
            EXPECT_EQ(o.pending, std::size_t(kQueued));
            queued += double(o.pending) * o.recent_s;
            horizon += std::min(double(o.pending), most) * o.recent_s;
        }
        EXPECT_NEAR(bal.work_left(), queued, 1e-12);
        EXPECT_NEAR(bal.horizon_load(), horizon, 1e-12);
        EXPECT_GT(queued, bal.options().balanced_ratio * horizon);  // the queue looks heavier
        // Chains of the same rates there: nothing to give.
        const detail::Ask chains{
            .load = 0, .min_gap = 0.001, .level = horizon, .horizon_level = horizon};
        const auto refused = detail::donate(bal, 1, chains);
        EXPECT_EQ(refused.objects, 0);
        EXPECT_EQ(refused.work, 0.0);
        // Chains at half the rate: some of the queue goes.
        const detail::Ask fewer{
            .load = 0, .min_gap = 0.001, .level = horizon / 2, .horizon_level = horizon / 2};
        const auto given = detail::donate(bal, 1, fewer);
        EXPECT_GT(given.objects, 0);
    });
}
