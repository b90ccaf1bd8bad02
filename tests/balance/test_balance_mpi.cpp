// Balancing (run at 1-8 ranks): the rotate policy moves every object at every step while
// thousands of requests run, and the objects layer keeps its guarantees (exactly once,
// per-sender order, exclusivity, contents); pinned objects never move; balancing off means
// no migration.
#include <gtest/gtest.h>
#include <mpi.h>

#include <atomic>
#include <cascade/balance/balancer.hpp>
#include <cascade/cascade.hpp>
#include <string>
#include <vector>

using namespace cascade;

namespace {

struct Tally {
    std::vector<std::int64_t> last;  // per sender
    std::int64_t count = 0;
    std::int64_t disorder = 0;
    int busy = 0;  // exclusive handlers running on it now
    std::int64_t overlaps = 0;
    std::string name;
    template <class Archive>
    void serialize(Archive& ar) {
        ar(last, count, disorder, overlaps, name);
    }
};

long sum(long x) {
    long y = 0;
    MPI_Allreduce(&x, &y, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    return y;
}

struct Outcome {
    long count = 0, disorder = 0, overlaps = 0, names = 0, local = 0, moved = 0, steps = 0;
};

// Every rank sends `per_rank` ordered requests to each of the objects (4 per rank).
Outcome run(const char* policy, bool enabled, bool pin_all, long per_rank) {
    Communicator comm;
    Threadpool tp(2, &comm);
    Objects objs(tp, comm);
    Balancer bal(objs, make_policy(policy), {.period_s = 0.0005, .enabled = enabled});
    const int me = comm.comm_rank(), n = comm.comm_size();
    auto bump = objs.make_handler<Tally>(
        [](Tally& t, int& sender, std::int64_t& seq) {
            if (++t.busy != 1) ++t.overlaps;
            if (seq != t.last[sender] + 1) ++t.disorder;
            t.last[sender] = seq;
            ++t.count;
            --t.busy;
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

}  // namespace

TEST(BalanceMpi, RotateKeepsTheGuaranteesOfTheObjectsLayer) {
    int n = 1;
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    const long per_rank = 1000;
    const Outcome r = run("rotate", true, false, per_rank);
    EXPECT_EQ(sum(r.local), 4L * n);                 // every object lives in exactly one place
    EXPECT_EQ(sum(r.count), 4L * n * n * per_rank);  // exactly once
    EXPECT_EQ(sum(r.disorder), 0);                   // per-sender order
    EXPECT_EQ(sum(r.overlaps), 0);                   // exclusive handlers alone
    EXPECT_EQ(sum(r.names), 4L * n);                 // contents intact
    const long steps = sum(r.steps);
    if (n > 1) {
        EXPECT_GT(steps, 0);
    }
}

TEST(BalanceMpi, PinnedObjectsNeverMove) {
    int n = 1;
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    const Outcome r = run("rotate", true, true, 300);
    EXPECT_EQ(sum(r.moved), 0);
    EXPECT_EQ(sum(r.count), 4L * n * n * 300);
    EXPECT_EQ(sum(r.disorder), 0);
}

TEST(BalanceMpi, BalancingOffMeansNoMigration) {
    int n = 1;
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    const Outcome r = run("rotate", false, false, 300);
    EXPECT_EQ(sum(r.moved), 0);
    EXPECT_EQ(sum(r.steps), 0);
    EXPECT_EQ(sum(r.count), 4L * n * n * 300);
}

TEST(BalanceMpi, PolicyByName) {
    EXPECT_STREQ(make_policy("none")->name(), "none");
    EXPECT_STREQ(make_policy("rotate")->name(), "rotate");
    EXPECT_THROW(make_policy("bogus"), UsageError);
}
