// Mobile objects across ranks (run at 1-8 ranks): handlers run where the object lives,
// per-sender ordering through migrations (the ordering storm), exclusive vs shared access,
// migration with queued requests, migrate during call, lazy updates (0 hops afterwards),
// mobile_ptr inside active messages and other objects, objects with vector members.
#include <gtest/gtest.h>
#include <mpi.h>

#include <atomic>
#include <cascade/cascade.hpp>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "mpi_test_util.hpp"

using namespace cascade;
using cascade_test::allreduce_max;
using cascade_test::allreduce_sum;

namespace {

struct Counter {
    long value = 0;
};

// The ranks its handlers ran on, in order.
struct Trail {
    std::vector<int> ranks;
    template <class Archive>
    void serialize(Archive& ar) {
        ar(ranks);
    }
};

// Checks the order of the requests it receives from each sender.
struct Tally {
    std::vector<std::int64_t> last;  // per sender: last sequence number seen
    std::int64_t count = 0;
    std::int64_t disorder = 0;
    std::vector<double> payload;  // travels with the object; checked after migrations
    std::string name;
    template <class Archive>
    void serialize(Archive& ar) {
        ar(last, count, disorder, payload, name);
    }
};

Tally make_tally(int ranks, int id) {
    Tally t;
    t.last.assign(ranks, -1);
    t.name = "tally " + std::to_string(id);
    for (int i = 0; i < 1000; ++i)
        t.payload.push_back(id + 0.25 * i);
    return t;
}
bool payload_ok(const Tally& t, int id) {
    if (t.payload.size() != 1000 || t.name != "tally " + std::to_string(id)) return false;
    for (int i = 0; i < 1000; ++i)
        if (t.payload[i] != id + 0.25 * i) return false;
    return true;
}

// An object holding global pointers to others.
struct Node {
    std::vector<mobile_ptr<Counter>> neighbours;
    std::string label;
    template <class Archive>
    void serialize(Archive& ar) {
        ar(neighbours, label);
    }
};
// A big object (8 MiB): migrates as a large active message.
struct Big {
    std::vector<double> v;
    std::string s;
    template <class Archive>
    void serialize(Archive& ar) {
        ar(v, s);
    }
};

// Members of every kind a migration sends: big vectors and strings travel as bodies of their
// own (straight from and into the members), small ones in the message, and vectors of
// elements with big members of their own.
struct Part {
    std::vector<float> x;
    int id = 0;
    template <class Archive>
    void serialize(Archive& ar) {
        ar(x, id);
    }
};
struct Mixed {
    std::vector<double> a;        // 1 MiB
    std::vector<std::int32_t> b;  // 200 KiB
    std::string s;                // 100 KiB
    std::vector<char> small;      // 100 B
    std::vector<Part> parts;      // parts[0].x 320 KiB, parts[1].x 40 B
    long counter = 0;
    template <class Archive>
    void serialize(Archive& ar) {
        ar(a, small, b, counter, s, parts);
    }
};
Mixed make_mixed() {
    Mixed m;
    m.a.resize(1 << 17);
    for (std::size_t i = 0; i < m.a.size(); ++i)
        m.a[i] = 0.5 * double(i);
    m.b.resize(50000);
    for (std::size_t i = 0; i < m.b.size(); ++i)
        m.b[i] = -std::int32_t(i);
    m.s.assign(100000, 'q');
    m.s[777] = '!';
    m.small.assign(100, 's');
    m.parts.resize(2);
    m.parts[0].x.resize(80000);
    for (std::size_t i = 0; i < m.parts[0].x.size(); ++i)
        m.parts[0].x[i] = float(i % 1000);
    m.parts[0].id = 7;
    m.parts[1].x.assign(10, 2.5f);
    m.parts[1].id = 8;
    return m;
}
bool mixed_ok(const Mixed& m) {
    bool ok = m.a.size() == (1u << 17) && m.b.size() == 50000 && m.s.size() == 100000 &&
              m.s[777] == '!' && m.s[778] == 'q' && m.small == std::vector<char>(100, 's') &&
              m.parts.size() == 2 && m.parts[0].id == 7 && m.parts[0].x.size() == 80000 &&
              m.parts[1].id == 8 && m.parts[1].x == std::vector<float>(10, 2.5f);
    for (std::size_t i = 0; ok && i < m.a.size(); ++i)
        ok = m.a[i] == 0.5 * double(i);
    for (std::size_t i = 0; ok && i < m.b.size(); ++i)
        ok = m.b[i] == -std::int32_t(i);
    for (std::size_t i = 0; ok && i < m.parts[0].x.size(); ++i)
        ok = m.parts[0].x[i] == float(i % 1000);
    return ok;
}
// A trivially copyable object of 128 KiB: its own bytes are the body.
struct Plain {
    double v[1 << 14];
    long tag;
};

// Many object types (Kind<0> ... Kind<N-1>), each with its own name.
template <int I>
struct Kind {
    long value = I;
};
template <int... Is>
void register_kinds(Objects& objs, std::integer_sequence<int, Is...>) {
    (objs.register_type<Kind<Is>>(), ...);
}

template <class T>
mobile_ptr<T> ptr(int home, std::uint64_t id) {
    return mobile_ptr<T>(ObjectKey{home, 0, id});
}

}  // namespace

TEST(ObjectsMpi, HandlersRunWhereTheObjectLives) {
    Communicator comm;
    Threadpool tp(2, &comm);
    Objects objs(tp, comm);
    const int me = comm.rank(), n = comm.ranks();
    std::atomic<int> wrong_rank{0};
    auto add = objs.make_handler<Counter>(
        [&](Counter& c, int& home, long& k) {
            if (home != me) ++wrong_rank;
            c.value += k;
        },
        {.name = "add"});
    auto get = objs.make_handler<Counter>([](const Counter& c) { return c.value; },
                                          {.access = Access::shared, .name = "get"});
    auto p = objs.create<Counter>();
    EXPECT_EQ(p.home(), me);
    EXPECT_TRUE(objs.is_local(p));
    MPI_Barrier(MPI_COMM_WORLD);  // every object exists before anyone invokes it
    for (int r = 0; r < n; ++r)
        for (long k = 1; k <= 10; ++k)
            add->invoke(ptr<Counter>(r, p.id()), r, k);
    // A call issued after the invokes runs after them (same sender, same object).
    std::vector<future<long>> fs;
    for (int r = 0; r < n; ++r)
        fs.push_back(get->call(ptr<Counter>(r, p.id())));
    for (auto& f : fs) {
        const long v = f.get();
        EXPECT_GE(v, 55);
        EXPECT_LE(v, 55L * n);
    }
    tp.join();
    EXPECT_EQ(wrong_rank.load(), 0);
    EXPECT_EQ(objs.local(p)->value, 55L * n);
    EXPECT_EQ(objs.local_objects().size(), 1u);
}

// Arriving objects find their type among many registered ones, also past the first 256
// (those are found without a lock, the rest under it).
TEST(ObjectsMpi, ObjectsOfManyTypesMigrate) {
    Communicator comm;
    Threadpool tp(1, &comm);
    Objects objs(tp, comm);
    const int me = comm.rank(), n = comm.ranks();
    constexpr int kKinds = 300;
    register_kinds(objs, std::make_integer_sequence<int, kKinds>{});
    std::atomic<long> seen{0};
    auto first = objs.make_handler<Kind<0>>([&](Kind<0>& k) { seen += k.value + 1; });
    auto last = objs.make_handler<Kind<kKinds - 1>>([&](Kind<kKinds - 1>& k) { seen += k.value; });
    auto a = objs.create<Kind<0>>();
    auto b = objs.create<Kind<kKinds - 1>>();
    objs.migrate(a, (me + 1) % n);
    objs.migrate(b, (me + 1) % n);
    first->invoke(a);  // ordered behind the migrations: they run where the objects went
    last->invoke(b);
    tp.join();
    EXPECT_EQ(seen.load(), 1 + (kKinds - 1));
    EXPECT_EQ(objs.local_objects().size(), 2u);
    EXPECT_EQ(objs.is_local(a), n == 1);
}

// A handler run inside the message handler (run_in_handler) keeps the same guarantees.
TEST(ObjectsMpi, RunInHandlerKeepsOrderAndExclusivity) {
    Communicator comm;
    Threadpool tp(2, &comm);
    Objects objs(tp, comm);
    const int me = comm.rank(), n = comm.ranks();
    auto bump = objs.make_handler<Tally>(
        [](Tally& t, int& sender, std::int64_t& seq) {
            if (seq != t.last[sender] + 1) ++t.disorder;
            t.last[sender] = seq;
            ++t.count;
        },
        {.name = "bump_inline", .run_in_handler = true});
    auto p = objs.create<Tally>(make_tally(n, me));
    MPI_Barrier(MPI_COMM_WORLD);
    for (int r = 0; r < n; ++r)
        for (std::int64_t i = 0; i < 1000; ++i)
            bump->invoke(ptr<Tally>(r, p.id()), me, i);
    if (me == 0 && n > 1) objs.migrate(p, 1);
    tp.join();
    long count = 0, disorder = 0;
    for (int r = 0; r < n; ++r)
        if (Tally* t = objs.local(ptr<Tally>(r, p.id()))) {
            count += t->count;
            disorder += t->disorder;
        }
    EXPECT_EQ(allreduce_sum(count), 1000L * n * n);
    EXPECT_EQ(allreduce_sum(disorder), 0);
}

// Short handlers arriving at an idle pool run on the communication thread (after the message
// handlers, outside them): they still never overlap an exclusive handler on their object,
// shared ones still overlap only shared ones, and each sender's requests run in its order,
// also while the object migrates.
TEST(ObjectsMpi, ShortHandlersOnTheCommThreadKeepAccessAndOrder) {
    Communicator comm;
    Threadpool tp(2, &comm);
    Objects objs(tp, comm);
    const int me = comm.rank(), n = comm.ranks();
    std::atomic<int> in_shared{0}, in_exclusive{0}, violations{0}, runs_on_comm{0};
    auto on_comm = [&] { return comm.on_comm_thread() && tp.current_thread() < 0; };
    auto enter_exclusive = [&] {
        if (++in_exclusive != 1 || in_shared.load() != 0) ++violations;
    };
    // Short (trusted after a few runs): checks its sender's order.
    auto tick = objs.make_handler<Tally>(
        [&](Tally& t, int& sender, std::int64_t& seq) {
            enter_exclusive();
            if (seq != t.last[sender] + 1) ++t.disorder;
            t.last[sender] = seq;
            ++t.count;
            if (on_comm()) ++runs_on_comm;
            --in_exclusive;
            return on_comm();
        },
        {.name = "tick"});
    // Long: runs on workers, overlapping the communication thread's handlers in time.
    auto slow = objs.make_handler<Tally>(
        [&](Tally& t, int& sender, std::int64_t& seq) {
            enter_exclusive();
            if (seq != t.last[sender] + 1) ++t.disorder;
            t.last[sender] = seq;
            ++t.count;
            std::this_thread::sleep_for(std::chrono::microseconds(300));
            --in_exclusive;
        },
        {.name = "slow"});
    auto peek = objs.make_handler<Tally>(
        [&](const Tally& t) {
            ++in_shared;
            if (in_exclusive.load() != 0) ++violations;
            const long c = t.count;
            if (on_comm()) ++runs_on_comm;
            --in_shared;
            return c;
        },
        {.access = Access::shared, .name = "peek"});
    auto p = objs.create<Tally>(make_tally(n, me));
    const auto target = ptr<Tally>(0, p.id());  // rank 0's object
    MPI_Barrier(MPI_COMM_WORLD);
    std::int64_t seq = 0;
    long sent = 0;
    std::mt19937 rng(me);
    tp.insert([&] {
        // One request at a time: each arrives at an idle pool (the path under test)...
        if (me != 0)
            for (int i = 0; i < 200; ++i, ++sent)
                tick->call(target, me, seq++).get();
        // ... then a storm of short, long and shared requests while rank 1 moves the object.
        for (int i = 0; i < 3000; ++i) {
            const unsigned r = rng() % 100;
            if (r < 2) {
                slow->invoke(target, me, seq++);
                ++sent;
            } else if (r < 10) {
                peek->invoke(target);
            } else {
                tick->invoke(target, me, seq++);
                ++sent;
            }
            if (me == 1 && i % 500 == 250) objs.migrate(target, int(rng() % n));
        }
    });
    tp.join();
    long count = 0, disorder = 0, good_payload = 0;
    if (Tally* t = objs.local(target)) {
        count = t->count;
        disorder = t->disorder;
        good_payload = payload_ok(*t, 0);
    }
    EXPECT_EQ(violations.load(), 0) << "rank " << me;
    EXPECT_EQ(allreduce_sum(count), allreduce_sum(sent));  // exactly once
    EXPECT_EQ(allreduce_sum(disorder), 0);                 // per-sender order
    EXPECT_EQ(allreduce_sum(good_payload), 1);
    const long comm_runs = allreduce_sum(long(objs.stats().on_comm_thread));
    EXPECT_EQ(comm_runs, allreduce_sum(long(runs_on_comm.load())));
    if (n > 1) {
        EXPECT_GT(comm_runs, 0) << "no handler ran on the communication thread";
    }
}

// 4 senders (ranks 0-3, or fewer ranks) x 100000 invokes to objects that one rank keeps
// migrating every ~100 us: every request runs exactly once, in its sender's order, and no
// request takes more than two forwards before it is sent through the home rank.
TEST(ObjectsMpi, OrderingStormUnderMigrations) {
    Communicator comm;
    Threadpool tp(2, &comm);
    Objects objs(tp, comm);
    const int me = comm.rank(), n = comm.ranks();
    const int senders = std::min(n, 4);
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
    const long per_sender = 20000;  // a sanitized build runs this 30-70x slower
#else
    const long per_sender = 100000;
#endif
    const int per_rank = 2;  // objects created by each rank
    auto bump = objs.make_handler<Tally>(
        [](Tally& t, int& sender, std::int64_t& seq) {
            if (seq != t.last[sender] + 1) ++t.disorder;
            t.last[sender] = seq;
            ++t.count;
        },
        {.name = "bump"});
    // Half of the migrations are made by a handler of the object itself: as it ends when
    // nothing waits on the object, queued behind the waiting requests otherwise.
    auto move_self = objs.make_handler<Tally>(
        [&](Tally&, mobile_ptr<Tally>& self, int& dest) { objs.migrate(self, dest); },
        {.name = "move_self"});
    std::vector<mobile_ptr<Tally>> mine;
    for (int i = 0; i < per_rank; ++i)
        mine.push_back(objs.create<Tally>(make_tally(n, me * per_rank + i)));
    std::vector<mobile_ptr<Tally>> all;
    for (int r = 0; r < n; ++r)
        for (int i = 0; i < per_rank; ++i)
            all.push_back(ptr<Tally>(r, mine[i].id()));
    MPI_Barrier(MPI_COMM_WORLD);

    std::atomic<bool> sending_done{me >= senders};
    long migrations = 0, self_moves = 0;
    if (me < senders) {
        tp.insert([&] {
            std::vector<std::int64_t> seq(all.size(), 0);
            std::mt19937 rng(me);
            for (long i = 0; i < per_sender; ++i) {
                const std::size_t o = rng() % all.size();
                bump->invoke(all[o], me, seq[o]++);
            }
            sending_done = true;
        });
    }
    // The mover: while this rank's sender runs, one migration every ~100 us (at least one,
    // should the sender finish first).
    std::function<void()> mover;
    std::mt19937 mrng(1000 + me);
    mover = [&] {
        if (sending_done && migrations > 0) return;
        const auto& p = all[mrng() % all.size()];
        const int dest = int(mrng() % n);
        if (migrations % 2 == 0) {
            objs.migrate(p, dest);
        } else {
            move_self->invoke(p, p, dest);
            ++self_moves;
        }
        ++migrations;
        std::this_thread::sleep_for(std::chrono::microseconds(100));
        tp.insert([&] { mover(); });
    };
    if (me == 0 && n > 1) tp.insert([&] { mover(); });
    tp.join();

    long count = 0, disorder = 0, good_payload = 0, local = 0;
    for (auto& p : all) {
        if (Tally* t = objs.local(p)) {
            ++local;
            count += t->count;
            disorder += t->disorder;
            good_payload += payload_ok(*t, int(p.home() * per_rank + p.id() - 1));
        }
    }
    const auto st = objs.stats();
    EXPECT_EQ(allreduce_sum(local), long(all.size()));  // each object lives in one place
    EXPECT_EQ(allreduce_sum(good_payload), long(all.size()));
    EXPECT_EQ(allreduce_sum(count), senders * per_sender);  // exactly once
    EXPECT_EQ(allreduce_sum(disorder), 0);                  // per-sender order
    EXPECT_EQ(allreduce_sum(long(st.handlers_run)),
              senders * per_sender + allreduce_sum(self_moves));
    EXPECT_LE(allreduce_max(long(st.max_hops_before_home)), Objects::kMaxHopsBeforeHome);
    const long moved = allreduce_sum(migrations);
    const long forwards = allreduce_sum(long(st.forwards));
    const long updates = allreduce_sum(long(st.lazy_updates));
    const long max_hops = allreduce_max(long(st.max_hops));
    const long by_handler = allreduce_sum(long(st.moved_by_handler));
    if (me == 0)
        std::printf(
            "storm: %ld migrations (%ld moved by their handler as it ended), %ld forwards, %ld "
            "lazy updates, max hops %ld\n",
            moved, by_handler, forwards, updates, max_hops);
    if (n > 1) {
        EXPECT_GT(moved, 0);
    }
}

// After a forwarded request, the rank that ran it tells the sender where the object is:
// the sender's next request goes straight there (0 hops).
TEST(ObjectsMpi, LazyUpdateMakesTheNextRequestDirect) {
    Communicator comm;
    Threadpool tp(2, &comm);
    Objects objs(tp, comm);
    const int me = comm.rank(), n = comm.ranks();
    auto where = objs.make_handler<Counter>([&](Counter&) { return me; }, {.name = "where"});
    auto go = comm.make_active_msg([&](mobile_ptr<Counter>& p) {
        tp.insert([&, p] {
            EXPECT_EQ(where->call(p).get(), 1);  // via the home: forwarded once
            EXPECT_EQ(where->call(p).get(), 1);  // straight to rank 1
        });
    });
    if (n >= 3 && me == 0) {
        auto p = objs.create<Counter>();
        objs.migrate(p, 1);
        EXPECT_EQ(where->call(p).get(), 1);  // after the migration (same sender: ordered)
        go->send(2, p);
    }
    tp.join();
    const auto st = objs.stats();
    if (n >= 3) {
        EXPECT_EQ(allreduce_sum(long(st.by_hops[1])), 1);  // rank 2's first call
        long more = 0;
        for (int h = 2; h < 8; ++h)
            more += long(st.by_hops[h]);
        EXPECT_EQ(allreduce_sum(more), 0);
        EXPECT_EQ(allreduce_sum(long(st.lazy_updates)), 1);
    }
}

// The home learns where its object is from the object's arrivals elsewhere, except those
// from the home itself: its departure set the location already. Requests through the home
// still find the object.
TEST(ObjectsMpi, ArrivalsFromTheHomeSendTheHomeNoUpdate) {
    Communicator comm;
    Threadpool tp(2, &comm);
    Objects objs(tp, comm);
    const int me = comm.rank(), n = comm.ranks();
    auto where = objs.make_handler<Counter>([&](Counter&) { return me; }, {.name = "where"});
    if (n >= 2 && me == 0) {
        auto p = objs.create<Counter>();
        objs.migrate(p, 1);  // from the home: no update
        EXPECT_EQ(where->call(p).get(), 1);
        objs.migrate(p, 0);              // to the home: none
        objs.migrate(p, 1);              // from the home again: none
        if (n >= 3) objs.migrate(p, 2);  // from rank 1: one
        EXPECT_EQ(where->call(p).get(), n >= 3 ? 2 : 1);
    }
    tp.join();
    const auto st = objs.stats();
    EXPECT_EQ(allreduce_sum(long(st.home_updates)), n >= 3 ? 1 : 0);
    EXPECT_EQ(allreduce_sum(long(st.migrations_in)), n >= 3 ? 4 : n == 2 ? 3 : 0);
}

TEST(ObjectsMpi, SharedHandlersOverlapExclusiveOnesNever) {
    Communicator comm;
    Threadpool tp(4, &comm);
    Objects objs(tp, comm);
    const int me = comm.rank();
    struct Probe {
        int x = 0;
    };
    std::atomic<int> in_shared{0}, in_exclusive{0}, max_shared{0}, violations{0};
    auto read = objs.make_handler<Probe>(
        [&](const Probe&) {
            const int s = ++in_shared;
            if (in_exclusive.load()) ++violations;
            int m = max_shared.load();
            while (s > m && !max_shared.compare_exchange_weak(m, s)) {
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(2));
            --in_shared;
        },
        {.access = Access::shared, .name = "read"});
    auto write = objs.make_handler<Probe>(
        [&](Probe& p) {
            if (++in_exclusive != 1 || in_shared.load() != 0) ++violations;
            ++p.x;
            std::this_thread::sleep_for(std::chrono::microseconds(300));
            --in_exclusive;
        },
        {.name = "write"});
    auto p = objs.create<Probe>();
    for (int round = 0; round < 5; ++round) {
        for (int i = 0; i < 8; ++i)
            read->invoke(p);
        write->invoke(p);
        write->invoke(p);
    }
    tp.join();
    EXPECT_EQ(violations.load(), 0) << "rank " << me;
    EXPECT_GE(max_shared.load(), 2) << "shared handlers never overlapped";
    EXPECT_EQ(objs.local(p)->x, 10);
}

// Requests queued behind a slow handler travel with the object; a migration to the rank
// that holds the object does nothing.
TEST(ObjectsMpi, MigrationCarriesQueuedRequests) {
    Communicator comm;
    Threadpool tp(2, &comm);
    Objects objs(tp, comm);
    const int me = comm.rank(), n = comm.ranks();
    std::atomic<int> ran_elsewhere{0};
    auto slow = objs.make_handler<Tally>(
        [&](Tally& t, std::int64_t& seq) {
            if (seq != t.last[0] + 1) ++t.disorder;
            t.last[0] = seq;
            ++t.count;
            if (me != 0) ++ran_elsewhere;
            if (seq == 0) std::this_thread::sleep_for(std::chrono::milliseconds(20));
        },
        {.name = "slow"});
    if (me == 0) {
        auto p = objs.create<Tally>(make_tally(1, 0));
        objs.migrate(p, 0);  // already here: nothing happens
        for (std::int64_t i = 0; i < 50; ++i)
            slow->invoke(p, i);  // the first one sleeps: the rest queue up
        objs.migrate(p, n - 1);
        for (std::int64_t i = 50; i < 100; ++i)
            slow->invoke(p, i);
        objs.migrate(p, n > 1 ? 1 : 0);
    }
    tp.join();
    long count = 0, disorder = 0;
    auto p = ptr<Tally>(0, 1);
    if (Tally* t = objs.local(p)) {
        count = t->count;
        disorder = t->disorder;
        EXPECT_TRUE(payload_ok(*t, 0));
    }
    EXPECT_EQ(allreduce_sum(count), 100);
    EXPECT_EQ(allreduce_sum(disorder), 0);
    const auto st = objs.stats();
    EXPECT_EQ(allreduce_sum(long(st.migrations_out)), n == 1 ? 0 : n == 2 ? 1 : 2);
}

// A handler that migrates its own object: with nothing queued on it, the object leaves as
// the handler ends (no request of its own) and the handler's later requests follow it; with a
// request queued behind the handler, that request still runs where the object was first.
TEST(ObjectsMpi, AHandlerMovingItsObjectKeepsTheOrderOfRequests) {
    Communicator comm;
    Threadpool tp(2, &comm);
    Objects objs(tp, comm);
    const int me = comm.rank(), n = comm.ranks(), far = n - 1;
    auto mark =
        objs.make_handler<Trail>([&](Trail& t) { t.ranks.push_back(me); }, {.name = "mark"});
    auto move = objs.make_handler<Trail>(
        [&](Trail&, mobile_ptr<Trail>& self, int& dest, int& nap_ms) {
            std::this_thread::sleep_for(std::chrono::milliseconds(nap_ms));
            objs.migrate(self, dest);
            mark->invoke(self);  // runs where the object goes
        },
        {.name = "move"});
    mobile_ptr<Trail> p;
    if (me == 0) p = objs.create<Trail>();
    MPI_Bcast(&p, sizeof p, MPI_BYTE, 0, MPI_COMM_WORLD);
    // Nothing queued: the object leaves as the handler ends.
    if (me == 0) move->invoke(p, p, far, 0);
    tp.join();
    EXPECT_EQ(allreduce_sum(long(objs.stats().moved_by_handler)), n > 1 ? 1 : 0);
    // A request queued behind the napping handler runs before the migration, where it was.
    if (me == 0) {
        move->invoke(p, p, 0, 200);
        mark->invoke(p);
    }
    tp.join();
    EXPECT_EQ(allreduce_sum(long(objs.stats().moved_by_handler)), n > 1 ? 1 : 0);
    if (me == 0) {
        const Trail* t = objs.local(p);
        ASSERT_NE(t, nullptr);
        EXPECT_EQ(t->ranks, (std::vector<int>{far, far, 0}));
    }
}

// A call whose object migrates while the call waits still gets its answer.
TEST(ObjectsMpi, MigrateDuringCall) {
    Communicator comm;
    Threadpool tp(2, &comm);
    Objects objs(tp, comm);
    const int me = comm.rank(), n = comm.ranks();
    auto square = objs.make_handler<Counter>(
        [&](Counter& c, long& x) {
            ++c.value;
            std::this_thread::sleep_for(std::chrono::microseconds(200));
            return x * x;
        },
        {.name = "square"});
    if (me == 0) objs.create<Counter>();
    MPI_Barrier(MPI_COMM_WORLD);
    auto p = ptr<Counter>(0, 1);
    std::vector<future<long>> fs;
    for (long i = 0; i < 20; ++i) {
        fs.push_back(square->call(p, i + 100 * me));
        if (me == 0) objs.migrate(p, int(i % n));
    }
    for (long i = 0; i < 20; ++i)
        EXPECT_EQ(fs[i].get(), (i + 100 * me) * (i + 100 * me));
    tp.join();
    long count = 0;
    if (auto* c = objs.local(p)) count = c->value;
    EXPECT_EQ(allreduce_sum(count), 20L * n);
}

// mobile_ptr inside an active message and inside another object (which migrates).
TEST(ObjectsMpi, MobilePtrInsideMessagesAndObjects) {
    Communicator comm;
    Threadpool tp(2, &comm);
    Objects objs(tp, comm);
    const int me = comm.rank(), n = comm.ranks();
    auto add =
        objs.make_handler<Counter>([](Counter& c, long& k) { c.value += k; }, {.name = "add"});
    auto poke = objs.make_handler<Node>(
        [&](Node& nd, long& k) {
            for (auto& q : nd.neighbours)
                add->invoke(q, k);
        },
        {.name = "poke"});
    auto c = objs.create<Counter>();
    auto nd = objs.create<Node>();
    MPI_Barrier(MPI_COMM_WORLD);
    auto am = comm.make_active_msg([&](mobile_ptr<Counter>& q, long& k) { add->invoke(q, k); });
    if (me == 0) {
        Node* local = objs.local(nd);
        for (int r = 0; r < n; ++r)
            local->neighbours.push_back(ptr<Counter>(r, c.id()));
        local->label = "hub";
        poke->invoke(nd, 1L);
        objs.migrate(nd, n - 1);
        poke->invoke(nd, 10L);
        for (int r = 0; r < n; ++r)
            am->send(r, ptr<Counter>((r + 1) % n, c.id()), 100L);
    }
    tp.join();
    EXPECT_EQ(objs.local(c)->value, 111);
    auto hub = ptr<Node>(0, nd.id());
    if (Node* h = objs.local(hub)) {
        EXPECT_EQ(h->label, "hub");
        EXPECT_EQ(h->neighbours.size(), std::size_t(n));
        EXPECT_EQ(me, n - 1);
    }
}

// Objects whose big members travel as bodies arrive intact, with the requests queued on them
// (which run after the migration, in order), around the ring of ranks and back.
TEST(ObjectsMpi, BigMembersMigrateAsBodies) {
    Communicator comm;
    Threadpool tp(2, &comm);
    Objects objs(tp, comm);
    const int me = comm.rank(), n = comm.ranks();
    std::atomic<int> bad{0};
    auto slow = objs.make_handler<Mixed>(
        [](Mixed&) { std::this_thread::sleep_for(std::chrono::milliseconds(2)); },
        {.name = "slow"});
    auto bump = objs.make_handler<Mixed>(
        [&](Mixed& m, long& expect) {
            if (m.counter != expect || !mixed_ok(m)) ++bad;
            ++m.counter;
        },
        {.name = "bump"});
    auto check = objs.make_handler<Mixed>([](const Mixed& m) { return mixed_ok(m); },
                                          {.access = Access::shared, .name = "check"});
    auto where = objs.make_handler<Plain>(
        [&](Plain& p, long& tag) {
            bool ok = p.tag == tag;
            for (int i = 0; ok && i < (1 << 14); ++i)
                ok = p.v[i] == i + 0.25;
            ++p.tag;
            return ok ? me : -1;
        },
        {.name = "where"});
    if (me == 0) {
        auto p = objs.create<Mixed>(make_mixed());
        auto q = objs.create<Plain>();
        Plain& plain = *objs.local(q);
        for (int i = 0; i < (1 << 14); ++i)
            plain.v[i] = i + 0.25;
        plain.tag = 0;
        long expect = 0;
        for (int round = 0; round < 2; ++round) {
            for (int r = 0; r < n; ++r) {
                const int dest = (r + 1) % n;
                slow->invoke(p);  // the next requests queue behind it and travel with the object
                for (int k = 0; k < 5; ++k)
                    bump->invoke(p, expect++);
                objs.migrate(p, dest);
                bump->invoke(p, expect++);
                EXPECT_TRUE(check->call(p).get()) << "after the move to rank " << dest;
                objs.migrate(q, dest);
                EXPECT_EQ(where->call(q, long(round * n + r)).get(), dest);
            }
        }
    }
    tp.join();
    EXPECT_EQ(bad.load(), 0) << "rank " << me;
    if (Mixed* m = objs.local(ptr<Mixed>(0, 1))) {
        EXPECT_EQ(m->counter, 12L * n);
    }
}

// Objects bigger than one small message migrate as large active messages.
TEST(ObjectsMpi, BigObjectsMigrate) {
    Communicator comm;
    Threadpool tp(2, &comm);
    Objects objs(tp, comm);
    const int me = comm.rank(), n = comm.ranks();
    auto check = objs.make_handler<Big>(
        [](Big& b) {
            bool ok = b.v.size() == (1u << 20) && b.s == "big";
            for (std::size_t i = 0; ok && i < b.v.size(); i += 4097)
                ok = b.v[i] == double(i);
            return ok;
        },
        {.name = "check"});
    if (me == 0) {
        Big b;
        b.v.resize(1u << 20);
        for (std::size_t i = 0; i < b.v.size(); ++i)
            b.v[i] = double(i);
        b.s = "big";
        auto p = objs.create<Big>(std::move(b));
        for (int r = 0; r < n; ++r) {
            objs.migrate(p, (r + 1) % n);
            EXPECT_TRUE(check->call(p).get()) << "after the move to rank " << (r + 1) % n;
        }
    }
    tp.join();
}

// A balancing migration asked for an object whose migrate or destroy is already dispatched
// (queued on a worker, not run yet) is refused: it would move the object again from where the
// migrate takes it, or find it destroyed.
TEST(ObjectsMpi, RebalanceBehindADispatchedMigrateOrDestroyIsRefused) {
    Communicator comm;
    Threadpool tp(1, &comm);  // one worker: what a handler dispatches waits until it returns
    Objects objs(tp, comm);
    const int me = comm.rank(), n = comm.ranks();
    std::atomic<int> accepted{0};
    // On the worker: a migrate and a destroy go to this worker's queue, behind this handler.
    auto act = objs.make_handler<Counter>(
        [&](Counter& c) {
            const auto moved = ptr<Counter>(0, 2), gone = ptr<Counter>(0, 3);
            objs.migrate(moved, 1);
            if (objs.rebalance(moved.key(), n - 1)) ++accepted;
            objs.destroy(gone);
            if (objs.rebalance(gone.key(), 1)) ++accepted;
            std::this_thread::sleep_for(std::chrono::milliseconds(50));
            ++c.value;
        },
        {.name = "act"});
    if (me == 0) {
        auto busy = objs.create<Counter>();  // 0:1
        objs.create<Counter>();              // 0:2
        objs.create<Counter>();              // 0:3
        if (n > 1) act->invoke(busy);
    }
    tp.join();
    EXPECT_EQ(accepted.load(), 0);
    if (n > 1) {
        const long here = objs.is_local(ptr<Counter>(0, 2)) ? 1 : 0;
        EXPECT_EQ(allreduce_sum(me == 1 ? here : 0), 1L);  // where migrate took it
        EXPECT_EQ(allreduce_sum(here), 1L);
    }
}

// Objects created, used from another rank, moved and destroyed round after round: every
// rank's directory forgets them (the home, the ranks they lived on, the ranks that sent them
// requests), and a late request still fails naming the destruction.
TEST(ObjectsMpi, DestroyedObjectsLeaveTheDirectory) {
    Communicator comm;
    Threadpool tp(2, &comm);
    Objects objs(tp, comm);
    const int me = comm.rank(), n = comm.ranks();
    auto add =
        objs.make_handler<Counter>([](Counter& c, long& k) { c.value += k; }, {.name = "add"});
    constexpr int kPerRound = 5000, kRounds = 4;
    std::uint64_t next_id = 1;
    std::vector<mobile_ptr<Counter>> mine;
    for (int round = 0; round < kRounds; ++round) {
        mine.clear();
        for (int i = 0; i < kPerRound; ++i)
            mine.push_back(objs.create<Counter>());
        MPI_Barrier(MPI_COMM_WORLD);  // every object exists before anyone invokes it
        const int prev = (me + n - 1) % n;
        for (int i = 0; i < kPerRound; ++i) {
            add->invoke(mine[i], 1L);
            if (prev != me) add->invoke(ptr<Counter>(prev, next_id + i), 1L);
            objs.migrate(mine[i], (me + 1) % n);
            if (round % 2 == 1) objs.migrate(mine[i], (me + 2) % n);  // through two ranks
        }
        tp.join();
        EXPECT_GE(objs.stats().directory, std::uint64_t(kPerRound)) << "round " << round;
        for (auto& p : mine)
            objs.destroy(p);
        tp.join();
        next_id += kPerRound;
        EXPECT_EQ(objs.stats().directory, 0u) << "round " << round;
    }
    EXPECT_EQ(objs.local_objects().size(), 0u);
}

// A migration's message announces the element count of each big member: a count no body
// could have is refused before anything is allocated for it.
TEST(ObjectsMpi, AnnouncedBodyCountsAreBoundedBeforeAllocating) {
    for (const std::uint64_t count : {std::uint64_t(1) << 58, std::uint64_t(1) << 50}) {
        std::vector<char> msg(sizeof count);
        std::memcpy(msg.data(), &count, sizeof count);
        std::vector<detail::BodyRef> bodies;
        detail::BodyReader br(msg.data(), msg.size(), bodies);
        std::vector<double> v;
        EXPECT_THROW(br.read_into(v), WireError) << count;
        EXPECT_TRUE(bodies.empty());
        std::vector<char> c;
        detail::BodyReader br2(msg.data(), msg.size(), bodies);
        EXPECT_THROW(br2.read_into(c), WireError) << count;
    }
}
