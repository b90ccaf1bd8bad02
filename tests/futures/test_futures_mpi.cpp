// Futures across ranks (run at 1-4 ranks): remote calls, round robin, exceptions across
// ranks, shared futures passed between ranks, when_all over several ranks, every worker
// waiting on remote results, and completion detection with outstanding asyncs.
#include <gtest/gtest.h>

#include <atomic>
#include <cascade/cascade.hpp>
#include <chrono>
#include <cstdlib>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include "mpi_test_util.hpp"

using namespace cascade;

namespace {
// With CASCADE_TEST_JOINER_WORKS=N in the environment the pool has N workers of which the
// thread in join() is one (ThreadpoolOptions::joiner_works), so gets and calls also run on the
// thread that drives MPI; without it, two workers and a joiner that only drives MPI.
int joiner_workers() {
    const char* s = std::getenv("CASCADE_TEST_JOINER_WORKS");
    return s ? std::atoi(s) : 0;
}
struct Env {
    Communicator comm;
    Threadpool tp{joiner_workers() > 0 ? joiner_workers() : 2, &comm,
                  ThreadpoolOptions{.joiner_works = joiner_workers() > 0}};
    Futures fx{tp, &comm};
    int me = comm.rank(), n = comm.ranks();
};
}  // namespace

// The pool these tests run on is the one the environment asks for.
TEST(FuturesMpi, PoolAsTheEnvironmentSays) {
    Env e;
    EXPECT_EQ(e.tp.joiner_works(), joiner_workers() > 0);
    EXPECT_EQ(e.tp.workers(), joiner_workers() > 0 ? joiner_workers() : 2);
    e.tp.join();
}

TEST(FuturesMpi, RemoteCallsToEveryRank) {
    Env e;
    auto where = e.fx.make_async([&](int& x) { return std::vector<int>{e.me, x * x}; }, "where");
    std::vector<future<std::vector<int>>> fs;
    for (int r = 0; r < e.n; ++r)
        fs.push_back(async(r, where, r + 10 * e.me));
    for (int r = 0; r < e.n; ++r) {
        auto v = fs[r].get();
        ASSERT_EQ(v.size(), 2u);
        EXPECT_EQ(v[0], r);
        EXPECT_EQ(v[1], (r + 10 * e.me) * (r + 10 * e.me));
    }
    e.tp.join();
}

TEST(FuturesMpi, AnyIsRoundRobin) {
    Env e;
    auto who = e.fx.make_async([&] { return e.me; }, "who");
    std::vector<int> count(e.n, 0);
    if (e.me == 0) {
        std::vector<future<int>> fs;
        for (int i = 0; i < 4 * e.n; ++i)
            fs.push_back(async(any, who));
        for (auto& f : fs)
            ++count[f.get()];
        for (int r = 0; r < e.n; ++r)
            EXPECT_EQ(count[r], 4) << "rank " << r;
    }
    e.tp.join();
}

TEST(FuturesMpi, ExceptionsCrossRanksWithTheirMessage) {
    Env e;
    auto boom = e.fx.make_async(
        [&](int& x) -> int {
            if (x >= 0) throw std::runtime_error("boom " + std::to_string(x));
            return x;
        },
        "boom");
    for (int r = 0; r < e.n; ++r) {
        auto f = async(r, boom, 100 * e.me + r);
        try {
            f.get();
            ADD_FAILURE() << "no exception from rank " << r;
        } catch (const RemoteError& x) {
            EXPECT_NE(r, e.me);
            EXPECT_EQ(x.rank(), r);
            EXPECT_EQ(std::string(x.what()), "async 'boom' on rank " + std::to_string(r) +
                                                 " threw: boom " + std::to_string(100 * e.me + r));
        } catch (const std::runtime_error& x) {
            EXPECT_EQ(r, e.me);  // a local call keeps the original exception
            EXPECT_EQ(std::string(x.what()), "boom " + std::to_string(100 * e.me + r));
        }
    }
    e.tp.join();
}

// The thesis's pipeline: stage 2 gets stage 1's future, not its value; it runs on another
// rank and fetches the value when it is there. Stage 3 forwards the future once more.
TEST(FuturesMpi, SharedFuturesPassedBetweenRanks) {
    Env e;
    auto stage1 = e.fx.make_async(
        [](int& i) {
            std::this_thread::sleep_for(std::chrono::milliseconds(i % 3));
            return std::vector<long>(100, long(i));
        },
        "stage1");
    auto stage2 = e.fx.make_async(
        [](shared_future<std::vector<long>>& in, int& i) {
            const auto& v = in.get();
            return std::accumulate(v.begin(), v.end(), 0L) + i;
        },
        "stage2");
    AsyncFn<long(shared_future<std::vector<long>>, int)> stage3;
    stage3 = e.fx.make_async(
        [&](shared_future<std::vector<long>>& in, int& i) {
            // forwards a future it received (a proxy) to yet another rank
            return async((e.me + 1) % e.n, stage2, in, i).get();
        },
        "stage3");
    auto dataflow = e.fx.make_async([](std::vector<long>& v) { return long(v.size()); }, "size");
    if (e.me == 0) {
        const int items = 12;
        std::vector<future<long>> out2, out3, out4;
        for (int i = 0; i < items; ++i) {
            shared_future<std::vector<long>> s1 = async((i + 1) % e.n, stage1, i).share();
            out2.push_back(async((i + 2) % e.n, stage2, s1, i));
            out3.push_back(async((i + 3) % e.n, stage3, s1, i));
            out4.push_back(async(any, dataflow, s1));  // parameter of the value type
        }
        for (int i = 0; i < items; ++i) {
            EXPECT_EQ(out2[i].get(), 101L * i);
            EXPECT_EQ(out3[i].get(), 101L * i);
            EXPECT_EQ(out4[i].get(), 100);
        }
        // a failed future passed along carries its error
        auto boom = async(e.n - 1, stage1, -1).then([](std::vector<long>) -> std::vector<long> {
            throw std::runtime_error("stage failed");
        });
        auto f = async(e.n - 1, stage2, boom.share(), 0);
        EXPECT_THROW(f.get(), std::runtime_error);
    }
    e.tp.join();
    EXPECT_EQ(e.fx.exported(), 0u);  // every exported state was fetched and released
}

TEST(FuturesMpi, WhenAllOverSeveralRanks) {
    Env e;
    auto twice = e.fx.make_async([&](int& x) { return 2 * x + 1000 * e.me; }, "twice");
    std::vector<future<int>> fs;
    for (int i = 0; i < 3 * e.n; ++i)
        fs.push_back(async(i % e.n, twice, i));
    auto all = when_all(std::move(fs)).get();
    for (int i = 0; i < 3 * e.n; ++i)
        EXPECT_EQ(all[i], 2 * i + 1000 * (i % e.n));
    auto t = when_all(async(0, twice, 1), async(e.n - 1, twice, 2)).get();
    EXPECT_EQ(std::get<0>(t), 2);
    EXPECT_EQ(std::get<1>(t), 4 + 1000 * (e.n - 1));
    std::vector<future<int>> any_of;
    for (int r = 0; r < e.n; ++r)
        any_of.push_back(async(r, twice, r));
    const std::size_t first = when_any(any_of).get();
    EXPECT_LT(first, any_of.size());
    EXPECT_EQ(any_of[first].get(), 2 * int(first) + 1000 * int(first));
    e.tp.join();
}

// Every worker of every rank blocks in get() on results from other ranks, which their
// own tasks compute: waiting workers keep running tasks, the joiner keeps MPI moving.
TEST(FuturesMpi, EveryWorkerWaitsOnRemoteResults) {
    Env e;
    AsyncFn<long(int)> fib;
    fib = e.fx.make_async(
        [&](int& n) -> long {
            if (n < 2) return n;
            auto a = async(any, fib, n - 1);
            auto b = async(any, fib, n - 2);
            return a.get() + b.get();
        },
        "fib");
    std::atomic<long> got{0};
    for (int w = 0; w < e.tp.workers(); ++w)
        e.tp.insert([&] { got += async(any, fib, 11).get(); }, w);
    e.tp.join();
    EXPECT_EQ(got.load(), 89L * e.tp.workers());
}

// join() must not return while an async is outstanding: the request was sent, or the
// result is not back yet, or the continuation that fulfills a Taskflow promise has not run.
TEST(FuturesMpi, CompletionWaitsForOutstandingAsyncs) {
    Env e;
    auto slow = e.fx.make_async(
        [](int& x) {
            std::this_thread::sleep_for(std::chrono::milliseconds(30));
            return x + 1;
        },
        "slow");
    Taskflow<int> tf(&e.tp, "after");
    std::atomic<int> ran{0}, value{0};
    tf.set_task([&](int) { ran = 1; });
    future<int> direct;
    if (e.me == 0) {
        e.tp.insert([&] {
            async(e.n - 1, slow, 41).then([&](int v) {
                value = v;
                tf.fulfill_promise(0);
            });
        });
        direct = async(e.n - 1, slow, 1);
    }
    e.tp.join();
    if (e.me == 0) {
        EXPECT_EQ(ran.load(), 1);
        EXPECT_EQ(value.load(), 42);
        EXPECT_TRUE(direct.ready());
        EXPECT_EQ(direct.get(), 2);
    }
    EXPECT_EQ(cascade_test::allreduce_sum(ran.load()), 1);
}

// Arguments of Futures::kLargeArg bytes or more leave as bodies after the request and land
// straight in the callee's argument: several per call, mixed with small ones and futures,
// lvalues (copied at the call) and rvalues (moved), vectors and strings, from tasks too,
// calls run in the handler, and a body argument whose call fails.
TEST(FuturesMpi, BigArgumentsTravelAsBodies) {
    Env e;
    const std::size_t big = Futures::kLargeArg / sizeof(double) + 17;
    auto checksum = [](const std::vector<double>& v) {
        double s = 0;
        for (std::size_t i = 0; i < v.size(); i += 97)
            s += v[i] * double(i + 1);
        return s + double(v.size());
    };
    auto sum = e.fx.make_async(
        [&](int& tag, std::vector<double>& a, std::string& s, std::vector<double>& b, long& k) {
            return std::vector<double>{double(tag),  checksum(a), double(s.size()),
                                       double(s[7]), checksum(b), double(k)};
        },
        "sum");
    auto inline_sum = e.fx.make_async([&](std::vector<double>& a) { return checksum(a); },
                                      "inline_sum", AsyncOptions{.run_in_handler = true});
    auto fail = e.fx.make_async(
        [](std::vector<double>& a) -> double {
            throw std::runtime_error("refused " + std::to_string(a.size()));
        },
        "fail");
    std::vector<double> a(big), b(3 * big + 5);
    for (std::size_t i = 0; i < a.size(); ++i)
        a[i] = double(i % 1000) + 0.5 * e.me;
    for (std::size_t i = 0; i < b.size(); ++i)
        b[i] = double(i % 77) - e.me;
    const std::string s(Futures::kLargeArg + 3, char('a' + e.me));
    const double ca = checksum(a), cb = checksum(b);

    std::vector<future<std::vector<double>>> fs;
    std::vector<future<double>> gs;
    for (int r = 0; r < e.n; ++r) {
        fs.push_back(async(r, sum, r, a, s, b, 5L));                            // lvalues: copied
        fs.push_back(async(r, sum, -r, std::vector<double>(a), std::string(s),  // rvalues
                           make_ready_future(b), 6L));
        gs.push_back(async(r, inline_sum, a));
    }
    a.assign(a.size(), -1.0);  // the calls copied their arguments when they were made
    for (int r = 0; r < e.n; ++r) {
        for (int k = 0; k < 2; ++k) {
            auto v = fs[2 * r + k].get();
            ASSERT_EQ(v.size(), 6u);
            EXPECT_EQ(v[0], k == 0 ? r : -r);
            EXPECT_EQ(v[1], ca) << "rank " << r;
            EXPECT_EQ(v[2], double(s.size()));
            EXPECT_EQ(v[3], double('a' + e.me));
            EXPECT_EQ(v[4], cb);
            EXPECT_EQ(v[5], 5.0 + k);
        }
        EXPECT_EQ(gs[r].get(), ca);
    }
    // From tasks, to the next rank; a failing call still consumes its body.
    std::vector<future<double>> from_tasks(4);
    std::atomic<int> failures{0};
    Taskflow<int> tf(&e.tp, "issue");
    tf.set_task([&](int i) {
        std::vector<double> v(big + i, double(i));
        from_tasks[i] = async((e.me + 1) % e.n, inline_sum, std::move(v));
        try {
            async((e.me + 1) % e.n, fail, std::vector<double>(big, 1.0)).get();
        } catch (const std::exception& ex) {
            if (std::string(ex.what()).find("refused " + std::to_string(big)) != std::string::npos)
                ++failures;
        }
    });
    for (int i = 0; i < 4; ++i)
        tf.fulfill_promise(i);
    e.tp.join();
    for (int i = 0; i < 4; ++i)
        EXPECT_EQ(from_tasks[i].get(), checksum(std::vector<double>(big + i, double(i))));
    EXPECT_EQ(failures.load(), 4);
    // Per other rank: a, s, b of the lvalue call, a, s, b of the rvalue one (b, a ready
    // future, leaves straight from its state), a of inline_sum; 4 x 2 from the previous
    // rank's tasks.
    EXPECT_EQ(e.fx.bodies_received(), e.n == 1 ? 0u : 7u * (e.n - 1) + 8u);
}

// Big results come back as bodies sent straight from the callee's result state, and a big
// shared future fetched by a third rank is answered the same way; errors stay messages.
TEST(FuturesMpi, BigResultsAndFetchedValuesTravelAsBodies) {
    Env e;
    const std::size_t big = Futures::kLargeArg / sizeof(double) + 5;
    auto make = e.fx.make_async(
        [big](int& seed, int& delay_ms) {
            std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms));
            std::vector<double> v(big + std::size_t(seed));
            for (std::size_t i = 0; i < v.size(); ++i)
                v[i] = double(seed) + double(i % 101);
            return v;
        },
        "make");
    auto check = e.fx.make_async(
        [big](int& seed, const std::vector<double>& v) {
            if (v.size() != big + std::size_t(seed)) return false;
            for (std::size_t i = 0; i < v.size(); ++i)
                if (v[i] != double(seed) + double(i % 101)) return false;
            return true;
        },
        "check");
    auto fail_big = e.fx.make_async(
        [](int& n) -> std::vector<double> { throw std::runtime_error("no " + std::to_string(n)); },
        "fail_big");
    const auto before = e.fx.bodies_received();
    std::uint64_t expected = 0;
    for (int r = 0; r < e.n; ++r) {
        const int seed = 10 * e.me + r;
        // Remote result: one body back to this rank.
        auto v = async(r, make, seed, 0).get();
        expected += r != e.me;
        ASSERT_EQ(v.size(), big + std::size_t(seed));
        EXPECT_EQ(v[3], double(seed) + 3.0);
        // A pending big result passed on to the next rank: that rank fetches it here and gets
        // it as a body, after it reached this rank as one.
        const int next = (r + 1) % e.n;
        auto sf = async(r, make, seed, 20).share();
        EXPECT_TRUE(async(next, check, seed, sf).get()) << "from rank " << r << " to " << next;
        expected += r != e.me;
        EXPECT_EQ(sf.get()[0], double(seed));
        try {
            (void)async(r, fail_big, seed).get();
            ADD_FAILURE() << "no exception";
        } catch (const std::exception& ex) {
            EXPECT_NE(std::string(ex.what()).find("no " + std::to_string(seed)), std::string::npos);
        }
    }
    e.tp.join();
    // Over all ranks: every remote result, plus one body per call of `check` on another rank
    // (sf fetched from its caller, or sent inline as a body if it was ready by then).
    const std::uint64_t mine = e.fx.bodies_received() - before;
    std::uint64_t total = 0, want = 0;
    MPI_Allreduce(&mine, &total, 1, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
    MPI_Allreduce(&expected, &want, 1, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
    std::uint64_t fetches = 0;
    for (int me = 0; me < e.n; ++me)
        for (int r = 0; r < e.n; ++r)
            fetches += ((r + 1) % e.n) != me;
    EXPECT_EQ(total, want + fetches);
}

// keep_result: the result stays on the callee's rank. A call there that takes it uses it in
// place, a call on a third rank fetches it straight from the owner (the caller only redirects),
// get() on the caller fetches it once, and errors still reach the caller.
TEST(FuturesMpi, KeptResultsStayWithTheirCallee) {
    Env e;
    const std::size_t big = Futures::kLargeArg / sizeof(double) + 5;
    auto make = e.fx.make_async(
        [&, big](int& i) {
            if (i < 0) throw std::runtime_error("kept failure " + std::to_string(i));
            std::this_thread::sleep_for(std::chrono::milliseconds(i % 3));
            return std::vector<double>(big, double(i + 1000 * e.me));
        },
        "make_kept", AsyncOptions{.keep_result = true});
    auto use =
        e.fx.make_async([&](const std::vector<double>& v,
                            int& i) { return v.size() == big ? v[0] - double(i) + 0.5 : -1.0; },
                        "use_kept");
    // a rank other than 0 and r (-1: none)
    const auto third = [&](int r) { return r != 1 ? (e.n > 1 ? 1 : -1) : (e.n > 2 ? 2 : -1); };
    const auto bodies0 = e.fx.bodies_received(), kept0 = e.fx.kept_in_place();
    const int items = 6;
    if (e.me == 0) {
        for (int i = 0; i < items; ++i) {
            for (int r = 0; r < e.n; ++r) {
                shared_future<std::vector<double>> f = async(r, make, i).share();
                auto on_owner = async(r, use, f, i);
                future<double> on_third;
                if (third(r) >= 0) on_third = async(third(r), use, f, i);
                // the value was computed on r, and reached each consumer intact
                EXPECT_EQ(on_owner.get(), 1000.0 * r + 0.5);
                if (third(r) >= 0) {
                    EXPECT_EQ(on_third.get(), 1000.0 * r + 0.5);
                }
                EXPECT_EQ(f.get().size(), big);
                EXPECT_EQ(f.get()[big - 1], double(i + 1000 * r));
            }
        }
        for (int r = 0; r < e.n; ++r) {
            auto bad = async(r, make, -r - 1).share();
            auto passed = async((r + 1) % e.n, use, bad, 0);
            try {
                (void)bad.get();
                ADD_FAILURE() << "no exception";
            } catch (const std::exception& ex) {
                EXPECT_NE(std::string(ex.what()).find("kept failure " + std::to_string(-r - 1)),
                          std::string::npos);
            }
            EXPECT_THROW((void)passed.get(), std::exception);
        }
    }
    if (e.me == 0) {
        // A small result is sent back at once (cheaper than a fetch later): the future is set
        // without anyone asking for its value.
        auto small = e.fx.make_async([](int& x) { return 3 * x; }, "small_kept",
                                     AsyncOptions{.keep_result = true});
        shared_future<int> s = async(e.n - 1, small, 5).share();
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
        while (!s.ref()->ready() && std::chrono::steady_clock::now() < deadline) {
            e.comm.progress();
            e.tp.work_as_joiner(1);  // a joining worker 0 runs the local call only when asked
        }
        EXPECT_TRUE(s.ref()->ready());
        EXPECT_EQ(s.get(), 15);
    } else {
        (void)e.fx.make_async([](int& x) { return 3 * x; }, "small_kept",
                              AsyncOptions{.keep_result = true});
    }
    e.tp.join();
    EXPECT_EQ(e.fx.exported(), 0u);  // every kept value was released by its last holder
    const std::uint64_t bodies = e.fx.bodies_received() - bodies0;
    const std::uint64_t kept = e.fx.kept_in_place() - kept0;
    std::uint64_t want_bodies = 0;
    if (e.me == 0) {
        // each remote value once, for get(); never for the call on a third rank
        want_bodies = std::uint64_t(items) * std::uint64_t(e.n - 1);
    } else {
        for (int r = 0; r < e.n; ++r)
            want_bodies += r != e.me && third(r) == e.me ? std::uint64_t(items) : 0u;
    }
    EXPECT_EQ(bodies, want_bodies);
    // every rank but 0 used its own results in place (rank 0's own are not kept: local calls)
    EXPECT_EQ(kept, e.me == 0 ? 0u : std::uint64_t(items));
}

// The same future passed to several calls on one rank is fetched there once.
TEST(FuturesMpi, OneImportPerRankForAFuturePassedToManyCalls) {
    Env e;
    const std::size_t big = Futures::kLargeArg / sizeof(double) + 9;
    // The value is made only once every call has been issued, so that each call gets the
    // future while it is pending (a ready one travels with every call instead).
    std::atomic<bool> all_issued{false};
    auto make = e.fx.make_async(
        [big, &all_issued](int& i) {
            while (!all_issued.load())
                std::this_thread::sleep_for(std::chrono::microseconds(100));
            return std::vector<double>(big, double(i));
        },
        "make_shared_tile");
    auto use = e.fx.make_async(
        [big](const std::vector<double>& v, int& k) {
            std::this_thread::sleep_for(std::chrono::milliseconds(2));
            return v.size() == big ? v[0] + k : -1.0;
        },
        "use_shared_tile");
    const auto bodies0 = e.fx.bodies_received(), shared0 = e.fx.imports_shared();
    const int calls = 4;
    if (e.me == 0 && e.n > 1) {
        // made on rank 0 and passed while pending: each other rank imports it once
        shared_future<std::vector<double>> f = async(0, make, 7).share();
        std::vector<future<double>> out;
        for (int r = 1; r < e.n; ++r)
            for (int k = 0; k < calls; ++k)
                out.push_back(async(r, use, f, k));
        all_issued = true;
        for (std::size_t j = 0; j < out.size(); ++j)
            EXPECT_EQ(out[j].get(), 7.0 + double(j % calls));
    }
    e.tp.join();
    EXPECT_EQ(e.fx.exported(), 0u);
    if (e.me != 0 && e.n > 1) {
        EXPECT_EQ(e.fx.bodies_received() - bodies0, 1u);  // one fetch for `calls` calls
        EXPECT_EQ(e.fx.imports_shared() - shared0, std::uint64_t(calls - 1));
    }
}

// Short calls that never wait, arriving while the callee's pool is idle, run on its
// communication thread once trusted; one that then waits for a value from its caller (whose
// main thread is blocked in get()) must still finish, and sends later calls to workers.
TEST(FuturesMpi, ShortCallsRunOnTheCommunicationThreadAndMayStillWait) {
    Env e;
    auto twice = e.fx.make_async([](int& x) { return 2 * x; }, "twice");
    auto ask = e.fx.make_async(
        [&](int& x) {
            // From the 20th call on: ask the caller's rank for something first.
            if (x < 20) return x;
            return async((e.me + e.n - 1) % e.n, twice, x).get() / 2;
        },
        "ask");
    auto on_comm_here = e.fx.make_async(
        [&] { return static_cast<long>(e.fx.calls_on_comm_thread()); }, "on_comm_here");
    const int to = (e.me + 1) % e.n;
    if (e.me == 0) {
        for (int i = 0; i < 30; ++i)
            ASSERT_EQ(async(to, ask, i).get(), i) << "call " << i;
        // A run counts as short only under 10 us: on a loaded machine a preempted run breaks
        // the streak, so keep calling (bounded) until the callee says one ran there.
        for (int i = 0; i < 20000; ++i) {
            ASSERT_EQ(async(to, twice, i).get(), 2 * i);
            if (i >= 30 && i % 32 == 0 && e.n > 1 && async(to, on_comm_here).get() > 0) break;
        }
    }
    e.tp.join();
    const auto on_comm =
        cascade_test::allreduce_sum(static_cast<long>(e.fx.calls_on_comm_thread()));
    if (e.n > 1) {
        EXPECT_GT(on_comm, 0);  // the pools were idle: most calls ran there
    } else {
        EXPECT_EQ(on_comm, 0);  // no messages, no communication thread runs
    }
}
